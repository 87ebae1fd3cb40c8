#!/usr/bin/env python3
"""Per-kernel sums of an ncu metrics log (device_verify.sh profile).

Input: ncu's default text output for `--metrics ...` runs, each run preceded by a
line `=== LABEL` (the field, version and bound). ncu prints each value with a
unit that it scales per value (ns/us/ms, byte/Kbyte/Mbyte/Gbyte), so every value
is normalized here before kernels' launches are averaged.
Output: one line per label and kernel (launches of the same kernel averaged):
time in µs, thread-instructions (M), registers, grid, achieved occupancy (%),
DRAM bytes read and written (MB). Kernels under --min-us are left out.
"""
import re
import sys

SCALE = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}
KERNEL = re.compile(r"^  (?:void )?([A-Za-z_][\w:]*(?:<[^(]*>)?)\(")


def parse(lines):
    rows, order, label, kernel = {}, [], None, None
    for line in lines:
        if line.startswith("=== "):
            label, kernel = line[4:].strip(), None
            continue
        m = KERNEL.match(line)
        if m:
            kernel = m.group(1)
            key = (label, kernel)
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key]["launches"] = rows[key].get("launches", 0) + 1
            continue
        parts = line.split()
        if kernel is None or len(parts) < 2 or "__" not in parts[0]:
            continue
        try:
            value = float(parts[-1].replace(",", ""))
        except ValueError:
            continue
        unit = parts[1] if len(parts) >= 3 else ""
        d = rows[(label, kernel)]
        d[parts[0]] = d.get(parts[0], 0.0) + value * SCALE.get(unit, 1.0)
    return rows, order


def main():
    args = sys.argv[1:]
    min_us = 3.0
    if len(args) >= 2 and args[0] == "--min-us":
        min_us, args = float(args[1]), args[2:]
    if len(args) != 1:
        sys.exit("usage: ncu_sum.py [--min-us N] NCU_LOG")
    with open(args[0]) as f:
        rows, order = parse(f)
    for key in order:
        d = rows[key]
        n = d["launches"]
        t = d.get("gpu__time_duration.sum", 0.0) / n
        if t < min_us:
            continue
        avg = lambda k, s=1.0: d.get(k, 0.0) / n / s
        print(f"{key[0]:<22} {key[1][:44]:<44} {t:8.1f} us  thr {avg('smsp__thread_inst_executed.sum', 1e6):8.1f} M"
              f"  regs {avg('launch__registers_per_thread'):4.0f}  grid {avg('launch__grid_size'):7.0f}"
              f"  occ {avg('sm__warps_active.avg.pct_of_peak_sustained_active'):5.1f} %"
              f"  dram rd {avg('dram__bytes_read.sum', 1e6):6.0f} MB wr {avg('dram__bytes_write.sum', 1e6):6.0f} MB  x{n}")


if __name__ == "__main__":
    main()
