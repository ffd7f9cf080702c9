#!/usr/bin/env python3
"""What the bulk reads of the benchmark cost on this machine before any server overhead:
the CPU of their parts, each measured alone, for weighing a bulk target against the
machine's cores (the client, curl, runs on the same cores as the server).

Usage: python bench/floor.py [--data DIR] [--n 3]

For a server that decodes what it sends (as tensorstore, with no cache, does; a cache of
decoded chunks as large as the read would skip decoding a repeated read):
  decode   libzstd (numcodecs' build, one reused context) decoding the volume's own inner
           chunks, one thread, CPU-s per decoded byte (least of N passes); for the region,
           only up to the last element it needs of each chunk (a decoder can stop there)
  receive  curl reading a loopback socket to /dev/null, as the benchmark's client does
Those two no such server avoids. The usual copies come on top, each measured alone:
  read     the stored bytes copied from the page cache into a reused buffer (mmap avoids
           the copy, at the price of page faults and of SIGBUS on a file truncated under it)
  place    decoded chunks copied into a 64 MiB slab in C order (numpy)
  send     a process writing 64 MiB buffers to the loopback socket (sendfile or splice from
           memory the server decodes into would avoid the copy)
report.py sets a target's CPU budget (its wall time times the cores) against these: what the
budget leaves after decode and receive is all a server has for reading, placing, sending,
HTTP and scheduling, with no idle moment. Prints one JSON document (bench.py keeps it as
"floor").
"""
import argparse
import itertools
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings

from peers import VOLUME_SHAPE, REGION as REGION_SLICES  # noqa: E402 (bench/ is on sys.path)

SHARD = (128, 512, 512)
INNER = (32, 64, 64)
PER_SHARD = tuple(s // i for s, i in zip(SHARD, INNER))
ITEM = 2  # uint16
REGION = tuple((s.start, s.stop) for s in REGION_SLICES)
SLAB = 64 << 20


def shard_path(data, shard):
    return os.path.join(data, "bench.zarr", "volume", "c", *map(str, shard))


def shard_index(blob_tail):
    """The (offset, nbytes) of each inner chunk from the end of a shard of the volume
    (little-endian pairs, then a CRC32C), in C order of the inner chunks."""
    n = PER_SHARD[0] * PER_SHARD[1] * PER_SHARD[2]
    raw = struct.unpack(f"<{2 * n}Q", blob_tail[-(n * 16 + 4):-4])
    return list(zip(raw[0::2], raw[1::2]))


def index_bytes():
    return PER_SHARD[0] * PER_SHARD[1] * PER_SHARD[2] * 16 + 4


def shard_chunks(data):
    """(inner chunk grid position, stored bytes) of every inner chunk of the volume, shard by shard."""
    per = PER_SHARD
    for shard in itertools.product(*(range(v // s) for v, s in zip(VOLUME_SHAPE, SHARD))):
        with open(shard_path(data, shard), "rb") as f:
            blob = f.read()
        for i, (off, nbytes) in enumerate(shard_index(blob)):
            if off == 2**64 - 1:
                continue
            inner = (i // (per[1] * per[2]), i // per[2] % per[1], i % per[2])
            yield tuple(s * p + c for s, p, c in zip(shard, per, inner)), blob[off:off + nbytes]


def least_cpu(n, work):
    """The least CPU-s of this thread that `work()` takes in n passes."""
    best = None
    for _ in range(n):
        t0 = time.thread_time()
        work()
        cpu = time.thread_time() - t0
        best = cpu if best is None else min(best, cpu)
    return best


def region_prefix_bytes(pos):
    """Bytes of inner chunk `pos` up to and including the last element the region needs
    (0 when the chunk is outside it)."""
    last = []
    for (lo, hi), p, c in zip(REGION, pos, INNER):
        a, b = max(lo, p * c), min(hi, (p + 1) * c)
        if a >= b:
            return 0
        last.append(b - 1 - p * c)
    z, y, x = last
    return ((z * INNER[1] + y) * INNER[2] + x + 1) * ITEM


def zstd_library():
    """libzstd as numcodecs links it (its symbols are exported), for decoding with one reused
    context as a server does, and its version as text."""
    import ctypes
    import numcodecs.zstd
    lib = ctypes.CDLL(numcodecs.zstd.__file__)
    lib.ZSTD_createDCtx.restype = ctypes.c_void_p
    lib.ZSTD_decompressDCtx.restype = ctypes.c_size_t
    lib.ZSTD_decompressDCtx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_freeDCtx.argtypes = [ctypes.c_void_p]
    v = lib.ZSTD_versionNumber()
    return lib, f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def least_decode_cpu(blobs, size, n):
    """The least CPU-s of this thread, in n passes, that libzstd takes to decode every
    blob (each to `size` bytes) with one reused context, as a server does; and the
    library's version."""
    import ctypes
    lib, version = zstd_library()
    out = ctypes.create_string_buffer(size)
    dctx = lib.ZSTD_createDCtx()

    def decode_all():
        for blob in blobs:
            if lib.ZSTD_decompressDCtx(dctx, out, size, blob, len(blob)) != size:
                raise RuntimeError("a chunk did not decode to its size")
    try:
        return least_cpu(n, decode_all), version
    finally:
        lib.ZSTD_freeDCtx(dctx)


def measure_decode(data, n):
    """CPU-s per decoded GB of libzstd on the volume's chunks, one reused decoding context
    (best of n passes), and the bytes the region needs decoded at least."""
    chunks = list(shard_chunks(data))
    size = INNER[0] * INNER[1] * INNER[2] * ITEM
    best, version = least_decode_cpu([blob for _, blob in chunks], size, n)
    decoded = len(chunks) * size
    return {"chunks": len(chunks), "decoded_bytes": decoded,
            "stored_bytes": sum(len(b) for _, b in chunks),
            "cpu_s_per_gb": best / (decoded / 1e9), "gb_per_s_per_core": decoded / 1e9 / best,
            "libzstd": version,
            "region_prefix_bytes": sum(region_prefix_bytes(pos) for pos, _ in chunks)}


def measure_read_and_place(data, n):
    """CPU-s per GB of two usual copies: reading the stored bytes from the page cache into a
    reused buffer, and placing decoded chunks in C order (numpy copying each (32, 64, 64)
    block into a 64 MiB slab), each alone (least of n passes)."""
    import numpy as np
    root = os.path.join(data, "bench.zarr", "volume", "c")
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
    read_bytes = sum(os.path.getsize(path) for path in files)
    buf = bytearray(1 << 20)

    def read_all():
        for path in files:
            with open(path, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass
    read_best = least_cpu(n, read_all)
    slab = np.zeros((INNER[0], VOLUME_SHAPE[1], VOLUME_SHAPE[2]), dtype=np.uint16)
    block = np.ones(INNER, dtype=np.uint16)

    def place_all():
        for y in range(0, VOLUME_SHAPE[1], INNER[1]):
            for x in range(0, VOLUME_SHAPE[2], INNER[2]):
                slab[:, y:y + INNER[1], x:x + INNER[2]] = block
    place_best = least_cpu(n, place_all)
    return {"read_cpu_s_per_gb": read_best / (read_bytes / 1e9),
            "place_cpu_s_per_gb": place_best / (slab.nbytes / 1e9)}


def sender(port_out, total, cpu_out):
    """Accepts one connection, reads its request, answers `total` bytes from 64 MiB buffers;
    appends the CPU-s it spent answering to `cpu_out`."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(60)  # curl failed to connect: give up instead of waiting for ever
    port_out.append(srv.getsockname()[1])
    conn, _ = srv.accept()
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += conn.recv(4096)
    slab = memoryview(bytearray(os.urandom(1 << 20)) * (SLAB >> 20))
    t0 = time.thread_time()
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\nConnection: close\r\n\r\n".encode())
    left = total
    while left:
        piece = slab[:min(left, SLAB)]
        conn.sendall(piece)
        left -= len(piece)
    conn.close()
    cpu_out.append(time.thread_time() - t0)
    srv.close()


def measure_transfer(total, n):
    """CPU-s per GB to send from memory and to receive with curl (best of n), and the wall time."""
    best = None
    for _ in range(n):
        port, cpu = [], []
        th = threading.Thread(target=sender, args=(port, total, cpu))
        th.start()
        while not port:
            time.sleep(0.001)
        w0 = time.perf_counter()
        proc = subprocess.Popen(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port[0]}/"])
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - w0
        th.join()
        if not cpu:
            raise RuntimeError("the sender did not finish")
        send_cpu = cpu[0]
        recv_cpu = usage.ru_utime + usage.ru_stime
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"curl exited with {os.waitstatus_to_exitcode(status)}")
        run = {"send_cpu_s_per_gb": send_cpu / (total / 1e9), "recv_cpu_s_per_gb": recv_cpu / (total / 1e9),
               "wall_s_per_gb": wall / (total / 1e9)}
        if best is None or run["send_cpu_s_per_gb"] + run["recv_cpu_s_per_gb"] < \
                best["send_cpu_s_per_gb"] + best["recv_cpu_s_per_gb"]:
            best = run
    return best


def costs(decode, transfer, more):
    """CPU-s of each part of the whole volume and of the region."""
    out = {}
    whole_bytes = VOLUME_SHAPE[0] * VOLUME_SHAPE[1] * VOLUME_SHAPE[2] * ITEM
    region_bytes = ITEM
    for lo, hi in REGION:
        region_bytes *= hi - lo
    for name, decoded, sent in (("whole", decode["decoded_bytes"], whole_bytes),
                                ("region", decode["region_prefix_bytes"], region_bytes)):
        stored = decode["stored_bytes"] * decoded / decode["decoded_bytes"]
        out[name] = {"bytes_out": sent, "bytes_decoded": decoded, "cpu_s": {
            "decode": decoded / 1e9 * decode["cpu_s_per_gb"],
            "receive": sent / 1e9 * transfer["recv_cpu_s_per_gb"],
            "read": stored / 1e9 * more["read_cpu_s_per_gb"],
            "place": sent / 1e9 * more["place_cpu_s_per_gb"],
            "send": sent / 1e9 * transfer["send_cpu_s_per_gb"]}}
    return out


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data"))
    ap.add_argument("--n", type=int, default=3)
    a = ap.parse_args()
    data = os.path.abspath(a.data)
    cores = len(os.sched_getaffinity(0))
    decode = measure_decode(data, a.n)
    transfer = measure_transfer(1 << 30, max(5, a.n))
    more = measure_read_and_place(data, a.n)
    print(json.dumps({"cores": cores, "decode": decode, "transfer": transfer, "read_and_place": more,
                      "costs": costs(decode, transfer, more),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    sys.exit(main())
