"""The service's encoders against numcodecs' (contract 4.2, "every codec it
reads it also writes; lossy codecs encode as their spec says"). For each
numcodecs filter and element codec, in Zarr v3 (`numcodecs.<id>`) and
Zarr v2 (`filters`), two identical arrays are made with zarr-python; it
writes the values into one, the service the same values into the other,
then a region again into both. zarr-python must read the two back equal,
bit for bit; where the codec is deterministic the chunk files are equal
byte for byte too.

    ZS_SERVER_BIN=target/ci/zarr-serve .venv-test/bin/python -m pytest tests/writes/test_encoders.py
"""
import numcodecs
import zarr.codecs.numcodecs as nz3
import numpy as np
import pytest
import zarr

from server import Server

RNG = np.random.default_rng(11)
SHAPE, CHUNKS = (30, 26), (8, 10)


def floats(dtype, scale=100.0):
    return (RNG.standard_normal(SHAPE) * scale).astype(dtype)


def ints(dtype, low, high):
    return RNG.integers(low, high, size=SHAPE).astype(dtype)


# (name, dtype, v3 filters, v2 filters, values, files compared byte for byte)
CASES = [
    ("delta_i4", "<i4", [nz3.Delta(dtype="<i4")], [numcodecs.Delta(dtype="<i4")], ints("<i4", -10**9, 10**9), True),
    ("delta_i8_as_i2", "<i8", [nz3.Delta(dtype="<i8", astype="<i2")], [numcodecs.Delta(dtype="<i8", astype="<i2")],
     ints("<i8", 0, 20).cumsum(axis=1), True),
    ("delta_f4", "<f4", [nz3.Delta(dtype="<f4")], [numcodecs.Delta(dtype="<f4")], floats("<f4"), True),
    ("fso_f8_i2", "<f8", [nz3.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<i2")],
     [numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<i2")], 1000 + floats("<f8"), True),
    ("fso_f4_u1", "<f4", [nz3.FixedScaleOffset(offset=0, scale=2, dtype="<f4", astype="|u1")],
     [numcodecs.FixedScaleOffset(offset=0, scale=2, dtype="<f4", astype="|u1")],
     np.abs(floats("<f4", 40.0)), True),
    ("quantize_f8", "<f8", [nz3.Quantize(digits=3, dtype="<f8")], [numcodecs.Quantize(digits=3, dtype="<f8")],
     floats("<f8"), True),
    ("quantize_f4", "<f4", [nz3.Quantize(digits=2, dtype="<f4")], [numcodecs.Quantize(digits=2, dtype="<f4")],
     floats("<f4"), True),
    ("bitround_f4", "<f4", [nz3.BitRound(keepbits=7)], [numcodecs.BitRound(keepbits=7)], floats("<f4"), True),
    ("bitround_f8", "<f8", [nz3.BitRound(keepbits=20)], [numcodecs.BitRound(keepbits=20)], floats("<f8"), True),
    ("astype_f8_f4", "<f8", [nz3.AsType(encode_dtype="<f4", decode_dtype="<f8")],
     [numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")], floats("<f8"), True),
    ("packbits", "|b1", [nz3.PackBits()], [numcodecs.PackBits()], RNG.random(SHAPE) > 0.5, True),
]


def make(root, name, dtype, v3_filters, v2_filters, fmt):
    if fmt == 3:
        return zarr.create_array(str(root / name), shape=SHAPE, chunks=CHUNKS, dtype=dtype, filters=v3_filters,
                                 compressors=None, fill_value=0, zarr_format=3)
    return zarr.create_array(str(root / name), shape=SHAPE, chunks=CHUNKS, dtype=dtype, filters=v2_filters,
                             compressors=None, fill_value=0, zarr_format=2)


def chunk_files(root, name):
    skip = {"zarr.json", ".zarray", ".zattrs"}
    return {p.relative_to(root / name).as_posix(): p.read_bytes()
            for p in sorted((root / name).rglob("*")) if p.is_file() and p.name not in skip}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("encoders")
    root = tmp / "data.zarr"
    zarr.open_group(str(root), mode="w")
    s = Server(tmp, root)
    s.root = root
    yield s
    s.stop()


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_service_encodes_as_numcodecs_does(server, case, fmt):
    name, dtype, v3_filters, v2_filters, values, same_files = case
    root = server.root
    ours, theirs = f"v{fmt}_{name}_service", f"v{fmt}_{name}_zarr"
    make(root, ours, dtype, v3_filters, v2_filters, fmt)
    reference = make(root, theirs, dtype, v3_filters, v2_filters, fmt)
    values = values.astype(dtype)
    reference[...] = values
    little = values.astype(np.dtype(dtype).newbyteorder("<"))
    r = server.put(ours, "", little.tobytes())
    assert r.status_code == 200, (ours, r.text)
    # then a region across chunk edges, read-modify-write of partial chunks
    region = values[5:19, 3:23:2][::-1].copy()
    reference[5:19, 3:23:2] = region
    r = server.put(ours, "5:19,3:23:2", region.astype(little.dtype).tobytes())
    assert r.status_code == 200, (ours, r.text)
    got = zarr.open_array(str(root / ours), mode="r")[...]
    want = zarr.open_array(str(root / theirs), mode="r")[...]
    np.testing.assert_array_equal(got, want, err_msg=f"{ours}: zarr-python reads other values")
    np.testing.assert_array_equal(server.read(ours), want, err_msg=f"{ours}: the service reads other values")
    if same_files:
        assert chunk_files(root, ours) == chunk_files(root, theirs), f"{ours}: chunk files differ from numcodecs'"



# zfpy (numcodecs' zfp with its header) in each mode numcodecs writes: the
# v3 serializer `numcodecs.zfpy` and the v2 compressor `zfpy`. zarr-serve's
# zfp encoder writes libzfp's bytes, so the chunk files are equal too.
ZFPY_CASES = [
    ("zfpy_accuracy_f8", "<f8", dict(mode=4, tolerance=0.01)),
    ("zfpy_accuracy_f4", "<f4", dict(mode=4, tolerance=0.5)),
    ("zfpy_rate_f4", "<f4", dict(mode=2, rate=13)),
    ("zfpy_precision_f8", "<f8", dict(mode=3, precision=21)),
    ("zfpy_precision_i4", "<i4", dict(mode=3, precision=24)),
]


def make_zfpy(root, name, dtype, kwargs, fmt):
    if fmt == 3:
        return zarr.create_array(str(root / name), shape=SHAPE, chunks=CHUNKS, dtype=dtype,
                                 serializer=nz3.ZFPY(**kwargs), compressors=None, fill_value=0, zarr_format=3)
    return zarr.create_array(str(root / name), shape=SHAPE, chunks=CHUNKS, dtype=dtype,
                             compressors=numcodecs.ZFPY(**kwargs), fill_value=0, zarr_format=2)


def write_chunks_v3(root, name, dtype, kwargs, rows, cols, model):
    """numcodecs' zfpy as zarr-python writes chunks, done by hand for Zarr v3:
    each chunk that `rows` x `cols` touch is decoded (a new one is the fill
    value), given `model`'s values inside the array and encoded again, the
    padding past the array's edge kept as decoded, as a read-modify-write
    keeps it. zarr-python 3.1.3 hands the v3 zfpy serializer
    non-contiguous views, which numcodecs refuses."""
    codec = numcodecs.ZFPY(**kwargs)
    for r in sorted({i // CHUNKS[0] for i in rows}):
        for c in sorted({j // CHUNKS[1] for j in cols}):
            rs = slice(r * CHUNKS[0], min((r + 1) * CHUNKS[0], SHAPE[0]))
            cs = slice(c * CHUNKS[1], min((c + 1) * CHUNKS[1], SHAPE[1]))
            path = root / name / "c" / str(r) / str(c)
            chunk = np.zeros(CHUNKS, dtype)
            if path.exists():
                chunk = codec.decode(path.read_bytes()).reshape(CHUNKS)
            chunk[: rs.stop - rs.start, : cs.stop - cs.start] = model[rs, cs]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(codec.encode(np.ascontiguousarray(chunk)))


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("case", ZFPY_CASES, ids=[c[0] for c in ZFPY_CASES])
def test_the_service_encodes_zfpy_as_libzfp_does(server, case, fmt):
    name, dtype, kwargs = case
    root = server.root
    ours, theirs = f"v{fmt}_{name}_service", f"v{fmt}_{name}_zarr"
    make_zfpy(root, ours, dtype, kwargs, fmt)
    reference = make_zfpy(root, theirs, dtype, kwargs, fmt)
    values = (ints(dtype, -10**6, 10**6) if dtype == "<i4" else floats(dtype)).astype(dtype)
    region = values[5:19, 3:23:2][::-1].copy()
    if fmt == 2:
        reference[...] = values
        reference[5:19, 3:23:2] = region
    else:
        write_chunks_v3(root, theirs, dtype, kwargs, range(SHAPE[0]), range(SHAPE[1]), values)
        model = reference[...]
        model[5:19, 3:23:2] = region
        write_chunks_v3(root, theirs, dtype, kwargs, range(5, 19), range(3, 23, 2), model)
    r = server.put(ours, "", values.tobytes())
    assert r.status_code == 200, (ours, r.text)
    r = server.put(ours, "5:19,3:23:2", region.tobytes())
    assert r.status_code == 200, (ours, r.text)
    want = zarr.open_array(str(root / theirs), mode="r")[...]
    np.testing.assert_array_equal(zarr.open_array(str(root / ours), mode="r")[...], want,
                                  err_msg=f"{ours}: zarr-python reads other values")
    np.testing.assert_array_equal(server.read(ours), want, err_msg=f"{ours}: the service reads other values")
    assert chunk_files(root, ours) == chunk_files(root, theirs), f"{ours}: chunk files differ from numcodecs'"
