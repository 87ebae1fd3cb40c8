#!/usr/bin/env python3
"""The README's side-by-side table (#30) from one device call's outputs.

Usage: sidebyside.py PEERS_TXT BENCH_JSON [--run NAME=KEY[,KEY]]...

PEERS_TXT: ../shared/peers/compare.sh's output (lines "field rel peer ratio
compress_GBps decompress_GBps check"; other lines are skipped).
BENCH_JSON: `fzsidecar bench --json` runs gathered as {"runs": {KEY: run}}
(device_verify.sh compare writes it; cuda/bench/h200-v*.json are such files).
The table takes three sets of runs of the same call, named
  v1    version 1 with box tiles: smooth3d, csm_b003, era5, hst, hyg_stars_x
  v2    version 2: hst, hyg_stars_x
  flat  version 1 with flat tiles: era5
each the key of one run or several (comma-separated: the better of their
medians, as an A/B takes them). By default NAME's key is the file's
"side_by_side" entry for NAME, else NAME itself.

Prints one markdown row per field, row kind and bound: ours, cuSZp plain,
cuSZp outlier and FZ-GPU as ratio / compress / decompress GB/s, then ours ÷
the faster peer in compress and decompress (#30 asks >= 1.2) and our ratio ÷
cuSZp's better mode (asks >= 1.0), met in bold. A quotient that would round
onto its target without meeting it gets three decimals (1.199).
"""
import json
import re
import sys

# (row label, run set, our field's name prefix, compare.sh's field prefix)
ROWS = [
    ("smooth3d", "v1", "smooth3d", "smooth3d"),
    ("csm_b003", "v1", "csm_b003", "csm_b003"),
    ("era5, flat tiles", "flat", "era5", "era5"),
    ("era5, box tiles", "v1", "era5", "era5"),
    ("hst, version 1", "v1", "hst", "hst"),
    ("hst, version 2", "v2", "hst", "hst"),
    ("hyg_stars_x, version 1", "v1", "hyg_stars_x", "hyg_stars_x"),
    ("hyg_stars_x, version 2", "v2", "hyg_stars_x", "hyg_stars_x"),
]
RELS = ((1e-2, "1e-2"), (1e-3, "1e-3"), (1e-4, "1e-4"))
PEERS = ("cuszp-plain", "cuszp-outlier", "fzgpu")
PEER_LINE = re.compile(r"^(\S+) (1e-[0-9]) (\S+) ([\d.]+) ([\d.]+) ([\d.]+) ")


def fail(msg):
    sys.exit(f"sidebyside.py: {msg}")


def read_peers(path):
    peers = {}
    with open(path) as f:
        for line in f:
            m = PEER_LINE.match(line)
            if m:
                peers[(m.group(1), m.group(2), m.group(3))] = tuple(float(m.group(i)) for i in (4, 5, 6))
    if not peers:
        fail(f"{path}: no peer lines (expected compare.sh's output: field rel peer ratio compress decompress check)")
    return peers


def peer(peers, prefix, rel, name):
    hits = [v for (f, r, p), v in peers.items() if f.startswith(prefix) and r == rel and p == name]
    if len(hits) != 1:
        fail(f"peers: {len(hits)} lines for {prefix} {rel} {name}, expected 1")
    return hits[0]


def ours(runs, keys, prefix, rel):
    """ratio, compress and decompress GB/s: the better of the runs' medians."""
    best = None
    for k in keys:
        if k not in runs:
            fail(f"bench JSON has no run {k!r} (it has {', '.join(sorted(runs))})")
        hits = [c for c in runs[k]["cases"] if c["field"].startswith(prefix) and abs(c["rel"] - rel) < 1e-12]
        if len(hits) != 1:
            fail(f"run {k}: {len(hits)} cases for {prefix} at {rel:g}, expected 1")
        c = hits[0]
        if c["bound_violations"]:
            fail(f"run {k}: {prefix} at {rel:g} has {c['bound_violations']} bound violations")
        got = (c["ratio"], c["compress_bytes_per_s"] / 1e9, c["decompress_bytes_per_s"] / 1e9)
        best = got if best is None else (got[0], max(best[1], got[1]), max(best[2], got[2]))
    return best


def quotient(q, target):
    s = f"{q:.2f}"
    if q < target and float(s) >= target:
        s = f"{q:.3f}"
    return f"**{s}**" if q >= target else s


def cell(t):
    return f"{t[0]:.2f} / {t[1]:.0f} / {t[2]:.0f}"


def main(argv):
    args, named = [], {}
    it = iter(argv)
    for a in it:
        if a == "--run":
            name, _, keys = next(it, "").partition("=")
            if name not in ("v1", "v2", "flat") or not keys:
                fail(f"--run {name}={keys}: expected v1=KEY, v2=KEY or flat=KEY (KEY[,KEY] for the better of two)")
            named[name] = keys.split(",")
        else:
            args.append(a)
    if len(args) != 2:
        fail("usage: sidebyside.py PEERS_TXT BENCH_JSON [--run NAME=KEY[,KEY]]...")
    peers = read_peers(args[0])
    with open(args[1]) as f:
        doc = json.load(f)
    if "runs" not in doc:
        fail(f"{args[1]}: expected {{\"runs\": {{KEY: bench run}}}}")
    runs, default = doc["runs"], doc.get("side_by_side", {})
    for name in ("v1", "v2", "flat"):
        if name not in named:
            keys = default.get(name, name)
            named[name] = keys if isinstance(keys, list) else [keys]
    for label, kind, ours_prefix, peer_prefix in ROWS:
        for rel, rs in RELS:
            o = ours(runs, named[kind], ours_prefix, rel)
            p = [peer(peers, peer_prefix, rs, n) for n in PEERS]
            fc, fd = max(x[1] for x in p), max(x[2] for x in p)
            br = max(p[0][0], p[1][0])
            print(f"| {label} | {rs} | {cell(o)} | {cell(p[0])} | {cell(p[1])} | {cell(p[2])} | "
                  f"{quotient(o[1] / fc, 1.2)} | {quotient(o[2] / fd, 1.2)} | {quotient(o[0] / br, 1.0)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
