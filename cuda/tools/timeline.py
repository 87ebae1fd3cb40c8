# timeline.py TRACE [N]: from `FZ_GPU_TRACE=1` stderr of `fzsidecar bench e2e`, how busy the upload stream was
# (gaps between uploads) and how long lanes sat outside compress; the window is the last N snapshots (256).
import re, sys, statistics as st
txt = open(sys.argv[1]).read()
n = int(sys.argv[2]) if len(sys.argv) > 2 else 256
up = [(float(a), float(d)) for d, a in re.findall(r"upload \d+ MB ([\d.]+)ms = [\d.]+ GB/s at ([\d.]+)ms", txt)]
up = sorted(up)[-n:]
gaps = []
e = up[0][0] + up[0][1]
for a, d in up[1:]:
    gaps.append(max(0.0, a - e)); e = max(e, a + d)
busy = sum(d for _, d in up); span = e - up[0][0]
print(f"uploads {len(up)}: span {span:.1f} ms, busy {busy:.1f} ms ({100*busy/span:.1f}%), gaps {sum(gaps):.1f} ms, >1ms: {sum(g>1 for g in gaps)}, median upload {st.median(d for _,d in up):.2f} ms")
lanes = {}
for lid, s0, p, e1 in re.findall(r"lane (\d+): host start ([\d.]+)ms params ([\d.]+)ms end ([\d.]+)ms", txt):
    lanes.setdefault(int(lid), []).append((float(s0), float(p), float(e1)))
out = []; inside = []
for lid, v in sorted(lanes.items()):
    v = sorted(v)[-n // max(1, len(lanes)):]
    for (s0, p, e1), (s1, _, _) in zip(v, v[1:]):
        out.append(s1 - e1)
    inside += [e1 - s0 for s0, _, e1 in v]
if out:
    q = sorted(out)
    print(f"lanes {len(lanes)}: time in compress median {st.median(inside):.2f} ms; idle between snapshots median {st.median(q):.2f} p90 {q[int(.9*len(q))]:.2f} max {q[-1]:.2f} ms, sum {sum(q):.1f} ms")
