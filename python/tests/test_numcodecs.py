"""The numcodecs codec "fzsidecar" with Zarr (v2 API) and xarray's to_zarr.

Run by python/python_test.go (go test ./python/) with the package importable
and libfz.so built; or by hand: PYTHONPATH=python python3 -m pytest python/tests.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

numcodecs = pytest.importorskip("numcodecs")
zarr = pytest.importorskip("zarr")

import fzsidecar.codec as fzc  # noqa: E402
from fzsidecar.numcodecs_fz import CODEC_ID, FZ  # noqa: E402

PYPROJECT = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"


def smooth(shape, dtype=np.float32, seed=0):
    """A smooth field with noise: compressible, not trivial."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    x = sum(np.sin(g * (i + 1)) for i, g in enumerate(grids)) * 40 + 280
    return (x + rng.normal(0, 0.5, shape)).astype(dtype)


def chunk_slices(shape, chunks):
    """Every chunk's index tuple (clipped at the array's edge)."""
    idx = [range(0, n, c) for n, c in zip(shape, chunks)]
    for origin in np.ndindex(*[len(r) for r in idx]):
        yield tuple(slice(idx[d][o], min(idx[d][o] + chunks[d], shape[d])) for d, o in enumerate(origin))


def max_err(x, y):
    return float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,chunks", [((5000,), (1024,)), ((90, 70), (32, 32)), ((20, 33, 40), (8, 16, 16)),
                                          ((6, 9, 32, 40), (3, 4, 16, 40))])
@pytest.mark.parametrize("order", ["C", "F"])
def test_zarr_abs_roundtrip_within_bound(dtype, shape, chunks, order):
    x = smooth(shape, dtype)
    eb = 0.05
    z = zarr.array(x, chunks=chunks, compressor=FZ(eb=eb), order=order)
    y = z[...]
    assert y.dtype == x.dtype and y.shape == x.shape
    assert max_err(x, y) <= eb
    # Lossy, not lossless: the codec did change values, and compressed
    # (little: the noise is 10x the bound, and order="F" hands FZ chunks whose
    # fastest dimension is the short first one).
    assert max_err(x, y) > 0
    assert z.nbytes_stored < z.nbytes


def test_zarr_rel_bound_is_per_chunk():
    shape, chunks = (40, 64, 64), (10, 32, 32)  # chunks tile the array: no padded edge chunks
    x = smooth(shape)
    rel = 1e-3
    z = zarr.array(x, chunks=chunks, compressor=FZ(eb=rel, mode="rel"))
    y = z[...]
    for sl in chunk_slices(shape, chunks):
        c = x[sl].astype(np.float64)
        assert max_err(x[sl], y[sl]) <= rel * (c.max() - c.min())


def test_chunk_is_the_standalone_container():
    x = smooth((30, 50, 60))
    chunks = (10, 50, 60)
    store = zarr.MemoryStore()
    z = zarr.array(x, chunks=chunks, compressor=FZ(eb=1e-3, mode="rel"), store=store)
    blob = bytes(store["1.0.0"])
    assert blob == fzc.compress(x[10:20], 1e-3, mode="rel")
    info = fzc.inspect(blob)
    assert info.shape == chunks and info.dtype == np.float32 and info.mode == "rel"
    assert np.array_equal(z[10:20], fzc.decompress(blob))


def test_fill_nan_and_inf_come_back_exactly():
    x = smooth((50, 80))
    fill = np.float32(-1e34)
    land = np.zeros(x.shape, bool)
    land[:, :35] = True  # 44 % "land", like the ocean fields
    x[land] = fill
    x[3, 50], x[4, 51], x[5, 52] = np.nan, np.inf, -np.inf
    rel = 1e-2
    z = zarr.array(x, chunks=(25, 40), compressor=FZ(eb=rel, mode="rel", fill=-1e34), fill_value=-1e34)
    y = z[...]
    assert np.array_equal(y[land], x[land])
    assert np.isnan(y[3, 50]) and y[4, 51] == np.inf and y[5, 52] == -np.inf
    ocean = ~land & np.isfinite(x)
    # The fill is left out of the range: the bound is relative to the ocean's values.
    for sl in chunk_slices(x.shape, (25, 40)):
        o = ocean[sl]
        if o.any():
            r = x[sl][o].astype(np.float64)
            assert max_err(x[sl][o], y[sl][o]) <= rel * (r.max() - r.min())
    # Without fill, -1e34 would stretch the range and the bound with it: much more error.
    z2 = zarr.array(x, chunks=(25, 40), compressor=FZ(eb=rel, mode="rel"))
    assert max_err(x[ocean], z2[...][ocean]) > 10 * max_err(x[ocean], y[ocean])


def test_config_roundtrip_and_registry():
    c = FZ(eb=0.25, mode="rel", fill=-9999.0)
    cfg = c.get_config()
    assert cfg == {"id": CODEC_ID, "eb": 0.25, "mode": "rel", "fill": -9999.0}
    assert json.loads(json.dumps(cfg)) == cfg
    c2 = numcodecs.get_codec(cfg)
    assert isinstance(c2, FZ) and c2 == c
    x = smooth((1000,))
    assert np.array_equal(c2.decode(c.encode(x)), c.decode(c2.encode(x)))


def test_zarr_store_reopens_with_codec_from_metadata(tmp_path):
    x = smooth((64, 64), np.float64)
    path = str(tmp_path / "a.zarr")
    zarr.save_array(path, x, chunks=(32, 32), compressor=FZ(eb=1e-6))
    meta = json.loads((tmp_path / "a.zarr" / ".zarray").read_text())
    assert meta["compressor"] == {"id": "fzsidecar", "eb": 1e-6, "mode": "abs", "fill": None}
    y = zarr.open_array(path, mode="r")[...]
    assert max_err(x, y) <= 1e-6


def test_entry_point_declared_in_pyproject():
    text = PYPROJECT.read_text()
    assert '[project.entry-points."numcodecs.codecs"]' in text
    section = text.split('[project.entry-points."numcodecs.codecs"]', 1)[1].split("\n[", 1)[0]
    assert 'fzsidecar = "fzsidecar.numcodecs_fz:FZ"' in section


def test_entry_point_loads_codec_in_a_fresh_process(tmp_path):
    """numcodecs finds the codec through the entry point alone (fzsidecar never imported by hand).

    When the package is pip-installed its own metadata provides the entry
    point; otherwise (a source checkout on PYTHONPATH) a dist-info carrying
    the entry point declared in pyproject.toml is put on the path, so what is
    tested is numcodecs' lookup of that declaration.
    """
    env = dict(os.environ)
    code = (
        "import numcodecs, numpy as np, sys\n"
        "assert 'fzsidecar' not in sys.modules\n"
        "c = numcodecs.get_codec({'id': 'fzsidecar', 'eb': 0.5, 'mode': 'abs', 'fill': None})\n"
        "x = np.linspace(0, 100, 5000, dtype=np.float32)\n"
        "y = c.decode(c.encode(x))\n"
        "assert np.max(np.abs(x - y)) <= 0.5, np.max(np.abs(x - y))\n"
        "print(type(c).__module__)\n"
    )
    probe = subprocess.run([sys.executable, "-c", "import entrypoints; "
                            "print('fzsidecar' in entrypoints.get_group_named('numcodecs.codecs'))"],
                           capture_output=True, text=True, env=env)
    if probe.stdout.strip() != "True":
        dist = tmp_path / "fzsidecar_codec_entrypoint-0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fzsidecar-codec-entrypoint\nVersion: 0\n")
        (dist / "entry_points.txt").write_text("[numcodecs.codecs]\nfzsidecar = fzsidecar.numcodecs_fz:FZ\n")
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fzsidecar.numcodecs_fz"


def test_xarray_to_zarr_roundtrip(tmp_path):
    xr = pytest.importorskip("xarray")
    t = smooth((12, 40, 50))
    p = smooth((12, 40, 50), np.float64, seed=1) * 100
    ds = xr.Dataset({"t": (("time", "lat", "lon"), t), "p": (("time", "lat", "lon"), p)},
                    coords={"time": np.arange(12), "lat": np.linspace(-60, 60, 40), "lon": np.linspace(0, 350, 50)})
    ds["t"].encoding["chunks"] = (4, 20, 25)
    ds["p"].encoding["chunks"] = (6, 40, 50)
    enc = {"t": {"compressor": FZ(eb=0.01)}, "p": {"compressor": FZ(eb=1e-4, mode="rel")}}
    path = str(tmp_path / "ds.zarr")
    ds.to_zarr(path, encoding=enc, consolidated=True)
    back = xr.open_zarr(path, consolidated=True).load()
    assert back["t"].dtype == np.float32 and back["p"].dtype == np.float64
    assert max_err(t, back["t"].values) <= 0.01
    pe = max_err(p, back["p"].values)
    assert 0 < pe <= 1e-4 * (p.max() - p.min())
    assert np.array_equal(back["lat"].values, ds["lat"].values)  # coordinates untouched (no FZ)
    cfg = zarr.open_array(os.path.join(path, "t"), mode="r").compressor.get_config()
    assert cfg["id"] == "fzsidecar" and cfg["eb"] == 0.01


def test_bad_parameters_are_clear_errors():
    with pytest.raises(ValueError, match="eb"):
        FZ(eb=-1)
    with pytest.raises(ValueError, match="eb"):
        FZ(eb=float("inf"))
    with pytest.raises(TypeError, match="eb"):
        FZ(eb="small")
    with pytest.raises(ValueError, match="mode"):
        FZ(eb=1, mode="relative")
    with pytest.raises(TypeError, match="float32 or float64"):
        FZ(eb=1).encode(np.arange(10, dtype=np.int32))
    with pytest.raises(TypeError, match="little-endian"):
        zarr.array(np.ones(100, ">f4"), chunks=(50,), compressor=FZ(eb=1))


def test_corrupted_chunk_is_an_error_not_garbage():
    x = smooth((64, 64))
    store = zarr.MemoryStore()
    z = zarr.array(x, chunks=(32, 32), compressor=FZ(eb=0.01), store=store)
    blob = bytearray(store["1.1"])
    blob[len(blob) // 2] ^= 0x40
    store["1.1"] = bytes(blob)
    with pytest.raises(ValueError, match="(?i)crc|checksum|corrupt"):
        z[40:50, 40:50]
    store["1.1"] = bytes(blob[:20])
    with pytest.raises(ValueError):
        z[40:50, 40:50]
    # The other chunks still read.
    assert max_err(x[:32, :32], z[:32, :32]) <= 0.01
