"""Checks what a GPU-resident run stored: for every DIR/<step>.raw the
producer dumped (DIR/step-<step>.raw), the stored container (fzsidecar get --compressed) must be
byte-identical to `fzsidecar compress --backend cpu` of the same bytes, and
the decoded field within the bound.

    python3 check_stored.py FZSIDECAR SINK RUN VAR DIR DIMS REL
"""
import os
import subprocess
import sys

import numpy as np

fzs, sink, run, var, d, dims, rel = sys.argv[1:8]
shape = tuple(int(x) for x in dims.split("x"))
steps = sorted(int(f[5:-4]) for f in os.listdir(d) if f.startswith("step-") and f.endswith(".raw"))
bad = 0
worst = 0.0
for s in steps:
    raw = os.path.join(d, f"step-{s}.raw")
    stored, cpu, dec = raw + ".stored.fz", raw + ".cpu.fz", raw + ".dec"
    subprocess.run([fzs, "get", "--sink", sink, "--run", run, "--var", var, "--step", str(s), "--compressed", "-o", stored], check=True)
    subprocess.run([fzs, "compress", "--backend", "cpu", "--dtype", "f32", "--dims", dims, "--mode", "rel", "--eb", rel, "-o", cpu, raw],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([fzs, "get", "--sink", sink, "--run", run, "--var", var, "--step", str(s), "--backend", "cpu", "-o", dec], check=True)
    same = open(stored, "rb").read() == open(cpu, "rb").read()
    x = np.fromfile(raw, np.float32).reshape(shape).astype(np.float64)
    y = np.fromfile(dec, np.float32).reshape(shape).astype(np.float64)
    eb = float(rel) * (x.max() - x.min())
    err = np.abs(x - y).max()
    worst = max(worst, err / eb if eb > 0 else 0)
    if not same or err > eb:
        bad += 1
    print(f"{run}/{var} step {s}: identical to CPU codec: {same}; max err {err:.4g} <= bound {eb:.4g}: {err <= eb}")
print(f"CHECK {run}: {len(steps)} steps, {bad} bad, worst err/bound {worst:.3f}")
sys.exit(1 if bad or not steps else 0)
