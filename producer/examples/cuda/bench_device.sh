#!/bin/bash
# Ingest throughput of GPU-resident snapshots on one GPU (issue #31): the
# kernel-only compress rate of the smooth bench field (fzsidecar bench), then
# the sidecar in process with a null sink (pipeline's TestDeviceIngestBench)
# fed by devbench, which measures pinned H2D in the same run. Variants:
# "LANES INFLIGHT ENV...": LANES are the host lanes (--gpu-lanes); device
# snapshots run on device lanes of their own (8 x 8192-tile jobs where they
# fit; FZ_GPU_DEVICE_LANES / FZ_GPU_DEVICE_JOB_TILES to compare). Needs R
# (default .devrun) with fzsidecar, pipeline.test and lib/ (see
# run_device.sh); logs to $OUT. producer/examples/gpu_ingest_diag.sh runs
# this bench too, old and new binaries side by side.
set -u
R=${R:-.devrun}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$R/lib:${LD_LIBRARY_PATH:-}
E=producer/examples/cuda
if [ ! -f cuda/build/libfzgpu.so ]; then
  if [ -f "$R/libfzgpu.so" ]; then mkdir -p cuda/build && cp "$R/libfzgpu.so" cuda/build/
  else make -C cuda >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }; fi
fi
cp cuda/build/libfzgpu.so "$OUT/" 2>/dev/null
export FZ_CUDA_LIB=$PWD/cuda/build/libfzgpu.so
nvcc -O2 -arch=sm_90 -Iproducer/include "$E/devbench.cu" -L"$R/lib" -lfzproducer -Xlinker -rpath-link="$R/lib" -o /tmp/devbench || exit 1
cp "$FZ_CUDA_LIB" "$R/" 2>/dev/null
"$R/fzsidecar" bench --backend gpu --fields smooth3d --rel 1e-3 --size 1GiB --reps 10 2>&1 | tee "$OUT/kernel_bench.log" | tail -3
for v in "${@:-4 8}"; do
  set -- $v
  lanes=$1 k=$2
  shift 2
  echo "=== lanes $lanes, $k in flight ${*:-}"
  env "$@" FZ_DEVBENCH=/tmp/devbench FZ_DEVBENCH_LANES=$lanes \
    FZ_DEVBENCH_ARGS="--size $((1<<30)) --buffers ${BUFS:-8} --snapshots ${SNAPS:-96} --inflight $k" \
    timeout 240 "$R/pipeline.test" -test.run TestDeviceIngestBench -test.v -test.count=1 2>&1 | tee -a "$OUT/devbench.log" |
    grep -E "device_bench|DEVICE_BENCH|ingest|stall|sidecar:|FAIL|ok|PASS|panic" | grep -v DEVBENCH_JSON
done
