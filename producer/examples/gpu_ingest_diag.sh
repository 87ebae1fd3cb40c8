#!/bin/bash
# Issues #28 and #31 on one GPU in one device call (docs/PRODUCERS.md, "GPU
# host"; docs/PIPELINE.md, "GPU-resident snapshots"). STEPS (default all):
#   host    THP for shmem, IOMMU, memory;
#   probe   h2d_probe.cu: the H2D rate of the sidecar's upload pattern with
#           one thing changed at a time (source memory, piece size, copies
#           in flight, concurrent D2H / HBM / host memory load), and D2H of
#           compressed bytes;
#   tests   cuda GPU tests of the device path and of exact copy-back
#           (byte-identical to the CPU codec);
#   kernel  `fzsidecar bench`: kernel-only compress rate of smooth3d, rel 1e-3;
#   device  the device-snapshot bench (pipeline TestDeviceIngestBench fed by
#           devbench), VARIANTS "BIN LANES INFLIGHT ENV...;..." (BIN: a
#           pipeline test binary in R, e.g. pipeline-old.test to compare);
#   c       bench_gpu_host.sh with C producers, C_RUNS as it takes them.
# Expects R (default .devrun-ingest) with fzsidecar.gz, pipeline*.test.gz,
# cuda.test.gz, libfzgpu.so(.gz) (REBUILD=1: make -C cuda instead),
# fzproducer_ingest and lib/ (libfzproducer, libnats and deps). Logs to $OUT.
set -u
R=${R:-.devrun-ingest}
OUT=${OUT:-/tmp/out}
STEPS=${STEPS:-host probe tests kernel device c}
has() { [[ " $STEPS " == *" $1 "* ]]; }
mkdir -p "$OUT" /tmp/fzd
for f in "$R"/*.gz; do b=$(basename "$f" .gz); gunzip -c "$f" >/tmp/fzd/$b && chmod +x /tmp/fzd/$b; done
[ -f /tmp/fzd/libfzgpu.so ] || cp "$R/libfzgpu.so" /tmp/fzd/ 2>/dev/null
if [ -n "${REBUILD:-}" ] || [ ! -f /tmp/fzd/libfzgpu.so ]; then # the cuda sources changed since the carried build
  make -C cuda >"$OUT/make_cuda.log" 2>&1 || { tail -30 "$OUT/make_cuda.log"; exit 1; }
else
  mkdir -p cuda/build && cp /tmp/fzd/libfzgpu.so cuda/build/
fi
export LD_LIBRARY_PATH=$PWD/$R/lib:${LD_LIBRARY_PATH:-}
export FZ_CUDA_LIB=$PWD/cuda/build/libfzgpu.so
step() { echo "=== $* ($(date +%T))"; }

if has host; then
  step host
  { nvidia-smi -L; nproc; free -g | head -2; ls /sys/class/iommu 2>&1 | head -3
    for f in enabled shmem_enabled; do echo "thp $f: $(cat /sys/kernel/mm/transparent_hugepage/$f)"; done
    dmesg 2>/dev/null | grep -i -m5 -E "iommu|dmar"; } 2>&1 | tee "$OUT/host.txt"
fi

step build
nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/fzd/h2d_probe producer/examples/h2d_probe.cu >"$OUT/build.log" 2>&1 || tail "$OUT/build.log"
nvcc -O2 -arch=sm_90 -Iproducer/include producer/examples/cuda/devbench.cu -L"$R/lib" -lfzproducer -Xlinker -rpath-link="$R/lib" \
  -o /tmp/fzd/devbench >>"$OUT/build.log" 2>&1 || tail "$OUT/build.log"

if has probe; then
  step h2d_probe
  SHM=/mnt/fzhuge
  mkdir -p $SHM && mount -t tmpfs -o huge=always,size=16g tmpfs $SHM 2>/dev/null || SHM=/dev/shm
  timeout 200 /tmp/fzd/h2d_probe $SHM 24 >"$OUT/h2d_probe.log" 2>&1
  echo "rc=$?"; grep -E "TABLE|h2d_probe:" "$OUT/h2d_probe.log"
  [ "$SHM" = /dev/shm ] || umount $SHM
fi

if has tests; then
  step tests
  (cd cuda && timeout 150 /tmp/fzd/cuda.test -test.run 'TestDeviceIPC' -test.v -test.count=1 >"$OUT/cuda_test.log" 2>&1
   echo "device IPC tests rc=$?"
   FZ_GPU_EXACT=1 timeout 150 /tmp/fzd/cuda.test -test.run 'TestStreamerMatchesCPU|TestStreamerErrors|TestStreamerConcurrent' -test.count=1 >>"$OUT/cuda_test.log" 2>&1
   echo "streamer tests with FZ_GPU_EXACT=1 rc=$?")
  (cd pipeline && FZ_GPU_EXACT=1 timeout 120 /tmp/fzd/pipeline.test -test.run 'TestGPUDirect|TestGPUDeviceRefusals' -test.v -test.count=1 >>"$OUT/cuda_test.log" 2>&1
   echo "pipeline GPU tests with FZ_GPU_EXACT=1 rc=$?")
  grep -E "^(--- |ok|FAIL|PASS)" "$OUT/cuda_test.log" | head -20
fi

if has kernel; then
  step kernel-only
  timeout 120 /tmp/fzd/fzsidecar bench --backend gpu --fields smooth3d --rel 1e-3 --size 1GiB --reps 10 2>&1 | tee "$OUT/kernel_bench.log" | tail -3
fi

if has device; then
  step device snapshots
  IFS=';' read -ra VS <<<"${VARIANTS:-pipeline-old.test 4 6;pipeline.test 4 8}"
  for v in "${VS[@]}"; do
    set -- $v
    bin=$1 lanes=$2 k=$3
    shift 3
    echo "--- $bin: lanes $lanes, $k in flight ${*:-}" | tee -a "$OUT/devbench.log"
    env "$@" FZ_GPU_TRACE=${TRACE:-1} FZ_DEVBENCH=/tmp/fzd/devbench FZ_DEVBENCH_LANES=$lanes \
      FZ_DEVBENCH_ARGS="--size $((1<<30)) --buffers ${BUFS:-8} --snapshots ${SNAPS:-192} --inflight $k --warmup ${WARMUP:-0}" \
      timeout 100 /tmp/fzd/$bin -test.run TestDeviceIngestBench -test.v -test.count=1 >/tmp/fzd/dev.log 2>&1
    echo "rc=$?" >>/tmp/fzd/dev.log
    grep -v "fzgpu trace" /tmp/fzd/dev.log | grep -v DEVBENCH_JSON >>"$OUT/devbench.log"
    grep -E "DEVICE_BENCH|rc=|FAIL|panic" /tmp/fzd/dev.log | grep -v "DEVICE_BENCH lanes"
    grep "fzgpu trace" /tmp/fzd/dev.log | grep -v "lane [0-9]*: host" | tail -${TRACE_LINES:-10} >>"$OUT/devbench.log"
    python3 - /tmp/fzd/dev.log <<'PY' | tee -a "$OUT/devbench.log"
import re, sys, statistics as st
t = open(sys.argv[1]).read()
rows = re.findall(r"jobs=(\d+): params ([\d.]+)ms jobs ([\d.]+)ms waitjob ([\d.]+)ms append ([\d.]+)ms index ([\d.]+)ms total ([\d.]+)ms short-copy-backs (\d+)(?: issue ([\d.]+)ms)?", t)
rows = [r[:8] + (r[8] or "0",) for r in rows]
if rows:
    c = list(zip(*[[float(x) for x in r] for r in rows]))
    q = sorted(c[6])
    print("  trace medians over %d snapshots: jobs/snap %d params %.2f jobs %.2f (issue %.2f) waitjob %.2f append %.2f index %.2f total %.2f ms (mean %.2f p90 %.2f max %.2f); short copy-backs %d" %
          (len(rows), c[0][0], st.median(c[1]), st.median(c[2]), st.median(c[8]), st.median(c[3]), st.median(c[4]), st.median(c[5]), st.median(c[6]),
           st.mean(q), q[int(.9 * len(q))], q[-1], sum(c[7])))
d = re.findall(r"device snapshot: blob ([\d.]+)ms \(pinned (\w+)\) compress ([\d.]+)ms after ([\d.]+)ms gpu ([\d.]+)ms", t)
if d:
    b = [float(x[0]) for x in d]; cp = sorted(float(x[2]) for x in d); a = [float(x[3]) for x in d]
    print("  GPU.Device: blob mean %.2f max %.2f ms, pinned %d of %d; CompressDevice median %.2f mean %.2f p90 %.2f max %.2f; after mean %.2f ms" %
          (st.mean(b), max(b), sum(x[1] == "true" for x in d), len(d), st.median(cp), st.mean(cp), cp[int(.9 * len(cp))], cp[-1], st.mean(a)))
lanes = {}
for lid, s0, e1 in re.findall(r"lane (\d+): host start ([\d.]+)ms params [\d.]+ms end ([\d.]+)ms", t):
    lanes.setdefault(int(lid), []).append((float(s0), float(e1)))
if lanes:
    allv = sorted(v for l in lanes.values() for v in l)[-192:]
    w0, w1 = allv[0][0], max(e for _, e in allv)
    busy = sum(e - s for s, e in allv)
    print("  lanes used %d; last 192 snapshots over %.1f ms: summed lane time %.1f ms = %.1f lanes busy on average" % (len(lanes), w1 - w0, busy, busy / (w1 - w0)))
PY
  done
fi

if has c; then
  step C producers
  R=$R FZS=/tmp/fzd/fzsidecar GO_FILLS="${GO_FILLS-}" OUT=$OUT/c bash producer/examples/bench_gpu_host.sh 2>&1 | tail -${C_TAIL:-12}
fi
step done
