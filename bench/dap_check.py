#!/usr/bin/env python3
"""Check the bodies bench/dap_peer.sh saved from its warm-up requests.

    dap_check.py ZARR T0 T1 zarr-serve.dods zarr-serve.bin xpublish.dods [zarr-serve.dap]

T0..T1 is the time range of the hyperslab (stop inclusive, as in DAP), all lat, all lon.
Each `.dods` body is parsed as DAP2 does: the constrained DDS up to the line "Data:"
(zarr-serve ends it with "\\n", opendap-protocol with "\\r\\n"), then the Grid `t` in
XDR: its array (two big-endian u32 element counts, then big-endian float32) and its
maps time (Int32), lat and lon (Float64), each likewise. The binary region body is the
same array as C-order little-endian float32. The DAP4 `.dap` body, when given, is parsed
as the DAP4 specification's chunked form: 4-byte chunk headers (flags, 24-bit length),
the DMR chunk ending in CRLF, then `t` little-endian and its CRC-32 (zlib's).

Prints, for each body: its size, its header size, the element counts and the first
floats after "Data:" + 8 bytes of counts; then compares every element of `t` (bit for
bit) across the three bodies and against xarray's own read of the store, and the maps
of both `.dods` bodies against the store's coordinates. Exits 1 on any mismatch.
"""
import os
import sys
import warnings
import zlib

import numpy as np
import xarray as xr

with warnings.catch_warnings(record=True):  # numcodecs' DeprecationWarning about crc32c (on
    # import, under a filter of its own that PYTHONWARNINGS=ignore does not override)
    import zarr  # noqa: F401

FIRST = 6


def parse_dods(path, shape):
    with open(path, "rb") as f:
        body = f.read()
    at = body.find(b"\nData:")
    if at < 0:
        raise SystemExit(f"{path}: no 'Data:' line")
    end = body.index(b"\n", at + 1) + 1
    dds = body[:at + 1].decode()
    pos = end
    out = {}
    for name, dtype, n in (("t", ">f4", int(np.prod(shape))), ("time", ">i4", shape[0]),
                           ("lat", ">f8", shape[1]), ("lon", ">f8", shape[2])):
        c1, c2 = np.frombuffer(body, ">u4", 2, pos)
        if c1 != n or c2 != n:
            raise SystemExit(f"{path}: {name}: element counts {c1}, {c2}; expected {n}")
        pos += 8
        width = np.dtype(dtype).itemsize
        out[name] = np.frombuffer(body, dtype, n, pos)
        pos += n * width
    if pos != len(body):
        raise SystemExit(f"{path}: {len(body) - pos} bytes after the last map")
    return dds, end, len(body), out


def parse_dap4(path, count):
    """The DMR and `t` of a DAP4 `.dap` body, its framing and checksum checked."""
    with open(path, "rb") as f:
        body = f.read()
    chunks, at = [], 0
    while at < len(body):
        flags, n = body[at], int.from_bytes(body[at + 1:at + 4], "big")
        chunks.append((flags, body[at + 4:at + 4 + n]))
        at += 4 + n
    if at != len(body) or not chunks[-1][0] & 1 or any(f & 1 for f, _ in chunks[:-1]):
        raise SystemExit(f"{path}: chunks cut short, or END not on the last chunk only")
    if any(not f & 4 for f, _ in chunks) or not chunks[0][1].endswith(b"\r\n"):
        raise SystemExit(f"{path}: a chunk not little-endian, or a DMR chunk not ending in CRLF")
    data = b"".join(c for _, c in chunks[1:])
    if len(data) != count * 4 + 4:
        raise SystemExit(f"{path}: {len(data)} data bytes, expected {count * 4 + 4}")
    t = np.frombuffer(data, "<f4", count)
    if int.from_bytes(data[-4:], "little") != zlib.crc32(data[:-4]):
        raise SystemExit(f"{path}: the checksum of t is wrong")
    return len(chunks[0][1]), len(body), len(chunks), t


def main():
    zarr, t0, t1, zs_dods, zs_bin, xp_dods = sys.argv[1:7]
    zs_dap = sys.argv[7] if len(sys.argv) > 7 else None
    t0, t1 = int(t0), int(t1)
    ds = xr.open_zarr(zarr, consolidated=False, chunks=None, decode_times=False)
    want = ds["t"][t0:t1 + 1].values
    shape = want.shape
    coords = {"time": ds["time"][t0:t1 + 1].values, "lat": ds["lat"].values, "lon": ds["lon"].values}

    ok = True
    arrays = {}
    for label, path in (("zarr-serve .dods", zs_dods), ("xpublish-opendap .dods", xp_dods)):
        dds, header, size, parts = parse_dods(path, shape)
        t = parts["t"]
        print(f"  {label:<24} {size:>11,} bytes (DDS + Data: {header} bytes, t {t.size:,} floats"
              f" + maps); first floats: {' '.join(f'{v:.5f}' for v in t[:FIRST])}")
        arrays[label] = t.astype("<f4").reshape(shape)
        for name, values in coords.items():
            if not np.array_equal(parts[name].astype(values.dtype), values):
                print(f"    MISMATCH: map {name} differs from the store's coordinate")
                ok = False
    raw = np.fromfile(zs_bin, "<f4")
    print(f"  {'zarr-serve binary':<24} {os.path.getsize(zs_bin):>11,} bytes (raw little-endian, "
          f"{raw.size:,} floats); first floats: {' '.join(f'{v:.5f}' for v in raw[:FIRST])}")
    if raw.size != want.size:
        raise SystemExit(f"{zs_bin}: {raw.size} floats, expected {want.size}")
    arrays["zarr-serve binary"] = raw.reshape(shape)
    if zs_dap:
        dmr, size, chunks, t = parse_dap4(zs_dap, want.size)
        print(f"  {'zarr-serve DAP4 .dap':<24} {size:>11,} bytes (DMR chunk {dmr} bytes, {chunks} chunks, "
              f"t {t.size:,} floats + CRC-32, checked); first floats: {' '.join(f'{v:.5f}' for v in t[:FIRST])}")
        arrays["zarr-serve DAP4 .dap"] = t.reshape(shape)
    print(f"  {'xarray (the store)':<24} {'':>11} first floats: "
          f"{' '.join(f'{v:.5f}' for v in want.ravel()[:FIRST])}")
    for label, got in arrays.items():
        # bit for bit (NaN payloads included)
        same = np.array_equal(got.view("<u4"), want.astype("<f4").view("<u4"))
        if not same:
            bad = np.flatnonzero(got.ravel() != want.ravel())
            print(f"    MISMATCH: {label}: {bad.size:,} elements differ from the store, first at {bad[:3]}")
            ok = False
    print("  values: " + (f"all {len(arrays)} bodies equal the store, element for element (t and its maps)"
                          if ok else "MISMATCH (see above)"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
