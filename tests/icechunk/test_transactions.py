"""Transactions of Icechunk repositories (api.md 4.3): begun on a branch,
written by the write routes with ?transaction=ID, read at
{ds}@transaction.ID, committed as one commit (read back with icechunk-python
+ zarr-python against a NumPy model) or aborted; their state lives in the
repository's store, so two server processes serve one transaction.

    ZS_SERVER_BIN=target/ci/zarr-serve .venv-dap/bin/python -m pytest tests/icechunk/test_transactions.py

Local files by default; with ZS_IC_S3_ENDPOINT the repository lives on that
S3 server, with ZS_IC_AZURE_URL on Azurite, and a second server process
shares it (see test_versions.py).
"""
import concurrent.futures
import hashlib
import io
import json
import os
import socket
import time

import numpy as np
import zarr

from test_versions import AZURE, AZURE_ACCOUNT, AZURE_KEY, S3
from test_writes import CHUNKS, SHAPE, call, jcall, put, read, repo_world, start, two_servers  # noqa: F401


def begin(base, branch=None):
    status, got = jcall("POST", f"{base}/v1/datasets/ic/transactions", {} if branch is None else {"branch": branch})
    assert status == 201, got
    return got


def npy(base, ds, path="a"):
    status, headers, body = call("GET", f"{base}/v1/datasets/{ds}/data/{path}?format=npy")
    assert status == 200, body
    return np.load(io.BytesIO(body)), headers


def tx_put(base, tx, select, values, path="a", ds="ic"):
    body = np.ascontiguousarray(values, dtype="<f4").tobytes()
    return call("PUT", f"{base}/v1/datasets/{ds}/data/{path}?select={select}&transaction={tx}", body,
                {"Content-Type": "application/octet-stream"})


def test_a_transaction_collects_writes_seen_only_at_its_ref_until_committed(repo_world):
    w, repo, base = repo_world, repo_world["repo"], repo_world["base"]
    tip = repo.lookup_branch("main")
    tx = begin(base)
    assert tx["branch"] == "main" and tx["base_snapshot"] == tip and tx["expires_at"].endswith("Z"), tx
    assert len(tx["id"]) == 32
    model = np.zeros(SHAPE, "float32")
    writes = [("0:2,0:3", np.full(CHUNKS, 1, "f4")), ("1:5,4:9", np.arange(20, dtype="f4").reshape(4, 5) + 0.5)]
    for select, values in writes:
        status, _, body = tx_put(base, tx["id"], select, values)
        assert status == 200, body
        answer = json.loads(body)
        assert answer["transaction"] == tx["id"] and answer["branch"] == "main" and "snapshot" not in answer
        rows, cols = (slice(*map(int, part.split(":"))) for part in select.split(","))
        model[rows, cols] = values
    doc = {"zarr_format": 3, "node_type": "group", "attributes": {"made": "in a transaction"}}
    status, _, body = call("PUT", f"{base}/v1/datasets/ic/nodes/g?transaction={tx['id']}", json.dumps(doc).encode(),
                           {"Content-Type": "application/json"})
    assert status == 201, body
    assert json.loads(body)["transaction"] == tx["id"]
    # Read your own writes at the transaction; nobody else sees them.
    got, headers = npy(base, f"ic@transaction.{tx['id']}")
    np.testing.assert_array_equal(got, model)
    assert "no-cache" in headers.get("cache-control", ""), headers
    status, headers, _ = call("GET", f"{base}/explore/ic@transaction.{tx['id']}/a")
    assert status == 200 and "no-cache" in headers.get("cache-control", ""), headers
    np.testing.assert_array_equal(npy(base, "ic")[0], np.zeros(SHAPE, "f4"))
    np.testing.assert_array_equal(read(repo, "a"), np.zeros(SHAPE, "f4"))
    assert repo.lookup_branch("main") == tip
    assert "g" not in zarr.open_group(repo.readonly_session(branch="main").store, mode="r")
    status, shown = jcall("GET", f"{base}/v1/datasets/ic/transactions/{tx['id']}")
    assert status == 200 and shown["writes"] == 3, shown
    # One commit with everything.
    status, got = jcall("POST", f"{base}/v1/datasets/ic/transactions/{tx['id']}/commit", {"message": "three at once"})
    assert status == 200, got
    assert got["branch"] == "main" and got["snapshot"] == repo.lookup_branch("main"), got
    np.testing.assert_array_equal(read(repo, "a"), model)
    group = zarr.open_group(repo.readonly_session(branch="main").store, mode="r")
    assert group["g"].attrs["made"] == "in a transaction"
    commit = next(iter(repo.ancestry(branch="main")))
    assert commit.message == "three at once" and commit.parent_id == tip
    assert commit.metadata["author"] == "anonymous" and commit.metadata["transaction"] == tx["id"]
    np.testing.assert_array_equal(npy(base, "ic")[0], model)
    # A committed transaction is gone.
    assert tx_put(base, tx["id"], "0:2,0:3", np.ones(CHUNKS, "f4"))[0] == 410
    assert call("GET", f"{base}/v1/datasets/ic@transaction.{tx['id']}/data/a?format=npy")[0] == 410
    assert jcall("POST", f"{base}/v1/datasets/ic/transactions/{tx['id']}/commit", {})[0] == 410
    assert call("GET", f"{base}/v1/datasets/ic/transactions/{tx['id']}")[0] == 410
    assert repo.lookup_branch("main") == got["snapshot"]


def test_a_slow_upload_holds_no_transaction(repo_world):
    """A write takes its transaction's lease once its body is in: another
    write to the transaction lands while a slow upload is still coming, and
    the commit holds both."""
    base, repo = repo_world["base"], repo_world["repo"]
    tx = begin(base)["id"]
    slow, fast = np.full(CHUNKS, 7, "<f4"), np.full(CHUNKS, 9, "<f4")
    body = slow.tobytes()
    host, port = base.removeprefix("http://").split(":")
    head = (f"PUT /v1/datasets/ic/data/a?select=0:2,0:3&transaction={tx} HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    with socket.create_connection((host, int(port)), timeout=60) as upload:
        upload.sendall(head.encode() + body[:8])
        time.sleep(0.5)  # the slow write's handler now waits for the rest of its body
        started = time.monotonic()
        status, _, got = tx_put(base, tx, "4:6,6:9", fast)
        waited = time.monotonic() - started
        assert status == 200, got
        assert waited < 2.5, f"the write waited {waited:.1f} s for the transaction a slow upload held"
        upload.sendall(body[8:])
        answer = b""
        while chunk := upload.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["transaction"] == tx
    status, shown = jcall("GET", f"{base}/v1/datasets/ic/transactions/{tx}")
    assert status == 200 and shown["writes"] == 2, shown
    assert jcall("POST", f"{base}/v1/datasets/ic/transactions/{tx}/commit", {})[0] == 200
    model = np.zeros(SHAPE, "f4")
    model[0:2, 0:3], model[4:6, 6:9] = slow, fast
    np.testing.assert_array_equal(read(repo, "a"), model)


def test_an_aborted_transaction_commits_nothing_and_unknown_ones_are_404(repo_world):
    w, repo, base = repo_world, repo_world["repo"], repo_world["base"]
    tip = repo.lookup_branch("main")
    tx = begin(base, "dev")
    status, _, body = tx_put(base, tx["id"], "0:2,0:3", np.ones(CHUNKS, "f4"))
    assert status == 200, body
    status, _, _ = call("DELETE", f"{base}/v1/datasets/ic/transactions/{tx['id']}")
    assert status == 204
    for branch in ["main", "dev"]:
        np.testing.assert_array_equal(read(repo, "a", branch=branch), np.zeros(SHAPE, "f4"))
    assert repo.lookup_branch("main") == tip and repo.lookup_branch("dev") == w["first"]
    assert tx_put(base, tx["id"], "0:2,0:3", np.ones(CHUNKS, "f4"))[0] == 410
    assert jcall("POST", f"{base}/v1/datasets/ic/transactions/{tx['id']}/commit", {})[0] == 410
    assert call("DELETE", f"{base}/v1/datasets/ic/transactions/{tx['id']}")[0] == 410
    for unknown in ["0123456789abcdef0123456789abcdef", "nope"]:
        assert tx_put(base, unknown, "0:2,0:3", np.ones(CHUNKS, "f4"))[0] == 404, unknown
        assert call("GET", f"{base}/v1/datasets/ic@transaction.{unknown}/data/a?format=npy")[0] == 404, unknown
        assert jcall("POST", f"{base}/v1/datasets/ic/transactions/{unknown}/commit", {})[0] == 404, unknown
        assert call("DELETE", f"{base}/v1/datasets/ic/transactions/{unknown}")[0] == 404, unknown
    # A path for an id reaches no object: unknown, or a malformed ref.
    traversal = "..%2F..%2Frefs%2Fbranch.main"
    assert tx_put(base, traversal, "0:2,0:3", np.ones(CHUNKS, "f4"))[0] == 404
    assert call("GET", f"{base}/v1/datasets/ic@transaction.{traversal}/data/a?format=npy")[0] == 400
    assert call("DELETE", f"{base}/v1/datasets/ic/transactions/{traversal}")[0] == 404
    assert repo.lookup_branch("main") == tip


def test_bad_requests_are_4xx_and_change_nothing(repo_world):
    w, repo, base = repo_world, repo_world["repo"], repo_world["base"]
    tip = repo.lookup_branch("main")
    assert jcall("POST", f"{base}/v1/datasets/ic/transactions", {"branch": "nope"})[0] == 404
    assert jcall("POST", f"{base}/v1/datasets/ic/transactions", {"branch": "a/b"})[0] == 400
    assert jcall("POST", f"{base}/v1/datasets/ic/transactions", {"branch": "main", "x": 1})[0] == 400
    assert call("POST", f"{base}/v1/datasets/ic/transactions", b"{", {"Content-Type": "application/json"})[0] == 400
    assert call("POST", f"{base}/v1/datasets/ic/transactions", b"{}", {"Content-Type": "text/plain"})[0] == 415
    assert jcall("POST", f"{base}/v1/datasets/ic@tag.v1/transactions", {})[0] == 400
    tx = begin(base)
    good = np.full(CHUNKS, 7, "f4")
    assert tx_put(base, tx["id"], "0:2,0:3", good)[0] == 200
    # A body of the wrong length, a second transaction parameter, another branch, a tag.
    status, _, body = call("PUT", f"{base}/v1/datasets/ic/data/a?select=0:2,0:3&transaction={tx['id']}", b"short",
                           {"Content-Type": "application/octet-stream"})
    assert status == 400, body
    status, _, body = call("PUT", f"{base}/v1/datasets/ic/data/a?select=0:2,0:3&transaction={tx['id']}&transaction=x",
                           good.tobytes(), {"Content-Type": "application/octet-stream"})
    assert status == 400, body
    assert tx_put(base, tx["id"], "0:2,0:3", good * 2, ds="ic@branch.dev")[0] == 400
    assert tx_put(base, tx["id"], "0:2,0:3", good * 2, ds="ic@tag.v1")[0] == 405
    status, _, body = call("PATCH", f"{base}/v1/datasets/ic/nodes/a?transaction={tx['id']}&other=1", b"{}",
                           {"Content-Type": "application/merge-patch+json"})
    assert status == 400, body
    assert call("GET", f"{base}/v1/datasets/ic/nodes/a?transaction={tx['id']}")[0] == 400
    status, shown = jcall("GET", f"{base}/v1/datasets/ic/transactions/{tx['id']}")
    assert shown["writes"] == 1, shown
    got, _ = npy(base, f"ic@transaction.{tx['id']}")
    assert got[0:2, 0:3].tolist() == good.tolist() and got.sum() == good.sum()
    # The failed writes let go of the transaction: the next one is served at once.
    started = time.monotonic()
    assert tx_put(base, tx["id"], "2:4,0:3", good)[0] == 200
    assert time.monotonic() - started < 5
    assert repo.lookup_branch("main") == tip


def test_a_transaction_conflicting_with_the_branch_is_409_and_stays_open(repo_world):
    w, repo, base = repo_world, repo_world["repo"], repo_world["base"]
    tx = begin(base)
    assert tx_put(base, tx["id"], "0:2,0:6", np.full((2, 6), 1, "f4"))[0] == 200
    status, _, body = put(base, "ic", "a", "0:2,3:6", np.full(CHUNKS, 2, "f4"))
    assert status == 200, body
    landed = repo.lookup_branch("main")
    status, got = jcall("POST", f"{base}/v1/datasets/ic/transactions/{tx['id']}/commit", {"message": "late"})
    assert status == 409, got
    assert "chunks [[0, 1]] of '/a'" in got["detail"], got
    assert repo.lookup_branch("main") == landed
    assert jcall("GET", f"{base}/v1/datasets/ic/transactions/{tx['id']}")[0] == 200
    assert call("DELETE", f"{base}/v1/datasets/ic/transactions/{tx['id']}")[0] == 204
    assert repo.lookup_branch("main") == landed


def test_a_transaction_is_rebased_onto_commits_of_other_chunks(repo_world):
    w, repo, base = repo_world, repo_world["repo"], repo_world["base"]
    model = np.zeros(SHAPE, "float32")
    tx = begin(base)
    assert tx_put(base, tx["id"], "0:2,0:3", np.full(CHUNKS, 1, "f4"))[0] == 200
    model[0:2, 0:3] = 1
    session = repo.writable_session("main")
    zarr.open_group(session.store, mode="r+")["a"][4:6, 0:3] = 3
    by_python = session.commit("by icechunk-python")
    model[4:6, 0:3] = 3
    status, got = jcall("POST", f"{base}/v1/datasets/ic/transactions/{tx['id']}/commit", {})
    assert status == 200, got
    np.testing.assert_array_equal(read(repo, "a"), model)
    tip = next(iter(repo.ancestry(branch="main")))
    assert tip.id == got["snapshot"] and tip.parent_id == by_python
    assert tip.message == f"commit transaction {tx['id']}"


def test_a_transaction_expires_after_transaction_ttl_secs(repo_world):
    w, repo = repo_world, repo_world["repo"]
    server, base = start(w["tmp"], {"ic": "icechunk+" + w["place"].url("repo")}, "transaction_ttl_secs = 3")
    try:
        tip = repo.lookup_branch("main")
        tx = begin(base)
        assert tx_put(base, tx["id"], "0:2,0:3", np.ones(CHUNKS, "f4"))[0] == 200
        time.sleep(2)
        assert tx_put(base, tx["id"], "2:4,0:3", np.ones(CHUNKS, "f4"))[0] == 200  # a write extends it
        time.sleep(2)
        assert jcall("GET", f"{base}/v1/datasets/ic/transactions/{tx['id']}")[0] == 200
        time.sleep(3)
        status, got = jcall("POST", f"{base}/v1/datasets/ic/transactions/{tx['id']}/commit", {})
        assert status == 410 and "expired" in got["detail"], got
        assert tx_put(base, tx["id"], "0:2,0:3", np.ones(CHUNKS, "f4"))[0] == 410
        assert call("GET", f"{base}/v1/datasets/ic@transaction.{tx['id']}/data/a?format=npy")[0] == 410
        assert repo.lookup_branch("main") == tip
    finally:
        server.kill()
        server.wait()


def test_one_transaction_through_two_server_processes(repo_world, two_servers):
    w, repo, a, b = repo_world, repo_world["repo"], repo_world["base"], two_servers
    model = np.zeros(SHAPE, "float32")
    tx = begin(a)
    # Writes to disjoint chunks, at once, half through each process: all are kept.
    jobs = []
    for i in range(4):
        for j in range(4):
            values = np.full(CHUNKS, i * 4 + j + 1, "float32")
            model[i * 2:(i + 1) * 2, j * 3:(j + 1) * 3] = values
            jobs.append(((a, b)[(i + j) % 2], f"{i * 2}:{(i + 1) * 2},{j * 3}:{(j + 1) * 3}", values))
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda job: tx_put(job[0], tx["id"], job[1], job[2]), jobs))
    assert [r[0] for r in results] == [200] * len(jobs), [r[2] for r in results if r[0] != 200]
    np.testing.assert_array_equal(npy(b, f"ic@transaction.{tx['id']}")[0], model)
    np.testing.assert_array_equal(npy(a, f"ic@transaction.{tx['id']}")[0], model)
    status, got = jcall("POST", f"{b}/v1/datasets/ic/transactions/{tx['id']}/commit", {"message": "from two"})
    assert status == 200, got
    np.testing.assert_array_equal(read(repo, "a"), model)
    assert len(list(repo.ancestry(branch="main"))) == 3  # the start, the arrays, the transaction
    assert tx_put(a, tx["id"], "0:2,0:3", np.ones(CHUNKS, "f4"))[0] == 410


def stored_record(base, tx_id):
    """The transaction's object, read through dataset `raw`: the repository
    as a plain store."""
    status, _, body = call("GET", f"{base}/v1/datasets/raw/zarr/zarr-serve/transactions/{tx_id}")
    assert status == 200, body
    return body


def test_a_stored_transaction_holds_no_credentials(repo_world):
    w = repo_world
    secret, options = "s3cr3t-n0t-in-the-bucket", {}
    needles = ["AKIAZSLEAKTEST", os.path.join(w["tmp"], "repo")]
    if S3:
        options = {"endpoint": S3, "allow_http": "true", "region": os.environ.get("AWS_REGION", "us-east-1"),
                   "access_key_id": "AKIAZSLEAKTEST", "secret_access_key": secret}
    if AZURE:  # Azurite checks signatures: its own key is the secret here
        secret, options = AZURE_KEY, {"account_name": AZURE_ACCOUNT, "access_key": AZURE_KEY}
    url = w["place"].url("repo")
    server, base = start(w["tmp"], {"ic": "icechunk+" + url, "raw": url}, options=options)
    try:
        tx = begin(base)
        status, _, body = tx_put(base, tx["id"], "0:2,0:3", np.ones(CHUNKS, "f4"))
        assert status == 200, body
        record = stored_record(base, tx["id"])
        assert tx["base_snapshot"].encode() in record  # it is the record
        for needle in [secret, *needles]:
            assert needle.encode() not in record, needle
    finally:
        server.kill()
        server.wait()


def test_transactions_need_the_write_grant_and_reading_one_the_read_grant(repo_world):
    w, repo = repo_world, repo_world["repo"]
    keys = {"writer": "w-key-0123456789", "reader": "r-key-0123456789"}
    tables = "".join(f'[auth.api_keys.{name}]\nsha256 = "{hashlib.sha256(key.encode()).hexdigest()}"\n'
                     for name, key in keys.items())
    server, base = start(w["tmp"], {"ic": "icechunk+" + w["place"].url("repo")}, tables, write='["key:writer"]')
    try:
        as_writer, as_reader = {"X-API-Key": keys["writer"]}, {"X-API-Key": keys["reader"]}
        tip = repo.lookup_branch("main")
        url = f"{base}/v1/datasets/ic/transactions"
        assert jcall("POST", url, {})[0] == 401
        assert jcall("POST", url, {}, as_reader)[0] == 403
        status, tx = jcall("POST", url, {}, as_writer)
        assert status == 201, tx
        body = np.ones(CHUNKS, "<f4").tobytes()
        write = f"{base}/v1/datasets/ic/data/a?select=0:2,0:3&transaction={tx['id']}"
        octets = {"Content-Type": "application/octet-stream"}
        assert call("PUT", write, body, {**octets, **as_reader})[0] == 403
        assert call("PUT", write, body, {**octets, **as_writer})[0] == 200
        # Anyone may read (the default grant); only the writer commits or aborts.
        got, _ = npy(base, f"ic@transaction.{tx['id']}")
        assert got[0:2, 0:3].tolist() == np.ones(CHUNKS).tolist()
        assert call("GET", f"{url}/{tx['id']}", None, as_reader)[0] == 200
        assert jcall("POST", f"{url}/{tx['id']}/commit", {}, as_reader)[0] == 403
        assert call("DELETE", f"{url}/{tx['id']}", None, as_reader)[0] == 403
        assert repo.lookup_branch("main") == tip
        status, got = jcall("POST", f"{url}/{tx['id']}/commit", {}, as_writer)
        assert status == 200, got
        assert next(iter(repo.ancestry(branch="main"))).metadata["author"] == "key:writer"
    finally:
        server.kill()
        server.wait()
