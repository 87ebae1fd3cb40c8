#!/usr/bin/env python3
"""A kernel's instructions and stall samples by source line, from an ncu source export.

Usage: ncu_source.py SOURCE_CSV[.gz] [--top N] [--tiles N]

SOURCE_CSV is what `ncu --import REP --page source --csv --print-source cuda,sass`
prints for one kernel launch profiled with `--section SourceCounters` (the
library built with -lineinfo; device_verify.sh source makes it). The export
lists, file by file, each CUDA line ("Line No" set) followed by the SASS
instructions mapped to it. An instruction inlined from one line into another
is listed under both, so summing every SASS row counts it twice or more (v34:
86.1 M warp-instructions against the kernel's 68.1 M): the kernel's totals here
count each SASS address once, and they equal the per-kernel metrics
(smsp__thread_inst_executed.sum: the same thread-instructions to the unit).
A line's figures are inclusive: they count every instruction listed under it,
so a caller's line and its callee's line both hold the callee's instructions
and the lines' shares add up to more than 100 %.

Output: the kernel's warp- and thread-instructions and stall samples (with
--tiles, warp-instructions a tile), each file's share, then the N largest
lines by instructions with their share of the stall samples.
"""
import csv
import gzip
import sys
from collections import Counter

INSTR, THREADS, SAMPLES = "Instructions Executed", "Thread Instructions Executed", "Warp Stall Sampling (All Samples)"


def fail(msg):
    sys.stderr.write(f"ncu_source.py: {msg}\n")
    sys.exit(2)


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            return list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        fail(f"cannot read {path}: {e}")


def aggregate(rows):
    """Returns (unique per-address figures, per-line figures, line texts, kernel name)."""
    addr = {}  # SASS address -> (warp-instructions, thread-instructions, samples)
    lines, text = {}, {}
    col, fname, line, kernel = None, None, None, None
    for r in rows:
        if not r:
            continue
        if r[0] == "File Path":
            fname = r[1].rsplit("/", 1)[-1] if len(r) > 1 else "?"
            line = None
            continue
        if r[0] == "Function Name":
            kernel = r[1] if len(r) > 1 else kernel
            continue
        if r[0] == "Line No":
            try:
                col = {k: r.index(k) for k in (INSTR, THREADS, SAMPLES)}
            except ValueError as e:
                fail(f"the export has no column {e} (profile with --section SourceCounters)")
            continue
        if col is None:
            continue
        if r[0] != "":
            line = (fname, int(r[0])) if r[0].isdigit() else None
            if line is not None:
                text[line] = r[1].strip() if len(r) > 1 else ""
            continue
        if len(r) < 3 or not r[2].startswith("0x"):
            continue
        try:
            v = tuple(int(r[col[k]].replace(",", "")) for k in (INSTR, THREADS, SAMPLES))
        except (ValueError, IndexError):
            fail(f"a SASS row at {r[2]} has no numbers where the header says: {r[:6]}")
        if r[2] in addr and addr[r[2]] != v:
            fail(f"SASS address {r[2]} is listed twice with different counts ({addr[r[2]]} and {v})")
        addr[r[2]] = v
        if line is not None:
            lines.setdefault(line, set()).add(r[2])
    if col is None:
        fail("no 'Line No' header: not a `--page source --csv` export")
    if not addr:
        fail("no SASS rows: export with --print-source cuda,sass")
    return addr, lines, text, kernel


def main(argv):
    args, top, tiles = [], 30, 0
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--top", "--tiles"):
            if i + 1 >= len(argv) or not argv[i + 1].isdigit() or int(argv[i + 1]) <= 0:
                fail(f"{a} expects a positive number")
            if a == "--top":
                top = int(argv[i + 1])
            else:
                tiles = int(argv[i + 1])
            i += 2
            continue
        args.append(a)
        i += 1
    if len(args) != 1:
        fail("usage: ncu_source.py SOURCE_CSV[.gz] [--top N] [--tiles N]")
    addr, lines, text, kernel = aggregate(read(args[0]))
    W = sum(v[0] for v in addr.values())
    TH = sum(v[1] for v in addr.values())
    S = sum(v[2] for v in addr.values()) or 1
    if W == 0:
        fail("the export counts no instructions (was the kernel run?)")
    if kernel:
        # ncu names template arguments with casts: decode_warp_kernel<float, (int)2, (bool)0>(Geo, ...)
        name = kernel
        for cast in ("(int)", "(bool)", "(unsigned int)", "(long long)", "(unsigned long long)"):
            name = name.replace(cast, "")
        print(f"kernel {name.split('(')[0].strip()}")
    per_tile = f", {W / tiles:,.0f} a tile of {tiles:,}" if tiles else ""
    print(f"warp-instructions {W:,}{per_tile}; thread-instructions {TH:,}; stall samples {S:,}")
    files_w, files_s = Counter(), Counter()
    line_w, line_s = Counter(), Counter()
    for ln, ads in lines.items():
        line_w[ln] = sum(addr[a][0] for a in ads)
        line_s[ln] = sum(addr[a][2] for a in ads)
    # a file's share counts each address once, under the file of any line that lists it
    seen = {}
    for ln, ads in lines.items():
        for a in ads:
            seen.setdefault((ln[0], a), addr[a])
    for (f, _), v in seen.items():
        files_w[f] += v[0]
        files_s[f] += v[2]
    print("by file (an instruction inlined from another file counts in both):")
    for f, w in files_w.most_common():
        if w:
            print(f"  {f:30} {100 * w / W:5.1f} % instr  {100 * files_s[f] / S:5.1f} % samples")
    print(f"the {top} largest lines (inclusive: a caller's line holds what is inlined into it):")
    for ln, w in line_w.most_common(top):
        print(f"{100 * w / W:5.1f} % {100 * line_s[ln] / S:5.1f} % samples  {ln[0]}:{ln[1]}  {text.get(ln, '')[:90]}")


if __name__ == "__main__":
    main(sys.argv[1:])
