"""Writes through Icechunk repositories (api.md 4.3): each write request is
one commit on a branch, made with the icechunk crate, read back with
icechunk-python + zarr-python and compared with a NumPy model.

    ZS_SERVER_BIN=target/ci/zarr-serve .venv-dap/bin/python -m pytest tests/icechunk/test_writes.py

Local files by default; with ZS_IC_S3_ENDPOINT the repository lives on that
S3 server, with ZS_IC_AZURE_URL on Azurite (see test_versions.py).
"""
import concurrent.futures
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import icechunk as ic
import numpy as np
import pytest
import zarr

from test_versions import BIN, REMOTE, Place, free_port

SHAPE, CHUNKS = (8, 12), (2, 3)


def start(tmp, datasets, settings="", options=None, write='["*"]'):
    """A server writing `datasets` (name: URL), with more top-level
    `settings` (before the datasets: also whole tables), the store `options`
    of every dataset and its `write` grant."""
    port = free_port()
    path = os.path.join(tmp, f"config-{port}.toml")
    with open(path, "w") as out:
        out.write(f'listen = "127.0.0.1:{port}"\nmetadata_ttl_secs = 0\n{settings}\n')
        for name, url in datasets.items():
            out.write(f'\n[datasets.{name}]\nurl = {json.dumps(url)}\nwritable = true\nwrite = {write}\n')
            if options:
                out.write(f"[datasets.{name}.options]\n")
                out.write("".join(f"{k} = {json.dumps(v)}\n" for k, v in options.items()))
    log = open(os.path.join(tmp, f"server-{port}.log"), "w")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZARR_SERVE_")}
    server = subprocess.Popen([BIN, "--config", path], stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=2)
            return server, base
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("zarr-serve did not start: " + open(log.name).read())


def call(method, url, body=None, headers=None):
    """(status, headers, body) of a request."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def put(base, ds, path, select, values, headers=None):
    body = np.ascontiguousarray(values, dtype="<f4").tobytes()
    h = {"Content-Type": "application/octet-stream", **(headers or {})}
    return call("PUT", f"{base}/v1/datasets/{ds}/data/{path}?select={select}", body, h)


@pytest.fixture()
def repo_world():
    """A fresh repository holding array `a` (zeros, as icechunk-python and
    zarr-python wrote it) with a tag and a second branch, and a server that
    may write it."""
    tmp = tempfile.mkdtemp(prefix="zs-icwrite-")
    place = Place(tmp)
    repo = ic.Repository.create(place.storage("repo"))
    session = repo.writable_session("main")
    root = zarr.open_group(session.store, mode="w", zarr_format=3)
    root.create_array("a", shape=SHAPE, chunks=CHUNKS, dtype="float32", fill_value=0)
    root.create_array("s", shape=SHAPE, chunks=CHUNKS, shards=(4, 6), dtype="float32", fill_value=0)
    first = session.commit("made by icechunk-python")
    repo.create_tag("v1", snapshot_id=first)
    repo.create_branch("dev", snapshot_id=first)
    server, base = start(tmp, {"ic": "icechunk+" + place.url("repo")})
    yield {"repo": repo, "base": base, "first": first, "tmp": tmp, "place": place}
    server.kill()
    server.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def read(repo, name, branch="main"):
    session = repo.readonly_session(branch=branch)
    return zarr.open_group(session.store, mode="r")[name][:]


def test_a_region_put_is_one_commit_icechunk_python_reads_back(repo_world):
    w, repo = repo_world, repo_world["repo"]
    model = np.zeros(SHAPE, "float32")
    values = np.arange(3 * 5, dtype="float32").reshape(3, 5) + 0.5
    model[1:4, 2:7] = values
    status, headers, body = put(w["base"], "ic", "a", "1:4,2:7", values, {"X-Commit-Message": "a region, by curl"})
    assert status == 200, body
    answer = json.loads(body)
    assert answer["branch"] == "main"
    assert answer["snapshot"] == repo.lookup_branch("main")
    assert answer["chunks_written"] == 6
    np.testing.assert_array_equal(read(repo, "a"), model)
    tip = next(iter(repo.ancestry(branch="main")))
    assert tip.message == "a region, by curl"
    assert tip.metadata["author"] == "anonymous"
    assert tip.parent_id == w["first"]
    # The service reads its own commit at once, at the branch and at the snapshot.
    status, _, got = call("GET", f"{w['base']}/v1/datasets/ic/data/a?format=npy")
    assert status == 200
    np.testing.assert_array_equal(np.load(io.BytesIO(got)), model)
    status, _, got = call("GET", f"{w['base']}/v1/datasets/ic@{answer['snapshot']}/data/a?format=npy")
    np.testing.assert_array_equal(np.load(io.BytesIO(got)), model)
    # The tag still reads what it named.
    np.testing.assert_array_equal(read(repo, "a", branch="dev"), np.zeros(SHAPE, "float32"))


def test_sharded_partial_writes_commit_and_read_back(repo_world):
    w, repo = repo_world, repo_world["repo"]
    model = np.zeros(SHAPE, "float32")
    for select, (rows, cols) in [("0:3,0:5", (slice(0, 3), slice(0, 5))), ("2:8,4:12", (slice(2, 8), slice(4, 12)))]:
        values = np.random.default_rng(len(select)).random(model[rows, cols].shape, dtype="float32")
        model[rows, cols] = values
        status, _, body = put(w["base"], "ic", "s", select, values)
        assert status == 200, body
    np.testing.assert_array_equal(read(repo, "s"), model)
    assert len(list(repo.ancestry(branch="main"))) == 4  # the repository's start, the arrays, two writes


def test_writes_go_to_the_branch_named_and_never_to_tags_or_snapshots(repo_world):
    w, repo = repo_world, repo_world["repo"]
    ones = np.ones((2, 3), "float32")
    status, _, body = put(w["base"], "ic@branch.dev", "a", "0:2,0:3", ones)
    assert status == 200, body
    assert json.loads(body)["branch"] == "dev"
    assert read(repo, "a", branch="dev")[0:2, 0:3].tolist() == ones.tolist()
    assert read(repo, "a").sum() == 0  # main untouched
    main_before = repo.lookup_branch("main")
    for ref in ["tag.v1", w["first"]]:
        status, _, body = put(w["base"], f"ic@{ref}", "a", "0:2,0:3", ones)
        assert status == 405, body
    status, _, body = put(w["base"], "ic@branch.nope", "a", "0:2,0:3", ones)
    assert status == 404, body
    status, _, body = put(w["base"], "ic@bad", "a", "0:2,0:3", ones)
    assert status == 400, body
    assert repo.lookup_branch("main") == main_before


def test_a_bad_body_commits_nothing(repo_world):
    w, repo = repo_world, repo_world["repo"]
    before = repo.lookup_branch("main")
    status, _, body = call("PUT", f"{w['base']}/v1/datasets/ic/data/a?select=0:2,0:3", b"short",
                           {"Content-Type": "application/octet-stream"})
    assert status == 400, body
    assert repo.lookup_branch("main") == before


def test_concurrent_writers_of_disjoint_chunks_all_land(repo_world):
    w, repo = repo_world, repo_world["repo"]
    model = np.zeros(SHAPE, "float32")
    jobs = []
    for i in range(4):
        for j in range(4):
            values = np.full(CHUNKS, i * 4 + j + 1, "float32")
            model[i * 2:(i + 1) * 2, j * 3:(j + 1) * 3] = values
            jobs.append((f"{i * 2}:{(i + 1) * 2},{j * 3}:{(j + 1) * 3}", values))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda job: put(w["base"], "ic", "a", *job), jobs))
    assert [r[0] for r in results] == [200] * len(jobs), [r[2] for r in results if r[0] != 200]
    np.testing.assert_array_equal(read(repo, "a"), model)
    assert len({json.loads(r[2])["snapshot"] for r in results}) == len(jobs)


def test_writers_of_one_chunk_land_whole_or_are_409(repo_world):
    w, repo = repo_world, repo_world["repo"]
    jobs = [np.full(CHUNKS, k + 1, "float32") for k in range(8)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda v: put(w["base"], "ic", "a", "0:2,0:3", v), jobs))
    statuses = [r[0] for r in results]
    assert set(statuses) <= {200, 409}, statuses
    assert 200 in statuses
    for status, _, body in results:
        if status == 409:
            assert "chunks [[0, 0]] of '/a'" in json.loads(body)["detail"], body
    landed = [k + 1 for k, r in enumerate(results) if r[0] == 200]
    chunk = read(repo, "a")[0:2, 0:3]
    assert len(set(chunk.ravel().tolist())) == 1 and chunk[0, 0] in landed, chunk


def test_nodes_and_appends_are_commits_too(repo_world):
    w, repo = repo_world, repo_world["repo"]
    base = w["base"]
    doc = {"zarr_format": 3, "node_type": "array", "shape": [2, 4], "data_type": "int32",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
           "attributes": {"units": "m"}}
    status, _, body = call("PUT", f"{base}/v1/datasets/ic/nodes/t", json.dumps(doc).encode(),
                           {"Content-Type": "application/json", "X-Commit-Message": "make t"})
    assert status == 201, body
    made = json.loads(body)
    assert made["branch"] == "main" and made["snapshot"] == repo.lookup_branch("main")
    rows = np.arange(8, dtype="<i4").reshape(2, 4)
    status, _, body = call("POST", f"{base}/v1/datasets/ic/data/t?append=0", rows.tobytes(),
                           {"Content-Type": "application/octet-stream"})
    assert status == 200, body
    assert json.loads(body)["shape"] == [4, 4]
    status, _, body = call("PATCH", f"{base}/v1/datasets/ic/nodes/t", json.dumps({"attributes": {"units": "km"}}).encode(),
                           {"Content-Type": "application/merge-patch+json"})
    assert status == 200, body
    group = zarr.open_group(repo.readonly_session(branch="main").store, mode="r")
    np.testing.assert_array_equal(group["t"][:], np.concatenate([np.zeros((2, 4), "i4"), rows]))
    assert group["t"].attrs["units"] == "km"
    messages = [s.message for s in repo.ancestry(branch="main")]
    assert messages[2] == "make t" and messages[1].startswith("append") and messages[0].startswith("patch")
    status, _, body = call("DELETE", f"{base}/v1/datasets/ic/nodes/t")
    assert status == 200, body
    assert json.loads(body)["snapshot"] == repo.lookup_branch("main")
    assert "t" not in zarr.open_group(repo.readonly_session(branch="main").store, mode="r")


class SlowPut:
    """A region PUT whose body is held back after its first bytes: the
    server has opened its session on the branch by then, so whatever
    commits before `finish` is what the write must be rebased onto."""

    def __init__(self, base, ds, path, select, values):
        import http.client
        from urllib.parse import urlparse
        url = urlparse(base)
        self.body = np.ascontiguousarray(values, dtype="<f4").tobytes()
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        self.conn.putrequest("PUT", f"/v1/datasets/{ds}/data/{path}?select={select}")
        self.conn.putheader("Content-Type", "application/octet-stream")
        self.conn.putheader("Transfer-Encoding", "chunked")
        self.conn.endheaders()
        self.send(self.body[:4])
        time.sleep(0.3)  # the server reads the head and opens its session

    def send(self, part):
        self.conn.send(b"%x\r\n%s\r\n" % (len(part), part))

    def finish(self):
        self.send(self.body[4:])
        self.conn.send(b"0\r\n\r\n")
        r = self.conn.getresponse()
        out = (r.status, r.read())
        self.conn.close()
        return out


@pytest.fixture()
def two_servers(repo_world):
    """A second server on the same repository: another process on S3 or
    Azure; on local files the same one (several processes writing one local
    repository is not supported, api.md 4.3)."""
    if not REMOTE:
        yield repo_world["base"]
        return
    server, base = start(repo_world["tmp"], {"ic": "icechunk+" + repo_world["place"].url("repo")})
    yield base
    server.kill()
    server.wait()


def test_a_write_is_rebased_onto_commits_made_meanwhile(repo_world, two_servers):
    w, repo = repo_world, repo_world["repo"]
    model = np.zeros(SHAPE, "float32")
    slow = SlowPut(w["base"], "ic", "a", "0:2,0:3", np.full(CHUNKS, 1, "float32"))
    model[0:2, 0:3] = 1
    # Meanwhile: another server process commits one chunk, icechunk-python another.
    status, _, body = put(two_servers, "ic", "a", "2:4,0:3", np.full(CHUNKS, 2, "float32"))
    assert status == 200, body
    model[2:4, 0:3] = 2
    session = repo.writable_session("main")
    zarr.open_group(session.store, mode="r+")["a"][4:6, 0:3] = 3
    by_python = session.commit("by icechunk-python")
    model[4:6, 0:3] = 3
    status, body = slow.finish()
    assert status == 200, body
    answer = json.loads(body)
    np.testing.assert_array_equal(read(repo, "a"), model)
    tip = next(iter(repo.ancestry(branch="main")))
    assert tip.id == answer["snapshot"] and tip.parent_id == by_python


def test_a_write_conflicting_with_a_commit_made_meanwhile_is_409_and_commits_nothing(repo_world, two_servers):
    w, repo = repo_world, repo_world["repo"]
    slow = SlowPut(w["base"], "ic", "a", "0:2,0:6", np.full((2, 6), 1, "float32"))
    status, _, body = put(two_servers, "ic", "a", "0:2,3:6", np.full(CHUNKS, 2, "float32"))
    assert status == 200, body
    landed = repo.lookup_branch("main")
    status, body = slow.finish()
    assert status == 409, body
    assert "chunks [[0, 1]] of '/a'" in json.loads(body)["detail"], body
    assert repo.lookup_branch("main") == landed
    chunk_row = read(repo, "a")[0:2, 0:6]
    np.testing.assert_array_equal(chunk_row, np.concatenate([np.zeros(CHUNKS, "f4"), np.full(CHUNKS, 2, "f4")], axis=1))


def jcall(method, url, doc=None, headers=None):
    body = None if doc is None else json.dumps(doc).encode()
    h = {"Content-Type": "application/json", **(headers or {})} if doc is not None else (headers or {})
    status, _, got = call(method, url, body, h)
    return status, (json.loads(got) if got else None)


def test_history_lists_every_commit_newest_first_as_icechunk_python_does(repo_world):
    w, repo = repo_world, repo_world["repo"]
    for k in range(3):
        status, _, body = put(w["base"], "ic", "a", f"{k * 2}:{k * 2 + 2},0:3", np.full(CHUNKS, k, "float32"),
                              {"X-Commit-Message": f"step {k}"})
        assert status == 200, body
    status, got = jcall("GET", f"{w['base']}/v1/datasets/ic/history")
    assert status == 200, got
    expected = list(repo.ancestry(branch="main"))
    assert [h["id"] for h in got] == [s.id for s in expected]
    assert [h["parent"] for h in got] == [s.parent_id for s in expected]
    assert [h["message"] for h in got] == [s.message for s in expected]
    assert [h["author"] for h in got[:3]] == ["anonymous"] * 3
    assert got[0]["written_at"].endswith("Z")
    status, got = jcall("GET", f"{w['base']}/v1/datasets/ic/history?ref=tag.v1&limit=1")
    assert status == 200 and [h["id"] for h in got] == [w["first"]], got
    for bad, code in [("?ref=nope", 400), ("?ref=branch.nope", 404), ("?limit=0", 400), ("?limit=x", 400),
                      ("?other=1", 400)]:
        status, got = jcall("GET", f"{w['base']}/v1/datasets/ic/history{bad}")
        assert status == code, (bad, got)


def test_branches_and_tags_are_made_reset_and_removed(repo_world):
    w, repo = repo_world, repo_world["repo"]
    refs = f"{w['base']}/v1/datasets/ic/refs"
    status, got = jcall("POST", f"{refs}/branches", {"name": "exp", "snapshot": w["first"]})
    assert status == 201 and got == {"name": "exp", "snapshot": w["first"]}, got
    assert repo.lookup_branch("exp") == w["first"]
    status, got = jcall("POST", f"{refs}/branches", {"name": "exp", "snapshot": w["first"]})
    assert status == 409, got
    status, got = jcall("POST", f"{refs}/tags", {"name": "v1", "snapshot": w["first"]})
    assert status == 409, got
    status, got = jcall("POST", f"{refs}/tags", {"name": "v2", "snapshot": "0" * 20})
    assert status == 400, got
    status, got = jcall("POST", f"{refs}/tags", {"name": "v2"})
    assert status == 400, got
    # A commit on exp, then a tag of it; reset exp back on condition.
    status, _, body = put(w["base"], "ic@branch.exp", "a", "0:2,0:3", np.ones(CHUNKS, "float32"))
    assert status == 200, body
    moved = json.loads(body)["snapshot"]
    status, got = jcall("POST", f"{refs}/tags", {"name": "v2", "snapshot": moved})
    assert status == 201, got
    assert repo.lookup_tag("v2") == moved
    status, got = jcall("PUT", f"{refs}/branches/exp", {"snapshot": w["first"]}, {"If-Match": f'"{w["first"]}"'})
    assert status == 412, got
    assert repo.lookup_branch("exp") == moved
    status, got = jcall("PUT", f"{refs}/branches/exp", {"snapshot": w["first"]}, {"If-Match": f'"{moved}"'})
    assert status == 200, got
    assert repo.lookup_branch("exp") == w["first"]
    # The service sees the reset at once.
    status, _, got = call("GET", f"{w['base']}/v1/datasets/ic@branch.exp/data/a?format=npy")
    assert np.load(io.BytesIO(got)).sum() == 0
    status, got = jcall("PUT", f"{refs}/branches/nope", {"snapshot": w["first"]})
    assert status == 404, got
    status, got = jcall("PUT", f"{refs}/tags/v1", {"snapshot": moved})
    assert status == 405, got  # tags never move
    status, got = jcall("POST", f"{refs}/leaves", {"name": "x", "snapshot": moved})
    assert status == 404, got
    status, _, _ = call("DELETE", f"{refs}/branches/exp")
    assert status == 204
    assert "exp" not in repo.list_branches()
    status, _, _ = call("DELETE", f"{refs}/branches/main")
    assert status == 400
    status, _, _ = call("DELETE", f"{refs}/tags/v2")
    assert status == 204
    assert "v2" not in repo.list_tags()
    status, got = jcall("POST", f"{refs}/tags", {"name": "v2", "snapshot": w["first"]})
    assert status == 409, got  # a deleted tag's name is not reused
    status, doc = jcall("GET", refs)
    assert status == 200
    assert {b["name"] for b in doc["branches"]} == {"main", "dev"}
