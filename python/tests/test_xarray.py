"""The xarray backend on runs written by `fzsidecar demo` and `serve`."""

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

import fzsidecar


def test_open_demo_run(demo_store):
    url, run = demo_store
    ds = xr.open_dataset(f"{url}/{run}", engine="fzsidecar")
    s = fzsidecar.open_store(url)
    names = s.variables(run)
    assert sorted(ds.data_vars) == names
    steps = s.steps(run, names[0])
    assert list(ds["step"].values) == steps
    for v in names:
        da = ds[v]
        assert not da.variable._in_memory, "data must load lazily"
        assert da.dims[0] == "step" and da.shape[1:] == s.stat(run, v, steps[0]).info.shape
        for k, st in enumerate(steps):
            assert np.array_equal(da[k].values, s.read(run, v, st))
        e = s.stat(run, v, steps[-1])
        assert da.attrs["fz_mode"] == e.info.mode and da.attrs["fz_bound"] == e.info.bound
        assert da.attrs["fz_ratio"] > 1
        assert 0 < da.attrs["fz_max_abs_err"] <= da.attrs["fz_abs_eb"]
        assert "_FillValue" not in da.attrs and "_FillValue" not in da.encoding
    v = names[0]
    sel = ds[v].isel(step=1, dim_0=slice(1, 3)).values
    assert np.array_equal(sel, s.read(run, v, steps[1], region=(1, 3)))
    odd = ds[v][::-1, ::-2, 3, 1:5].values
    whole = np.stack([s.read(run, v, st) for st in steps])
    assert np.array_equal(odd, whole[::-1, ::-2, 3, 1:5])
    assert ds[v].isel(step=slice(0, 0)).values.shape[0] == 0


def test_store_and_run_separately(demo_store):
    url, run = demo_store
    a = xr.open_dataset(url, engine="fzsidecar", run=run)
    b = xr.open_dataset(f"{url}/{run}/", engine="fzsidecar")
    assert a.identical(b)


def test_fill_value_as_netcdf(serve_store):
    url, run = serve_store
    s = fzsidecar.open_store(url)
    ds = xr.open_dataset(f"{url}/{run}", engine="fzsidecar")
    m = ds["masked"]
    assert m.encoding["_FillValue"] == -9999.0 and "_FillValue" not in m.attrs
    raw = s.read(run, "masked", 0)
    got = m.sel(step=0).values
    assert np.array_equal(np.isnan(got), raw == -9999.0)
    assert np.array_equal(got[raw != -9999.0], raw[raw != -9999.0])
    # step 1 exists for other variables only: it reads as missing
    assert np.isnan(m.sel(step=1).values).all()
    raw_ds = xr.open_dataset(f"{url}/{run}", engine="fzsidecar", mask_and_scale=False)
    assert raw_ds["masked"].attrs["_FillValue"] == -9999.0
    assert np.array_equal(raw_ds["masked"].sel(step=0).values, raw)
    assert raw_ds["masked"].attrs["fz_mode"] == "abs"


def test_drop_variables_and_errors(serve_store, tmp_path):
    url, run = serve_store
    ds = xr.open_dataset(f"{url}/{run}", engine="fzsidecar", drop_variables=["masked"])
    assert sorted(ds.data_vars) == ["pres", "temp"]
    with pytest.raises(fzsidecar.FzNotFoundError, match="existing runs"):
        xr.open_dataset(f"{url}/no-such-run", engine="fzsidecar")


def test_dask_chunks(demo_store):
    pytest.importorskip("dask")
    url, run = demo_store
    ds = xr.open_dataset(f"{url}/{run}", engine="fzsidecar", chunks={"step": 1})
    v = sorted(ds.data_vars)[0]
    plain = xr.open_dataset(f"{url}/{run}", engine="fzsidecar")
    assert np.array_equal(ds[v].mean("step").values, plain[v].mean("step").values)
