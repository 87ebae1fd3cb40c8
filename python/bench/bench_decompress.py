#!/usr/bin/env python3
"""Decompression throughput of fzsidecar.decompress (libfz through ctypes).

    python3 bench_decompress.py [--fz FILE] [--mib 256] [--repeat 5] [--json]
    python3 bench_decompress.py --fz FILE --serve

Without --fz it makes a smooth float32 field of --mib MiB, compresses it with
fzsidecar.compress (rel 1e-3) and decodes that. It reports the best and
median of --repeat decodes, each into a fresh numpy array (the plain call)
and into one reused array (out=). `go test ./python/ -bench Decompress`
runs this script next to the Go codec on the same container, with --serve:
it then reads "fresh" or "reused" lines on stdin and answers each with the
wall-clock and CPU seconds (user + system, whole process) one such decode
took, so that the Go and Python decodes alternate and share the machine's
conditions (docs/PYTHON.md).
"""

import argparse
import json
import resource
import statistics
import sys
import time

import numpy as np

import fzsidecar


def make_field(mib: int) -> np.ndarray:
    n = mib * 2**20 // 4
    nx = ny = 512
    nz = max(1, n // (nx * ny))
    z = np.arange(nz, dtype=np.float32)[:, None, None]
    y = np.arange(ny, dtype=np.float32)[None, :, None]
    x = np.arange(nx, dtype=np.float32)[None, None, :]
    f = np.sin(0.02 * x) * np.cos(0.03 * y) + 0.01 * z
    rng = np.random.default_rng(0)
    return (f + 0.001 * rng.standard_normal(f.shape, dtype=np.float32)).astype(np.float32)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def serve(blob: bytes, out: np.ndarray) -> int:
    print("ready", flush=True)
    for line in sys.stdin:
        how = line.strip()
        c = cpu()
        t = time.perf_counter()
        if how == "fresh":
            d = fzsidecar.decompress(blob)
        elif how == "reused":
            d = fzsidecar.decompress(blob, out=out)
        else:
            print(f"error: unknown request {how!r}: expected fresh or reused", flush=True)
            return 2
        wall = time.perf_counter() - t
        print(wall, cpu() - c, flush=True)
        del d
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fz", help="container to decode (default: make one)")
    ap.add_argument("--mib", type=int, default=256, help="field size without --fz (default 256)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--serve", action="store_true", help="time one decode per line of stdin (for the Go benchmark)")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be >= 1")
    if a.fz:
        with open(a.fz, "rb") as f:
            blob = f.read()
    else:
        blob = fzsidecar.compress(make_field(a.mib), eb=1e-3, mode="rel")
    info = fzsidecar.inspect(blob)
    fresh, reused = [], []
    out = fzsidecar.empty(info.shape, info.dtype)  # as decompress allocates: 64-byte aligned
    fzsidecar.decompress(blob, out=out)  # warm-up: library load, page faults of out
    if a.serve:
        return serve(blob, out)
    for _ in range(a.repeat):
        t = time.perf_counter()
        d = fzsidecar.decompress(blob)
        fresh.append(time.perf_counter() - t)
        del d
        t = time.perf_counter()
        fzsidecar.decompress(blob, out=out)
        reused.append(time.perf_counter() - t)
    mb = info.raw_bytes / 1e6
    r = {
        "raw_bytes": info.raw_bytes,
        "compressed_bytes": info.compressed_bytes,
        "ratio": info.ratio,
        "fresh_best_mb_s": mb / min(fresh),
        "fresh_median_mb_s": mb / statistics.median(fresh),
        "reused_best_mb_s": mb / min(reused),
        "reused_median_mb_s": mb / statistics.median(reused),
        "repeat": a.repeat,
    }
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{info.raw_bytes / 2**20:.0f} MiB {info.dtype} {info.shape}, ratio {info.ratio:.2f}")
        print(f"decompress, fresh array:   best {r['fresh_best_mb_s']:.0f} MB/s, median {r['fresh_median_mb_s']:.0f} MB/s")
        print(f"decompress(out=reused):    best {r['reused_best_mb_s']:.0f} MB/s, median {r['reused_median_mb_s']:.0f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
