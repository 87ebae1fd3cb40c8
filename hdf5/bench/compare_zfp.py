#!/usr/bin/python3
"""FZ against ZFP on the real fields of ../shared/data, on this machine, in one run.

For every field and every relative bound REL:
  eb = REL x (max - min) over the finite, non-fill values (what `fzsidecar --mode rel` uses);
  FZ   `fzsidecar eval --mode rel --workers 1 --backend cpu` (one thread; median of --repeat runs);
  ZFP  libzfp through zfpy (Debian python3-zfpy, libzfp 1.0), fixed-accuracy mode, one thread:
       "zfp -a eb"    tolerance = eb, the setting ZFP guarantees (it leaves most of the bound unused);
       "zfp tuned"    the largest tolerance whose measured max error is still <= eb (zfp rounds the
                      tolerance to a power of two, so the powers of two from eb upwards are tried);
  HDF5 (with --hdf5) both again through their HDF5 filters, one chunk = the whole field: FZ's plugin
       (filter 310, HDF5_PLUGIN_PATH=build/hdf5-plugins) and Debian's H5Z-ZFP (32013,
       hdf5-filter-plugin-zfp-serial) at the tuned tolerance; the ratio is raw bytes / storage size.
Max errors are taken over the finite non-fill values; fill values are checked to come back exactly.
Ratios count the field's own bytes (8 per value for the f64 field). MB/s = raw MB / median seconds.

SZ3 is not in Debian (no library, no CLI, no HDF5 filter), so its figures are the measured ones of
../shared/notes/anchors.md, printed beside the geometric means, not re-measured.

Usage: /usr/bin/python3 hdf5/bench/compare_zfp.py [--data ../shared/data] [--rel 1e-2,1e-3,1e-4]
       [--fzsidecar PATH] [--repeat 3] [--hdf5] [--json OUT.json]
Prints a Markdown table (docs/FORMATS.md holds one such run). Generated files go to a temp dir.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import zfpy
except ImportError:  # pragma: no cover - a message instead of a traceback
    sys.exit("compare_zfp: python module zfpy missing (Debian: apt-get install python3-zfpy)")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FZ_FILTER_ID = 310
ZFP_FILTER_ID = 32013
ZFP_MODE_ACCURACY = 3
DEBIAN_PLUGINS = "/usr/lib/x86_64-linux-gnu/hdf5/serial/plugins"

# SZ3 3.3.2, one thread, 11 real f32 fields, same absolute bound (../shared/notes/anchors.md).
SZ3_ANCHOR = {"fz_over_sz3": {1e-2: 0.26, 1e-3: 0.60, 1e-4: 0.81}, "mbps": (212, 499),
              "fz_over_zfp_a": {1e-2: 1.76, 1e-3: 1.76, 1e-4: 1.53},
              "fz_over_zfp_tuned": {1e-2: 1.23, 1e-3: 1.38, 1e-4: 1.30}}


def read_fields(data_dir):
    """Fields from the table of data_dir/README.md: file, dims, dtype and the fill in its notes."""
    fields = []
    with open(os.path.join(data_dir, "README.md"), encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 6 or not re.search(r"\.f(32|64)$", cells[0]):
                continue
            name, dims, dtype, notes = cells[0], cells[1], cells[2], cells[5]
            m = re.search(r"fill=([-+0-9.eE]+|nan)", notes)
            fields.append({
                "file": name,
                "dims": tuple(int(d) for d in dims.split("x")),
                "dtype": {"float32": np.float32, "float64": np.float64}[dtype],
                "fill": float(m.group(1)) if m else None,
            })
    return fields


def median_seconds(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def errors(x, y, fill):
    """Max |x - y| over finite non-fill values, and how many fill values did not come back exactly."""
    keep = np.isfinite(x)
    bad_fill = 0
    if fill is not None:
        isfill = x == x.dtype.type(fill)
        keep &= ~isfill
        bad_fill = int(np.count_nonzero(y[isfill] != x[isfill]))
    uint = {4: np.uint32, 8: np.uint64}[x.itemsize]
    nonfinite = ~np.isfinite(x)
    nonfinite_changed = int(np.count_nonzero(x.view(uint)[nonfinite] != y.view(uint)[nonfinite]))
    err = float(np.max(np.abs(x[keep].astype(np.float64) - y[keep].astype(np.float64)))) if keep.any() else 0.0
    return err, bad_fill + nonfinite_changed


def run_fz(fzsidecar, path, field, rel, repeat):
    dims = "x".join(str(d) for d in field["dims"])
    dtype = "f32" if field["dtype"] == np.float32 else "f64"
    cmd = [fzsidecar, "eval", "--dtype", dtype, "--dims", dims, "--mode", "rel", "--eb", repr(rel),
           "--workers", "1", "--backend", "cpu", "--repeat", str(repeat), "--json"]
    if field["fill"] is not None:
        cmd += ["--fill", repr(field["fill"])]
    env = dict(os.environ, GOMAXPROCS="1")
    out = subprocess.run(cmd + [path], check=True, capture_output=True, text=True, env=env).stdout
    row = json.loads(out.strip().splitlines()[-1])
    raw_mb = os.path.getsize(path) / 1e6
    return {"ratio": row["ratio"], "abs_eb": row["abs_eb"], "max_err": row["max_abs_err"],
            "violations": row["violations"],
            # eval reports GB/s of input; convert to MB/s.
            "c_mbps": row["compress_gbps"] * 1e3, "d_mbps": row["decompress_gbps"] * 1e3, "raw_mb": raw_mb}


def run_zfp(x, tol, fill, repeat, xin=None):
    """ZFP at tolerance tol on xin (default x); errors against x."""
    xin = x if xin is None else xin
    tc, blob = median_seconds(lambda: zfpy.compress_numpy(xin, tolerance=tol), repeat)
    td, y = median_seconds(lambda: zfpy.decompress_numpy(blob), repeat)
    err, bad = errors(x, y, fill)
    return {"tol": tol, "ratio": x.nbytes / len(blob), "max_err": err, "bad_fill": bad,
            "c_mbps": x.nbytes / 1e6 / tc, "d_mbps": x.nbytes / 1e6 / td}


def tune_zfp(x, eb, fill, xin=None):
    """The largest power-of-two tolerance >= eb/2 whose max error stays <= eb (None if none does)."""
    xin = x if xin is None else xin
    best = None
    k = math.floor(math.log2(eb))
    for step in range(0, 12):
        tol = 2.0 ** (k + step)
        y = zfpy.decompress_numpy(zfpy.compress_numpy(xin, tolerance=tol))
        err, _ = errors(x, y, fill)
        if err > eb:
            break
        best = tol
    return best


def hdf5_ratios(x, field, rel, zfp_tol, tmp):
    """FZ and ZFP through their HDF5 filters, one chunk = the whole field: raw bytes / storage bytes."""
    import h5py  # noqa: imported late so the library comparison runs without h5py

    opts_fz = [2, *np.array([rel], "<f8").view("<u4").tolist()]
    if field["fill"] is not None:
        opts_fz += [1, *np.array([field["fill"]], "<f8").view("<u4").tolist()]
    opts_zfp = [ZFP_MODE_ACCURACY, 0, *np.array([zfp_tol], "<f8").view("<u4").tolist()]
    path = os.path.join(tmp, "cmp.h5")
    out = {}
    with h5py.File(path, "w") as f:
        for name, fid, opts in (("fz", FZ_FILTER_ID, opts_fz), ("zfp", ZFP_FILTER_ID, opts_zfp)):
            d = f.create_dataset(name, data=x, chunks=x.shape, compression=fid, compression_opts=tuple(opts))
            out[name] = x.nbytes / d.id.get_storage_size()
    with h5py.File(path, "r") as f:
        for name in ("fz", "zfp"):
            err, bad = errors(x, f[name][...], field["fill"])
            out[name + "_err"], out[name + "_bad_fill"] = err, bad
    os.remove(path)
    return out


def geomean(v):
    v = [a for a in v if a and a > 0]
    return math.exp(sum(math.log(a) for a in v) / len(v)) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"))
    ap.add_argument("--rel", default="1e-2,1e-3,1e-4")
    ap.add_argument("--fzsidecar", default="", help="fzsidecar binary (default: go build ./cmd/fzsidecar into a temp dir)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hdf5", action="store_true", help="also compare through the HDF5 filters (needs build/hdf5-plugins)")
    ap.add_argument("--json", default="", help="write every measurement to this file")
    a = ap.parse_args()
    rels = [float(r) for r in a.rel.split(",")]
    if not os.path.isfile(os.path.join(a.data, "README.md")):
        sys.exit(f"compare_zfp: {a.data}/README.md not found: pass --data DIR with the shared fields")

    tmp = tempfile.mkdtemp(prefix="fz-compare-zfp-")
    try:
        fzsidecar = a.fzsidecar
        if not fzsidecar:
            fzsidecar = os.path.join(tmp, "fzsidecar")
            subprocess.run(["go", "build", "-o", fzsidecar, "./cmd/fzsidecar"], cwd=REPO, check=True)
        if a.hdf5:
            plugdir = os.path.join(REPO, "build", "hdf5-plugins")
            if not os.path.isdir(plugdir):
                sys.exit("compare_zfp: --hdf5 needs the plugin: run `make hdf5` first")
            # Set before h5py loads HDF5; keep Debian's directory so H5Z-ZFP is found too.
            os.environ["HDF5_PLUGIN_PATH"] = plugdir + ":" + DEBIAN_PLUGINS
        rows = []
        for field in read_fields(a.data):
            path = os.path.join(a.data, field["file"])
            x = np.fromfile(path, dtype=field["dtype"]).reshape(field["dims"])
            for rel in rels:
                fz = run_fz(fzsidecar, path, field, rel, a.repeat)
                eb = fz["abs_eb"]
                za = run_zfp(x, eb, field["fill"], a.repeat)
                tol = tune_zfp(x, eb, field["fill"])
                zt = run_zfp(x, tol, field["fill"], a.repeat) if tol else None
                row = {"field": field["file"], "rel": rel, "eb": eb, "fill": field["fill"], "fz": fz,
                       "zfp_a": za, "zfp_tuned": zt}
                if field["fill"] is not None:
                    # ZFP has no fill value: a -1e34 in a 4^d block wipes out its neighbours' precision. The
                    # user's workaround: replace fill by the mean of the valid values, keep the mask elsewhere
                    # (its bytes are not counted here, which favours ZFP).
                    isfill = x == x.dtype.type(field["fill"])
                    xin = x.copy()
                    xin[isfill] = x[~isfill & np.isfinite(x)].mean()
                    tf = tune_zfp(x, eb, field["fill"], xin)
                    row["zfp_filled"] = run_zfp(x, tf, field["fill"], a.repeat, xin) if tf else None
                if a.hdf5:
                    row["hdf5"] = hdf5_ratios(x, field, rel, tol or eb, tmp)
                rows.append(row)
                print(f"{field['file']} REL {rel:g}: fz {fz['ratio']:.2f}, zfp -a {za['ratio']:.2f}, "
                      f"tuned {zt['ratio'] if zt else float('nan'):.2f}", file=sys.stderr)
        print_table(rows, rels, a.hdf5)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"rows": rows, "sz3_anchor": {k: (v if not isinstance(v, dict) else {str(r): x for r, x in v.items()})
                                                        for k, v in SZ3_ANCHOR.items()}}, f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def print_table(rows, rels, hdf5):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    print(f"Measured {time.strftime('%Y-%m-%d')} on {cpu} ({os.cpu_count()} cores), one thread per codec; "
          f"libzfp via zfpy {getattr(zfpy, '__version__', '1.0')}.\n")
    hdr = ("| field | REL | eb | FZ ratio | FZ max err/eb | ZFP -a eb ratio | ZFP -a max err/eb | ZFP tuned ratio (tol) "
           "| ZFP tuned max err/eb |")
    sep = "|---|---|---|---|---|---|---|---|---|"
    if hdf5:
        hdr += " HDF5 FZ / ZFP ratio |"
        sep += "---|"
    hdr += " MB/s FZ c / d | MB/s ZFP c / d (tuned, else -a) |"
    sep += "---|---|"
    print(hdr)
    print(sep)
    for r in rows:
        fz, za, zt = r["fz"], r["zfp_a"], r["zfp_tuned"]
        name = r["field"].rsplit(".", 1)[0] + (" (fill)" if r["fill"] is not None else "")
        zt_ratio = f"{zt['ratio']:.2f} ({zt['tol']:.3g})" if zt else "none ≤ eb"
        zt_err = f"{zt['max_err'] / r['eb']:.3f}" if zt else "–"
        zf = r.get("zfp_filled")
        if zf:
            zt_ratio += f"; fill→mean: {zf['ratio']:.2f}* ({zf['tol']:.3g})"
            zt_err += f"; {zf['max_err'] / r['eb']:.3f}*"
        line = (f"| {name} | {r['rel']:g} | {r['eb']:.4g} | {fz['ratio']:.2f} | {fz['max_err'] / r['eb']:.3f} | "
                f"{za['ratio']:.2f} | {za['max_err'] / r['eb']:.3g} | {zt_ratio} | {zt_err} |")
        if hdf5:
            h = r["hdf5"]
            line += f" {h['fz']:.2f} / {h['zfp']:.2f} |"
        zs = zt or r.get("zfp_filled") or za
        line += f" {fz['c_mbps']:.0f} / {fz['d_mbps']:.0f} | {zs['c_mbps']:.0f} / {zs['d_mbps']:.0f} |"
        print(line)
    print("\n\\* fill replaced by the mean of the valid values before ZFP; the land mask ZFP would need on the side "
          "is not counted in its ratio.\n")
    print("Geometric means over the f32 fields without fill (anchors.md used the same fields plus mpas as f32); "
          "the anchors.md columns and SZ3 are from that earlier run, not re-measured:\n")
    print("| REL | fz / zfp -a eb | fz / zfp tuned | anchors: fz / zfp -a eb | fz / zfp tuned | fz / SZ3 |")
    print("|---|---|---|---|---|---|")
    sel = [r for r in rows if r["fill"] is None and not r["field"].endswith(".f64")]
    for rel in rels:
        rr = [r for r in sel if r["rel"] == rel]
        g_a = geomean([r["fz"]["ratio"] / r["zfp_a"]["ratio"] for r in rr])
        g_t = geomean([r["fz"]["ratio"] / r["zfp_tuned"]["ratio"] for r in rr if r["zfp_tuned"]])
        an = SZ3_ANCHOR
        print(f"| {rel:g} | {g_a:.2f} | {g_t:.2f} | {an['fz_over_zfp_a'].get(rel, float('nan')):.2f} | "
              f"{an['fz_over_zfp_tuned'].get(rel, float('nan')):.2f} | {an['fz_over_sz3'].get(rel, float('nan')):.2f} |")
    allr = [r for r in rows if r["fill"] is None and not r["field"].endswith(".f64")]
    fc = geomean([r["fz"]["c_mbps"] for r in allr])
    fd = geomean([r["fz"]["d_mbps"] for r in allr])
    zc = geomean([(r["zfp_tuned"] or r["zfp_a"])["c_mbps"] for r in allr])
    zd = geomean([(r["zfp_tuned"] or r["zfp_a"])["d_mbps"] for r in allr])
    print(f"\nThroughput, geometric mean over those fields and bounds, MB/s compress / decompress, one thread: "
          f"FZ {fc:.0f} / {fd:.0f}, ZFP (tuned) {zc:.0f} / {zd:.0f}; "
          f"SZ3 3.3.2 {SZ3_ANCHOR['mbps'][0]} / {SZ3_ANCHOR['mbps'][1]} (anchors.md, another run).")


if __name__ == "__main__":
    main()
