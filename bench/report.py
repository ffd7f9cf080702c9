#!/usr/bin/env python3
"""Render bench-data/results.json (from bench.py) as the Markdown table of the issue.

Usage: python bench/report.py [bench-data/results.json]
"""
import json
import os
import sys

MB = 1e6
MIB = 2**20


def fmt(x, unit="", nd=0):
    if x is None:
        return "n/a"
    return f"{x:,.{nd}f}{unit}"


def verdict(ok):
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def ratio(a, b):
    return a / b if a is not None and b else None


def peer(res, lib, what):
    for p in res.get("peers", {}).get("peers", []):
        if p.get("lib") == lib and p.get("what") == what:
            return p
    return {}


def counter(d, name, label=None):
    for k, v in d.items():
        if k.startswith(name + "{") or k == name:
            if label is None or label in k:
                return v
    return None


def budget_table(floor, region, whole):
    """The bulk targets as CPU budgets (wall time times cores) against the costs of their
    parts measured alone (bench/floor.py). `region`, `whole`: (our wall s, our server CPU s,
    tensorstore's wall s)."""
    costs = floor.get("costs")
    if not costs:
        return [f"CPU budget of the bulk targets: not measured ({floor.get('error', '')[-300:]})", ""]
    cores = floor["cores"]
    L = [f"CPU budget of the bulk targets on these {cores} cores (bench/floor.py, each part measured alone; "
         "for a server that decodes what it sends; curl runs on the same cores):", "",
         "| request | target (wall) | budget: target × cores | decode + curl's receive | left for everything else "
         "| the usual copies alone: read + place + send | zarr-serve: wall, server CPU | verdict |",
         "|---|---|---|---|---|---|---|---|"]
    for name, key, factor, (ours_s, ours_cpu, ts_s) in (("128 MiB region", "region", 1.3, region),
                                                      ("whole 1 GiB volume", "whole", 1.5, whole)):
        c = costs[key]["cpu_s"]
        target = ts_s / factor if ts_s else None
        budget = target * cores if target else None
        need = c["decode"] + c["receive"]
        left = budget - need if budget else None
        copies = c["read"] + c["place"] + c["send"]
        if left is None:
            word = "n/a"
        elif left < 0:
            word = "decoding and receiving alone exceed it"
        elif copies > left:
            word = f"the usual copies alone exceed what is left by {fmt(copies - left, ' s', 3)}"
        else:
            word = f"fits if HTTP, scheduling and idle time take under {fmt(left - copies, ' s', 3)}"
        L.append(f"| {name} | tensorstore/{factor} = {fmt(target, ' s', 3)} | {fmt(budget, ' s', 3)} | "
                 f"{fmt(c['decode'], '', 3)} + {fmt(c['receive'], '', 3)} = {fmt(need, ' s', 3)} | {fmt(left, ' s', 3)} | "
                 f"{fmt(c['read'], '', 3)} + {fmt(c['place'], '', 3)} + {fmt(c['send'], '', 3)} = {fmt(copies, ' s', 3)} | "
                 f"{fmt(ours_s, ' s', 3)}, {fmt(ours_cpu, ' s', 3)} | {word} |")
    dec, tr = floor["decode"], floor["transfer"]
    L += ["", f"libzstd {dec['libzstd']} decodes the volume's chunks at {fmt(dec['gb_per_s_per_core'], ' GB/s', 2)} "
              f"a core; a GB over loopback costs {fmt(tr['send_cpu_s_per_gb'], ' s', 3)} of the sender's CPU and "
              f"{fmt(tr['recv_cpu_s_per_gb'], ' s', 3)} of curl's.", ""]
    return L


def cpu_table(res):
    """The bulk reads as CPU per byte (issue 32): the server's CPU-s (all its threads, /proc,
    around exactly one request), tensorstore's process CPU-s for the same read in-process, and
    the decode-only floor (bench/floor.py); least of the runs, the range beside it."""
    floor = res.get("floor", {}).get("costs", {})
    bulk, mem = res.get("bulk", {}), res.get("memory", {})
    runs = {"region": [w for w in bulk.get("warm", []) if w.get("status") == 200],
            "whole": [r for r in mem.get("whole_runs", []) if r.get("status") == 200]}
    ours = {k: [r["server_cpu_s"] for r in v if "server_cpu_s" in r] for k, v in runs.items()}
    walls = {k: [r["time_s"] for r in v if r.get("time_s")] for k, v in runs.items()}
    L = ["Bulk reads as CPU per byte (issue 32; least of the runs, their range in brackets; "
         "server: utime + stime of every thread from /proc/PID/stat around exactly one request; "
         "tensorstore: time.process_time() around its read in-process; floor: libzstd decoding "
         "what the read needs, one thread, bench/floor.py):", "",
         "| read | zarr-serve CPU-s | tensorstore CPU-s | decode floor CPU-s | zarr-serve / floor | tensorstore / zarr-serve "
         "| wall: zarr-serve, tensorstore (speed ratio) | targets | decode + read + place + send, each alone (/ floor) |",
         "|---|---|---|---|---|---|---|---|---|"]
    for name, key, limits in (("128 MiB region", "region", (None, 1.5)), ("whole 1 GiB volume", "whole", (1.3, 1.6))):
        mine, ts = ours[key], peer(res, "tensorstore", key)
        ts_cpu = ts.get("cpu_s") or []
        dec = floor.get(key, {}).get("cpu_s", {}).get("decode")
        least, ts_least = min(mine, default=None), min(ts_cpu, default=None)
        to_floor, vs_ts = ratio(least, dec), ratio(ts_least, least)
        wall = min(walls[key], default=None)
        speed = ratio(ts.get("best_s"), wall)
        goals = []
        if limits[0]:
            goals.append(f"≤ {limits[0]}x floor: {verdict(None if to_floor is None else to_floor <= limits[0])}")
        goals.append(f"≥ {limits[1]}x less than tensorstore: {verdict(None if vs_ts is None else vs_ts >= limits[1])}")
        span = lambda xs: f" [{fmt(min(xs), '', 3)}–{fmt(max(xs), '', 3)}]" if xs else ""
        parts = floor.get(key, {}).get("cpu_s", {})
        alone = sum(parts.get(k, 0) for k in ("decode", "read", "place", "send")) if parts else None
        L.append(f"| {name} | {fmt(least, '', 3)}{span(mine)} | {fmt(ts_least, '', 3)}{span(ts_cpu)} | {fmt(dec, '', 3)} | "
                 f"{fmt(to_floor, 'x', 2)} | {fmt(vs_ts, 'x', 2)} | {fmt(wall, ' s', 3)}, {fmt(ts.get('best_s'), ' s', 3)} "
                 f"({fmt(speed, 'x', 2)}) | {'; '.join(goals)} | {fmt(alone, '', 3)} ({fmt(ratio(alone, dec), 'x', 2)}) |")
    L.append("")
    return L


def render(res):
    L = []
    b = res.get("binary", {})
    L.append(f"# zarr-serve benchmark ({res.get('started')} .. {res.get('finished')})\n")
    L.append(f"Binary: `{b.get('version')}` sha256 {b.get('sha256')}… built {b.get('mtime')}; "
             f"{res['machine']['nproc']} cores, loadavg at start {' '.join(res['machine']['loadavg_at_start'])}, "
             f"at end {' '.join(res['machine'].get('loadavg_at_end', []))}. "
             f"MB = 10^6 bytes of decoded output. wrk: {res['params']['threads']} threads, "
             f"{res['params']['conns']} connections, {res['params']['duration']} s after a "
             f"{res['params']['warmup']} s warm-up, same seeded tile sequence for both servers.\n")

    bulk = res.get("bulk", {})
    warm_ok = [w for w in bulk.get("warm", []) if w.get("status") == 200 and w.get("size") == 134217728]
    warm_best = min((w["time_s"] for w in warm_ok), default=None)
    warm_mbps = 134217728 / MB / warm_best if warm_best else None
    cold = bulk.get("cold", {})
    cold_mbps = 134217728 / MB / cold["time_s"] if cold.get("status") == 200 and cold.get("time_s") else None
    ts_r, zp_r = peer(res, "tensorstore", "region"), peer(res, "zarr-python", "region")
    ts_w, zp_w = peer(res, "tensorstore", "whole"), peer(res, "zarr-python", "whole")
    mem = res.get("memory", {})
    whole = mem.get("whole", {})
    whole_mbps = (whole["size"] / MB / whole["time_s"]) if whole.get("status") == 200 and whole.get("time_s") else None

    tz, tn = res.get("tiles_zarr", {}), res.get("tiles_nginx", {})
    mz, mn = res.get("meta_zarr", {}), res.get("meta_nginx", {})
    lz, ln = tz.get("latency_us", {}), tn.get("latency_us", {})

    L.append("| measure | zarr-serve | peer | ratio | target | verdict |")
    L.append("|---|---|---|---|---|---|")
    r1 = ratio(warm_mbps, ts_r.get("mb_per_s"))
    L.append(f"| Bulk 128 MiB region, binary over HTTP, warm (best of {len(bulk.get('warm', []))}) | "
             f"{fmt(warm_mbps, ' MB/s')} | tensorstore {fmt(ts_r.get('mb_per_s'), ' MB/s')} | "
             f"{fmt(r1, 'x', 2)} | >= 1.3x (v1: 1.0x) | {verdict(None if r1 is None else r1 >= 1.3)} |")
    r2 = ratio(warm_mbps, zp_r.get("mb_per_s"))
    L.append(f"| ″ | ″ | zarr-python {fmt(zp_r.get('mb_per_s'), ' MB/s')} | {fmt(r2, 'x', 2)} | >= 3x | "
             f"{verdict(None if r2 is None else r2 >= 3.0)} |")
    acc = [w for w in bulk.get("accepting_gzip", []) if w.get("status") == 200]
    acc_best = min(acc, key=lambda w: w["time_s"], default=None)
    acc_mbps = 134217728 / MB / acc_best["time_s"] if acc_best else None
    L.append(f"| Bulk region, warm, client sending `Accept-Encoding: gzip, deflate` (as Python requests does) | "
             f"{fmt(acc_mbps, ' MB/s')} (Content-Encoding: {(acc_best or {}).get('content_encoding') or 'none'}) | "
             f"tensorstore {fmt(ts_r.get('mb_per_s'), ' MB/s')} | {fmt(ratio(acc_mbps, ts_r.get('mb_per_s')), 'x', 2)} | – | |")
    L.append(f"| Bulk region, cold (first request of a fresh server) | {fmt(cold_mbps, ' MB/s')} | "
             f"tensorstore {fmt(ts_r.get('mb_per_s'), ' MB/s')} | {fmt(ratio(cold_mbps, ts_r.get('mb_per_s')), 'x', 2)} | – | |")
    rw = ratio(whole_mbps, ts_w.get("mb_per_s"))
    L.append(f"| Whole 1 GiB volume over HTTP (fresh server, best of {len(mem.get('whole_runs', [whole]))}) | "
             f"{fmt(whole_mbps, ' MB/s')} | "
             f"tensorstore {fmt(ts_w.get('mb_per_s'), ' MB/s')}, zarr-python {fmt(zp_w.get('mb_per_s'), ' MB/s')} | "
             f"{fmt(rw, 'x', 2)} vs ts | >= 1.5x | {verdict(None if rw is None else rw >= 1.5)} |")
    r3 = ratio(tz.get("rps"), tn.get("rps"))
    L.append(f"| Tiles, 64 KiB, req/s at {res['params']['conns']} conns | {fmt(tz.get('rps'))} | "
             f"nginx {fmt(tn.get('rps'))} | {fmt(r3, 'x', 2)} | >= 0.7x nginx (v1: 0.5x) | {verdict(None if r3 is None else r3 >= 0.7)} |")
    pr = ratio(lz.get("p99"), lz.get("p50"))
    L.append(f"| Tiles latency p50 / p99 | {fmt(lz.get('p50', 0) / 1000 if lz else None, ' ms', 2)} / "
             f"{fmt(lz.get('p99', 0) / 1000 if lz else None, ' ms', 2)} | nginx "
             f"{fmt(ln.get('p50', 0) / 1000 if ln else None, ' ms', 2)} / {fmt(ln.get('p99', 0) / 1000 if ln else None, ' ms', 2)} | "
             f"p99/p50 = {fmt(pr, '', 1)} | p99 < 5 ms (v1: < 10x p50) | "
             f"{verdict(None if not lz else lz.get('p99', 0) < 5000)} |")
    tv = res.get("tiles_v2_view", {})
    r5 = ratio(tv.get("rps"), tz.get("rps"))
    L.append(f"| Zarr v2 view: the same tiles as `/v2/` chunks, req/s | {fmt(tv.get('rps'))} | "
             f"`/data/` tiles {fmt(tz.get('rps'))} | {fmt(r5, 'x', 2)} | >= 0.5x `/data/` | "
             f"{verdict(None if r5 is None else r5 >= 0.5)} |")
    tp = res.get("tiles_png", {})
    r7 = ratio(tp.get("rps"), tz.get("rps"))
    L.append(f"| The same tiles as 256x256 PNGs (viridis, ~{fmt(res.get('tiles_png_bytes', 0) / 1024, ' KiB', 0)}), req/s | "
             f"{fmt(tp.get('rps'))} | binary tiles {fmt(tz.get('rps'))} | {fmt(r7, 'x', 2)} | >= 0.5x binary | "
             f"{verdict(None if r7 is None else r7 >= 0.5)} |")
    tpz = res.get("tiles_png_zstd", {})
    r8 = ratio(tpz.get("rps"), tz.get("rps"))
    L.append(f"| The same PNGs with `Accept-Encoding: zstd` (~{fmt(res.get('tiles_png_zstd_bytes', 0) / 1024, ' KiB', 0)} "
             f"sent), req/s | {fmt(tpz.get('rps'))} | binary tiles {fmt(tz.get('rps'))} | {fmt(r8, 'x', 2)} | — | — |")
    tw = res.get("twins", {})

    def best_mbps(name):
        ok = [w["time_s"] for w in tw.get(name, {}).get("warm", []) if w.get("status") == 200 and w.get("time_s")]
        return 64 * MIB / MB / min(ok) if ok else None

    v2m, v3m = best_mbps("v2_zstd"), best_mbps("v3_zstd")
    r6 = ratio(v2m, v3m)
    L.append(f"| Zarr v2 zstd, whole 64 MiB, warm (best of {len(tw.get('v2_zstd', {}).get('warm', []))}) | "
             f"{fmt(v2m, ' MB/s')} | same data and chunks as Zarr v3 zstd {fmt(v3m, ' MB/s')} | {fmt(r6, 'x', 2)} | "
             f">= 0.8x (within 20%) | {verdict(None if r6 is None else r6 >= 0.8)} |")
    pt = res.get("points", {})
    pt_ok = [w["time_s"] for w in pt.get("warm", []) if w.get("status") == 200]
    pt_best = min(pt_ok, default=None)
    ts_p = peer(res, "tensorstore", "points")
    r7 = ratio(ts_p.get("best_s"), pt_best)
    L.append(f"| 10,000 random points of the volume, POST, warm (best of {len(pt.get('warm', []))}) | "
             f"{fmt(pt_best, ' s', 3)} | tensorstore vindex {fmt(ts_p.get('best_s'), ' s', 3)}, zarr-python "
             f"{fmt(peer(res, 'zarr-python', 'points').get('best_s'), ' s', 3)} | {fmt(r7, 'x', 2)} (speed vs ts) | "
             f">= 1.0x | {verdict(None if r7 is None else r7 >= 1.0)} |")
    rm = res.get("reduce_mean", {})
    rm_best = min((r["time_s"] for r in rm.get("runs", [])), default=None)
    ts_m, zp_m = peer(res, "tensorstore", "mean"), peer(res, "zarr-python", "mean")
    r8 = ratio(ts_m.get("best_s"), rm_best)
    L.append(f"| `reduce=mean` over the whole 1 GiB volume (best of {len(rm.get('runs', []))}) | {fmt(rm_best, ' s', 2)} | "
             f"tensorstore read + numpy.mean {fmt(ts_m.get('best_s'), ' s', 2)}, zarr-python "
             f"{fmt(zp_m.get('best_s'), ' s', 2)} | {fmt(r8, 'x', 2)} (speed vs ts) | >= 1.5x | "
             f"{verdict(None if r8 is None else r8 >= 1.5)} |")
    rm_hwm = rm.get("rss_after", {}).get("VmHWM_mib")
    L.append(f"| Peak RSS (VmHWM) of the server after the means | {fmt(rm_hwm, ' MiB')} | "
             f"in-process: tensorstore {fmt(ts_m.get('peak_rss_mib'), ' MiB')} | – | < 128 MiB | "
             f"{verdict(None if rm_hwm is None else rm_hwm < 128)} |")
    jr = res.get("json_region", {})
    ok = [r for r in jr.get("runs", []) if r.get("status") == 200 and r.get("time_s")]
    if jr:
        best = min(ok, key=lambda r: r["time_s"]) if ok else {}
        rate = best["size"] / best["time_s"] / MB if best else None
        hwm = jr.get("rss_after", {}).get("VmHWM_mib")
        L.append(f"| `format=json` of a 256 MiB uint16 region ({fmt(best.get('size', 0) / MB, ' MB', 0)} of text, "
                 f"streamed), best of {len(jr.get('runs', []))} | {fmt(rate, ' MB/s')} | – | – | >= 200 MB/s | "
                 f"{verdict(None if rate is None else rate >= 200)} |")
        L.append(f"| Peak RSS (VmHWM) of the server after the JSON regions | {fmt(hwm, ' MiB')} | – | – | bounded "
                 f"(< 256 MiB) | {verdict(None if hwm is None else hwm < 256)} |")
    ec, pref = pt.get("economy_cold", {}), pt.get("reference", {})
    decoded = counter(ec, "zarr_serve_chunks_decoded_total")
    ranged = counter(ec, "zarr_serve_store_range_requests_total")
    if pref:
        L.append(f"| Points, cold: chunks decoded / ranged store requests | {fmt(decoded)} / {fmt(ranged)} | "
                 f"touched: {pref.get('inner_chunks')} inner chunks in {pref.get('shards')} shards | | "
                 f"each chunk decoded once | {verdict(None if decoded is None else decoded == pref.get('inner_chunks'))} |")
    r4 = ratio(mz.get("rps"), mn.get("rps"))
    L.append(f"| Metadata: node doc (`nodes/volume`, {res.get('node_doc_bytes')} B) req/s | {fmt(mz.get('rps'))} | "
             f"nginx zarr.json ({res.get('zarr_json_bytes')} B) {fmt(mn.get('rps'))} | {fmt(r4, 'x', 2)} | >= 0.5x nginx | "
             f"{verdict(None if r4 is None else r4 >= 0.5)} |")
    hwm = mem.get("after", {}).get("VmHWM_mib")
    L.append(f"| Peak RSS (VmHWM) streaming whole volume ({len(mem.get('whole_runs', [whole]))} times) | {fmt(hwm, ' MiB')} (at start {fmt(mem.get('before', {}).get('VmHWM_mib'), ' MiB')}) | "
             f"in-process whole read: tensorstore {fmt(ts_w.get('peak_rss_mib'), ' MiB')}, zarr-python "
             f"{fmt(zp_w.get('peak_rss_mib'), ' MiB')} (hold the 1 GiB result) | – | < 128 MiB (v1: 256) | "
             f"{verdict(None if hwm is None else hwm < 128)} |")
    ts_t, zp_t = peer(res, "tensorstore", "tile"), peer(res, "zarr-python", "tile")
    L.append(f"| (info) one tile in-process, 1 thread, p50 | – | tensorstore {fmt(ts_t.get('p50_us'), ' µs')}, "
             f"zarr-python {fmt(zp_t.get('p50_us'), ' µs')} | | | |")
    bc = bulk.get("server_cpu_s_per_warm_request")
    L.append(f"| (info) server CPU: warm bulk region / whole volume | {fmt(bc, ' s', 2)} / "
             f"{fmt(whole.get('server_cpu_s'), ' s', 2)} | in-process wall time: tensorstore {fmt(ts_r.get('best_s'), ' s', 2)} / "
             f"{fmt(ts_w.get('best_s'), ' s', 2)} | | | |")
    L.append(f"| (info) server CPU per tile / per node doc | {fmt(tz.get('server_cpu_us_per_req'), ' µs')} / "
             f"{fmt(mz.get('server_cpu_us_per_req'), ' µs')} | nginx {fmt(tn.get('server_cpu_us_per_req'), ' µs')} / "
             f"{fmt(mn.get('server_cpu_us_per_req'), ' µs')} | "
             f"{fmt(ratio(tz.get('server_cpu_us_per_req'), tn.get('server_cpu_us_per_req')), 'x', 1)} / "
             f"{fmt(ratio(mz.get('server_cpu_us_per_req'), mn.get('server_cpu_us_per_req')), 'x', 1)} | | |")
    L.append(f"| (info) server RSS after tiles+metadata wrk / after 4 bulk reads | "
             f"{fmt(mz.get('rss_after', {}).get('VmRSS_mib'), ' MiB')} (HWM {fmt(mz.get('rss_after', {}).get('VmHWM_mib'), ' MiB')}) / "
             f"{fmt(bulk.get('rss_after', {}).get('VmRSS_mib'), ' MiB')} (HWM {fmt(bulk.get('rss_after', {}).get('VmHWM_mib'), ' MiB')}) | | | | |")
    L.append("")
    L.extend(cpu_table(res))
    L.extend(budget_table(res.get("floor", {}), (warm_best, bulk.get("server_cpu_s_per_warm_request"), ts_r.get("best_s")),
                          (whole.get("time_s"), whole.get("server_cpu_s"), ts_w.get("best_s"))))

    # store economy
    eco, ref = res.get("economy", {}), res.get("economy_reference", {})
    warm_range = counter(eco.get("bulk_warm", {}), "zarr_serve_store_range_requests_total")
    targets = {
        # index reads are inferred from ranged requests: a cold bulk read makes the warm read's
        # data requests plus its index reads; a tile makes one data request plus its index read
        "bulk_cold": (f"1 index read per shard ({ref.get('shards')} shards); ideal "
                      f"{fmt(ref.get('stored_bytes', 0) / MB if ref else None, ' MB', 1)} data + "
                      f"{ref.get('shards', 0)}×{ref.get('index_bytes_per_shard')} B index",
                      lambda d: None if warm_range is None else d["range"] - warm_range == ref.get("shards"),
                      lambda d: None if warm_range is None else d["range"] - warm_range),
        "bulk_warm": (f"0 index reads; ideal {fmt(ref.get('stored_bytes', 0) / MB if ref else None, ' MB', 1)} "
                      f"in {ref.get('inner_chunks')} chunks", lambda d: d["misses"] == 0, lambda d: d["misses"]),
        "tile_cold": ("1 index read + 1 data read", lambda d: d["range"] == 2, lambda d: d["range"] - 1),
        "tile_warm_same": ("0 index reads, <= 1 ranged read", lambda d: d["misses"] == 0 and d["range"] <= 1,
                           lambda d: d["misses"]),
        "tile_warm_other_same_shard": ("0 index reads, <= 1 ranged read",
                                       lambda d: d["misses"] == 0 and d["range"] <= 1, lambda d: d["misses"]),
        "tile_new_shard_warm_server": ("1 index read + 1 data read", lambda d: d["range"] == 2,
                                       lambda d: d["range"] - 1),
    }
    L.append("Store economy (deltas of `/metrics` around each request, in this order; store req includes "
             "zarr.json reads; index reads inferred from ranged requests, see bench/report.py):\n")
    L.append("| request | store req | ranged req | index reads | bytes read | shard_index hits / misses | target | verdict |")
    L.append("|---|---|---|---|---|---|---|---|")
    notes_eco = []
    for name, d in eco.items():
        row = {"req": counter(d, "zarr_serve_store_requests_total"),
               "range": counter(d, "zarr_serve_store_range_requests_total"),
               "bytes": counter(d, "zarr_serve_store_bytes_total"),
               "hits": counter(d, "zarr_serve_cache_hits_total", 'cache="shard_index"'),
               "misses": counter(d, "zarr_serve_cache_misses_total", 'cache="shard_index"')}
        tgt, check, idx = targets.get(name, ("", None, None))
        try:
            v = verdict(check(row)) if check else ""
            ir = idx(row) if idx else None
        except Exception:
            v, ir = "n/a", None
        label = name + (f" {tuple(d['_tile'])}" if "_tile" in d else "")
        if ir is not None and row["misses"] is not None and name.startswith("tile") and row["misses"] != ir:
            notes_eco.append(f"{label}: shard_index misses {row['misses']} but {ir} index read(s) "
                             "(the miss counter counts more than index fetches on this path)")
        L.append(f"| {label} | {row['req']} | {row['range']} | {fmt(ir)} | {fmt(row['bytes'])} | "
                 f"{row['hits']} / {row['misses']} | {tgt} | {v} |")
    L.append("")

    # oddities
    odd = list(res.get("notes", [])) + notes_eco
    m = res.get("machine", {})
    la = max(float(x) for x in m.get("loadavg_at_start", ["0"])[:1] + m.get("loadavg_at_end", ["0"])[:1])
    if la > 0.75 * (m.get("nproc") or 1):
        odd.insert(0, f"1-min loadavg up to {la:.1f} on {m.get('nproc')} cores (it counts this benchmark's own "
                      "clients and servers, and whatever else ran): throughput and latency figures are noisy; "
                      "CPU per request is the steadier figure")
    if bulk:
        for w in [cold] + bulk.get("warm", []):
            if w.get("status") != 200 or w.get("size") != 134217728 or w.get("content_length") not in (None, w.get("size")):
                odd.append(f"bulk response odd: {w}")
        ts_sha = ts_r.get("sha256") or zp_r.get("sha256")
        if ts_sha and bulk.get("sha256") != ts_sha:
            odd.append(f"bulk HTTP body sha256 {bulk.get('sha256')[:12]}… != peers' {ts_sha[:12]}… ({bulk.get('sha_bytes')} B)")
        elif ts_sha:
            odd.append("bulk HTTP body identical (sha256) to tensorstore/zarr-python output")
    for run in mem.get("whole_runs", [whole] if whole else []):
        if (run.get("status") != 200 or run.get("size") != 1073741824
                or run.get("content_length") not in (None, run.get("size"))):
            odd.append(f"whole-volume response odd: {run}")
    if pt.get("warm"):
        shas = {w.get("sha256") for w in pt["warm"]} | {pt.get("cold", {}).get("sha256")}
        ts_sha = ts_p.get("sha256")
        if len(shas) != 1 or (ts_sha and ts_sha not in shas):
            odd.append(f"points: answers differ between requests or from tensorstore's vindex ({shas}, ts {ts_sha})")
        elif ts_sha:
            odd.append("points body identical (sha256) to tensorstore's vindex")
    means = {round(r["value"], 6) for r in rm.get("runs", [])}
    if ts_m.get("mean") is not None and means:
        if any(abs(m - ts_m["mean"]) > 1e-9 * abs(ts_m["mean"]) for m in means):
            odd.append(f"reduce=mean {means} differs from numpy.mean {ts_m['mean']}")
        else:
            odd.append(f"reduce=mean equals numpy.mean of tensorstore's read within 1e-9 ({ts_m['mean']:.9f})")
    if tw and tw.get("v2_zstd", {}).get("sha256") != tw.get("v3_zstd", {}).get("sha256"):
        odd.append("the v2 and v3 twins answered different bytes")
    if res.get("tiles_check_mismatches"):
        odd.append(f"tile bytes differ from numpy extraction: {res['tiles_check_mismatches']}")
    for k in ("tiles_zarr", "tiles_v2_view", "tiles_png", "tiles_png_zstd", "tiles_nginx", "meta_zarr", "meta_nginx"):
        w = res.get(k, {})
        if "error" in w:
            odd.append(f"{k}: wrk failed: {w['error'][:300]}")
        elif w.get("error_count") or w.get("non_2xx"):
            odd.append(f"{k}: wrk errors {w.get('errors')}, non-2xx {w.get('non_2xx', 0)}")
    for k in ("bulk", "tiles_zarr", "memory", "points", "reduce_mean", "json_region"):
        for line in res.get(k, {}).get("log_issues", []) or []:
            odd.append(f"server log ({k}): {line[:200]}")
    for p in res.get("peers", {}).get("peers", []):
        if "error" in p:
            odd.append(f"peer {p['lib']} {p['what']} failed: {p['error'][:200]}")
    if odd:
        L.append("Notes:\n")
        L += [f"- {o}" for o in odd]
        L.append("")
    return "\n".join(L)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data", "results.json")
    print(render(json.load(open(path))))
