"""The FZ HDF5 filter (hdf5/h5z_fz.c) through h5py, h5dump and netCDF-4.

Driven by hdf5/hdf5_test.go (go test ./hdf5/), which builds libfz.so and the
plugin and sets:
  HDF5_PLUGIN_PATH  the directory with libh5zfz.so (its ../lib has libfz.so)
  FZSIDECAR_BIN     the fzsidecar CLI (the standalone container to compare with)
  FZ_SHARED_DATA    ../shared/data (the real-field test skips without it)
  PYTHONPATH        python/ (fzsidecar.hdf5filter, fzsidecar.codec)
"""

import ctypes
import ctypes.util
import os
import subprocess
import sys

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from fzsidecar.hdf5filter import FILTER_ID, FZ, cd_values, decode_cd_values  # noqa: E402

PLUGIN_DIR = os.environ["HDF5_PLUGIN_PATH"]
FZSIDECAR = os.environ["FZSIDECAR_BIN"]


def smooth(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    x = sum(np.sin(g * (i + 1)) for i, g in enumerate(grids)) * 40 + 280
    return (x + rng.normal(0, 0.2, shape)).astype(dtype)


def max_err(x, y):
    return float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0


def chunk_slices(shape, chunks):
    idx = [range(0, n, c) for n, c in zip(shape, chunks)]
    for origin in np.ndindex(*[len(r) for r in idx]):
        yield tuple(slice(idx[d][o], min(idx[d][o] + chunks[d], shape[d])) for d, o in enumerate(origin))


def standalone(values, tmp_path, mode, eb, fill=None):
    """`fzsidecar compress` of values: the container a chunk must equal."""
    raw, out = tmp_path / "chunk.raw", tmp_path / "chunk.fz"
    values.astype(values.dtype.newbyteorder("<")).tofile(raw)
    dtype = {4: "f32", 8: "f64"}[values.dtype.itemsize]
    cmd = [FZSIDECAR, "compress", "--dtype", dtype, "--dims", "x".join(map(str, values.shape)), "--mode", mode,
           "--eb", repr(eb), "-o", str(out), str(raw)]
    if fill is not None:
        cmd += ["--fill", repr(fill)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,chunks", [((10000,), (4096,)), ((130, 90), (64, 64)), ((25, 40, 50), (10, 16, 50)),
                                          ((5, 6, 30, 40), (2, 4, 16, 40))])
def test_h5py_roundtrip_within_abs_bound(tmp_path, dtype, shape, chunks):
    """Ranks 1-4, edge chunks included (no shape is a multiple of its chunks)."""
    x = smooth(shape, dtype)
    eb = 0.01
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=x, chunks=chunks, **FZ(eb))
    with h5py.File(path, "r") as f:
        d = f["v"]
        y = d[...]
        cd = decode_cd_values(d.id.get_create_plist().get_filter_by_id(FILTER_ID)[1])
        stored = d.id.get_storage_size()
    assert y.dtype == x.dtype and y.shape == x.shape
    assert 0 < max_err(x, y) <= eb
    assert stored < x.nbytes * 0.75
    assert cd["mode"] == "abs" and cd["eb"] == eb and cd["layout"] == 1
    assert cd["dtype"] == np.dtype(dtype).name and cd["chunks"] == chunks


def test_rel_bound_is_per_chunk(tmp_path):
    shape, chunks = (40, 64, 64), (10, 32, 32)  # chunks tile the array exactly
    x = smooth(shape)
    rel = 1e-3
    with h5py.File(tmp_path / "r.h5", "w") as f:
        f.create_dataset("v", data=x, chunks=chunks, **FZ(rel, mode="rel"))
        y = f["v"][...]
    for sl in chunk_slices(shape, chunks):
        c = x[sl].astype(np.float64)
        assert max_err(x[sl], y[sl]) <= rel * (c.max() - c.min())


@pytest.mark.parametrize("fill_arg", ["dataset", -1e34])
def test_fill_is_exact_and_left_out_of_the_range(tmp_path, fill_arg):
    """Ocean-like field, 45 % fill, edge chunks: HDF5 pads them with the dataset's fill value."""
    x = smooth((12, 45, 90))
    land = np.zeros(x.shape, bool)
    land[:, :, :40] = True
    x[land] = np.float32(-1e34)
    rel = 1e-3
    with h5py.File(tmp_path / "f.h5", "w") as f:
        d = f.create_dataset("sst", data=x, chunks=(5, 20, 64), fillvalue=np.float32(-1e34), **FZ(rel, "rel", fill_arg))
        cd = decode_cd_values(d.id.get_create_plist().get_filter_by_id(FILTER_ID)[1])
        y = d[...]
    # "dataset": set_local stored the dataset's fill value, read back as float64.
    assert cd["fill"] == (float(np.float32(-1e34)) if fill_arg == "dataset" else fill_arg)
    assert np.array_equal(y[land], x[land])
    for sl in chunk_slices(x.shape, (5, 20, 64)):
        o = ~land[sl]
        if o.any():
            r = x[sl][o].astype(np.float64)
            assert max_err(x[sl][o], y[sl][o]) <= rel * (r.max() - r.min())


def test_nan_inf_exact(tmp_path):
    x = smooth((64, 64), np.float64)
    x[1, 2], x[3, 4], x[5, 6] = np.nan, np.inf, -np.inf
    with h5py.File(tmp_path / "n.h5", "w") as f:
        y = f.create_dataset("v", data=x, chunks=(32, 32), **FZ(0.001))[...]
    assert np.isnan(y[1, 2]) and y[3, 4] == np.inf and y[5, 6] == -np.inf
    ok = np.isfinite(x)
    assert max_err(x[ok], y[ok]) <= 0.001


def check_same_as_standalone(tmp_path, x, chunks, mode, eb, fill=None):
    """The stored chunk is the standalone container: same bytes, so the same ratio."""
    with h5py.File(tmp_path / "s.h5", "w") as f:
        d = f.create_dataset("v", data=x, chunks=chunks, **FZ(eb, mode, fill))
        origin = tuple(0 for _ in chunks)
        mask, stored = d.id.read_direct_chunk(origin)
    assert mask == 0  # the filter ran (h5py's filters are optional: a failure would store the chunk raw)
    ref = standalone(x[tuple(slice(0, c) for c in chunks)], tmp_path, mode, eb, fill)
    raw = int(np.prod(chunks)) * x.dtype.itemsize
    ratio_h5, ratio_fz = raw / len(stored), raw / len(ref)
    assert abs(ratio_h5 / ratio_fz - 1) < 0.02, (ratio_h5, ratio_fz)
    assert stored == ref
    return ratio_h5


def test_ratio_equals_standalone_container_synthetic(tmp_path):
    r = check_same_as_standalone(tmp_path, smooth((40, 64, 128)), (10, 64, 128), "rel", 1e-3)
    assert r > 2


def test_ratio_equals_standalone_container_real_field(tmp_path):
    data = os.environ.get("FZ_SHARED_DATA", "")
    path = os.path.join(data, "csm_b003_TS_100x64x128.f32")
    if not os.path.isfile(path):
        pytest.skip(f"SKIPPED: real field {path} not found (needs ../shared/data)")
    x = np.fromfile(path, dtype="<f4").reshape(100, 64, 128)
    r = check_same_as_standalone(tmp_path, x, (10, 64, 128), "rel", 1e-3)
    assert r > 4
    lev = os.path.join(data, "levitus_TEMP_20x180x360.f32")
    if os.path.isfile(lev):
        y = np.fromfile(lev, dtype="<f4").reshape(20, 180, 360)
        check_same_as_standalone(tmp_path, y, (5, 180, 360), "rel", 1e-3, fill=-1e10)


def h5dump_env():
    """Nothing but HDF5_PLUGIN_PATH (and a PATH to find h5dump): no FZ_LIBFZ, no PYTHONPATH."""
    return {"HDF5_PLUGIN_PATH": PLUGIN_DIR, "PATH": "/usr/bin:/bin"}


def test_h5dump_reads_with_only_plugin_path(tmp_path):
    x = smooth((30, 40, 50))
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("t", data=x, chunks=(10, 20, 50), **FZ(0.01))
    with h5py.File(path, "r") as f:
        y = f["t"][...]
    out = tmp_path / "t.bin"
    r = subprocess.run(["h5dump", "-d", "/t", "-b", "LE", "-o", str(out), str(path)], env=h5dump_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    z = np.fromfile(out, dtype="<f4").reshape(x.shape)
    assert np.array_equal(y, z)  # h5dump decodes the very values h5py does
    assert max_err(x, z) <= 0.01
    r = subprocess.run(["h5dump", "-H", "-p", "-d", "/t", str(path)], env=h5dump_env(), capture_output=True, text=True)
    assert r.returncode == 0 and "FILTER_ID 310" in r.stdout, r.stdout + r.stderr


def corrupt_file(tmp_path, how):
    x = smooth((64, 64, 64))
    path = tmp_path / f"c-{how}.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("t", data=x, chunks=(16, 64, 64), **FZ(0.01))
        blob = bytearray(d.id.read_direct_chunk((16, 0, 0))[1])
        if how == "flip":
            blob[len(blob) // 2] ^= 0x10
        elif how == "truncate":
            blob = blob[: len(blob) // 3]
        elif how == "garbage":
            blob = bytearray(np.random.default_rng(1).integers(0, 256, len(blob), dtype=np.uint8).tobytes())
        d.id.write_direct_chunk((16, 0, 0), bytes(blob))
    return path, x


@pytest.mark.parametrize("how", ["flip", "truncate", "garbage"])
def test_corrupted_chunk_is_an_hdf5_error(tmp_path, how):
    path, x = corrupt_file(tmp_path, how)
    with h5py.File(path, "r") as f:
        with pytest.raises(OSError, match="fz filter"):
            f["t"][16:32]
        assert max_err(x[:16], f["t"][:16]) <= 0.01  # the other chunks still read
    r = subprocess.run(["h5dump", "--enable-error-stack", "-d", "/t", "-b", "LE", "-o", str(tmp_path / "o.bin"), str(path)],
                       env=h5dump_env(), capture_output=True, text=True)
    assert r.returncode > 0, "h5dump must fail, not crash (a negative code is a signal)"
    assert "fz filter" in r.stderr, r.stderr


@pytest.mark.parametrize("opts,msg", [((7, 0, 0), "mode 7"), ((1, 0, 0), "bound 0"),
                                      (cd_values(1)[:1] + (0, 0x7FF80000), "bound nan"),
                                      ((1, 0, 0x3FF00000, 0), "4 cd_values"), (None, "0 cd_values"),
                                      (cd_values(1)[:3] + (3, 0, 0), "has_fill 3"),
                                      (cd_values(1, fill=1e300), "fill value 1e\\+300 is outside the float32 range")])
def test_bad_parameters_are_hdf5_errors(tmp_path, opts, msg):
    with h5py.File(tmp_path / "b.h5", "w") as f:
        kw = {"compression": FILTER_ID}
        if opts is not None:
            kw["compression_opts"] = opts
        with pytest.raises(ValueError, match="fz filter: .*" + msg):
            f.create_dataset("v", data=np.ones((10, 10), "f4"), chunks=(5, 5), **kw)


@pytest.mark.parametrize("dtype,msg", [("i4", "not floating point"), (">f4", "big-endian"), ("f2", "2-byte")])
def test_unsupported_types_are_hdf5_errors(tmp_path, dtype, msg):
    with h5py.File(tmp_path / "t.h5", "w") as f:
        with pytest.raises(ValueError, match="fz filter: .*" + msg):
            f.create_dataset("v", data=np.ones((10, 10), dtype), chunks=(5, 5), **FZ(1))


def test_missing_libfz_is_an_hdf5_error(tmp_path):
    code = ("import h5py, numpy as np\nfrom fzsidecar.hdf5filter import FZ\n"
            f"f = h5py.File({str(tmp_path / 'm.h5')!r}, 'w')\n"
            "f.create_dataset('v', data=np.ones((10, 10), 'f4'), chunks=(5, 5), **FZ(1))\n")
    env = dict(os.environ, FZ_LIBFZ=str(tmp_path / "nowhere" / "libfz.so"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "fz filter: cannot load libfz.so" in r.stderr and "nowhere/libfz.so" in r.stderr, r.stderr


def test_plugin_uses_the_libfz_the_package_loaded(tmp_path):
    """fzsidecar first loads a libfz.so from another path (RTLD_GLOBAL): the plugin must use it, not load a second
    copy from ../lib (two Go runtimes in one process)."""
    copy = tmp_path / "elsewhere" / "libfz.so"
    copy.parent.mkdir()
    copy.write_bytes(open(os.path.join(PLUGIN_DIR, "..", "lib", "libfz.so"), "rb").read())
    code = ("import os, h5py, numpy as np, fzsidecar\nfrom fzsidecar.hdf5filter import FZ\n"
            "fzsidecar.compress(np.ones(8, 'f4'), eb=1)\n"
            "del os.environ['FZ_LIBFZ']\n"
            f"with h5py.File({str(tmp_path / 'p.h5')!r}, 'w') as f:\n"
            "    f.create_dataset('v', data=np.ones((10, 10), 'f4'), chunks=(5, 5), **FZ(0.1))\n"
            "    assert (f['v'][...] == 1).all()\n"
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if l.rstrip().endswith('/libfz.so')}))\n")
    env = dict(os.environ, FZ_LIBFZ=str(copy))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == repr([str(copy)]), r.stdout


def test_netcdf4_variable_with_the_filter(tmp_path):
    """netCDF-C 4.9 writes the variable (nc_def_var_filter), netCDF4-python reads it back.

    netCDF4-python 1.6 takes only named compressors (zlib, zstd, ...) in
    createVariable, so the filter is set with nc_def_var_filter from the same
    libnetcdf that netCDF4-python is linked to, on its ncid/varid.
    """
    netCDF4 = pytest.importorskip("netCDF4")
    lib = ctypes.CDLL(ctypes.util.find_library("netcdf") or "libnetcdf.so.19")
    lib.nc_strerror.restype = ctypes.c_char_p
    x = smooth((13, 45, 90))
    land = np.zeros(x.shape, bool)
    land[:, :20, :] = True
    fill = np.float32(-1e34)  # as in COADS: the _FillValue is also HDF5's fill value
    x[land] = fill
    path = str(tmp_path / "t.nc")
    rel = 1e-3
    with netCDF4.Dataset(path, "w") as ds:
        for name, n in zip(("time", "lat", "lon"), x.shape):
            ds.createDimension(name, n)
        v = ds.createVariable("sst", "f4", ("time", "lat", "lon"), chunksizes=(5, 45, 90),
                             fill_value=fill)
        opts = cd_values(rel, "rel", "dataset")
        st = lib.nc_def_var_filter(ds._grpid, v._varid, FILTER_ID, len(opts), (ctypes.c_uint * len(opts))(*opts))
        assert st == 0, lib.nc_strerror(st)
        v[:] = np.ma.masked_array(x, mask=land)
    with netCDF4.Dataset(path, "r") as ds:
        y = ds["sst"][:]
        assert ds["sst"]._FillValue == fill
    assert np.array_equal(np.ma.getmaskarray(y), land)  # fill came back exactly, so netCDF masks it again
    for sl in chunk_slices(x.shape, (5, 45, 90)):
        o = ~land[sl]
        r = x[sl][o].astype(np.float64)
        assert max_err(x[sl][o], np.ma.getdata(y)[sl][o]) <= rel * (r.max() - r.min())
    r = subprocess.run(["h5dump", "-H", "-p", "-d", "/sst", path], env=h5dump_env(), capture_output=True, text=True)
    assert "FILTER_ID 310" in r.stdout, r.stdout + r.stderr


def test_h5repack_compresses_and_decompresses_an_existing_file(tmp_path):
    """h5repack -f UD=310,...: the filter on an existing file (set_local runs on the new layout)."""
    x = smooth((40, 50, 60))
    plain, packed, unpacked = (str(tmp_path / n) for n in ("plain.h5", "packed.h5", "unpacked.h5"))
    with h5py.File(plain, "w") as f:
        f["t"] = x
    ud = "UD=%d,0,%d,%s" % (FILTER_ID, 3, ",".join(str(v) for v in cd_values(0.01)[:3]))
    r = subprocess.run(["h5repack", "-l", "t:CHUNK=10x50x60", "-f", "t:" + ud, plain, packed], env=h5dump_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["h5repack", "-f", "NONE", packed, unpacked], env=h5dump_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with h5py.File(packed, "r") as f:
        cd = decode_cd_values(f["t"].id.get_create_plist().get_filter_by_id(FILTER_ID)[1])
        y = f["t"][...]
        assert f["t"].id.get_storage_size() < x.nbytes / 3
    with h5py.File(unpacked, "r") as f:
        assert f["t"].compression is None and f["t"].id.get_create_plist().get_nfilters() == 0
        assert np.array_equal(f["t"][...], y)
    assert cd["chunks"] == (10, 50, 60) and cd["eb"] == 0.01
    assert 0 < max_err(x, y) <= 0.01


def test_chunk_of_another_shape_is_refused(tmp_path):
    """A valid container of the right byte size but another shape (e.g. a chunk copied from another dataset)."""
    x = smooth((32, 64))
    with h5py.File(tmp_path / "s.h5", "w") as f:
        d = f.create_dataset("v", data=x, chunks=(16, 64), **FZ(0.01))
        other = standalone(x[:32, :32].copy(), tmp_path, "abs", 0.01)  # 32 x 32 = 16 x 64 values
        d.id.write_direct_chunk((16, 0), other)
        with pytest.raises(OSError, match="fz filter: .*chunk shape"):
            d[16:]
        assert max_err(x[:16], d[:16]) <= 0.01


def test_format_version_2(tmp_path):
    """FZ(..., format_version=2): chunks are version-2 containers (the bytes of
    `fzsidecar compress --format-version 2`), read back within the bound; the
    stored cd_values are layout 2 with the version after the chunk dims."""
    import fzsidecar.codec as fzc

    shape, chunks, rel = (30, 64, 100), (10, 64, 100), 1e-3
    x = smooth(shape)
    path = tmp_path / "v2.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("v", data=x, chunks=chunks, **FZ(rel, "rel", format_version=2))
        raw_cd = d.id.get_create_plist().get_filter_by_id(FILTER_ID)[1]
        mask, stored = d.id.read_direct_chunk((0, 0, 0))
    assert len(raw_cd) == 10 + 3 and raw_cd[6] == 2 and raw_cd[-1] == 2, raw_cd
    cd = decode_cd_values(raw_cd)
    assert cd["format_version"] == 2 and cd["layout"] == 2 and cd["chunks"] == chunks
    assert mask == 0 and fzc.inspect(stored).version == 2
    first = x[:10].astype("<f4")
    raw, ref = tmp_path / "c.raw", tmp_path / "c.fz"
    first.tofile(raw)
    subprocess.run([FZSIDECAR, "compress", "--dtype", "f32", "--dims", "10x64x100", "--mode", "rel", "--eb", repr(rel),
                    "--format-version", "2", "-o", str(ref), str(raw)], check=True, capture_output=True)
    assert stored == ref.read_bytes(), "the stored chunk differs from `fzsidecar compress --format-version 2`"
    with h5py.File(path, "r") as f:
        y = f["v"][...]
    for sl in chunk_slices(shape, chunks):
        c = x[sl].astype(np.float64)
        assert max_err(x[sl], y[sl]) <= rel * (c.max() - c.min())

    # h5repack to another chunk shape runs set_local on the copied values: the version stays 2
    repacked = str(tmp_path / "re.h5")
    r = subprocess.run(["h5repack", "-l", "v:CHUNK=5x64x100", str(path), repacked], env=h5dump_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with h5py.File(repacked, "r") as f:
        cd = decode_cd_values(f["v"].id.get_create_plist().get_filter_by_id(FILTER_ID)[1])
        assert cd["format_version"] == 2 and cd["chunks"] == (5, 64, 100)
        assert fzc.inspect(f["v"].id.read_direct_chunk((0, 0, 0))[1]).version == 2
        assert max_err(y, f["v"][...]) <= rel * float(x.max() - x.min())

    # the default stays version 1: the 6 user values, layout 1
    assert cd_values(rel, "rel") == cd_values(rel, "rel", format_version=1) and len(cd_values(rel)) == 6
    with h5py.File(tmp_path / "v1.h5", "w") as f:
        d = f.create_dataset("v", data=x, chunks=chunks, **FZ(rel, "rel"))
        assert decode_cd_values(d.id.get_create_plist().get_filter_by_id(FILTER_ID)[1])["layout"] == 1
        assert fzc.inspect(d.id.read_direct_chunk((0, 0, 0))[1]).version == 1


@pytest.mark.parametrize("opts,msg", [(cd_values(1) + (3,), r"cd_values\[6\] format version 3: expected 1 \(the default\) or 2"),
                                      (cd_values(1) + (2, 0), "8 cd_values")])
def test_bad_format_version_is_an_hdf5_error(tmp_path, opts, msg):
    with h5py.File(tmp_path / "b.h5", "w") as f:
        with pytest.raises(ValueError, match="fz filter: .*" + msg):
            f.create_dataset("v", data=np.ones((10, 10), "f4"), chunks=(5, 5), compression=FILTER_ID,
                             compression_opts=opts)
    for bad in (0, 3, "2", True):
        with pytest.raises(ValueError, match="format_version"):
            cd_values(1, format_version=bad)
