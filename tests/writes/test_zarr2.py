"""Writes into arrays zarr-python 2.18 made, read back by it (contract
4.2): Zarr v2 with a big-endian dtype, order F, `/` keys and each of
zlib, blosc and no compressor; then zarr-python 2.18 writes over the
service's chunks and the service over its.

    ZS_SERVER_BIN=target/ci/zarr-serve .venv-zarr2/bin/python -m pytest tests/writes/test_zarr2.py
"""
import json

import numpy as np
import pytest
import zarr

from server import Server

if not zarr.__version__.startswith("2."):
    pytest.skip("zarr-python 2.18 only", allow_module_level=True)

import numcodecs  # noqa: E402

RNG = np.random.default_rng(7)


def test_zarr2_arrays_take_writes_and_read_back(tmp_path):
    root = tmp_path / "v2.zarr"
    group = zarr.open_group(str(root), mode="w")
    made = {
        "zlib_be_f": group.create_dataset("zlib_be_f", shape=(30, 17), chunks=(7, 5), dtype=">f8", order="F",
                                          compressor=numcodecs.Zlib(level=3), fill_value=-9.5),
        "blosc_slash": group.create_dataset("blosc_slash", shape=(25, 40), chunks=(10, 16), dtype="<i4",
                                            compressor=numcodecs.Blosc(cname="zstd", clevel=3, shuffle=2),
                                            dimension_separator="/", fill_value=0),
        "raw_u1": group.create_dataset("raw_u1", shape=(50,), chunks=(8,), dtype="u1", compressor=None,
                                       fill_value=3),
    }
    for a in made.values():
        a[: a.shape[0] // 2] = RNG.integers(0, 100, size=(a.shape[0] // 2,) + a.shape[1:]).astype(a.dtype)
    server = Server(tmp_path, root)
    try:
        for name, a in made.items():
            model = a[...]
            le = model.dtype.newbyteorder("<")
            region = tuple(slice(1, n - 1, 2 if d else 1) for d, n in enumerate(model.shape))
            select = ",".join(f"{s.start}:{s.stop}:{s.step}" for s in region)
            new = RNG.integers(0, 200, size=model[region].shape).astype(le)
            r = server.put(name, select, new.tobytes())
            assert r.status_code == 200, (name, r.text)
            model[region] = new
            np.testing.assert_array_equal(zarr.open_array(str(root / name), mode="r")[...], model, err_msg=name)
            # zarr-python 2.18 writes over the service's chunks, the service over its
            back = zarr.open_array(str(root / name), mode="r+")
            theirs = RNG.integers(0, 50, size=model[2:6].shape).astype(model.dtype)
            back[2:6] = theirs
            model[2:6] = theirs
            r = server.put(name, "4:5", json.dumps(np.full(model[4:5].shape, 77).tolist()), "application/json")
            assert r.status_code == 200, (name, r.text)
            model[4:5] = 77
            np.testing.assert_array_equal(zarr.open_array(str(root / name), mode="r")[...], model, err_msg=name)
            np.testing.assert_array_equal(server.read(name), model, err_msg=name)
    finally:
        server.stop()


def test_chunks_of_an_array_without_fill_value_are_always_stored(tmp_path):
    """zarr-python 2.18 reads a missing chunk of an array whose fill value is
    None as uninitialized memory: a chunk of zeros must be stored."""
    root = tmp_path / "nofill.zarr"
    group = zarr.open_group(str(root), mode="w")
    group.create_dataset("a", shape=(10,), chunks=(5,), dtype="<i4", compressor=None, fill_value=None)
    server = Server(tmp_path, root)
    try:
        r = server.put("a", "0:5", np.zeros(5, "<i4").tobytes())
        assert r.status_code == 200, r.text
        assert (root / "a" / "0").exists(), "a chunk of zeros was not stored"
        assert r.json()["chunks_written"] == 1
        np.testing.assert_array_equal(zarr.open_array(str(root / "a"), mode="r")[0:5], 0)
    finally:
        server.stop()
