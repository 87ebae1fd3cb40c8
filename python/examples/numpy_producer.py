#!/usr/bin/env python3
"""A numpy mini-app handing every N-th step to an fzsidecar, written in place.

A 3-D diffusing blob: on an output step the new field is computed straight
into the shared-memory segment (``snap.array``), published, and the result
collected later (up to 4 in flight).

    python3 numpy_producer.py [--url U] [--shm-dir D] [--run R] [--shape 32,64,64]
                              [--steps 40] [--every 10] [--bound 1e-3] [--dump DIR]

Prints "stored step S key K ratio R max_err E abs_eb B" per step; exits 1 if
any snapshot failed. --dump DIR writes the published fields as
DIR/step-S.raw (C order, little-endian float32) for comparison with
``fzsidecar get``.
"""

import argparse
import collections
import os
import sys

import numpy as np

from fzsidecar.producer import Producer, ProducerError


def step_field(u, out):
    """One explicit diffusion step of u into out (fixed boundary)."""
    out[...] = u
    out[1:-1, 1:-1, 1:-1] = u[1:-1, 1:-1, 1:-1] + 0.1 * (
        u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
        + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:] - 6 * u[1:-1, 1:-1, 1:-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url")
    ap.add_argument("--shm-dir")
    ap.add_argument("--run", default="numpy-blob")
    ap.add_argument("--shape", default="32,64,64")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--bound", type=float, default=1e-3)
    ap.add_argument("--dump")
    a = ap.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    z, y, x = np.meshgrid(*[np.linspace(0, 1, n, dtype=np.float32) for n in shape], indexing="ij")
    u = (100 * np.exp(-30 * ((z - 0.5) ** 2 + (y - 0.4) ** 2 + (x - 0.6) ** 2))).astype(np.float32)
    tmp = np.empty_like(u)
    pending = collections.deque()
    failures = 0

    def collect(block):
        nonlocal failures
        while pending:
            step, snap = pending[0]
            try:
                r = snap.wait(300) if block else snap.poll()
            except ProducerError as e:
                print(f"FAILED step {step}: [{e.code}] {e.message}", flush=True)
                failures += 1
                r = True
            if r is None:
                return
            if r is not True:
                print(f"stored step {step} key {r.key} ratio {r.ratio:.2f} max_err {r.max_abs_err:.6g} abs_eb {r.abs_eb:.6g}",
                      flush=True)
            pending.popleft()
            snap.free()
            if not block:
                continue
            return

    with Producer(a.url, shm_dir=a.shm_dir, reuse_segments=2, publish_timeout=120) as p:
        for step in range(1, a.steps + 1):
            if step % a.every:
                step_field(u, tmp)
                u, tmp = tmp, u
                continue
            collect(False)
            while len(pending) >= 4:
                collect(True)
            try:
                snap = p.begin(a.run, "density", step, shape, "f4", mode="abs", bound=a.bound)
            except ProducerError as e:
                print(f"FAILED step {step}: begin: [{e.code}] {e.message}", flush=True)
                failures += 1
                step_field(u, tmp)
                u, tmp = tmp, u
                continue
            field = snap.array
            step_field(u, field)           # the new field goes straight into the segment
            u[...] = field                 # the simulation keeps its own copy for the next step
            if a.dump:
                field.tofile(os.path.join(a.dump, f"step-{step}.raw"))
            del field
            snap.publish()
            print(f"published step {step}", flush=True)
            pending.append((step, snap))
        while pending:
            collect(True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
