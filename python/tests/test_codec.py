"""The codec: round trips, CLI parity, metadata, bad input."""

import os
import subprocess

import numpy as np
import pytest

import fzsidecar


def test_installed_package_is_used():
    want = os.environ.get("FZ_TEST_EXPECT_PREFIX")
    if want:
        assert fzsidecar.__file__.startswith(want), fzsidecar.__file__


def field(shape, dtype, seed=1):
    rng = np.random.default_rng(seed)
    idx = np.indices(shape).astype(np.float64)
    smooth = sum(np.sin(0.3 * (k + 1) * i) for k, i in enumerate(idx))
    return (smooth + 0.01 * rng.standard_normal(shape)).astype(dtype)


CASES = [
    dict(shape=(40, 50, 60), dtype=np.float32, mode="abs", eb=1e-3, fill=None),
    dict(shape=(3000,), dtype=np.float64, mode="rel", eb=1e-4, fill=None),
    dict(shape=(30, 40), dtype=np.float32, mode="rel", eb=1e-3, fill=-1e34),
    dict(shape=(4, 5, 6, 7), dtype=np.float64, mode="abs", eb=1e-2, fill=9.96921e36),
    dict(shape=(2, 3, 2, 3, 2, 3), dtype=np.float32, mode="abs", eb=0.5, fill=None),
]


def with_fill(a, fill):
    if fill is not None:
        a = a.copy()
        a.reshape(-1)[::7] = fill
    return a


@pytest.mark.parametrize("c", CASES, ids=lambda c: f"{np.dtype(c['dtype']).name}-{len(c['shape'])}d-{c['mode']}-fill{c['fill'] is not None}")
def test_roundtrip_and_cli_parity(c, tmp_path, fzsidecar_bin):
    a = with_fill(field(c["shape"], c["dtype"]), c["fill"])
    blob, info = fzsidecar.compress(a, eb=c["eb"], mode=c["mode"], fill=c["fill"], stats=True)
    assert isinstance(blob, bytes)

    # identical to the Go CLI
    raw, out = tmp_path / "in.raw", tmp_path / "cli.fz"
    a.tofile(raw)
    args = [fzsidecar_bin, "compress", "--dtype", "f32" if a.dtype == np.float32 else "f64",
            "--dims", "x".join(map(str, a.shape)), "--mode", c["mode"], "--eb", repr(c["eb"]),
            "--backend", "cpu", "-o", str(out), str(raw)]
    if c["fill"] is not None:
        args += ["--fill", repr(c["fill"])]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == blob, "Python's container differs from `fzsidecar compress`"

    # header metadata
    h = fzsidecar.inspect(blob)
    assert h.shape == a.shape and h.dtype == a.dtype and h.mode == c["mode"] and h.bound == c["eb"]
    assert h.compressed_bytes == len(blob) and h.raw_bytes == a.nbytes
    assert h.ratio == pytest.approx(a.nbytes / len(blob))
    assert h.max_abs_err is None and info.max_abs_err is not None
    if c["fill"] is None:
        assert h.fill is None
    else:
        assert h.fill == float(a.dtype.type(c["fill"]))

    # decode within the bound, fill exact
    d = fzsidecar.decompress(blob)
    assert d.dtype == a.dtype and d.shape == a.shape
    finite = np.ones(a.shape, bool) if c["fill"] is None else a != a.dtype.type(c["fill"])
    err = np.abs(d[finite].astype(np.float64) - a[finite])
    assert err.max() <= h.abs_eb
    assert err.max() == info.max_abs_err
    assert np.array_equal(d[~finite], a[~finite])


def test_decode_buffer_is_the_array():
    a = field((64, 64), np.float32)
    blob = fzsidecar.compress(a, eb=1e-3)
    d = fzsidecar.decompress(blob)
    # numpy's memory, on a cache line (see fzsidecar.empty), not shared
    # with anything but the buffer it was cut from
    assert d.flags.c_contiguous and d.flags.writeable and d.ctypes.data % 64 == 0
    assert d.base is not None and d.base.base is None and d.base.flags.owndata
    assert d.base.nbytes - d.nbytes == 64
    out = np.empty_like(a)
    assert fzsidecar.decompress(blob, out=out) is out
    assert np.array_equal(out, d)
    # bytes-like inputs of every kind, without copies on our side
    for b in (bytearray(blob), memoryview(blob), np.frombuffer(blob, np.uint8)):
        assert np.array_equal(fzsidecar.decompress(b), d)


def test_region_matches_whole(fzsidecar_bin, tmp_path):
    a = field((50, 40, 30), np.float64)
    blob = fzsidecar.compress(a, eb=1e-5)
    whole = fzsidecar.decompress(blob)
    for lo, hi in [(0, 1), (7, 23), (49, 50), (0, 50)]:
        assert np.array_equal(fzsidecar.decompress(blob, region=(lo, hi)), whole[lo:hi])
    assert np.array_equal(fzsidecar.decompress(blob, region=slice(10, None)), whole[10:])
    with pytest.raises(ValueError, match="not inside dimension 0"):
        fzsidecar.decompress(blob, region=(5, 51))
    with pytest.raises(ValueError, match="step of 1"):
        fzsidecar.decompress(blob, region=slice(0, 10, 2))


def test_big_endian_and_noncontiguous_input():
    a = field((20, 30), np.float32)
    blob = fzsidecar.compress(a, eb=1e-3)
    assert fzsidecar.compress(a.astype(">f4"), eb=1e-3) == blob
    t = np.asfortranarray(a)
    assert fzsidecar.compress(t, eb=1e-3) == blob


def test_corrupt_bytes_raise_with_the_containers_message(tmp_path, fzsidecar_bin):
    a = field((40, 50, 60), np.float32)
    blob = bytearray(fzsidecar.compress(a, eb=1e-3))
    blob[len(blob) // 2] ^= 0x10
    with pytest.raises(fzsidecar.FzFormatError) as e:
        fzsidecar.decompress(bytes(blob))
    msg = str(e.value)
    assert "checksum mismatch" in msg and e.value.code == 2
    # the same message as the Go CLI
    bad = tmp_path / "bad.fz"
    bad.write_bytes(blob)
    p = subprocess.run([fzsidecar_bin, "decompress", "--backend", "cpu", "-o", str(tmp_path / "out"), str(bad)],
                       capture_output=True, text=True)
    assert p.returncode != 0 and msg in p.stderr, (msg, p.stderr)

    head = bytearray(blob)
    head[0:4] = b"NOPE"
    with pytest.raises(fzsidecar.FzFormatError, match="bad magic"):
        fzsidecar.inspect(bytes(head))
    with pytest.raises(fzsidecar.FzFormatError, match="truncated|checksum|index"):
        fzsidecar.decompress(bytes(blob[: len(blob) - 100]))
    with pytest.raises(fzsidecar.FzInvalidError, match="at least 88"):
        fzsidecar.decompress(b"short")
    with pytest.raises(ValueError):  # every error above is also a ValueError
        fzsidecar.decompress(b"\0" * 200)


def test_bad_arguments():
    a = field((10, 10), np.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        fzsidecar.compress(a.astype(np.int32), eb=1)
    with pytest.raises(ValueError, match="mode"):
        fzsidecar.compress(a, eb=1e-3, mode="relative")
    with pytest.raises(fzsidecar.FzInvalidError, match="error bound"):
        fzsidecar.compress(a, eb=-1)
    with pytest.raises(fzsidecar.FzInvalidError, match="error bound"):
        fzsidecar.compress(a, eb=float("inf"))
    with pytest.raises(ValueError, match="dims"):
        fzsidecar.compress(np.float32(1.0), eb=1)
    with pytest.raises(ValueError, match="dims"):
        fzsidecar.compress(np.zeros((1,) * 17, np.float32), eb=1)
    with pytest.raises(fzsidecar.FzInvalidError, match="float32 range"):
        fzsidecar.compress(a, eb=1e-3, fill=1e300)
    blob = fzsidecar.compress(a, eb=1e-3)
    with pytest.raises(ValueError, match="out is"):
        fzsidecar.decompress(blob, out=np.empty((10, 11), np.float32))
    with pytest.raises(fzsidecar.FzInvalidError, match="max_raw_bytes"):
        fzsidecar.decompress(blob, max_raw_bytes=100)
    with pytest.raises(TypeError):
        fzsidecar.decompress(12345)


def test_threads():
    from concurrent.futures import ThreadPoolExecutor

    a = field((64, 64, 64), np.float32)
    blob = fzsidecar.compress(a, eb=1e-3)
    want = fzsidecar.decompress(blob)
    bad = bytearray(blob)
    bad[-5] ^= 1

    def work(i):
        if i % 2:
            with pytest.raises(fzsidecar.FzFormatError, match="chunk"):
                fzsidecar.decompress(bytes(bad))
            return True
        return np.array_equal(fzsidecar.decompress(blob, workers=1), want)

    with ThreadPoolExecutor(8) as ex:
        assert all(ex.map(work, range(32)))


def test_reuses_a_libfz_already_loaded(tmp_path):
    # As an HDF5 filter plugin would: another copy of libfz.so loaded first.
    # A second Go runtime in the process is unsupported, so the package must
    # use the loaded copy.
    import shutil
    import sys

    from fzsidecar import _libfz

    copy = tmp_path / "plugin-dir" / "libfz.so"
    copy.parent.mkdir()
    shutil.copy(_libfz.lib()._name, copy)
    code = (f"import ctypes; ctypes.CDLL({str(copy)!r}); import numpy as np, fzsidecar; "
            "from fzsidecar import _libfz; a = np.arange(100.0); "
            "assert (abs(fzsidecar.decompress(fzsidecar.compress(a, eb=1e-3)) - a) <= 1e-3).all(); "
            "print(_libfz.lib()._name)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(copy)
