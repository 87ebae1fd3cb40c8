"""fzsidecar.producer against a real `fzsidecar serve`.

producer/producer_test.go (go test ./producer/) builds libfzproducer, starts
the sidecars and sets:

  FZ_LIBFZPRODUCER        the library
  FZ_TEST_URL, FZ_TEST_SHM_DIR, FZ_TEST_SINK          a sidecar and its sink
  FZ_TEST_SMALL_URL, FZ_TEST_SMALL_SHM_DIR            a sidecar with a 1 MiB budget
  FZ_TEST_FZSIDECAR       the fzsidecar binary (for `get`)

Tests whose variables are missing are skipped with a message saying so.
"""

import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest


def _env(name):
    v = os.environ.get(name)
    if not v:
        pytest.skip(f"{name} not set: run these tests through `go test ./producer/`")
    return v


@pytest.fixture
def sidecar():
    _env("FZ_LIBFZPRODUCER")
    return _env("FZ_TEST_URL"), _env("FZ_TEST_SHM_DIR")


@pytest.fixture
def small():
    _env("FZ_LIBFZPRODUCER")
    return _env("FZ_TEST_SMALL_URL"), _env("FZ_TEST_SMALL_SHM_DIR")


def producer_module():
    from fzsidecar import producer
    return producer


def get(run, var, step, dtype, shape):
    """The stored field, decoded by `fzsidecar get`."""
    out = tempfile.mktemp(suffix=".raw")
    try:
        subprocess.run([_env("FZ_TEST_FZSIDECAR"), "get", "--sink", _env("FZ_TEST_SINK"), "--run", run, "--var", var,
                        "--step", str(step), "--backend", "cpu", "-o", out], check=True, capture_output=True)
        return np.fromfile(out, dtype=dtype).reshape(shape)
    finally:
        if os.path.exists(out):
            os.unlink(out)


def auth(shm):
    """user/password of the sidecar's local-trust file, if it wrote one."""
    kv = {}
    try:
        with open(os.path.join(shm, ".fzsidecar-auth")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                kv[k] = v
    except FileNotFoundError:
        pass
    return {k: kv[k] for k in ("user", "password") if k in kv}


def test_in_place_round_trip(sidecar):
    P = producer_module()
    url, shm = sidecar
    with P.Producer(url, shm_dir=shm, id="pytest-rt") as p:
        assert p.id == "pytest-rt"
        snap = p.begin("pyprod", "wave", 3, (8, 16, 32), "f4", mode="abs", bound=1e-3)
        a = snap.array
        assert a.shape == (8, 16, 32) and a.dtype == np.dtype("<f4") and a.flags.c_contiguous
        want = np.sin(np.arange(a.size, dtype=np.float32) * 0.01).reshape(a.shape)
        a[...] = want
        snap.publish()
        assert not a.flags.writeable, "the array must be read-only after publish"
        with pytest.raises(ValueError):
            a[0, 0, 0] = 1
        r = snap.wait(60)
        assert r.key == "pyprod/wave/000000000003.fz" and r.step == 3
        assert r.raw_bytes == a.nbytes and r.compressed_bytes > 0 and r.ratio > 1
        assert r.max_abs_err <= r.abs_eb == pytest.approx(1e-3)
        assert np.array_equal(snap.array, want), "the segment stays mapped until the snapshot is freed"
        snap.free()
    got = get("pyprod", "wave", 3, "<f4", (8, 16, 32))
    assert np.max(np.abs(got.astype(np.float64) - want)) <= 1e-3


def test_put_fortran_ordered_f64_with_fill(sidecar):
    P = producer_module()
    url, shm = sidecar
    a = np.asfortranarray(np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6))
    a[1, 2, 3] = np.nan
    with P.Producer(url, shm_dir=shm, id="pytest-put") as p:
        s = p.put("pyprod", "ordered", 0, a, mode="abs", bound=1e-9, fill=float("nan"))
        r = s.wait(60)
        assert r.max_abs_err <= 1e-9
    got = get("pyprod", "ordered", 0, "<f8", (4, 5, 6))
    assert np.isnan(got[1, 2, 3])
    mask = ~np.isnan(a)
    assert np.allclose(got[mask], a[mask], rtol=0, atol=1e-9)


def test_sidecar_error_codes_unchanged(sidecar):
    P = producer_module()
    url, shm = sidecar
    with P.Producer(url, shm_dir=shm, id="pytest-conflict") as p:
        p.put("pyprod", "conflict", 0, np.zeros(64, np.float32), mode="abs", bound=0.1).wait(60)
        s = p.put("pyprod", "conflict", 0, np.ones(64, np.float32), mode="abs", bound=0.1)
        with pytest.raises(P.ProducerError) as e:
            s.wait(60)
        assert e.value.code == "conflict" and e.value.status == P.ESIDECAR


@pytest.mark.parametrize("kw,match", [
    (dict(bound=0.0), "finite number > 0"),
    (dict(bound=-1.0), "finite number > 0"),
    (dict(bound=float("nan")), "finite number > 0"),
    (dict(bound=float("inf")), "finite number > 0"),
])
def test_bad_bound(sidecar, kw, match):
    P = producer_module()
    url, shm = sidecar
    with P.Producer(url, shm_dir=shm) as p:
        with pytest.raises(P.ProducerError, match=match) as e:
            p.begin("r", "v", 0, (4,), "f4", **kw)
        assert e.value.code == "invalid"


def test_bad_arguments(sidecar):
    P = producer_module()
    url, shm = sidecar
    with P.Producer(url, shm_dir=shm) as p:
        with pytest.raises(ValueError, match="float32"):
            p.begin("r", "v", 0, (4,), "i4")
        with pytest.raises(ValueError, match="mode"):
            p.begin("r", "v", 0, (4,), "f4", mode="relative")
        with pytest.raises(ValueError, match="shape"):
            p.begin("r", "v", 0, (4, -1), "f4")
        with pytest.raises(ValueError, match="shape"):
            p.begin("r", "v", 0, (), "f4")
        with pytest.raises(ValueError, match="step"):
            p.begin("r", "v", -1, (4,), "f4")
        with pytest.raises(P.ProducerError, match="run") as e:
            p.begin("../etc", "v", 0, (4,), "f4")
        assert e.value.code == "invalid"
        with pytest.raises(P.ProducerError, match="step"):
            p.begin("r", "v", 10**12, (4,), "f4")
        s = p.begin("r", "v", 0, (4,), "f4")
        with pytest.raises(P.ProducerError) as e:
            s.wait(0.1)
        assert e.value.code == "state"
        s.abort()
        with pytest.raises(P.ProducerError, match="freed"):
            s.array
    with pytest.raises(ValueError, match="block_timeout"):
        P.Producer(url, shm_dir=shm, block_timeout=float("nan"))
    with pytest.raises(P.ProducerError, match="expected block or fail"):
        P.Producer(url, shm_dir=shm, policy="never")
    with pytest.raises(P.ProducerError) as e:
        p.begin("r", "v", 0, (4,), "f4")
    assert e.value.code == "closed"


def test_unwritable_shm_dir(sidecar, tmp_path):
    P = producer_module()
    url, shm = sidecar
    f = tmp_path / "file"
    f.write_text("not a directory")
    with P.Producer(url, shm_dir=str(f / "shm"), **auth(shm)) as p:
        with pytest.raises(P.ProducerError, match="shm dir") as e:
            p.begin("r", "v", 0, (16,), "f4")
        assert e.value.code == "system"


def test_no_sidecar_errors_within_the_timeout(tmp_path):
    P = producer_module()
    _env("FZ_LIBFZPRODUCER")
    t0 = time.monotonic()
    with pytest.raises(P.ProducerError) as e:
        P.Producer("nats://127.0.0.1:1", shm_dir=str(tmp_path), connect_timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert e.value.code == "unavailable" and "127.0.0.1:1" in e.value.message


def test_budget_policies(small):
    P = producer_module()
    url, shm = small
    with P.Producer(url, shm_dir=shm, id="pytest-hold") as hold, \
            P.Producer(url, shm_dir=shm, id="pytest-fail", policy="fail") as fail, \
            P.Producer(url, shm_dir=shm, id="pytest-block", block_timeout=0.6) as block:
        h = hold.begin("b", "v", 0, (768 * 256,), "f4")
        for p in (fail, block):
            with pytest.raises(P.ProducerError) as e:
                p.begin("b", "v", 1, (512 * 256,), "f4")
            assert e.value.code == "budget_full" and e.value.status == P.EBUDGET
            with pytest.raises(P.ProducerError) as e:
                p.begin("b", "v", 2, (2 * 1024 * 256,), "f4")
            assert e.value.code == "too_large"
        h.abort()
        # Block policy: the release travels on another connection and another
        # subject than the admission, and a loaded sidecar may read it well
        # after the admission arrives, so wait longer than block's 0.6 s.
        with P.Producer(url, shm_dir=shm, id="pytest-patient", block_timeout=30) as patient:
            s = patient.begin("b", "v", 3, (512 * 256,), "f4")
            s.array[...] = 1
            s.publish()
            s.wait(60)


def test_two_producers_at_once(sidecar):
    P = producer_module()
    url, shm = sidecar
    with P.Producer(url, shm_dir=shm, id="pytest-a") as a, P.Producer(url, shm_dir=shm, id="pytest-b") as b:
        snaps = []
        for k in range(3):
            for p in (a, b):
                snaps.append(p.put(f"two-{p.id}", "x", k, np.full(100, k, np.float32), mode="abs", bound=0.01))
        keys = sorted(s.wait(60).key for s in snaps)
        assert keys == sorted(f"two-{i}/x/{k:012d}.fz" for i in ("pytest-a", "pytest-b") for k in range(3))


def test_library_lookup_names_the_path():
    code = "import fzsidecar.producer as p; p.library_version()"
    env = dict(os.environ, FZ_LIBFZPRODUCER="/nonexistent/libfzproducer.so")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "FZ_LIBFZPRODUCER=/nonexistent/libfzproducer.so" in r.stderr


def test_arrays_never_outlive_their_mapping(sidecar):
    """free(), abort() and close() with arrays still referenced wait for the
    arrays (also views derived from them) instead of unmapping under them."""
    P = producer_module()
    url, shm = sidecar
    import gc
    with P.Producer(url, shm_dir=shm, id="pytest-life") as p:
        s = p.begin("pyprod", "life", 0, (64, 64), "f8", mode="abs", bound=1e-6)
        a = s.array
        a[...] = 7.0
        tail = a[32:]          # a view of a view: keeps the buffer, not `a`
        s.publish()
        s.wait(60)
        s.free()
        with pytest.raises(P.ProducerError, match="freed"):
            s.array
        del a
        gc.collect()
        assert tail.sum() == 7.0 * 32 * 64, "the mapping must stay while a derived view lives"
        segs = [f for f in os.listdir(shm) if f.startswith("pytest-life-")]
        assert len(segs) == 1
        del tail, s
        gc.collect()
        assert [f for f in os.listdir(shm) if f.startswith("pytest-life-")] == []

        # abort with a live array: the admission goes back when the array does
        s = p.begin("pyprod", "life", 1, (1024,), "f4")
        b = s.array
        s.abort()
        b[0] = 1.0             # still mapped: no crash
        del b
        gc.collect()
        assert [f for f in os.listdir(shm) if f.startswith("pytest-life-")] == []
        c = p.begin("pyprod", "life", 2, (16,), "f4").array
    # closed with an array alive: no more calls, the array stays usable
    c[...] = 3.0
    assert c.sum() == 48.0
    with pytest.raises(P.ProducerError) as e:
        p.begin("pyprod", "life", 3, (16,), "f4")
    assert e.value.code == "closed"
    del c
    gc.collect()
    assert p._p is None, "the connection closes once the last array is gone"
