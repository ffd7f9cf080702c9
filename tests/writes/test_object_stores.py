"""Writes on object stores (contract 4.2) through two server processes
sharing one store, as replicas behind a load balancer would: what one
writes the other reads; concurrent writers to disjoint cells of one shard
all land (the union), overlapping writers leave each shard as one of them
wrote it, and concurrent appenders get disjoint ranges without gaps.

Run by the s3 and azure stages with ZS_WRITES_URL (e.g.
s3://zarr-fixtures/writes-http) and the backend's environment. The races
need a store whose conditional puts are atomic: Azurite's are
(ZS_WRITES_ATOMIC=1); moto checks a condition and writes without a lock
between, so there only the sequential part runs.
"""
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from server import Server

URL = os.environ.get("ZS_WRITES_URL")
ATOMIC = os.environ.get("ZS_WRITES_ATOMIC") == "1"
pytestmark = pytest.mark.skipif(not URL, reason="ZS_WRITES_URL names no object store")

ARRAY = {"zarr_format": 3, "node_type": "array", "shape": [64, 64], "data_type": "float32",
         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [32, 32]}},
         "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0.0,
         "codecs": [{"name": "sharding_indexed", "configuration": {
             "chunk_shape": [8, 8],
             "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd",
                                                                                  "configuration": {"level": 1}}],
             "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
             "index_location": "end"}}]}
PLAIN = {"zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "float32",
         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
         "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0.0,
         "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}
LOG = {"zarr_format": 3, "node_type": "array", "shape": [0, 4], "data_type": "int32",
       "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
       "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": -1,
       "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}


@pytest.fixture
def replicas(tmp_path):
    a, b = Server(tmp_path, URL), Server(tmp_path, URL)
    for name in ["arr", "log", "plain"]:
        requests.delete(f"{a.url}/v1/datasets/w/nodes/{name}")
    yield a, b
    a.stop()
    b.stop()


def create(server, name, doc):
    r = requests.put(f"{server.url}/v1/datasets/w/nodes/{name}", json=doc)
    assert r.status_code == 201, r.text


def test_one_replica_reads_what_the_other_wrote(replicas):
    a, b = replicas
    create(a, "arr", ARRAY)
    model = np.zeros((64, 64), dtype="<f4")
    rng = np.random.default_rng(3)
    for server, (rows, cols) in [(a, (slice(3, 40), slice(5, 61, 2))), (b, (slice(30, 64), slice(0, 20)))]:
        new = rng.standard_normal(model[rows, cols].shape).astype("<f4")
        select = f"{rows.start}:{rows.stop}:{rows.step or 1},{cols.start}:{cols.stop}:{cols.step or 1}"
        r = server.put("arr", select, new.tobytes())
        assert r.status_code == 200, r.text
        model[rows, cols] = new
    np.testing.assert_array_equal(a.read("arr"), model)
    np.testing.assert_array_equal(b.read("arr"), model)
    # a conditional write on a stale ETag is 412 on the other replica too
    etag = requests.get(f"{a.url}/v1/datasets/w/data/arr", params={"select": "0:2,0:2", "format": "binary"})
    etag = etag.headers["ETag"]
    assert b.put("arr", "0:2,0:2", np.ones((2, 2), "<f4").tobytes(), headers={"If-Match": etag}).status_code == 200
    r = a.put("arr", "0:2,0:2", np.ones((2, 2), "<f4").tobytes(), headers={"If-Match": etag})
    assert r.status_code == 412, r.text


@pytest.mark.skipif(not ATOMIC, reason="the store's conditional puts are not atomic (moto)")
def test_concurrent_writers_on_two_replicas(replicas):
    a, b = replicas
    create(a, "arr", ARRAY)
    cells = [(i, j) for i in range(0, 32, 4) for j in (1, 20)]  # 16 cells of shard (0, 0)

    def write(k):
        i, j = cells[k]
        server = (a, b)[k % 2]
        r = server.put("arr", f"{i}:{i + 1},{j}:{j + 1}", np.array([k + 1], "<f4").tobytes())
        assert r.status_code == 200, r.text

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(16)))
    got = a.read("arr")
    for k, (i, j) in enumerate(cells):
        assert got[i, j] == k + 1, f"writer {k}'s element was lost"
    assert np.count_nonzero(got) == 16

    # overlapping writers: each shard ends as one writer left it
    def overwrite(k):
        server = (a, b)[k % 2]
        r = server.put("arr", "0:32,0:64", np.full((32, 64), 100 + k, "<f4").tobytes())
        assert r.status_code in (200, 409), r.text

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(overwrite, range(8)))
    got = b.read("arr")
    for shard in [got[0:32, 0:32], got[0:32, 32:64]]:
        assert len(np.unique(shard)) == 1, "a shard mixes two writers"


@pytest.mark.skipif(not ATOMIC, reason="the store's conditional puts are not atomic (moto)")
def test_a_writer_emptying_a_chunk_loses_no_other_writers_element(replicas):
    """One replica sets the chunk's last other element to the fill value
    (the chunk is then deleted) while the other writes a new element into
    it: the delete is conditional on the version read, so the new element
    survives every round."""
    a, b = replicas
    create(a, "plain", PLAIN)
    lost = []
    for k in range(1, 25):
        assert a.put("plain", "0:1,0:1", np.array([k], "<f4").tobytes()).status_code == 200
        with ThreadPoolExecutor(2) as pool:
            empty = pool.submit(a.put, "plain", "0:1,0:1", np.zeros(1, "<f4").tobytes())
            fill = pool.submit(b.put, "plain", f"3:4,{k % 4}:{k % 4 + 1}", np.array([k], "<f4").tobytes())
            assert empty.result().status_code == 200, empty.result().text
            assert fill.result().status_code == 200, fill.result().text
        got = b.read("plain")
        if got[3, k % 4] != k:
            lost.append(k)
        assert got[0, 0] == 0
        assert b.put("plain", "3:4,0:4", np.zeros(4, "<f4").tobytes()).status_code == 200
    assert not lost, f"rounds whose element the emptying writer deleted: {lost}"


@pytest.mark.skipif(not ATOMIC, reason="the store's conditional puts are not atomic (moto)")
def test_concurrent_appenders_on_two_replicas(replicas):
    a, b = replicas
    create(a, "log", LOG)

    def append(k):
        server = (a, b)[k % 2]
        rows = np.full((k % 3 + 1, 4), k, "<i4")
        r = requests.post(f"{server.url}/v1/datasets/w/data/log?append=0", data=rows.tobytes(),
                          headers={"Content-Type": "application/octet-stream"}, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["offset"], len(rows), k

    with ThreadPoolExecutor(8) as pool:
        spans = sorted(pool.map(append, range(8)))
    assert spans[0][0] == 0
    for (start, count, _), (next_start, _, _) in zip(spans, spans[1:]):
        assert start + count == next_start, f"a gap or an overlap: {spans}"
    got = b.read("log")
    assert got.shape == (spans[-1][0] + spans[-1][1], 4)
    for start, count, k in spans:
        assert (got[start:start + count] == k).all()
