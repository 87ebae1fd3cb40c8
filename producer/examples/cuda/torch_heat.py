"""A PyTorch (or CuPy) heat-equation mini-app whose field stays on the GPU:
every --every steps it hands the field to fzsidecar without a host copy
(Producer.put on a CUDA tensor / CuPy array: __cuda_array_interface__,
CUDA IPC; docs/PRODUCERS.md, GPU-resident snapshots).

    python3 torch_heat.py [--lib cupy] [--n 2048] [--steps 100] [--every 10] [--dump DIR]

--dump writes each published field to DIR/step-<step>.raw (for comparing what
was stored with the CPU codec). Needs `fzsidecar serve --backend gpu`.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from fzsidecar.producer import Producer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=("torch", "cupy"), default="torch")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--bound", type=float, default=1e-3)
    ap.add_argument("--run", default="torchheat")
    ap.add_argument("--dump")
    a = ap.parse_args()
    if a.lib == "torch":
        import torch
        x = torch.linspace(0, 1, a.n, device="cuda")
        u = 300 + 50 * torch.exp(-40 * ((x[None, :] - 0.3) ** 2 + (x[:, None] - 0.6) ** 2))
        u = u.to(torch.float32).contiguous()

        def step(u):
            v = u.clone()
            v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
            return v

        def host(u):
            return u.cpu().numpy()
        stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    else:
        import cupy as cp
        x = cp.linspace(0, 1, a.n, dtype=cp.float32)
        u = (300 + 50 * cp.exp(-40 * ((x[None, :] - 0.3) ** 2 + (x[:, None] - 0.6) ** 2))).astype(cp.float32)

        def step(u):
            v = u.copy()
            v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
            return v

        def host(u):
            return cp.asnumpy(u)
        stream = lambda: cp.cuda.get_current_stream().ptr  # noqa: E731
    n_ok = n_fail = 0
    stall = 0.0
    with Producer() as p:
        for s in range(1, a.steps + 1):
            u = step(u)
            if s % a.every:
                continue
            t = time.perf_counter()
            snap = p.put(a.run, "temperature", s, u, mode="rel", bound=a.bound) if a.lib == "torch" else \
                p.put_device(a.run, "temperature", s, u, mode="rel", bound=a.bound, stream=stream())
            if a.dump:
                host(u).tofile(os.path.join(a.dump, f"step-{s}.raw"))
            try:
                r = snap.wait(120)
                n_ok += 1
                print(f"stored step {r.step} key {r.key} ratio {r.ratio:.1f} max_err {r.max_abs_err:.3g} (bound {r.abs_eb:.3g})")
            except Exception as e:  # reported, the run goes on
                n_fail += 1
                print(f"step {s}: {e}", file=sys.stderr)
            finally:
                stall += time.perf_counter() - t
                snap.free()
    print(f"{a.lib}_heat {a.n}x{a.n}: {n_ok} stored, {n_fail} failed, publish-to-result {stall * 1e3 / max(n_ok + n_fail, 1):.3f} ms/snapshot")
    sys.exit(1 if n_fail else 0)


if __name__ == "__main__":
    main()
