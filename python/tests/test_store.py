"""Reading a store that `fzsidecar serve` wrote (simulate + publish)."""

import shutil
import subprocess

import numpy as np
import pytest

import fzsidecar


def cli_get(bin_, store, run, var, step, tmp_path, region=None):
    out = tmp_path / f"get-{var}-{step}-{region}.raw"
    args = [bin_, "get", "--sink", store, "--run", run, "--var", var, "--step", str(step), "--backend", "cpu",
            "-o", str(out)]
    if region:
        args += ["--region", f"{region[0]}:{region[1]}"]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return out.read_bytes()


def test_listing(serve_store):
    url, run = serve_store
    with fzsidecar.open_store(url) as s:
        assert run in s.runs()
        assert s.variables(run) == ["masked", "pres", "temp"]
        assert s.steps(run, "temp") == [0, 1, 2]
        assert s.steps(run, "masked") == [0, 2]
        rows = s.list(run)
        assert [(r["var"], r["step"]) for r in rows] == [("masked", 0), ("masked", 2), ("pres", 0), ("pres", 1),
                                                         ("pres", 2), ("temp", 0), ("temp", 1), ("temp", 2)]
        assert all(r["raw_bytes"] == 8 * 32 * 32 * 4 and r["ratio"] > 1 for r in rows)
        assert s.list(run, "temp") == rows[-3:]
        assert s.latest(run, "pres") == 2


def test_reads_equal_the_cli(serve_store, fzsidecar_bin, tmp_path):
    url, run = serve_store
    s = fzsidecar.open_store(url)
    for var in ("temp", "pres"):
        for step in (0, 1, 2):
            a = s.read(run, var, step)
            assert a.dtype == np.float32 and a.shape == (8, 32, 32)
            assert a.tobytes() == cli_get(fzsidecar_bin, url, run, var, step, tmp_path)
    r = s.read(run, "temp", 1, region=(2, 5))
    assert r.shape == (3, 32, 32)
    assert r.tobytes() == cli_get(fzsidecar_bin, url, run, "temp", 1, tmp_path, region=(2, 5))
    assert np.array_equal(s.read(run, "temp", "latest"), s.read(run, "temp", 2))
    out = np.empty((8, 32, 32), np.float32)
    assert s.read(run, "pres", 0, out=out) is out
    e = s.read_into(out, run, "temp", 2)
    assert e.step == 2 and np.array_equal(out, s.read(run, "temp", 2))
    part = np.empty((3, 32, 32), np.float32)
    s.read_into(part, run, "temp", 1, (2, 5))
    assert np.array_equal(part, r)
    with pytest.raises(ValueError, match="is float32"):
        s.read_into(np.empty((8, 32, 16), np.float64), run, "temp", 1)
    with pytest.raises(fzsidecar.FzInvalidError, match="needs 32768"):
        s.read_into(np.empty((8, 32, 31), np.float32), run, "temp", 1)


def test_metadata(serve_store):
    url, run = serve_store
    s = fzsidecar.open_store(url)
    a, e = s.read(run, "temp", 1, with_info=True)
    st = s.stat(run, "temp", 1)
    assert e == st
    i = e.info
    assert (e.run, e.var, e.step) == (run, "temp", 1)
    assert i.mode == "rel" and i.bound == 1e-3 and i.fill is None and i.shape == (8, 32, 32)
    assert i.ratio == pytest.approx(i.raw_bytes / e.stored_bytes) and i.compressed_bytes == e.stored_bytes
    assert 0 < i.max_abs_err <= i.abs_eb
    assert e.created is not None and e.crc32c != 0
    m = s.stat(run, "masked", 0).info
    assert m.fill == -9999.0 and m.mode == "abs" and m.bound == 0.01


def test_fill_round_trips_exactly(serve_store):
    url, run = serve_store
    a = fzsidecar.open_store(url).read(run, "masked", 0)
    assert (a == -9999.0).sum() == 8 * 32 * 32 // 5 + 1  # every 5th value of the field (see python_test.go)


def test_not_found_lists_what_exists(serve_store):
    url, run = serve_store
    s = fzsidecar.open_store(url)
    with pytest.raises(fzsidecar.FzNotFoundError, match="existing variables: masked, pres, temp"):
        s.read(run, "nope", 0)
    with pytest.raises(fzsidecar.FzNotFoundError, match="existing steps: 0, 1, 2"):
        s.stat(run, "temp", 7)
    with pytest.raises(fzsidecar.FzNotFoundError, match="run \"nope\" not found"):
        s.variables("nope")
    with pytest.raises(LookupError):
        s.steps(run, "nope")
    with pytest.raises(fzsidecar.FzInvalidError, match="only A-Z"):
        s.read(run, "bad/name", 0)
    with pytest.raises(ValueError, match="not inside dimension 0"):
        s.read(run, "temp", 0, region=(0, 9))


def test_corrupt_blob_on_disk(serve_store, tmp_path):
    url, run = serve_store
    copy = tmp_path / "store"
    shutil.copytree(url, copy)
    blob = copy / run / "temp" 
    f = sorted(blob.glob("*.fz"))[1]
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 0xFF
    f.write_bytes(b)
    s = fzsidecar.open_store(str(copy))
    with pytest.raises(fzsidecar.FzChecksumError, match="corrupt|checksum"):
        s.read(run, "temp", 1)
    assert s.read(run, "temp", 0).shape == (8, 32, 32)  # the others still read


def test_open_errors(tmp_path):
    with pytest.raises(fzsidecar.FzError, match="unknown scheme"):
        fzsidecar.open_store("ftp://x/y")
    # A malformed URL is a ValueError saying what is expected, not an I/O error.
    for bad, why in [("http://x", "unknown scheme"), ("s3://", "no bucket"), ("s3://b/../x", "prefix")]:
        with pytest.raises(fzsidecar.FzInvalidError, match=why) as e:
            fzsidecar.open_store(bad)
        assert isinstance(e.value, ValueError) and "expected" in str(e.value), str(e.value)
    with pytest.raises(fzsidecar.FzStoreError, match="does not exist"):
        fzsidecar.open_store(str(tmp_path / "missing"))  # a wrong path, not an empty store
    s = fzsidecar.open_store(str(tmp_path))
    assert s.runs() == []
    with pytest.raises(fzsidecar.FzInvalidError, match="run is empty"):
        s.variables("")  # not every run's variables mixed together
    s.close()
    s.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        s.runs()



def test_list_crc32c_as_ls_prints_it(serve_store, fzsidecar_bin):
    """The catalog's crc32c is the 8-hex-digit string that `fzsidecar ls
    --json` and restore.json print, and the value of Entry.crc32c."""
    import json
    url, run = serve_store
    p = subprocess.run([fzsidecar_bin, "ls", "--sink", url, "--run", run, "--var", "temp", "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cli = json.loads(p.stdout)
    want = sorted(str(e["crc32c"]) for e in cli)
    with fzsidecar.open_store(url) as s:
        rows = s.list(run, "temp")
        assert sorted(r["crc32c"] for r in rows) == want
        assert all(len(r["crc32c"]) == 8 for r in rows)
        assert sorted(f"{s.stat(run, 'temp', r['step']).crc32c:08x}" for r in rows) == want
