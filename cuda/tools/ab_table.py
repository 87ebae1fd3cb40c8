#!/usr/bin/env python3
"""ab_table.py DIR PREFIX SIDE...: device_verify.sh ab's table. DIR holds
PREFIX-<side><k>.json for each side (a, b, c) and k = 1, 2 (`fzsidecar bench
--json`, the sides run a1 b1 (c1) a2 b2 (c2)); one line per case: A's compress
and decompress GB/s (the better of its two medians), each other side's and its
ratio to A, and the bound violations of all runs."""
import json
import sys


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: ab_table.py DIR PREFIX SIDE... (the first side is A)")
    o, prefix, sides = argv[1], argv[2], argv[3:]
    runs = {}
    for s in sides:
        for k in "12":
            path = f"{o}/{prefix}-{s}{k}.json"
            try:
                runs[s + k] = json.load(open(path))["cases"]
            except (OSError, ValueError, KeyError) as e:
                sys.exit(f"ab_table.py: {path}: {e}")
    n = len(runs[sides[0] + "1"])
    for r, cases in runs.items():
        if len(cases) != n or any(c["field"] != d["field"] or c["rel"] != d["rel"] for c, d in zip(cases, runs[sides[0] + "1"])):
            sys.exit(f"ab_table.py: run {r} has other cases than {sides[0]}1")
    a, others = sides[0], sides[1:]
    head = f"{'field':<36} {'rel':>7}  {a.upper() + ' comp':>8}"
    head += "".join(f" {x.upper() + ' comp':>8} {x.upper() + '/' + a.upper():>5}" for x in others)
    head += f"  {a.upper() + ' dec':>8}" + "".join(f" {x.upper() + ' dec':>8} {x.upper() + '/' + a.upper():>5}" for x in others)
    print(head + "  viol")
    for i, c in enumerate(runs[a + "1"]):
        def best(s, k):
            return max(runs[s + "1"][i][k], runs[s + "2"][i][k]) / 1e9
        line = f"{c['field'][:36]:<36} {c['rel']:>7g}"
        for k in ("compress_bytes_per_s", "decompress_bytes_per_s"):
            ref = best(a, k)
            line += f"  {ref:8.1f}" + "".join(f" {best(x, k):8.1f} {best(x, k) / ref:5.2f}" for x in others)
        v = sum(runs[r][i]["bound_violations"] for r in runs)
        print(line + f"  {v}")


if __name__ == "__main__":
    main(sys.argv)
