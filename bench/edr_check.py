#!/usr/bin/env python3
"""The questions bench/edr_peer.sh asks, and the check of the answers it kept.

    edr_check.py lists DIR DS NPOINTS DATETIME
        writes DIR/questions.json and the request lists DIR/{position,area}.{zs,xp}.list
        (one "/path?query" a line, for bench/wrk_edr_list.lua and the warm-up pass):
        NPOINTS seeded random points (CRS84, 3 decimals, never on a cell edge: the
        cell holding a point is then also the one whose centre is nearest, which is
        what xpublish-edr's `method=nearest` picks) and 4 copies of one pentagon
        (about 19 x 15 degrees) over 4 continents, each area limited to DATETIME.
        zarr-serve: /v1/datasets/DS/edr/collections/DS/{position,area}?coords=...&parameter-name=tas
        xpublish-edr: /edr/{position,area}?coords=...&parameter-name=tas
        Both answer CoverageJSON (the default of each, no `f`).

        Also DIR/zipf.zs.list: ZIPF_REQUESTS (4000) positions, each the cell of a rank
        drawn from a Zipf law (exponent ZIPF_S, 1.1) over the grid's 64,800 cells, the
        ranks given to cells in a seeded random order: a skewed workload of repeated
        positions (zarr-serve only; the hot-series figures of issue 45).

    edr_check.py floor ZARR DIR
        what the position questions cost libzstd alone: each point's series decodes the
        chunks of its column (11), decoded with one reused context (bench/floor.py's
        least_decode_cpu), least CPU of 5 passes; prints "SECONDS_PER_ANSWER CHUNKS_PER_ANSWER"
        (the mean over the points).

    edr_check.py edr ZARR DIR
        compares the warm-up bodies DIR/warm/{zs,xp}-{position,area}-N.json with each
        other and with xarray's read of the store: the time axis, the cell (centre)
        of each point, the cells of each area, every value (float32, NaN-aware: CoverageJSON
        null is NaN). zarr-serve answers an area as a Grid (t, y, x) with null outside the
        polygon, xpublish-edr as a list of the cells inside (t, pts): the check maps
        each of xpublish-edr's cells onto the grid, and asks that the cells zarr-serve
        has values for are exactly those.

    edr_check.py formats ZARR CSV_SELECT CSV_BODY BIG_SELECT NC_BODY BIN_BODY
        the region reads: the CSV body (header, labels of every row, values as float32,
        empty cells for NaN), the NetCDF body (read with scipy's netCDF 3 reader: tas and
        its coordinates) and the binary body (little-endian float32), each against the
        store. SELECT is "a:b,:,:" (a time range, all lat, all lon).

Exits 1 on any mismatch.
"""
import io
import json
import os
import random
import sys
import warnings

import numpy as np
import xarray as xr

with warnings.catch_warnings(record=True):  # numcodecs' DeprecationWarning about crc32c
    import zarr  # noqa: F401

# A pentagon (offsets in degrees from its first vertex) and where its copies start.
PENTAGON = [(0.0, 0.0), (14.5, -2.2), (17.7, 7.3), (9.2, 12.5), (-1.6, 8.9)]
ANCHORS = [(10.2, 40.3), (-101.3, 30.6), (20.7, -31.4), (121.4, -32.2)]


def wkt_point(x, y):
    return f"POINT({x}%20{y})"


def wkt_polygon(ring):
    ring = ring + [ring[0]]
    return "POLYGON((" + ",".join(f"{x:.1f}%20{y:.1f}" for x, y in ring) + "))"


def lists(out, ds, npoints, datetime):
    rng = random.Random(30)
    points = []
    while len(points) < npoints:
        x, y = round(rng.uniform(-179.9, 179.9), 3), round(rng.uniform(-89.9, 89.9), 3)
        # a point on a cell edge (an integer degree) may belong to either cell
        if abs(x - round(x)) > 0.01 and abs(y - round(y)) > 0.01:
            points.append((x, y))
    areas = [[(ax + dx, ay + dy) for dx, dy in PENTAGON] for ax, ay in ANCHORS]
    with open(os.path.join(out, "questions.json"), "w") as f:
        json.dump({"points": points, "areas": areas, "datetime": datetime}, f)
    zs = f"/v1/datasets/{ds}/edr/collections/{ds}"
    queries = {
        "position": [f"position?coords={wkt_point(x, y)}&parameter-name=tas" for x, y in points],
        "area": [f"area?coords={wkt_polygon(a)}&parameter-name=tas&datetime={datetime}" for a in areas],
    }
    for name, qs in queries.items():
        for server, prefix in (("zs", zs), ("xp", "/edr")):
            with open(os.path.join(out, f"{name}.{server}.list"), "w") as f:
                f.writelines(f"{prefix}/{q}\n" for q in qs)
    zipf_list(out, zs)


ZIPF_REQUESTS = 4000
ZIPF_S = 1.1
GRID = (180, 360)  # lat, lon cells of 1 degree


def zipf_list(out, zs):
    """The skewed position list (see the module's doc)."""
    rng = random.Random(45)
    cells = list(range(GRID[0] * GRID[1]))
    rng.shuffle(cells)  # rank k is cell cells[k]
    weights = [(k + 1) ** -ZIPF_S for k in range(len(cells))]
    picked = rng.choices(cells, weights=weights, k=ZIPF_REQUESTS)
    with open(os.path.join(out, "zipf.zs.list"), "w") as f:
        for cell in picked:
            iy, ix = divmod(cell, GRID[1])
            # a quarter of a degree inside the cell: never on its edge
            x, y = -180 + ix + 0.25, -90 + iy + 0.25
            f.write(f"{zs}/position?coords={wkt_point(x, y)}&parameter-name=tas\n")
    distinct = len(set(picked))
    print(f"  zipf: {ZIPF_REQUESTS} positions, {distinct} distinct cells (exponent {ZIPF_S})")


def position_floor(zarr_path, d):
    """libzstd's CPU-s per position answer (see the module's doc)."""
    from floor import least_decode_cpu
    meta = json.load(open(os.path.join(zarr_path, "tas", "zarr.json")))
    ct, clat, clon = meta["chunk_grid"]["configuration"]["chunk_shape"]
    nt = meta["shape"][0]
    size = ct * clat * clon * 4
    q = json.load(open(os.path.join(d, "questions.json")))
    blobs = []
    for x, y in q["points"]:
        iy, ix = int(y + 90), int(x + 180)
        for t in range((nt + ct - 1) // ct):
            with open(os.path.join(zarr_path, "tas", "c", str(t), str(iy // clat), str(ix // clon)), "rb") as f:
                blobs.append(f.read())
    best, version = least_decode_cpu(blobs, size, 5)
    n = len(q["points"])
    print(f"{best / n:.6f} {len(blobs) // n} libzstd {version}")
    return True


def covjson_values(doc):
    r = doc["ranges"]["tas"]
    v = np.array([np.nan if x is None else x for x in r["values"]], dtype=np.float64)
    return v.astype(np.float32).reshape(r["shape"]), r["axisNames"]


def axis(doc, name):
    a = doc["domain"]["axes"][name]
    if "values" in a:
        return a["values"]
    return list(np.linspace(a["start"], a["stop"], a["num"]))


def times(doc):
    return [t.rstrip("Z") for t in axis(doc, "t")]


def same(a, b):
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def check_edr(zarr_path, d):
    q = json.load(open(os.path.join(d, "questions.json")))
    ds = xr.open_zarr(zarr_path, consolidated=False, chunks=None)
    tas = ds["tas"]
    iso = [str(t)[:19] for t in ds["time"].values.astype("datetime64[s]")]
    lat, lon = ds["lat"].values, ds["lon"].values
    ok = True

    def bad(text):
        nonlocal ok
        ok = False
        print("    MISMATCH: " + text)

    sizes = {"zs": [], "xp": []}
    nulls = 0
    for i, (x, y) in enumerate(q["points"]):
        docs = {}
        for s in ("zs", "xp"):
            path = os.path.join(d, "warm", f"{s}-position-{i}.json")
            sizes[s].append(os.path.getsize(path))
            docs[s] = json.load(open(path))
        iy, ix = int(np.abs(lat - y).argmin()), int(np.abs(lon - x).argmin())
        want = tas[:, iy, ix].values.astype(np.float32)
        nulls += int(np.isnan(want).sum())
        for s, doc in docs.items():
            got, _ = covjson_values(doc)
            where = f"point {i} POINT({x} {y}) {s}"
            if times(doc) != iso:
                bad(f"{where}: the time axis differs from the store's")
            cx, cy = axis(doc, "x")[0], axis(doc, "y")[0]
            if (cx, cy) != (lon[ix], lat[iy]):
                bad(f"{where}: cell centre ({cx}, {cy}), expected ({lon[ix]}, {lat[iy]})")
            if not same(got.ravel(), want):
                n = int((~((got.ravel() == want) | (np.isnan(got.ravel()) & np.isnan(want)))).sum())
                bad(f"{where}: {n} of {want.size} values differ from the store")
    print(f"  position: {len(q['points'])} points x {len(iso)} days, {nulls} nulls in all; "
          f"CoverageJSON bytes a point: zarr-serve {np.mean(sizes['zs']):,.0f}, "
          f"xpublish-edr {np.mean(sizes['xp']):,.0f}")

    t0, t1 = q["datetime"].split("/")
    sub = tas.sel(time=slice(t0, t1))
    sub_iso = [str(t)[:19] for t in sub["time"].values.astype("datetime64[s]")]
    sizes = {"zs": [], "xp": []}
    cells = []
    for i, ring in enumerate(q["areas"]):
        docs = {}
        for s in ("zs", "xp"):
            path = os.path.join(d, "warm", f"{s}-area-{i}.json")
            sizes[s].append(os.path.getsize(path))
            docs[s] = json.load(open(path))
        where = f"area {i}"
        for s, doc in docs.items():
            if times(doc) != sub_iso:
                bad(f"{where} {s}: the time axis ({len(times(doc))} steps) differs from the store's "
                    f"{len(sub_iso)} steps of {q['datetime']}")
        zv, znames = covjson_values(docs["zs"])
        if znames != ["t", "y", "x"]:
            bad(f"{where} zs: axes {znames}, expected t, y, x")
            continue
        zx, zy = np.array(axis(docs["zs"], "x")), np.array(axis(docs["zs"], "y"))
        xv, xnames = covjson_values(docs["xp"])
        xx, xy = np.array(axis(docs["xp"], "x")), np.array(axis(docs["xp"], "y"))
        if xnames != ["t", "pts"]:
            bad(f"{where} xp: axes {xnames}, expected t, pts")
            continue
        inside = ~np.all(np.isnan(zv), axis=0)  # (y, x): the cells zarr-serve has values for
        seen = np.zeros_like(inside)
        # the store's values in the bounding box of both answers' cells, read once
        bx, by = np.concatenate([zx, xx]), np.concatenate([zy, xy])
        rows = np.abs(lat[:, None] - by[None, :]).argmin(axis=0)
        cols = np.abs(lon[:, None] - bx[None, :]).argmin(axis=0)
        r0, c0 = int(rows.min()), int(cols.min())
        box = sub[:, r0:int(rows.max()) + 1, c0:int(cols.max()) + 1].values.astype(np.float32)
        for k in range(xv.shape[1]):
            jx, jy = np.flatnonzero(zx == xx[k]), np.flatnonzero(zy == xy[k])
            if jx.size != 1 or jy.size != 1:
                bad(f"{where}: xpublish-edr's cell ({xx[k]}, {xy[k]}) is outside zarr-serve's grid")
                continue
            seen[jy[0], jx[0]] = True
            want = box[:, int(np.abs(lat - xy[k]).argmin()) - r0, int(np.abs(lon - xx[k]).argmin()) - c0]
            if not same(zv[:, jy[0], jx[0]], want):
                bad(f"{where}: zarr-serve's values at ({xx[k]}, {xy[k]}) differ from the store")
            if not same(xv[:, k], want):
                bad(f"{where}: xpublish-edr's values at ({xx[k]}, {xy[k]}) differ from the store")
        if not np.array_equal(seen, inside):
            bad(f"{where}: zarr-serve has values in {int(inside.sum())} cells, xpublish-edr in "
                f"{int(seen.sum())}; {int((seen != inside).sum())} differ")
        cells.append(int(inside.sum()))
    print(f"  area: {len(q['areas'])} pentagons, {'/'.join(map(str, cells))} cells inside x {len(sub_iso)} days "
          f"({q['datetime']}); CoverageJSON bytes an area: zarr-serve {np.mean(sizes['zs']):,.0f} "
          f"(a grid, null outside), xpublish-edr {np.mean(sizes['xp']):,.0f} (a list of cells)")
    print("  values: " + ("every point and area agrees, value for value (NaN-aware), with the other server "
                          "and with the store" if ok else "MISMATCH (see above)"))
    return ok


def region(sel):
    a, b = sel.split(",")[0].split(":")
    return int(a), int(b)


def check_formats(zarr_path, csv_sel, csv_body, big_sel, nc_body, bin_body):
    import pandas as pd
    from scipy.io import netcdf_file

    ds = xr.open_zarr(zarr_path, consolidated=False, chunks=None)
    ok = True

    def bad(text):
        nonlocal ok
        ok = False
        print("    MISMATCH: " + text)

    # CSV: time,lat,lon,tas; one row per element in C order
    a, b = region(csv_sel)
    want = ds["tas"][a:b].values
    with open(csv_body, "rb") as f:
        header = f.readline().decode().strip()
        table = pd.read_csv(io.BufferedReader(f), header=None, names=["time", "lat", "lon", "tas"],
                            dtype={"time": str, "lat": np.float64, "lon": np.float64, "tas": np.float32},
                            engine="c", na_filter=True)
    if header != "time,lat,lon,tas":
        bad(f"CSV header {header!r}")
    if len(table) != want.size:
        bad(f"CSV: {len(table):,} rows, expected {want.size:,}")
    else:
        nt, ny, nx = want.shape
        iso = np.array([str(t)[:19] for t in ds["time"][a:b].values.astype("datetime64[s]")])
        if not np.array_equal(table["time"].to_numpy()[::ny * nx], iso) or table["time"].nunique() != nt:
            bad("CSV: the time labels differ from the store's")
        if not (np.array_equal(table["lat"].to_numpy()[:ny * nx:nx], ds["lat"].values)
                and np.array_equal(table["lon"].to_numpy()[:nx], ds["lon"].values)):
            bad("CSV: the lat/lon labels differ from the store's")
        if not same(table["tas"].to_numpy(), want.ravel()):
            bad("CSV: values differ from the store's")
    print(f"  CSV     {os.path.getsize(csv_body):>13,} bytes: {len(table):,} rows of time,lat,lon,tas "
          f"(time {a}..{b - 1}, all lat, all lon; {np.isnan(want).sum():,} empty)")

    a, b = region(big_sel)
    want = ds["tas"][a:b].values
    with netcdf_file(nc_body, "r", mmap=False, maskandscale=False) as nc:
        got = nc.variables["tas"].data
        if tuple(nc.variables["tas"].dimensions) != ("time", "lat", "lon"):
            bad(f"NetCDF: tas dimensions {nc.variables['tas'].dimensions}")
        if not same(got.astype(np.float32), want):
            bad("NetCDF: tas differs from the store's")
        for name in ("lat", "lon"):
            if not np.array_equal(nc.variables[name].data, ds[name].values):
                bad(f"NetCDF: {name} differs from the store's")
        units = nc.variables["time"].units.decode() if "time" in nc.variables else "?"
        version = nc.version_byte
    print(f"  NetCDF  {os.path.getsize(nc_body):>13,} bytes: CDF-{version}, tas {'x'.join(map(str, want.shape))} "
          f"float32 + coordinates (time in {units!r})")
    raw = np.fromfile(bin_body, "<f4")
    if not same(raw, want.ravel()):
        bad("binary: values differ from the store's")
    print(f"  binary  {os.path.getsize(bin_body):>13,} bytes: {raw.size:,} little-endian float32")
    print("  values: " + ("all three equal the store, element for element (NaN-aware)" if ok
                          else "MISMATCH (see above)"))
    return ok


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "lists":
        lists(args[0], args[1], int(args[2]), args[3])
        ok = True
    elif cmd == "floor":
        ok = position_floor(*args)
    elif cmd == "edr":
        ok = check_edr(*args)
    elif cmd == "formats":
        ok = check_formats(*args)
    else:
        raise SystemExit(f"unknown command {cmd}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
