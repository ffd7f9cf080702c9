#!/usr/bin/env python3
"""Check the bodies bench/dap_peer.sh saved from its warm-up requests.

    dap_check.py ZARR T0 T1 zarr-serve.dods zarr-serve.bin xpublish.dods

T0..T1 is the time range of the hyperslab (stop inclusive, as in DAP), all lat, all lon.
Each `.dods` body is parsed as DAP2 does: the constrained DDS up to the line "Data:"
(zarr-serve ends it with "\\n", opendap-protocol with "\\r\\n"), then the Grid `t` in
XDR: its array (two big-endian u32 element counts, then big-endian float32) and its
maps time (Int32), lat and lon (Float64), each likewise. The binary region body is the
same array as C-order little-endian float32.

Prints, for each body: its size, its header size, the element counts and the first
floats after "Data:" + 8 bytes of counts; then compares every element of `t` (bit for
bit) across the three bodies and against xarray's own read of the store, and the maps
of both `.dods` bodies against the store's coordinates. Exits 1 on any mismatch.
"""
import os
import sys
import warnings

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


def main():
    zarr, t0, t1, zs_dods, zs_bin, xp_dods = sys.argv[1:]
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
    print(f"  {'xarray (the store)':<24} {'':>11} first floats: "
          f"{' '.join(f'{v:.5f}' for v in want.ravel()[:FIRST])}")
    for label, got in arrays.items():
        # bit for bit (NaN payloads included)
        same = np.array_equal(got.view("<u4"), want.astype("<f4").view("<u4"))
        if not same:
            bad = np.flatnonzero(got.ravel() != want.ravel())
            print(f"    MISMATCH: {label}: {bad.size:,} elements differ from the store, first at {bad[:3]}")
            ok = False
    print("  values: " + ("all three bodies equal the store, element for element (t and its maps)"
                          if ok else "MISMATCH (see above)"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
