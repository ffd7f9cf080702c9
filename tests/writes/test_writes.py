"""Writes to Zarr stores (contract 4.2) checked with the libraries people
write Zarr with. Arrays are made by zarr-python 3 and tensorstore (v3
sharded and unsharded, v2); the service writes regions into them with
every body form; zarr-python, tensorstore and zarrs (through zarrs-python)
read them back equal to a NumPy model; zarr-python then writes over the service's chunks and the
service over zarr-python's (mixed writers). Also: every 4xx of 4.2 leaves
the store's bytes as they were, 16 concurrent writers into one shard lose
nothing, 8 concurrent ... and `kill -9` in the middle of a large write
leaves every shard old or new, never torn.

    ZS_SERVER_BIN=target/ci/zarr-serve .venv-test/bin/python -m pytest tests/writes
"""
import hashlib
import io
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests
import tensorstore as ts
from server import Server
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, ShardingCodec, TransposeCodec, ZstdCodec

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(42)


def npy_bytes(array):
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def make_arrays(root):
    """The arrays the tests write into, by name: (zarr path, dtype)."""
    group = zarr.open_group(str(root), mode="w")
    arrays = {}
    a = group.create_array("sharded_zstd", shape=(100, 120), chunks=(10, 20), shards=(50, 60), dtype="float32",
                           compressors=ZstdCodec(level=3), fill_value=np.nan)
    a[:60, :] = RNG.random((60, 120), dtype=np.float32)
    b = group.create_array("blosc_transposed", shape=(37, 23), chunks=(8, 6), dtype="int16",
                           filters=[TransposeCodec(order=(1, 0))],
                           compressors=BloscCodec(cname="lz4", clevel=5, shuffle="bitshuffle"), fill_value=-1)
    b[:] = RNG.integers(-1000, 1000, size=(37, 23), dtype=np.int16)
    c = zarr.create_array(str(root / "v2_zlib"), shape=(40, 30), chunks=(16, 16), dtype=">f8", zarr_format=2,
                          compressors=zarr.codecs.numcodecs.Zlib(level=1) if False else None, fill_value=0.0)
    c[:20] = RNG.random((20, 30))
    # tensorstore: a sharded uint16 array with a crc32c index, written by it.
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / "ts_sharded")},
            "metadata": {"shape": [64, 64], "data_type": "uint16", "fill_value": 7,
                         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [32, 32]}},
                         "codecs": [{"name": "sharding_indexed", "configuration": {
                             "chunk_shape": [8, 8],
                             "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                        {"name": "gzip", "configuration": {"level": 4}}],
                             "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                              {"name": "crc32c"}]}}]},
            "create": True, "delete_existing": True}
    t = ts.open(spec).result()
    t[10:50, 5:60].write(RNG.integers(0, 60000, size=(40, 55), dtype=np.uint16)).result()
    for name in ["sharded_zstd", "blosc_transposed", "v2_zlib", "ts_sharded"]:
        arrays[name] = name
    return arrays


def zarr_read(root, path):
    return zarr.open_array(str(root / path), mode="r")[...]


def zarrs_read(root, path):
    """Read through zarrs (the Rust library), strict: an array it cannot
    decode itself is an error, not zarr-python's pipeline quietly."""
    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True}):
        return zarr.open_array(str(root / path), mode="r")[...]


def ts_read(root, path):
    meta = root / path / "zarr.json"
    driver = "zarr3" if meta.exists() else "zarr"
    return ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(root / path)}}).result().read().result()


def tree_hash(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "data.zarr"
    make_arrays(root)
    server = Server(tmp_path, root)
    yield root, server
    server.stop()


def values(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -30000), min(info.max, 30000), size=shape).astype(dtype)


def test_regions_read_back_by_zarr_python_and_tensorstore(store):
    root, server = store
    for path in ["sharded_zstd", "blosc_transposed", "v2_zlib", "ts_sharded"]:
        model = zarr_read(root, path)
        dtype = model.dtype.newbyteorder("<")
        # binary: a strided region across chunk (and shard) edges
        region = (slice(3, 33, 1), slice(1, 22, 3))
        new = values(model[region].shape, dtype)
        r = server.put(path, "3:33,1:22:3", new.astype("<" + dtype.str[1:]).tobytes())
        assert r.status_code == 200, (path, r.text)
        model[region] = new
        answer = r.json()
        assert answer["objects_written"] >= 1 and r.headers["ETag"] == answer["etag"]
        # npy, big-endian, into another region
        new2 = values((4, 5), dtype).astype(dtype.newbyteorder(">"))
        r = server.put(path, "20:24,0:5", npy_bytes(new2), "application/x-npy")
        assert r.status_code == 200, (path, r.text)
        model[20:24, 0:5] = new2
        # JSON: nested lists, then a scalar filling a region
        new3 = values((2, 3), dtype)
        r = server.put(path, "30:32,2:5", json.dumps(new3.tolist()), "application/json")
        assert r.status_code == 200, (path, r.text)
        model[30:32, 2:5] = new3
        r = server.put(path, "0,:", "5", "application/json")
        assert r.status_code == 200, (path, r.text)
        model[0, :] = 5
        np.testing.assert_array_equal(zarr_read(root, path), model, err_msg=f"{path}: zarr-python")
        np.testing.assert_array_equal(ts_read(root, path), model, err_msg=f"{path}: tensorstore")
        if model.dtype.isnative:  # zarrs-python 0.2.3: "Non-native byte order not supported"
            np.testing.assert_array_equal(zarrs_read(root, path), model, err_msg=f"{path}: zarrs")
        np.testing.assert_array_equal(server.read(path), model, err_msg=f"{path}: the service")


def test_fill_value_chunks_are_not_stored_and_empty_shards_deleted(store):
    root, server = store
    a = zarr.open_array(str(root / "sharded_zstd"), mode="r")
    # The first shard (rows 0-49, columns 0-59) holds data; fill it all with NaN.
    assert (root / "sharded_zstd" / "c" / "0" / "0").exists()
    r = server.put("sharded_zstd", "0:50,0:60", "\"NaN\"", "application/json")
    assert r.status_code == 200, r.text
    assert r.json()["chunks_deleted"] == 15 and r.json()["chunks_written"] == 0
    assert not (root / "sharded_zstd" / "c" / "0" / "0").exists(), "an empty shard is deleted"
    assert np.isnan(a[0:50, 0:60]).all()
    # Part of a shard: its inner chunks that become fill are left out of it.
    r = server.put("sharded_zstd", "50:60,0:20", "\"NaN\"", "application/json")
    assert r.status_code == 200, r.text
    assert r.json()["chunks_deleted"] == 1, r.text
    # An unsharded chunk all fill value is deleted.
    chunk = root / "blosc_transposed" / "c" / "0" / "0"
    assert chunk.exists()
    r = server.put("blosc_transposed", "0:8,0:6", "-1", "application/json")
    assert r.status_code == 200 and r.json()["chunks_deleted"] == 1, r.text
    assert not chunk.exists()
    assert (zarr_read(root, "blosc_transposed")[0:8, 0:6] == -1).all()


def test_mixed_writers(store):
    root, server = store
    path = "ts_sharded"
    model = zarr_read(root, path)
    new = values((20, 20), "uint16")
    assert server.put(path, "0:20,0:20", new.tobytes()).status_code == 200
    model[0:20, 0:20] = new
    # zarr-python writes over part of what the service wrote (and its shard)
    a = zarr.open_array(str(root / path), mode="r+")
    theirs = values((10, 30), "uint16")
    a[5:15, 10:40] = theirs
    model[5:15, 10:40] = theirs
    # the service writes over zarr-python's chunks again
    mine = values((4, 4), "uint16")
    assert server.put(path, "12:16,36:40", mine.tobytes()).status_code == 200
    model[12:16, 36:40] = mine
    np.testing.assert_array_equal(zarr_read(root, path), model)
    np.testing.assert_array_equal(ts_read(root, path), model)
    np.testing.assert_array_equal(server.read(path), model)


def test_bad_writes_change_nothing(store):
    root, server = store
    before = tree_hash(root)
    f32 = np.zeros((2, 2), dtype="<f4").tobytes()
    cases = [
        (server.put("sharded_zstd", "0:2,0:2", f32[:-1]), 400),  # short body
        (server.put("sharded_zstd", "0:2,0:2", npy_bytes(np.zeros((2, 2), "<f8")), "application/x-npy"), 400),
        (server.put("sharded_zstd", "0:2,0:2", npy_bytes(np.zeros((2, 3), "<f4")), "application/x-npy"), 400),
        (server.put("sharded_zstd", "0:2,0:2", b"\x93NUMPY garbage", "application/x-npy"), 400),
        (server.put("sharded_zstd", "0:2,0:2", "[[1, 2], [3]]", "application/json"), 400),
        (server.put("sharded_zstd", "0:2,0:2", "[[1, 2], [3, \"x\"]]", "application/json"), 400),
        (server.put("sharded_zstd", "0:2,0:2", f32, "text/csv"), 415),
        (server.put("sharded_zstd", "0:2,0:2", f32, ""), 415),
        (server.put("sharded_zstd", "[0,1],0:2", f32), 400),  # an index list
        (server.put("sharded_zstd", "0:4:-1,0:2", f32), 400),  # a negative step
        (server.put("sharded_zstd", "0:2,0:200", f32), 400),  # wrong size for the clamped region
        (server.put("sharded_zstd", "0:2,0:2", f32, ds="ro"), 405),
        (server.put("nope", "0:2", f32), 404),
        (requests.put(f"{server.url}/v1/datasets/w/data/sharded_zstd?select=0:2,0:2&format=npy", data=f32,
                      headers={"Content-Type": "application/octet-stream"}), 400),
        (server.put("sharded_zstd", "0:2,0:2", f32, headers={"If-Match": '"0123456789abcdef0123456789abcdef"'}), 412),
        (server.put("sharded_zstd", ":,:", np.zeros((2048, 4097), "<f8").tobytes()), 413),
    ]
    for response, status in cases:
        assert response.status_code == status, (status, response.status_code, response.text)
        assert response.headers["Content-Type"].startswith("application/problem+json")
    assert cases[11][0].headers["Allow"] == "GET, HEAD, POST"
    assert tree_hash(root) == before, "a refused write changed the store"


def test_if_match_names_the_region_read(store):
    root, server = store
    etag = requests.get(f"{server.url}/v1/datasets/w/data/v2_zlib", params={"select": "0:2,0:2", "format": "binary"})
    etag = etag.headers["ETag"]
    body = np.ones((2, 2), "<f8").tobytes()
    r = server.put("v2_zlib", "0:2,0:2", body, headers={"If-Match": etag})
    assert r.status_code == 200, r.text
    assert r.json()["etag"] != etag
    r = server.put("v2_zlib", "0:2,0:2", body, headers={"If-Match": etag})
    assert r.status_code == 412, "the region changed since that ETag"


def test_concurrent_writers_to_one_shard_lose_nothing(store):
    root, server = store
    path = "ts_sharded"
    model = zarr_read(root, path)
    cells = [(i, j) for i in range(0, 32, 2) for j in (3, 17)][:16]  # 16 cells of shard (0, 0)

    def write(cell):
        i, j = cell
        value = np.array([[1000 + i * 10 + j]], dtype="<u2")
        r = server.put(path, f"{i}:{i + 1},{j}:{j + 1}", value.tobytes())
        assert r.status_code == 200, r.text
        return cell, value[0, 0]

    with ThreadPoolExecutor(16) as pool:
        for (i, j), v in pool.map(write, cells):
            model[i, j] = v
    np.testing.assert_array_equal(zarr_read(root, path), model)


def test_kill_9_mid_write_leaves_every_shard_old_or_new(tmp_path):
    root = tmp_path / "data.zarr"
    group = zarr.open_group(str(root), mode="w")
    big = group.create_array("big", shape=(4096, 2048), chunks=(64, 256), shards=(256, 2048), dtype="float32",
                             compressors=ZstdCodec(level=3), fill_value=0)
    old = RNG.random((4096, 2048), dtype=np.float32)
    big[:] = old
    new = RNG.random((4096, 2048), dtype=np.float32)
    server = Server(tmp_path, root, extra="read_concurrency = 2")
    shards = sorted((root / "big" / "c").rglob("*"))
    shards = [p for p in shards if p.is_file()]
    stamps = {p: p.stat().st_mtime_ns for p in shards}
    done = threading.Event()

    def put():
        try:
            server.put("big", ":,:", new.tobytes())
        except requests.RequestException:
            pass
        done.set()

    thread = threading.Thread(target=put)
    thread.start()
    # Wait until the write has replaced some shards but not all, then kill.
    deadline = time.time() + 60
    while time.time() < deadline and not done.is_set():
        changed = sum(1 for p in shards if p.stat().st_mtime_ns != stamps[p])
        if changed >= 2:
            break
        time.sleep(0.005)
    server.stop(kill=True)
    thread.join()
    a = zarr.open_array(str(root / "big"), mode="r")
    kinds = []
    for s in range(16):
        rows = slice(s * 256, (s + 1) * 256)
        got = a[rows, :]
        if np.array_equal(got, old[rows]):
            kinds.append("old")
        elif np.array_equal(got, new[rows]):
            kinds.append("new")
        else:
            pytest.fail(f"shard {s} is neither old nor new after kill -9")
    leftovers = [p for p in (root / "big").rglob("*.partial")]
    print("after kill -9:", "".join(k[0] for k in kinds), "leftover temporary files:", len(leftovers))
    assert "new" in kinds, "the kill came before any shard was replaced"


def test_appends_get_disjoint_ranges(store):
    root, server = store
    group = zarr.open_group(str(root), mode="r+")
    log = group.create_array("log", shape=(0, 6), chunks=(4, 6), shards=(8, 6), dtype="int32", fill_value=-1,
                             dimension_names=["time", "sensor"], compressors=ZstdCodec(level=1))
    rows = {k: np.full((k % 3 + 1, 6), k, dtype="<i4") for k in range(8)}

    def append(k):
        r = requests.post(f"{server.url}/v1/datasets/w/data/log", params={"append": "time"},
                          data=rows[k].tobytes(), headers={"Content-Type": "application/octet-stream"}, timeout=60)
        assert r.status_code == 200, r.text
        return k, r.json()

    with ThreadPoolExecutor(8) as pool:
        answers = dict(pool.map(append, range(8)))
    spans = sorted((a["offset"], a["offset"] + a["count"], k) for k, a in answers.items())
    assert spans[0][0] == 0
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert end == start, f"a gap or an overlap between appends: {spans}"
    total = spans[-1][1]
    back = zarr.open_array(str(root / "log"), mode="r")
    assert back.shape == (total, 6)
    for start, end, k in spans:
        np.testing.assert_array_equal(back[start:end], rows[k])
    # npy and JSON bodies, by index; a body of the wrong width is 400 and grows nothing
    r = requests.post(f"{server.url}/v1/datasets/w/data/log?append=0", data=npy_bytes(np.ones((2, 6), ">i4")),
                      headers={"Content-Type": "application/x-npy"})
    assert r.status_code == 200 and r.json()["offset"] == total, r.text
    r = requests.post(f"{server.url}/v1/datasets/w/data/log?append=-2", data=json.dumps([[9] * 6]),
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 200 and r.json()["shape"] == [total + 3, 6], r.text
    before = tree_hash(root)
    for params, body in [({"append": "time"}, np.ones((2, 5), "<i4").tobytes()), ({"append": "depth"}, b""),
                         ({"append": "time", "x": "1"}, b"")]:
        r = requests.post(f"{server.url}/v1/datasets/w/data/log", params=params, data=body,
                          headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 400, r.text
    assert tree_hash(root) == before
    back = zarr.open_array(str(root / "log"), mode="r")
    np.testing.assert_array_equal(back[total:total + 2], 1)
    np.testing.assert_array_equal(back[total + 2], 9)
    np.testing.assert_array_equal(ts_read(root, "log")[...], back[...])


def node_url(server, path, ds="w"):
    return f"{server.url}/v1/datasets/{ds}/nodes/{path}"


def test_nodes_are_created_patched_and_deleted(store):
    root, server = store
    doc = {"zarr_format": 3, "node_type": "array", "shape": [10, 8], "data_type": "float64",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": "NaN", "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                           {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
           "attributes": {"units": "K", "keep": 1}, "dimension_names": ["y", "x"]}
    r = requests.put(node_url(server, "new/deep/temp"), json=doc)
    assert r.status_code == 201, r.text
    assert r.json()["shape"] == [10, 8] and r.headers["ETag"]
    assert zarr.open_group(str(root / "new"), mode="r").attrs is not None, "a missing parent became a group"
    a = zarr.open_array(str(root / "new" / "deep" / "temp"), mode="r")
    assert a.shape == (10, 8) and np.isnan(a[...]).all()
    # create-only; unreadable metadata; under an array
    assert requests.put(node_url(server, "new/deep/temp"), json=doc).status_code == 409
    before = tree_hash(root)
    bad = dict(doc, data_type="float99")
    assert requests.put(node_url(server, "other"), json=bad).status_code in (400, 501)
    assert requests.put(node_url(server, "other"), json={"zarr_format": 3}).status_code == 400
    assert requests.put(node_url(server, "other"), data="{", headers={"Content-Type": "application/json"}).status_code == 400
    assert requests.put(node_url(server, "other"), data="{}", headers={"Content-Type": "text/plain"}).status_code == 415
    assert requests.put(node_url(server, "new/deep/temp/x"), json=doc).status_code == 409
    assert requests.put(node_url(server, "other", ds="ro"), json=doc).status_code == 405
    assert tree_hash(root) == before
    # data, then PATCH: attributes merge, shape shrink then grow reads fill beyond the old extent
    values_ = RNG.standard_normal((10, 8))
    assert server.put("new/deep/temp", ":,:", values_.tobytes()).status_code == 200
    etag = requests.get(node_url(server, "new/deep/temp")).headers["ETag"]
    patch = {"attributes": {"units": "degC", "keep": None, "long_name": "t"}, "shape": [6, 8]}
    r = requests.patch(node_url(server, "new/deep/temp"), data=json.dumps(patch),
                       headers={"Content-Type": "application/merge-patch+json", "If-Match": etag})
    assert r.status_code == 200, r.text
    a = zarr.open_array(str(root / "new" / "deep" / "temp"), mode="r")
    assert dict(a.attrs) == {"units": "degC", "long_name": "t"} and a.shape == (6, 8)
    np.testing.assert_array_equal(a[...], values_[:6])
    r = requests.patch(node_url(server, "new/deep/temp"), data=json.dumps({"shape": [10, 8]}),
                       headers={"Content-Type": "application/merge-patch+json", "If-Match": etag})
    assert r.status_code == 412, "the node changed since that ETag"
    r = requests.patch(node_url(server, "new/deep/temp"), data=json.dumps({"shape": [10, 8]}),
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    a = zarr.open_array(str(root / "new" / "deep" / "temp"), mode="r")
    np.testing.assert_array_equal(a[:6], values_[:6])
    assert np.isnan(a[6:]).all(), "what a shrink cut off reads as the fill value after growing"
    for bad_patch in [{"data_type": "int8"}, {"shape": [1]}, {"shape": "big"}, [1]]:
        r = requests.patch(node_url(server, "new/deep/temp"), data=json.dumps(bad_patch),
                           headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 400, (bad_patch, r.text)
    # v2 nodes beside it, read by zarr-python
    v2 = {"zarr_format": 2, "shape": [5], "chunks": [2], "dtype": "<i2", "compressor": None, "fill_value": 3,
          "order": "C", "filters": None}
    assert requests.put(node_url(server, "v2group/arr"), json=v2).status_code == 201
    assert (root / "v2group" / ".zgroup").exists()
    r = requests.patch(node_url(server, "v2group/arr"), data=json.dumps({"attributes": {"a": 1}}),
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    b = zarr.open_array(str(root / "v2group" / "arr"), mode="r", zarr_format=2)
    assert b.shape == (5,) and (b[...] == 3).all() and dict(b.attrs) == {"a": 1}
    # DELETE: everything under the node; the root cannot be deleted
    assert requests.delete(node_url(server, "new")).status_code == 204
    assert not (root / "new").exists() or not any(p.is_file() for p in (root / "new").rglob("*"))
    assert requests.get(node_url(server, "new/deep/temp")).status_code == 404
    assert requests.delete(node_url(server, "new")).status_code == 404
    assert requests.delete(f"{server.url}/v1/datasets/w/nodes/").status_code == 400
    assert requests.delete(f"{server.url}/v1/datasets/w/nodes").status_code == 400
    # the root: its attributes patched (with and without the trailing slash), never re-created
    for url in [f"{server.url}/v1/datasets/w/nodes", f"{server.url}/v1/datasets/w/nodes/"]:
        r = requests.patch(url, data=json.dumps({"attributes": {"title": url[-1]}}),
                           headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        assert dict(zarr.open_group(str(root), mode="r").attrs)["title"] == url[-1]
    assert requests.put(f"{server.url}/v1/datasets/w/nodes", json={"zarr_format": 3, "node_type": "group"}).status_code == 409
    assert requests.patch(f"{server.url}/v1/datasets/ro/nodes", data="{}",
                          headers={"Content-Type": "application/merge-patch+json"}).status_code == 405


def test_string_arrays_take_json_bodies(tmp_path):
    """Strings (variable length) through JSON bodies, in a Zarr v3 `string`
    array (`vlen-utf8`) and a v2 object array (`VLenUTF8`) made by
    zarr-python 3, read back by it: regions, a scalar filling a region, a
    chunk become all fill value deleted, an append; binary bodies are 415."""
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w")
    a = zarr.create_array(str(root / "v3"), shape=(7, 5), chunks=(3, 2), dtype=str, fill_value="", zarr_format=3)
    a[:3] = np.array([[f"r{i}c{j}" for j in range(5)] for i in range(3)])
    b = zarr.create_array(str(root / "v2"), shape=(6,), chunks=(4,), dtype=str, zarr_format=2)
    b[:] = np.array(["p", "q", "r", "s", "t", "u"])
    server = Server(tmp_path, root)
    try:
        model = a[...].astype(object)
        new = [["α β", "", "long string " * 5], ["x", "y", "日本"]]
        r = server.put("v3", "1:3,1:4", json.dumps(new), "application/json")
        assert r.status_code == 200, r.text
        model[1:3, 1:4] = new
        r = server.put("v3", "5:7,:", json.dumps("fill me"), "application/json")
        assert r.status_code == 200, r.text
        model[5:7, :] = "fill me"
        # the last row of chunks (rows 6..7) back to the fill value: its chunk files go
        r = server.put("v3", "6:7,:", json.dumps(""), "application/json")
        assert r.status_code == 200 and r.json()["chunks_deleted"] == 3, r.text
        model[6:7, :] = ""
        assert not list((root / "v3" / "c" / "2").glob("*")), "chunks of fill values stay stored"
        np.testing.assert_array_equal(zarr.open_array(str(root / "v3"), mode="r")[...].astype(object), model)
        np.testing.assert_array_equal(server.read("v3").astype(object), model)
        # binary bodies cannot carry strings; a number is not a string; nothing written
        before = tree_hash(root)
        assert server.put("v3", "0,0", b"abcdefgh").status_code == 415
        assert server.put("v3", "0,0:2", json.dumps(["a", 5]), "application/json").status_code == 400
        assert tree_hash(root) == before
        # append a row
        r = requests.post(f"{server.url}/v1/datasets/w/data/v3?append=0",
                          data=json.dumps([["n0", "n1", "n2", "n3", "n4"]]), headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        model = np.concatenate([model, np.array([["n0", "n1", "n2", "n3", "n4"]], dtype=object)])
        np.testing.assert_array_equal(zarr.open_array(str(root / "v3"), mode="r")[...].astype(object), model)
        # v2 object array with VLenUTF8
        r = server.put("v2", "1:4", json.dumps(["é", "", "zz"]), "application/json")
        assert r.status_code == 200, r.text
        np.testing.assert_array_equal(zarr.open_array(str(root / "v2"), mode="r")[...].astype(object),
                                      np.array(["p", "é", "", "zz", "t", "u"], dtype=object))
    finally:
        server.stop()


def test_strings_in_shards(tmp_path):
    """Strings through JSON bodies into a sharded `string` array made by
    zarr-python 3 (inner chunks `vlen-utf8`): a region across shard and
    inner-chunk edges (inner chunks read, changed and written again), a
    shard become all fill value deleted, then zarr-python writing on top;
    zarr-python reads back the model each time."""
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w")
    a = zarr.create_array(str(root / "sh"), shape=(8, 6), chunks=(2, 3), shards=(4, 6), dtype=str,
                          fill_value="", zarr_format=3)
    a[:3] = np.array([[f"r{i}c{j}" for j in range(6)] for i in range(3)])
    server = Server(tmp_path, root)
    try:
        model = a[...].astype(object)
        new = [["α β", "", "long string " * 5], ["x", "y", "日本"], ["p", "q", "r"], ["s", "t", "u"]]
        r = server.put("sh", "1:5,2:5", json.dumps(new), "application/json")
        assert r.status_code == 200, r.text
        model[1:5, 2:5] = new
        np.testing.assert_array_equal(zarr.open_array(str(root / "sh"), mode="r")[...].astype(object), model)
        np.testing.assert_array_equal(server.read("sh").astype(object), model)
        # the second shard (rows 4..8) back to the fill value: its file goes
        assert (root / "sh" / "c" / "1" / "0").exists()
        r = server.put("sh", "4:8,:", json.dumps(""), "application/json")
        assert r.status_code == 200, r.text
        model[4:8, :] = ""
        assert not (root / "sh" / "c" / "1" / "0").exists(), "a shard of fill values stays stored"
        np.testing.assert_array_equal(zarr.open_array(str(root / "sh"), mode="r")[...].astype(object), model)
        # zarr-python writes on top of what the service wrote, the service reads it
        b = zarr.open_array(str(root / "sh"), mode="r+")
        b[0, :] = np.array(["z"] * 6)
        model[0, :] = "z"
        np.testing.assert_array_equal(server.read("sh").astype(object), model)
    finally:
        server.stop()


@pytest.mark.parametrize("fmt", [3, 2])
def test_consolidated_metadata_follows_node_changes(tmp_path, fmt):
    """A store with consolidated metadata (v3 `consolidated_metadata`, v2
    `.zmetadata`, as zarr.consolidate_metadata writes them): an append, a
    resize, new attributes, a new node and a deletion through the service
    are what zarr-python sees when it opens the store consolidated (as
    xarray does by default)."""
    root = tmp_path / "c.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=fmt)
    log = group.create_array("log", shape=(4, 3), chunks=(2, 3), dtype="int32", fill_value=0)
    log[:] = np.arange(12, dtype="int32").reshape(4, 3)
    group.create_array("gone/inner", shape=(2,), chunks=(2,), dtype="uint8", fill_value=0)
    zarr.consolidate_metadata(str(root), zarr_format=fmt)
    server = Server(tmp_path, root)
    try:
        r = requests.post(f"{server.url}/v1/datasets/w/data/log?append=0", data=json.dumps([[7, 8, 9]] * 2),
                          headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        merge = {"Content-Type": "application/merge-patch+json"}
        r = requests.patch(node_url(server, "log"), data=json.dumps({"attributes": {"units": "m"}}), headers=merge)
        assert r.status_code == 200, r.text
        doc = ({"zarr_format": 3, "node_type": "group", "attributes": {"made": "here"}} if fmt == 3
               else {"zarr_format": 2})
        assert requests.put(node_url(server, "new/sub"), json=doc).status_code == 201
        assert requests.delete(node_url(server, "gone")).status_code == 204
        seen = zarr.open_consolidated(str(root), mode="r", zarr_format=fmt)
        assert seen["log"].shape == (6, 3)
        assert dict(seen["log"].attrs) == {"units": "m"}
        np.testing.assert_array_equal(seen["log"][4:], [[7, 8, 9]] * 2)
        assert "sub" in seen["new"]
        assert "gone" not in seen, "a deleted node is still in the consolidated metadata"
        names = sorted(k for k, _ in seen.members(max_depth=None))
        assert names == ["log", "new", "new/sub"], names
        r = requests.patch(node_url(server, "log"), data=json.dumps({"shape": [3, 3]}), headers=merge)
        assert r.status_code == 200, r.text
        assert zarr.open_consolidated(str(root), mode="r", zarr_format=fmt)["log"].shape == (3, 3)
    finally:
        server.stop()
