#!/bin/bash
# GPU-resident snapshots on a GPU machine, all in one go (issue #31):
# builds libfzgpu, the CUDA examples; runs the cuda IPC tests, the CUDA C
# stencil and the PyTorch/CuPy producers against `fzsidecar serve --backend
# gpu` (every step checked against the CPU codec), a producer killed while
# the sidecar reads its buffer, and the throughput bench (devbench, with
# `fzsidecar bench` for the kernel-only rate of the same field).
#
# Expects, from this machine (no Go, no libnats there): R (default .devrun)
# with fzsidecar and cuda.test (CGO_ENABLED=0 builds) and lib/ holding
# libfzproducer.so and libnats with its dependencies. Logs go to $OUT.
set -u
R=${R:-.devrun}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$R/lib:${LD_LIBRARY_PATH:-}
export FZ_LIBFZPRODUCER=$PWD/$R/lib/libfzproducer.so
FZS=$PWD/$R/fzsidecar
E=producer/examples/cuda
step() { echo "=== $* ($(date +%T))"; }
step build
nvidia-smi -L
if [ -f "$R/libfzgpu.so" ] && [ -z "${REBUILD:-}" ]; then mkdir -p cuda/build && cp "$R/libfzgpu.so" cuda/build/
else make -C cuda >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }; cp cuda/build/libfzgpu.so "$R/"; fi
for x in stencil devbench; do
  nvcc -O2 -arch=sm_90 -Iproducer/include "$E/$x.cu" -L"$R/lib" -lfzproducer -Xlinker -rpath-link="$R/lib" -o "/tmp/$x" \
    >>"$OUT/build.log" 2>&1 || { echo "nvcc $x failed"; tail -30 "$OUT/build.log"; }
done

step cuda tests
(cd cuda && FZ_CUDA_LIB=$PWD/build/libfzgpu.so timeout 240 ../$R/cuda.test -test.run 'IPC|Device' -test.v -test.count=1) \
  >"$OUT/cuda_test.log" 2>&1
echo "cuda tests rc=$?"; grep -E "^(---|ok|FAIL|PASS)|ipc_test" "$OUT/cuda_test.log" | head -30

start_serve() {
  rm -rf /dev/shm/fzsidecar /tmp/fzdata
  "$FZS" serve --backend gpu --sink /dev/shm/sink --data-dir /tmp/fzdata --metrics-listen off "$@" >>"$OUT/serve.log" 2>&1 &
  SERVE=$!
  for i in $(seq 100); do [ -f /dev/shm/fzsidecar/.fzsidecar-auth ] && sleep 0.5 && return 0; sleep 0.2; done
  echo "serve did not start"; tail -20 "$OUT/serve.log"; return 1
}
stop_serve() { kill -TERM $SERVE; wait $SERVE; }
rm -rf /dev/shm/sink
start_serve || exit 1

step stencil
mkdir -p /tmp/st && timeout 120 /tmp/stencil --nx 4096 --ny 4096 --steps 100 --every 20 --dump /tmp/st 2>&1 | tee "$OUT/stencil.log" | tail -3
python3 $E/check_stored.py "$FZS" /dev/shm/sink stencil temperature /tmp/st 4096x4096 1e-3 2>&1 | tail -2

step torch
mkdir -p /tmp/th && PYTHONUNBUFFERED=1 timeout 120 python3 $E/torch_heat.py --lib torch --n 2048 --steps 60 --every 20 --dump /tmp/th 2>&1 | tail -2
python3 $E/check_stored.py "$FZS" /dev/shm/sink torchheat temperature /tmp/th 2048x2048 1e-3 2>&1 | tail -2
step cupy
mkdir -p /tmp/cp && PYTHONUNBUFFERED=1 timeout 120 python3 $E/torch_heat.py --lib cupy --run cupyheat --n 2048 --steps 60 --every 20 --dump /tmp/cp 2>&1 | tail -2
python3 $E/check_stored.py "$FZS" /dev/shm/sink cupyheat temperature /tmp/cp 2048x2048 1e-3 2>&1 | tail -2

step producer killed while the sidecar reads its buffer
for i in 1 2 3; do timeout 60 /tmp/devbench --size $((1<<30)) --buffers 1 --die 2>&1 | tail -1; done
sleep 3
grep -E "device|stale|snapshot failed|stored" "$OUT/serve.log" | grep -i "die" | tail -5
echo "sidecar alive after the kills: $(kill -0 $SERVE && echo yes || echo NO)"
timeout 60 /tmp/stencil --nx 1024 --ny 1024 --steps 20 --every 10 --run afterkill 2>&1 | tail -1
stop_serve

step bench
"$FZS" bench --backend gpu --fields smooth3d --rel 1e-3 --size 1GiB --reps 10 2>&1 | tee "$OUT/kernel_bench.log" | tail -4
rm -rf /dev/shm/sink
start_serve || exit 1
timeout 200 /tmp/devbench --size $((1<<30)) --buffers 8 --snapshots ${SNAPS:-64} --inflight ${INFLIGHT:-6} --warmup ${WARMUP:-0} 2>&1 | tee "$OUT/devbench.log" | tail -5
stop_serve
grep "device snapshots" "$OUT/serve.log" | tail -2
step done
