#!/usr/bin/env python3
"""Each kernel's instructions and divergence checks, from SASS listings.

Usage: sass_guards.py SASS [SASS_B] [--kernel REGEX] [--lines]

SASS is what `nvdisasm -gi -c CUBIN` (source lines with their inlining chains,
from a -lineinfo build; or -g, innermost lines only) or `cuobjdump -sass LIB`
prints, plain or gzipped. Where ptxas cannot prove a warp
converged at a shuffle, vote or reduce, it puts a divergence check before it
(`BRA.DIV`, with a `UMOV` of the mask) and compiles a collective copy of the code
that follows (`WARPSYNC.COLLECTIVE`) for the divergent case, which is cold but
part of the kernel: v48 (PERF.md) found the padded fill kernel's 15 % more
instructions since v46 to be such checks, on every shuffle of the walk's second
pass, none of them there in v45.

Output, one line per kernel matching REGEX (default: all): instructions,
checks and collective blocks; with SASS_B, both listings' figures side by side
for the kernels in both, only those that differ. With --lines (nvdisasm -g
input), each check's address, the warp-wide instruction it guards (the first
shuffle, vote, reduce, match or warp sync after it) and that instruction's
source lines outside CUDA's own headers, innermost first (up to three: the
line, its caller's, theirs).
"""
import gzip
import re
import signal
import sys

FUNC_NVDISASM = re.compile(r"^//-+ \.text\.(\S+)\s+-+")
FUNC_CUOBJDUMP = re.compile(r"^\s*Function : (\S+)")
ARCH = re.compile(r"^\s*(?:code for|\.target)\s+(sm_\d+)")
LINE = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
WARPWIDE = ("SHFL", "VOTE", "REDUX", "MATCH", "WARPSYNC", "NOP", "BAR")
CUDA_HEADER = re.compile(r"^(sm_\d+_.*|.*_functions|.*intrinsics.*|cuda_.*)\.h(pp)?$")
INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def read(path):
    """{kernel: [(address, instruction, source)]} in listing order; source is
    the instruction's (file, line) chain, innermost first (empty without line
    info): nvdisasm -gi writes one `//## File` line per inlining level.
    A listing of several architectures (cuobjdump of the Makefile's default
    sm_80 + sm_90 build) names each kernel with its architecture, so that
    the two machine codes are not counted as one."""
    opener = gzip.open if path.endswith(".gz") else open
    funcs, cur, chain, fresh, arch = {}, None, [], True, ""
    with opener(path, "rt", errors="replace") as f:
        for text in f:
            m = ARCH.match(text)
            if m:
                arch = m.group(1)
                continue
            m = FUNC_NVDISASM.match(text) or FUNC_CUOBJDUMP.match(text)
            if m:
                cur, chain, fresh = funcs.setdefault((m.group(1), arch), []), [], True
                continue
            m = LINE.match(text)
            if m:
                if fresh:  # a new chain starts after an instruction
                    chain, fresh = [], False
                chain.append((m.group(1).rsplit("/", 1)[-1], int(m.group(2))))
                continue
            m = INSTR.match(text)
            if m and cur is not None:
                cur.append((int(m.group(1), 16), m.group(2), tuple(chain)))
                fresh = True
    if not funcs:
        sys.exit(f"sass_guards.py: {path} lists no kernel (expected `nvdisasm -g -c` or `cuobjdump -sass` output)")
    one = len({a for _, a in funcs}) == 1
    return {name if one else f"{name} ({a or 'no arch'})": v for (name, a), v in funcs.items()}


def figures(instrs):
    checks = sum(1 for _, op, _ in instrs if "BRA.DIV" in op)
    collective = sum(1 for _, op, _ in instrs if op.startswith("WARPSYNC.COLLECTIVE"))
    return len(instrs), checks, collective


def guarded(instrs):
    """(address, guarded instruction, its source) for every check; the source
    is up to three (file, line), innermost first, outside CUDA's headers."""
    out = []
    for i, (addr, op, _) in enumerate(instrs):
        if "BRA.DIV" not in op:
            continue
        after = instrs[i + 1 : i + 41]
        hit = next((x for x in after if x[1].startswith(WARPWIDE)), after[0] if after else (addr, "?", ()))
        user = [loc for loc in hit[2] if not CUDA_HEADER.match(loc[0])] or list(hit[2][:1])
        out.append((addr, hit[1].split()[0], user[:3]))
    return out


def main(argv):
    args, kernel, lines = [], None, False
    it = iter(argv)
    for a in it:
        if a == "--kernel":
            kernel = re.compile(next(it, ""))
        elif a == "--lines":
            lines = True
        elif a.startswith("-"):
            sys.exit(f"sass_guards.py: unknown option {a}\n{__doc__}")
        else:
            args.append(a)
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    lists = [read(p) for p in args]
    keep = lambda name: kernel is None or kernel.search(name)
    names = [n for n in sorted(set.intersection(*(set(l) for l in lists))) if keep(n)]
    if not names:
        sys.exit(f"sass_guards.py: no kernel{' in both listings' if len(lists) == 2 else ''} matches {kernel.pattern if kernel else 'any name'}")
    if len(lists) == 1:
        for name in names:
            instrs = lists[0][name]
            n, c, w = figures(instrs)
            print(f"{name[:90]}  instructions {n}  checks {c}  collective {w}")
            if lines:
                for addr, op, src in guarded(instrs):
                    where = " < ".join(f"{f}:{ln}" for f, ln in src) if src else "no line info"
                    print(f"    check at {addr:#06x} before {op:<12} {where}")
        return
    a, b = lists
    same = 0
    for name in names:
        fa, fb = figures(a[name]), figures(b[name])
        if fa != fb:
            print(f"{name[:90]}  instructions {fa[0]} -> {fb[0]}  checks {fa[1]} -> {fb[1]}  collective {fa[2]} -> {fb[2]}")
        else:
            same += 1
    print(f"{same} of {len(names)} kernels the same")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    main(sys.argv[1:])
