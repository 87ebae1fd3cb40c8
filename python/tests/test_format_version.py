"""format_version: the container version compress and the numcodecs codec
write (1, the default, or 2), and reading a store `fzsidecar serve` wrote
with format_version 2. Run by python/python_test.go (go test ./python/)."""

import os
import subprocess

import numpy as np
import pytest

import fzsidecar
from fzsidecar import codec as fzc


def field(shape, dtype=np.float32, seed=3):
    rng = np.random.default_rng(seed)
    idx = np.indices(shape).astype(np.float64)
    smooth = sum(np.sin(0.05 * (k + 1) * i) for k, i in enumerate(idx)) * 40 + 280
    return (smooth + rng.normal(0, 0.05, shape)).astype(dtype)


@pytest.mark.parametrize("dtype,mode,eb,fill", [(np.float32, "rel", 1e-3, None), (np.float64, "abs", 1e-4, -9999.0)])
def test_compress_version_2_roundtrip_and_cli_parity(dtype, mode, eb, fill, tmp_path, fzsidecar_bin):
    a = field((20, 60, 70), dtype)
    if fill is not None:
        a.reshape(-1)[::11] = fill
    v1 = fzc.compress(a, eb, mode=mode, fill=fill)
    assert fzc.compress(a, eb, mode=mode, fill=fill, format_version=1) == v1, "format_version=1 is the default"
    blob, info = fzc.compress(a, eb, mode=mode, fill=fill, format_version=2, stats=True)
    assert fzc.inspect(v1).version == 1
    assert info.version == 2 and fzc.inspect(blob).version == 2

    # the same bytes as `fzsidecar compress --format-version 2`
    raw, out = tmp_path / "in.raw", tmp_path / "cli.fz"
    a.tofile(raw)
    args = [fzsidecar_bin, "compress", "--dtype", "f32" if a.dtype == np.float32 else "f64",
            "--dims", "x".join(map(str, a.shape)), "--mode", mode, "--eb", repr(eb), "--backend", "cpu",
            "--format-version", "2", "-o", str(out), str(raw)]
    if fill is not None:
        args += ["--fill", repr(fill)]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == blob, "Python's version-2 container differs from `fzsidecar compress --format-version 2`"

    # decodes within the bound, fill exact; a region too
    d = fzc.decompress(blob)
    keep = np.ones(a.shape, bool) if fill is None else a != a.dtype.type(fill)
    err = np.abs(d[keep].astype(np.float64) - a[keep])
    assert err.max() <= info.abs_eb and err.max() == info.max_abs_err
    assert np.array_equal(d[~keep], a[~keep])
    assert np.array_equal(fzc.decompress(blob, region=(5, 9)), d[5:9])
    print(f"{a.dtype} {mode} {eb}: version 1 {len(v1)} bytes, version 2 {len(blob)} bytes")


def test_bad_format_version():
    a = field((4, 5, 6))
    for bad in (0, 3, -1, 256):
        with pytest.raises(ValueError, match=r"format_version=.*expected 1 \(the default\) or 2"):
            fzc.compress(a, 1e-3, format_version=bad)
    for bad in ("2", 2.0, None, True):
        with pytest.raises(TypeError, match=r"expected 1 \(the default\) or 2"):
            fzc.compress(a, 1e-3, format_version=bad)


numcodecs = pytest.importorskip("numcodecs")
zarr = pytest.importorskip("zarr")

from fzsidecar.numcodecs_fz import CODEC_ID, FZ  # noqa: E402


def test_numcodecs_format_version(tmp_path):
    assert FZ(eb=1e-3).format_version == 1
    assert "format_version" not in FZ(eb=1e-3).get_config(), "the default leaves configs as before"
    c = FZ(eb=1e-3, mode="rel", format_version=2)
    cfg = c.get_config()
    assert cfg == {"id": CODEC_ID, "eb": 1e-3, "mode": "rel", "fill": None, "format_version": 2}
    assert numcodecs.get_codec(cfg) == c
    assert numcodecs.get_codec(dict(cfg, format_version=1)) == FZ(eb=1e-3, mode="rel")
    assert "format_version=2" in repr(c)
    for bad in (0, 3):
        with pytest.raises(ValueError, match="format_version"):
            FZ(eb=1e-3, format_version=bad)
    with pytest.raises(TypeError, match="format_version"):
        FZ(eb=1e-3, format_version="two")

    # a Zarr array: every chunk a version-2 container, reopened from its metadata
    x = field((40, 64, 50))
    path = str(tmp_path / "v2.zarr")
    zarr.save_array(path, x, chunks=(10, 32, 50), compressor=c)
    z = zarr.open_array(path, mode="r")
    assert z.compressor.get_config()["format_version"] == 2
    y = z[...]
    for i in range(0, 40, 10):
        for j in range(0, 64, 32):
            sl = (slice(i, i + 10), slice(j, j + 32))
            r = x[sl].astype(np.float64)
            assert np.abs(y[sl] - r).max() <= 1e-3 * (r.max() - r.min())
    chunks = [n for n in os.listdir(path) if not n.startswith(".")]
    assert len(chunks) == 8
    for n in chunks:
        with open(os.path.join(path, n), "rb") as f:
            assert fzc.inspect(f.read()).version == 2, n


def test_store_written_with_format_version_2(serve_v2_store, fzsidecar_bin, tmp_path):
    """A run `fzsidecar serve --format-version 2` stored: the store API reads
    it like any other (every reader reads both versions), with the values
    `fzsidecar get` gives."""
    url, run = serve_v2_store
    with fzsidecar.open_store(url) as s:
        assert s.steps(run, "temp") == [0, 1]
        for step in (0, 1):
            a, e = s.read(run, "temp", step, with_info=True)
            assert e.info.version == 2 and s.stat(run, "temp", step).info.version == 2
            assert a.shape == (8, 32, 32) and a.dtype == np.float32
            out = tmp_path / f"get-{step}.raw"
            p = subprocess.run([fzsidecar_bin, "get", "--sink", url, "--run", run, "--var", "temp", "--step", str(step),
                                "--backend", "cpu", "-o", str(out)], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            assert a.tobytes() == out.read_bytes(), "the store API and `fzsidecar get` decode differently"
            assert np.array_equal(s.read(run, "temp", step, region=(2, 5)), a[2:5])
            assert e.info.max_abs_err is not None and e.info.max_abs_err <= e.info.abs_eb
