#!/bin/bash
# Ingest on a GPU host with C producers that write every snapshot in place
# (issue #28, performance): one script for one device call.
#   1. baseline: `fzsidecar bench e2e --backend gpu` (Go producers) with
#      --fill none and --fill copy, 8 x 32 x 256 MiB, null sink; it prints the
#      pinned H2D of its own run;
#   2. `fzsidecar serve --backend gpu` fed by fzproducer_ingest
#      (bench_ingest.c: K C producer processes writing each snapshot into its
#      reused segment), 8 and 16 producers x 32 x 256 MiB, writes fresh
#      (every value new, non-temporal stores), plus none / copy / store and
#      2 writer threads for comparison; pinned H2D measured by bench_h2d
#      (the same method as bench e2e) right before and after each run, and
#      the upload stream's busy share from FZ_GPU_TRACE=1 (cuda/tools/timeline.py).
# GO_FILLS (default "none copy", "" for none) and C_RUNS (see below) pick
# the runs; a C run's VAR=value words go to the sidecar's environment
# (e.g. FZ_GPU_EXACT=1, to compare settings in one call).
# Then a table. Segments on a huge=always tmpfs when it can be mounted
# (else /dev/shm), for both the Go and C runs.
#
# Expects, built on a machine with Go and libnats (no Go, no libnats here):
#   R (default .devrun/ingest): fzsidecar (CGO_ENABLED=0), fzproducer_ingest,
#   lib/ with libfzproducer.so* and libnats with its dependencies (ldd), and
#   optionally libfzgpu.so (used when cuda/build has none; else make -C cuda).
# Logs and JSON lines go to $OUT (at most a handful of files).
set -u
R=${R:-.devrun/ingest}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$R/lib:${LD_LIBRARY_PATH:-}
FZS=${FZS:-$PWD/$R/fzsidecar}
ING=$PWD/$R/fzproducer_ingest
TL=$PWD/cuda/tools/timeline.py
RES=$OUT/results.jsonl
SNAPS=${SNAPS:-32}
SIZE=${SIZE:-256MiB}
BACKEND=${BACKEND:-gpu} # cpu: a dry run of this script on a machine without a GPU (small SNAPS/SIZE)
PORT=${PORT:-4222}
GPUS=(--gpus 0)
[ "$BACKEND" = gpu ] || GPUS=()
SEGS=fzgh-segs SINK=/dev/shm/fzgh-sink DATA=/tmp/fzgh-data TMPD=/tmp/fzgh
mkdir -p $TMPD
step() { echo "=== $* ($(date +%T))"; }
: >"$RES"

step host
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total --format=csv
  nproc; lscpu | grep -E "Model name|Socket|NUMA node\(s\)"; free -g | head -2; } 2>&1 | tee "$OUT/host.txt"

step build
if [ "$BACKEND" != gpu ]; then echo "dry run on $BACKEND: no build, no H2D"
elif [ ! -f cuda/build/libfzgpu.so ] && [ -f "$R/libfzgpu.so" ] && [ -z "${REBUILD:-}" ]; then
  mkdir -p cuda/build && cp "$R/libfzgpu.so" cuda/build/ && echo "libfzgpu.so: carried (cuda sources unchanged)"
elif [ ! -f cuda/build/libfzgpu.so ] || [ -n "${REBUILD:-}" ]; then
  make -C cuda >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
if [ "$BACKEND" = gpu ]; then
  export FZ_CUDA_LIB=$PWD/cuda/build/libfzgpu.so
  nvcc -O2 -o $TMPD/bench_h2d producer/examples/bench_h2d.cu >>"$OUT/build.log" 2>&1 || { echo "nvcc bench_h2d failed"; tail "$OUT/build.log"; exit 1; }
fi
"$ING" 2>&1 | head -1 # usage: the binary loads

# Segments: a huge-page tmpfs (PIPELINE.md, GPU path), else /dev/shm.
SHM=/mnt/fzhuge
[ "$BACKEND" = gpu ] && mkdir -p $SHM && mount -t tmpfs -o huge=always,size=48g tmpfs $SHM 2>/dev/null || SHM=/dev/shm
grep -E " $SHM " /proc/mounts | head -1
echo "segments in $SHM"

step "Go producers: bench e2e"
for fill in ${GO_FILLS-none copy}; do
  echo "--- go fill $fill" | tee -a "$OUT/go.log"
  FZ_GPU_TRACE=1 timeout 150 "$FZS" bench e2e --backend $BACKEND "${GPUS[@]}" --producers 8 --snapshots "$SNAPS" --size "$SIZE" \
    --sink null --fill $fill --shm $SHM --json $TMPD/go_$fill.json >$TMPD/go_$fill.out 2>$TMPD/go_$fill.trace
  echo "rc=$?" >>$TMPD/go_$fill.out
  cat $TMPD/go_$fill.out | tee -a "$OUT/go.log" | grep -E "ingest|H2D|memcpy|rc="
  busy=$(python3 "$TL" $TMPD/go_$fill.trace $((8 * SNAPS)) 2>&1 | tee -a "$OUT/go.log" | sed -n 's/.*busy [0-9.]* ms (\([0-9.]*\)%).*/\1/p' | head -1)
  grep -v -E "upload|lane [0-9]+:" $TMPD/go_$fill.trace | tail -5 >>"$OUT/go.log"
  python3 -c "import json,sys; r=json.load(open('$TMPD/go_$fill.json')); r['run']='go fill $fill'; r['link_busy_pct']=float('${busy:-0}' or 0); print(json.dumps(r))" >>"$RES" 2>>"$OUT/go.log"
done

SERVE=
start_serve() { # $1: log; $SERVE_ENV: VAR=value words for the sidecar
  rm -rf $SHM/$SEGS $DATA $SINK
  env ${SERVE_ENV:-} FZ_GPU_TRACE=1 "$FZS" serve --backend $BACKEND "${GPUS[@]}" --shm-dir $SHM/$SEGS --sink $SINK --data-dir $DATA \
    --nats-listen 127.0.0.1:$PORT --metrics-listen off --budget 16GiB --writers 8 >"$1" 2>&1 &
  SERVE=$!
  for i in $(seq 150); do grep -q "fzsidecar ready" "$1" && return 0; kill -0 $SERVE 2>/dev/null || break; sleep 0.2; done
  echo "serve did not start"; tail -20 "$1"; return 1
}
stop_serve() { kill -TERM $SERVE; wait $SERVE; }
h2d() { [ "$BACKEND" = gpu ] && $TMPD/bench_h2d $((256 << 20)) 0 | awk '{print $2}' || echo 0; }

c_run() { # name producers write [more flags]
  local name=$1 k=$2 w=$3; shift 3
  echo "--- c $name: $k producers, write $w $* ${SERVE_ENV:-}" | tee -a "$OUT/c.log"
  local b a busy
  b=$(h2d)
  start_serve $TMPD/serve_$name.log || return 1
  timeout 150 "$ING" --shm-dir $SHM/$SEGS --producers $k --snapshots "$SNAPS" --bytes "$SIZE" --write $w --run "$name" \
    --json $TMPD/c_$name.json "$@" >$TMPD/c_$name.out 2>&1
  echo "rc=$?" >>$TMPD/c_$name.out
  stop_serve
  a=$(h2d)
  echo "stored objects in the sink: $(find $SINK -name '*.fz' | wc -l)" >>$TMPD/c_$name.out
  cat $TMPD/c_$name.out | tee -a "$OUT/c.log" | grep -E "^(ingest|producers wrote|write probe|rc=)"
  busy=$(python3 "$TL" $TMPD/serve_$name.log $((k * SNAPS)) 2>&1 | tee -a "$OUT/c.log" | sed -n 's/.*busy [0-9.]* ms (\([0-9.]*\)%).*/\1/p' | head -1)
  echo "pinned H2D before / after: $b / $a" | tee -a "$OUT/c.log"
  { echo "### serve $name"; grep -v -E "upload [0-9]+ MB|lane [0-9]+: host start|snapshot stored" $TMPD/serve_$name.log | tail -20; } >>"$OUT/serve.log"
  python3 -c "import json; r=json.load(open('$TMPD/c_$name.json')); r['run']='c $name'; r['serve_env']='${SERVE_ENV:-}'; r['pinned_h2d_bytes_per_second']=${b:-0}; r['pinned_h2d_after_bytes_per_second']=${a:-0}; r['ingest_vs_pinned_h2d']=r['ingest_bytes_per_second']/max(${b:-0},${a:-0},1); r['link_busy_pct']=float('${busy:-0}' or 0); print(json.dumps(r))" >>"$RES" 2>>"$OUT/c.log"
  rm -rf $SINK $DATA
}

step "C producers: fzproducer_ingest -> serve"
# C_RUNS: "name producers write [flags] [VAR=value for serve...]" separated by ';'
IFS=';' read -ra CR <<<"${C_RUNS:-fresh8 8 fresh;fresh16 16 fresh;none8 8 none;copy8 8 copy;fresh8t2 8 fresh --threads 2;store8 8 store}"
for r in "${CR[@]}"; do
  set -- $r
  SERVE_ENV=
  args=()
  for a in "$@"; do case $a in *=*) SERVE_ENV="$SERVE_ENV $a" ;; *) args+=("$a") ;; esac; done
  c_run "${args[@]}"
done
[ "$SHM" = /dev/shm ] && rm -rf $SHM/$SEGS || umount $SHM

step table
python3 - "$RES" <<'EOF' | tee "$OUT/table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'run':<16}{'prod':>5}{'ingest GB/s':>12}{'H2D before/after':>18}{'x H2D':>7}{'write GB/s each':>16}{'write %win':>11}{'probe GB/s':>11}{'link busy':>10}")
for r in rows:
    g = lambda k: r.get(k) or 0
    if r['run'].startswith('go'):
        we, share, probe = g('producer_fill_bytes_per_second'), 0, g('host_memcpy_k_threads_bytes_per_second')
    else:
        we, share, probe = g('write_bytes_per_second_each'), g('write_share_of_window'), g('probe_write_bytes_per_second')
    print(f"{r['run']:<16}{r['producers']:>5}{g('ingest_bytes_per_second')/1e9:>12.2f}{g('pinned_h2d_bytes_per_second')/1e9:>9.2f}/{g('pinned_h2d_after_bytes_per_second')/1e9:<8.2f}"
          f"{g('ingest_vs_pinned_h2d'):>7.2f}{we/1e9:>16.2f}{100*share:>10.0f}%{probe/1e9:>11.2f}{g('link_busy_pct'):>9.1f}%")
EOF
step done
