#!/bin/bash
# Everything the GPU codec must show on a GPU machine, in one device call
# (there is no Go there: the binaries are built beforehand on a machine
# with Go and carried in R). Modes:
#   tests    the library built from cuda/ with this machine's nvcc, then the
#            cuda package's GPU tests (identity with the CPU on real fields,
#            adversarial inputs, corrupted streams, chunk tables, the
#            optimistic fallback, bounds, the streamer, CUDA IPC), the
#            > 4 GiB field, container version 2 (V2: decode identity,
#            corrupt-stream and per-rule agreement with the CPU), and
#            compute-sanitizer memcheck + racecheck on the short cases (v2
#            decode included).
#   compare  the peers (../shared/peers/compare.sh: cuSZp plain/outlier and
#            FZ-GPU, timed with Nsight Compute) and `fzsidecar bench` on the
#            same fields in the same run.
# R (default .devrun) holds: fzsidecar and cuda.test (CGO_ENABLED=0),
# data/ (../shared/data) and peers/ (../shared/peers). Prepare it with
#   R=.devrun bash cuda/tools/device_verify.sh prepare   (on the Go machine)
# Logs and JSON go to $OUT.
set -u
R=${R:-.devrun}
OUT=${OUT:-/tmp/out}
mode=${1:-tests}
FIELDS=${FIELDS:-smooth3d,csm_b003,era5,hst,hyg_stars_x,coads,levitus}
mkdir -p "$OUT"

if [ "$mode" = prepare ]; then
  mkdir -p "$R"
  # stripped and compressed: what travels is limited to 64 MiB in all
  CGO_ENABLED=0 go build -ldflags="-s -w" -o "$R/fzsidecar" ./cmd/fzsidecar || exit 1
  CGO_ENABLED=0 go test -ldflags="-s -w" -c -o "$R/cuda.test" ./cuda || exit 1
  gzip -f "$R/fzsidecar" "$R/cuda.test"
  rm -rf "$R/data" "$R/peers" "$R/data.tar.xz"
  tar -C ../shared -cJf "$R/data.tar.xz" data && cp -r ../shared/peers "$R/peers" || exit 1
  chmod -R u+w "$R"
  du -sh "$R"
  exit 0
fi

for f in "$R"/*.gz; do [ -e "$f" ] && gunzip -f "$f" && chmod +x "${f%.gz}"; done
[ -f "$R/data.tar.xz" ] && [ ! -d "$R/data" ] && tar -C "$R" -xJf "$R/data.tar.xz"
lib=$PWD/cuda/build/libfzgpu.so
if [ ! -f "$lib" ]; then
  make -C cuda >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi
export FZ_CUDA_LIB=$lib FZ_SHARED_DATA=$PWD/$R/data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"

case $mode in
tests)
  ( cd cuda && FZ_GPU_BIG=1 timeout 420 "../$R/cuda.test" -test.v -test.count=1 \
      -test.run 'RealFields|Adversarial|Clipped|DecodeShapes|Corrupted|ChunkTables|Optimistic|Bound|Range|Streamer|Huge|IPC|V2' ) \
      >"$OUT/tests.log" 2>&1
  echo "tests rc=$?"; grep -E "^(--- |ok|FAIL|PASS)|SKIP" "$OUT/tests.log" | head -60
  for tool in memcheck racecheck; do
    ( cd cuda && FZ_GPU_SHORT=1 timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 \
        "../$R/cuda.test" -test.count=1 -test.run 'Adversarial|ChunkTables|V2DecodeMatches|V2RuleCasesAgree|StagedWalksSmall' ) >"$OUT/$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
  done
  ;;
compare)
  # one after the other: the GPU is timed by each
  timeout 420 bash "$R/peers/compare.sh" "$R/data" >"$OUT/peers.txt" 2>&1
  echo "peers rc=$?"; cat "$OUT/peers.txt"
  "$R/fzsidecar" bench --backend gpu --size 1GiB --reps ${REPS:-10} --data "$R/data" --fields "$FIELDS" \
    --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  echo "bench rc=$?"; tail -3 "$OUT/bench.log"
  ;;
*) echo "usage: device_verify.sh prepare|tests|compare"; exit 2 ;;
esac
