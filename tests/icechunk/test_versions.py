"""Icechunk repositories and kerchunk references, written by the real tools
(icechunk-python, xarray + zarr-python, netCDF4, kerchunk), served by
zarr-serve and compared with what icechunk-python + zarr-python read.

    ZS_SERVER_BIN=target/ci/zarr-serve .venv-dap/bin/python -m pytest tests/icechunk

On local files by default. With ZS_IC_S3_ENDPOINT (and AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION set, as the s3 stage does), the
repositories, the NetCDF file and the reference sets are written to that
S3 server instead, and the server reads them there. With ZS_IC_AZURE_URL
(Azurite's blob endpoint, its container `icechunk-tests` made, and
AZURITE_BLOB_STORAGE_URL, AZURE_STORAGE_USE_EMULATOR and
AZURE_STORAGE_ACCOUNT_NAME set, as the azure stage does) the repositories
of the write tests live on Azurite.
"""
import base64
import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import h5py  # noqa: F401  (kerchunk's HDF5 reader)
import icechunk as ic
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("ZS_SERVER_BIN", os.path.join(ROOT, "target", "ci", "zarr-serve"))
S3 = os.environ.get("ZS_IC_S3_ENDPOINT")
AZURE = os.environ.get("ZS_IC_AZURE_URL")
# Azurite's published development account (not a secret).
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# An object store several server processes may share (a local repository
# is written by one process, api.md 4.3).
REMOTE = bool(S3 or AZURE)
BUCKET = "icechunk-tests"
TTL = 1.0


# ---------------------------------------------------------------- where data lives


class Place:
    """Where the test writes: a local directory, or a prefix of an S3
    bucket or an Azure container (repositories only)."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.run = uuid.uuid4().hex[:8]
        if S3:
            try:
                urllib.request.urlopen(urllib.request.Request(f"{S3}/{BUCKET}", method="PUT"), timeout=30).close()
            except urllib.error.HTTPError as e:
                if e.code != 409:  # it exists
                    raise

    def url(self, name):
        """The URL of `name` (a directory or file) as the server sees it."""
        if S3:
            return f"s3://{BUCKET}/{self.run}/{name}"
        if AZURE:
            return f"az://{BUCKET}/{self.run}/{name}"
        return f"file://{self.tmp}/{name}"

    def storage(self, name):
        if S3:
            return ic.s3_storage(bucket=BUCKET, prefix=f"{self.run}/{name}", endpoint_url=S3, allow_http=True,
                                 region=os.environ.get("AWS_REGION", "us-east-1"), force_path_style=True,
                                 access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                                 secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
        if AZURE:
            return ic.azure_storage(account=AZURE_ACCOUNT, container=BUCKET, prefix=f"{self.run}/{name}",
                                    access_key=AZURE_KEY, config={"azure_storage_use_emulator": "true"})
        return ic.local_filesystem_storage(os.path.join(self.tmp, name))

    def object_store(self):
        if S3:
            return ic.s3_store(endpoint_url=S3, allow_http=True, force_path_style=True,
                               region=os.environ.get("AWS_REGION", "us-east-1"))
        return ic.local_filesystem_store(self.tmp)

    def credentials(self, prefix):
        if S3:
            creds = ic.s3_credentials(access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                                      secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
        else:
            creds = None
        return ic.containers_credentials({prefix: creds})

    def put_file(self, local, name):
        """Make the local file `local` the object `name`."""
        if S3:
            # The test server (moto) takes unsigned requests.
            with open(local, "rb") as f:
                put = urllib.request.Request(f"{S3}/{BUCKET}/{self.run}/{name}", data=f.read(), method="PUT",
                                             headers={"Content-Type": "application/octet-stream"})
            urllib.request.urlopen(put, timeout=30).close()
        else:
            os.makedirs(os.path.dirname(os.path.join(self.tmp, name)), exist_ok=True)
            shutil.copy(local, os.path.join(self.tmp, name))


# ---------------------------------------------------------------- the data


def climate(offset=0.0):
    rng = np.random.default_rng(7)
    temp = (rng.standard_normal((3, 18, 36)) * 10 + offset).astype("float32")
    return xr.Dataset(
        {
            "temp": (("time", "lat", "lon"), temp, {"units": "K", "standard_name": "air_temperature"}),
            "sharded": (("time", "lat", "lon"), (temp * 2).astype("float64")),
        },
        coords={
            "time": ("time", np.array([0, 1, 2], "int32"), {"units": "days since 2000-01-01", "calendar": "standard"}),
            "lat": ("lat", np.arange(-85, 90, 10, dtype="float64"), {"units": "degrees_north", "standard_name": "latitude"}),
            "lon": ("lon", np.arange(-175, 180, 10, dtype="float64"), {"units": "degrees_east", "standard_name": "longitude"}),
        },
    )


def write_netcdf(path):
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", 4)
        nc.createDimension("y", 20)
        nc.createDimension("x", 30)
        t2m = nc.createVariable("t2m", "f4", ("time", "y", "x"), chunksizes=(1, 10, 15))
        t2m[:] = np.arange(4 * 20 * 30, dtype="float32").reshape(4, 20, 30) / 7
        q = nc.createVariable("q", "f8", ("time", "y", "x"), chunksizes=(2, 10, 10), zlib=True, complevel=4)
        q[:] = np.sin(np.arange(4 * 20 * 30).reshape(4, 20, 30) / 50.0)


@pytest.fixture(scope="module")
def world():
    """Writes every repository, file and reference set; starts the server."""
    tmp = tempfile.mkdtemp(prefix="zs-icechunk-")
    place = Place(tmp)
    w = {"place": place, "tmp": tmp}

    # A repository written by xarray through icechunk: two commits on main,
    # a tag on the first, a branch from the first with a commit of its own.
    repo = ic.Repository.create(place.storage("repo"))
    session = repo.writable_session("main")
    climate().to_zarr(session.store, zarr_format=3, consolidated=False,
                      encoding={"temp": {"chunks": (1, 9, 12)}, "sharded": {"chunks": (1, 3, 4), "shards": (1, 9, 12)}})
    first = session.commit("first")
    repo.create_tag("v1", snapshot_id=first)
    repo.create_branch("dev", snapshot_id=first)
    session = repo.writable_session("main")
    group = zarr.open_group(session.store, mode="r+")
    group["temp"][:] = group["temp"][:] + 100
    second = session.commit("second")
    session = repo.writable_session("dev")
    zarr.open_group(session.store, mode="r+")["temp"][0] = -1
    dev = session.commit("on dev")
    w.update(repo=repo, first=first, second=second, dev=dev)

    # A NetCDF4 file, and a repository whose chunks are virtual references
    # into it (under a container the repository declares).
    local_nc = os.path.join(tmp, "obs.nc")
    write_netcdf(local_nc)
    place.put_file(local_nc, "archive/obs.nc")
    nc_url = place.url("archive/obs.nc")
    archive = place.url("archive/")
    w.update(local_nc=local_nc, nc_url=nc_url, archive=archive)
    config = ic.RepositoryConfig.default()
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(archive, place.object_store()))
    vrepo = ic.Repository.create(place.storage("vrepo"), config=config)
    session = vrepo.writable_session("main")
    root = zarr.open_group(session.store, mode="w", zarr_format=3)
    root.create_array("t2m", shape=(4, 20, 30), chunks=(1, 10, 15), dtype="float32", compressors=None, fill_value=np.nan,
                      dimension_names=["time", "y", "x"])
    with h5py.File(local_nc) as f:
        dset = f["t2m"]
        for t in range(4):
            for j in range(2):
                for i in range(2):
                    info = dset.id.get_chunk_info_by_coord((t, j * 10, i * 15))
                    session.store.set_virtual_ref(f"t2m/c/{t}/{j}/{i}", nc_url, offset=info.byte_offset, length=info.size)
        # The first chunk again, recorded with the file's modification time:
        # long before the file was written (stale), or long after (fresh).
        info = dset.id.get_chunk_info_by_coord((0, 0, 0))
        for name, when in [("stale", datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)),
                           ("fresh", datetime.datetime(2100, 1, 1, tzinfo=datetime.timezone.utc))]:
            root.create_array(name, shape=(1, 10, 15), chunks=(1, 10, 15), dtype="float32", compressors=None)
            session.store.set_virtual_ref(f"{name}/c/0/0/0", nc_url, offset=info.byte_offset, length=info.size,
                                          checksum=when)
    w["vsnap"] = session.commit("virtual")

    # A repository whose only virtual chunk points where no container of
    # ours allows (its own container says it may).
    config = ic.RepositoryConfig.default()
    other = place.url("elsewhere/")
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(other, place.object_store()))
    orepo = ic.Repository.create(place.storage("orepo"), config=config)
    session = orepo.writable_session("main")
    root = zarr.open_group(session.store, mode="w", zarr_format=3)
    root.create_array("a", shape=(4,), chunks=(4,), dtype="int32", compressors=None)
    session.store.set_virtual_ref("a/c/0", place.url("elsewhere/x.bin"), offset=0, length=16)
    session.commit("outside")
    w["elsewhere"] = place.url("elsewhere/x.bin")

    # kerchunk references to the same file: as kerchunk writes them
    # (version 1), their version 0 form, and version 1 with a template.
    from kerchunk.hdf import SingleHdf5ToZarr
    with open(local_nc, "rb") as f:  # the same bytes as the object at nc_url
        refs = SingleHdf5ToZarr(f, nc_url, inline_threshold=300).translate()
    templated = {"version": 1, "templates": {"u": nc_url},
                 "refs": {k: (["{{u}}"] + v[1:] if isinstance(v, list) else v) for k, v in refs["refs"].items()}}
    assert any(isinstance(v, list) for v in refs["refs"].values())
    for name, doc in [("refs_v1.json", refs), ("refs_v0.json", refs["refs"]), ("refs_tpl.json", templated)]:
        local = os.path.join(tmp, "local-" + name)
        with open(local, "w") as out:
            json.dump(doc, out)
        place.put_file(local, f"sets/{name}")
    w["refs"] = refs
    # The same references as Parquet (kerchunk.df, fsspec's layout), three
    # chunks a record file.
    import kerchunk.df
    parquet = os.path.join(tmp, "local-refs.parq")
    kerchunk.df.refs_to_dataframe(refs, parquet, record_size=3)
    for folder, _, files in os.walk(parquet):
        for f in files:
            relative = os.path.relpath(os.path.join(folder, f), parquet)
            place.put_file(os.path.join(folder, f), f"sets/refs.parq/{relative}")
    assert len([f for f in os.listdir(os.path.join(parquet, "t2m")) if f.endswith(".parq")]) > 1

    # A plain Zarr v3 store, for refs on a dataset without versions.
    climate().to_zarr(os.path.join(tmp, "plain.zarr"), zarr_format=3, consolidated=False)

    datasets = {
        "ic": {"url": "icechunk+" + place.url("repo")},
        "icv": {"url": "icechunk+" + place.url("vrepo"), "virtual_chunk_containers": [archive]},
        "icv_closed": {"url": "icechunk+" + place.url("vrepo"), "virtual_chunk_containers": [place.url("unrelated/")]},
        "ico": {"url": "icechunk+" + place.url("orepo"), "virtual_chunk_containers": [archive]},
        "refs": {"url": "refs+" + place.url("sets/refs_v1.json"), "virtual_chunk_containers": [{"url_prefix": archive}]},
        "refs0": {"url": "refs+" + place.url("sets/refs_v0.json"), "virtual_chunk_containers": [archive]},
        "refst": {"url": "refs+" + place.url("sets/refs_tpl.json"), "virtual_chunk_containers": [archive]},
        "refsp": {"url": "refs+" + place.url("sets/refs.parq"), "virtual_chunk_containers": [archive]},
        "refs_closed": {"url": "refs+" + place.url("sets/refs_v1.json")},
        "plain": {"url": os.path.join(tmp, "plain.zarr")},
    }
    port = free_port()
    config_path = os.path.join(tmp, "config.toml")
    with open(config_path, "w") as out:
        out.write(f'listen = "127.0.0.1:{port}"\nmetadata_ttl_secs = {TTL}\ncache_max_age_secs = 7\n')
        for name, d in datasets.items():
            out.write(f"\n[datasets.{name}]\nurl = {json.dumps(d['url'])}\n")
            if "virtual_chunk_containers" in d:
                items = [json.dumps(c) if isinstance(c, str) else "{url_prefix = %s}" % json.dumps(c["url_prefix"])
                         for c in d["virtual_chunk_containers"]]
                out.write(f"virtual_chunk_containers = [{', '.join(items)}]\n")
    log = open(os.path.join(tmp, "server.log"), "w")
    # The server reads ZARR_SERVE_* variables as config: give it none.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZARR_SERVE_")}
    server = subprocess.Popen([BIN, "--config", config_path], stdout=log, stderr=subprocess.STDOUT, env=env)
    w["base"] = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(w["base"] + "/healthz", timeout=2)
            break
        except OSError:
            time.sleep(0.1)
    else:
        server.kill()
        raise RuntimeError("zarr-serve did not start: " + open(log.name).read())
    yield w
    server.kill()
    server.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(w, path, headers=None):
    """(status, headers, body) of a GET."""
    request = urllib.request.Request(w["base"] + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def array(w, path, **params):
    """An array read as .npy."""
    query = "&".join(f"{k}={v}" for k, v in {"format": "npy", **params}.items())
    status, _, body = fetch(w, f"{path}?{query}")
    assert status == 200, body[:300]
    import io
    return np.load(io.BytesIO(body))


def python_read(w, name, **version):
    session = w["repo"].readonly_session(**version)
    return zarr.open_group(session.store, mode="r")[name][:]


# ---------------------------------------------------------------- refs and values


def test_refs_list_every_branch_and_tag_with_its_snapshot(world):
    w = world
    status, headers, body = fetch(w, "/v1/datasets/ic/refs")
    assert status == 200, body
    doc = json.loads(body)
    repo = w["repo"]
    assert doc["branches"] == [{"name": b, "snapshot": repo.lookup_branch(b)} for b in sorted(repo.list_branches())]
    assert doc["tags"] == [{"name": "v1", "snapshot": w["first"]}]
    assert {b["name"] for b in doc["branches"]} == {"main", "dev"}
    assert "immutable" not in headers.get("cache-control", "")


@pytest.mark.parametrize("ref,version", [
    ("", {"branch": "main"}),
    ("@branch.main", {"branch": "main"}),
    ("@branch.dev", {"branch": "dev"}),
    ("@tag.v1", {"tag": "v1"}),
    ("@first", {"snapshot_id": "first"}),
    ("@second", {"snapshot_id": "second"}),
])
@pytest.mark.parametrize("name", ["temp", "sharded"])
def test_values_at_every_ref_equal_icechunk_python(world, ref, version, name):
    w = world
    if ref in ("@first", "@second"):
        version = {"snapshot_id": w[ref[1:]]}
        ref = "@" + w[ref[1:]]
    want = python_read(w, name, **version)
    got = array(w, f"/v1/datasets/ic{ref}/data/{name}")
    np.testing.assert_array_equal(got, want)
    region = array(w, f"/v1/datasets/ic{ref}/data/{name}", select="1:3,2:11,5:30")
    np.testing.assert_array_equal(region, want[1:3, 2:11, 5:30])


def test_the_refs_really_differ(world):
    w = world
    main = python_read(w, "temp", branch="main")
    v1 = python_read(w, "temp", tag="v1")
    dev = python_read(w, "temp", branch="dev")
    assert not np.array_equal(main, v1) and not np.array_equal(dev, v1)


def test_etag_depends_only_on_the_snapshot_and_tags_are_immutable(world):
    w = world
    path = "/data/temp?select=0,0:4,0:4&format=json"
    s1, h1, b1 = fetch(w, "/v1/datasets/ic@tag.v1" + path)
    s2, h2, b2 = fetch(w, f"/v1/datasets/ic@{w['first']}" + path)
    s3, h3, b3 = fetch(w, "/v1/datasets/ic@branch.dev" + path)
    s4, h4, _ = fetch(w, "/v1/datasets/ic@branch.main" + path)
    assert (s1, s2, s3, s4) == (200, 200, 200, 200)
    assert b1 == b2 and h1["etag"] == h2["etag"]
    assert h3["etag"] != h1["etag"]
    for h in (h1, h2):
        assert h["cache-control"] == "public, max-age=31536000, immutable"
    assert h4["cache-control"] == "max-age=7"
    # 304 for a snapshot's ETag asked through the tag.
    status, _, _ = fetch(w, "/v1/datasets/ic@tag.v1" + path, {"If-None-Match": h2["etag"]})
    assert status == 304
    # Node documents too.
    _, n1, _ = fetch(w, "/v1/datasets/ic@tag.v1/nodes/temp")
    _, n2, _ = fetch(w, f"/v1/datasets/ic@{w['first']}/nodes/temp")
    assert n1["etag"] == n2["etag"] and "immutable" in n1["cache-control"]


def test_a_commit_is_seen_through_the_branch_within_the_ttl_and_not_through_the_tag(world):
    w = world
    before_tag = array(w, "/v1/datasets/ic@tag.v1/data/temp")
    array(w, "/v1/datasets/ic/data/temp")  # the branch's snapshot is now remembered
    session = w["repo"].writable_session("main")
    group = zarr.open_group(session.store, mode="r+")
    group["temp"][2] = 12345.0
    third = session.commit("during the test")
    want = python_read(w, "temp", branch="main")
    assert want[2, 0, 0] == 12345.0
    time.sleep(TTL + 0.5)
    for ref in ("", "@branch.main"):
        np.testing.assert_array_equal(array(w, f"/v1/datasets/ic{ref}/data/temp"), want)
    np.testing.assert_array_equal(array(w, "/v1/datasets/ic@tag.v1/data/temp"), before_tag)
    np.testing.assert_array_equal(array(w, f"/v1/datasets/ic@{third}/data/temp"), want)
    status, _, body = fetch(w, "/v1/datasets/ic/refs")
    assert {"name": "main", "snapshot": third} in json.loads(body)["branches"]


@pytest.mark.parametrize("ref,status", [
    ("@branch.nope", 404), ("@tag.nope", 404), ("@0000000000000000000G", 404),
    ("@nope", 400), ("@branch.", 400), ("@tag.", 400), ("@ABC", 400),
])
def test_unknown_refs_404_and_malformed_400(world, ref, status):
    got, headers, body = fetch(world, f"/v1/datasets/ic{ref}/data/temp?select=0,0,0")
    assert got == status, body
    assert headers["content-type"].startswith("application/problem+json")


def test_refs_on_a_dataset_without_versions_400(world):
    for path in ("/v1/datasets/plain@branch.main/data/temp?select=0,0,0", "/v1/datasets/plain/refs",
                 "/v1/datasets/refs@tag.v1/nodes"):
        status, _, body = fetch(world, path)
        assert status == 400, (path, body)
    status, _, _ = fetch(world, "/v1/datasets/plain/data/temp?select=0,0,0")
    assert status == 200


# ---------------------------------------------------------------- every route at a ref


def test_every_route_reads_a_ref(world):
    w = world
    base = "/v1/datasets/ic@tag.v1"
    v1 = python_read(w, "temp", tag="v1")
    status, _, body = fetch(w, base + "/nodes/temp")
    assert status == 200 and json.loads(body)["shape"] == [3, 18, 36]
    assert fetch(w, base + "/nodes/temp/c/0")[0] == 404  # chunks are not nodes
    # Passthrough: the zarr.json the repository stores, and a chunk key.
    status, _, body = fetch(w, base + "/zarr/temp/zarr.json")
    assert status == 200, body
    doc = json.loads(body)
    assert doc["node_type"] == "array" and doc["shape"] == [3, 18, 36] and doc["attributes"]["units"] == "K"
    status, _, chunk = fetch(w, base + "/zarr/temp/c/0/0/0")
    assert status == 200 and len(chunk) > 0
    # The v2 view reads the same values.
    status, _, body = fetch(w, base + "/v2/temp/.zarray")
    assert status == 200 and json.loads(body)["shape"] == [3, 18, 36]
    v2 = zarr.open_array(zarr.storage.FsspecStore.from_url(w["base"] + base + "/v2/temp", read_only=True), mode="r", zarr_format=2)
    np.testing.assert_array_equal(v2[:], v1)
    # The explorer, a map tile, WMS, DAP2 and EDR.
    status, headers, _ = fetch(w, "/explore/ic@tag.v1/temp")
    assert status == 200 and headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "cache-control" not in fetch(w, "/explore/ic/temp")[1]
    status, headers, png = fetch(w, base + "/tiles/WebMercatorQuad/0/0/0?variable=temp")
    assert status == 200 and png[:4] == b"\x89PNG", png[:200]
    assert "immutable" in headers["cache-control"]
    status, _, dds = fetch(w, base + "/dap.dds")
    assert status == 200 and b"temp" in dds, dds
    with netCDF4.Dataset(w["base"] + base + "/dap") as nc:  # netCDF-C's DAP2 client
        np.testing.assert_array_equal(nc["temp"][:], v1)
    status, _, body = fetch(w, base + "/edr/collections")
    assert status == 200, body
    collection = json.loads(body)["collections"][0]["id"]
    # The collection is named after the dataset whatever version is read (3.5).
    assert collection == "ic", collection
    status, _, body = fetch(w, f"{base}/edr/collections/{collection}/position?coords=POINT(-175%20-85)&parameter-name=temp&f=CoverageJSON")
    assert status == 200, body
    values = json.loads(body)["ranges"]["temp"]["values"]
    np.testing.assert_allclose(values, v1[:, 0, 0], rtol=1e-6)


# ---------------------------------------------------------------- virtual chunks and references


def netcdf(w, name):
    with netCDF4.Dataset(w["local_nc"]) as nc:
        return nc[name][:].filled(np.nan) if np.ma.isMaskedArray(nc[name][:]) else nc[name][:]


def test_virtual_chunks_read_the_netcdf_file(world):
    w = world
    want = netcdf(w, "t2m")
    got = array(w, "/v1/datasets/icv/data/t2m")
    np.testing.assert_array_equal(got, want)
    repo = ic.Repository.open(w["place"].storage("vrepo"), authorize_virtual_chunk_access=w["place"].credentials(w["archive"]))
    theirs = zarr.open_group(repo.readonly_session(branch="main").store, mode="r")["t2m"][:]
    np.testing.assert_array_equal(got, theirs)
    np.testing.assert_array_equal(array(w, f"/v1/datasets/icv@{w['vsnap']}/data/t2m", select="2,3:17,4:29"), want[2, 3:17, 4:29])


def test_a_virtual_chunk_whose_file_changed_is_an_error_never_other_data(world):
    w = world
    np.testing.assert_array_equal(array(w, "/v1/datasets/icv/data/fresh"), netcdf(w, "t2m")[0:1, 0:10, 0:15])
    status, _, body = fetch(w, "/v1/datasets/icv/data/stale?format=json")
    assert status >= 500, body
    assert "changed after the snapshot" in json.loads(body)["detail"], body


@pytest.mark.parametrize("dataset,url_key", [("icv_closed", "nc_url"), ("ico", "elsewhere")])
def test_virtual_chunks_outside_the_containers_are_403(world, dataset, url_key):
    w = world
    path = "t2m" if dataset == "icv_closed" else "a"
    status, headers, body = fetch(w, f"/v1/datasets/{dataset}/data/{path}?format=json")
    assert status == 403, body
    detail = json.loads(body)["detail"]
    assert w[url_key] in detail and "virtual_chunk_containers" in detail, detail


@pytest.mark.parametrize("dataset", ["refs", "refs0", "refst", "refsp"])
@pytest.mark.parametrize("name", ["t2m", "q"])
def test_kerchunk_references_read_the_netcdf_file(world, dataset, name):
    w = world
    want = netcdf(w, name)
    np.testing.assert_array_equal(array(w, f"/v1/datasets/{dataset}/data/{name}"), want)
    np.testing.assert_array_equal(array(w, f"/v1/datasets/{dataset}/data/{name}", select="1:3,5:15,7:22"), want[1:3, 5:15, 7:22])


def test_kerchunk_passthrough_serves_the_sets_own_keys(world):
    w = world
    refs = w["refs"]["refs"]
    status, _, body = fetch(w, "/v1/datasets/refs/zarr/t2m/.zarray")
    assert status == 200 and json.loads(body) == json.loads(refs["t2m/.zarray"])
    assert fetch(w, "/v1/datasets/refs/zarr/zarr.json")[0] == 404
    assert fetch(w, "/v1/datasets/refs/zarr/t2m/zarr.json")[0] == 404
    # A chunk key: the bytes at the reference's range of the file.
    key = next(k for k, v in refs.items() if k.startswith("t2m/") and isinstance(v, list))
    url, offset, length = refs[key]
    status, _, chunk = fetch(w, f"/v1/datasets/refs/zarr/{key}")
    with open(w["local_nc"], "rb") as f:
        f.seek(offset)
        assert status == 200 and chunk == f.read(length)
    # Inline values as kerchunk stored them (text, or bytes after base64:).
    inline = [k for k, v in refs.items() if isinstance(v, str) and not k.endswith((".zarray", ".zattrs", ".zgroup"))]
    for key in inline:
        status, _, body = fetch(w, f"/v1/datasets/refs/zarr/{key}")
        value = refs[key]
        want = base64.b64decode(value[7:]) if value.startswith("base64:") else value.encode()
        assert status == 200 and body == want, key


def test_kerchunk_references_outside_the_containers_are_403(world):
    status, _, body = fetch(world, "/v1/datasets/refs_closed/data/t2m?format=json")
    assert status == 403, body
    detail = json.loads(body)["detail"]
    assert world["nc_url"] in detail and "virtual_chunk_containers" in detail


def test_kerchunk_dataset_through_xarray_and_dap2(world):
    w = world
    status, _, dds = fetch(w, "/v1/datasets/refs/dap.dds")
    assert status == 200 and re.search(rb"t2m", dds), dds
    want = netcdf(w, "q")
    url = w["base"] + "/v1/datasets/refs/dap"
    with netCDF4.Dataset(url) as nc:
        np.testing.assert_allclose(nc["q"][1, :, :], want[1])
