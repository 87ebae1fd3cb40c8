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
#            decode, the optimistic kernels' fill-field cases and the
#            clipped kernel included; v38 call 2: those two ~55 s of racecheck).
#   compare  the peers (../shared/peers/compare.sh: cuSZp plain/outlier and
#            FZ-GPU, timed with Nsight Compute) and `fzsidecar bench` on the
#            same fields in the same run, then the README's side-by-side table
#            from both (tools/sidebyside.py; ~8 minutes on an H200).
#   ab       an A/B of two library builds in one call: A is the cuda/ tree of
#            BASE (a git revision, packed into R by `prepare`; default HEAD)
#            built with A_FLAGS, B the working tree's cuda/ with B_FLAGS (extra
#            nvcc flags, e.g. -DENC_PCT=0); sm_90 only, both at once. Then,
#            unless NOTESTS=1, B's GPU tests (AB_TESTS, a -test.run pattern);
#            with SANITIZE=1, compute-sanitizer racecheck and memcheck of B on
#            the staged walks and version 2's decode (short cases, each ~2
#            minutes on an H200; SAN_TESTS: another -test.run pattern); then `bench` over FIELDS (REPS, default 5) with A, B, A, B, and
#            one line per case: A's and B's compress and decompress GB/s (the
#            better of each pair) and B / A. With C_FLAGS set, a third build C
#            (the working tree's cuda/ with C_FLAGS) is timed beside them
#            (A, B, C, A, B, C) and C / A printed too; the tests are B's.
#            V2_FIELDS: then the same sides on those fields in container
#            version 2 (bench-v2-*.json), a second table. Before the benches,
#            sass.txt: the kernels whose instructions or divergence checks
#            differ between A and B (and A and C), tools/sass_guards.py. B_REV / C_REV
#            (given to `prepare`): B's / C's cuda/ tree from that revision
#            instead of the working tree's (e.g. two branches against main,
#            with BASE=main).
#   profile  ncu per kernel (--clock-control none): time, thread-instructions,
#            registers, grid, occupancy and DRAM bytes of every kernel of a
#            compress and a decompress, for each of FIELDS x RELS (default
#            1e-2,1e-4) x VERSIONS (container versions, default 1) on a SIZE
#            field (default 256MiB), summed by tools/ncu_sum.py; then, with
#            KERNEL set (an ncu regex), that kernel's sections (occupancy, warp
#            states, memory) on the first field, bound and version.
#   guards   where ptxas guards warp-wide instructions with divergence checks
#            (BRA.DIV; each one also compiles a collective copy of the code
#            after it, PERF.md v48): fzgpu.cu's cubin of BASE (packed by
#            prepare) and of B_REV's tree (given to prepare) or else the
#            working tree's, sm_90, -lineinfo, both at once;
#            tools/sass_guards.py on nvdisasm -gi's listings: the kernels
#            whose figures differ, then each check of the kernels matching
#            KERNEL (a regex, default the padded fill kernel
#            encode_warp_kernel<float, 3, 5, 1, 1, 1, 1>) with the source
#            lines of what it guards, A's and B's (guards.txt; ~3 minutes).
#   source   one kernel by source line: the working tree's cuda/ built with
#            -lineinfo (sm_90), ncu SourceCounters on the first launch of
#            KERNEL (an ncu regex, default decode_warp_kernel) in a bench of the
#            first of FIELDS at REL (default 1e-2), VERSION (default 1), SIZE
#            (default 256MiB); the export (source.csv.gz) and its sums by line
#            (tools/ncu_source.py, source.txt) in $OUT.
# What comes back from a device call is at most 8 files, so every mode but
# prepare works in a scratch folder and leaves in $OUT only its summaries
# (device.txt, ab.txt, sass.txt, guards.txt, peers.txt, peers-raw.txt, sidebyside.md, bench.json,
# ncu-sum.txt, source.txt: whichever the mode wrote) and all.tgz, every file it
# wrote (logs, each run's JSON), also when a step fails (a call killed at its
# time limit brings back nothing of it: give steps their own timeouts). v38
# and v41 lost a compare's peers file to that limit (11 files).
# TILING (ab, profile, source): the bench's --tiling (boxes, flat, auto or padded; default boxes);
# in ab, TILING_A / TILING_B / TILING_C set one side's (e.g. one library, boxes against padded).
# VERSION (ab, source): the container version the bench writes (default 1; profile takes VERSIONS).
# R (default .devrun) holds: fzsidecar and cuda.test (CGO_ENABLED=0),
# data/ (../shared/data) and peers/ (../shared/peers). Prepare it with
#   R=.devrun bash cuda/tools/device_verify.sh prepare   (on the Go machine)
# Summaries and all.tgz (logs and JSON) go to $OUT (above).
set -u
R=${R:-.devrun}
OUT=${OUT:-/tmp/out}
mode=${1:-tests}
FIELDS=${FIELDS:-smooth3d,csm_b003,era5,hst,hyg_stars_x,coads,levitus}
mkdir -p "$OUT"
# sanitize TOOL PATTERN LOG TIMEOUT: compute-sanitizer TOOL over the short GPU
# tests matching PATTERN (with the library in FZ_CUDA_LIB), its summary line
sanitize() {
  ( cd cuda && FZ_GPU_SHORT=1 timeout "$4" compute-sanitizer --tool "$1" --error-exitcode 9 \
      "../$R/cuda.test" -test.count=1 -test.run "$2" ) >"$OUT/$3" 2>&1
  echo "$1 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$3" | tail -1)"
}

if [ "$mode" = prepare ]; then
  mkdir -p "$R"
  # stripped and compressed: what travels is limited to 64 MiB in all
  CGO_ENABLED=0 go build -ldflags="-s -w" -o "$R/fzsidecar" ./cmd/fzsidecar || exit 1
  CGO_ENABLED=0 go test -ldflags="-s -w" -c -o "$R/cuda.test" ./cuda || exit 1
  gzip -f "$R/fzsidecar" "$R/cuda.test"
  rm -rf "$R/data" "$R/peers" "$R/data.tar.xz"
  tar -C ../shared -cJf "$R/data.tar.xz" data && cp -r ../shared/peers "$R/peers" || exit 1
  git archive "${BASE:-HEAD}" cuda | gzip > "$R/base.tgz" || exit 1  # mode ab's A
  # mode ab's B and C from revisions (else the working tree's cuda/)
  rm -f "$R/b.tgz" "$R/c.tgz"
  if [ -n "${B_REV:-}" ]; then git archive "$B_REV" cuda | gzip > "$R/b.tgz" || exit 1; fi
  if [ -n "${C_REV:-}" ]; then git archive "$C_REV" cuda | gzip > "$R/c.tgz" || exit 1; fi
  chmod -R u+w "$R"
  du -sh "$R"
  exit 0
fi

FINAL=$OUT OUT=$(mktemp -d /tmp/device_verify.XXXXXX)
finish() {
  for f in device.txt ab.txt sass.txt guards.txt peers.txt peers-raw.txt sidebyside.md bench.json ncu-sum.txt source.txt; do
    [ -f "$OUT/$f" ] && cp "$OUT/$f" "$FINAL/"
  done
  tar -czf "$FINAL/all.tgz" -C "$OUT" .
}
trap finish EXIT
for f in "$R"/*.gz; do [ -e "$f" ] && gunzip -f "$f" && chmod +x "${f%.gz}"; done
[ -f "$R/data.tar.xz" ] && [ ! -d "$R/data" ] && tar -C "$R" -xJf "$R/data.tar.xz"
lib=$PWD/cuda/build/libfzgpu.so
if [ "$mode" = ab ]; then
  # both libraries at once, sm_90 only (the H100/H200's; half the build time)
  nv='-O3 -std=c++17 -fmad=false -Xcompiler -fPIC -cudart static -Xptxas -v $(GENCODE)'
  gen="-gencode arch=compute_90,code=sm_90"
  sides="a b"; if [ -n "${C_FLAGS:-}" ] || [ -f "$R/c.tgz" ]; then sides="a b c"; fi
  rm -rf /tmp/ab && mkdir -p /tmp/ab/a /tmp/ab/b /tmp/ab/c && tar -xzf "$R/base.tgz" -C /tmp/ab/a || exit 1
  for x in b c; do  # B_REV / C_REV's tree where prepare packed one, else the working tree's
    if [ -f "$R/$x.tgz" ]; then tar -xzf "$R/$x.tgz" -C /tmp/ab/$x || exit 1; else cp -r cuda /tmp/ab/$x/ || exit 1; fi
  done
  make -C /tmp/ab/a/cuda GENCODE="$gen" NVFLAGS="$nv ${A_FLAGS:-}" >"$OUT/build-a.log" 2>&1 &
  make -C /tmp/ab/b/cuda GENCODE="$gen" NVFLAGS="$nv ${B_FLAGS:-}" >"$OUT/build-b.log" 2>&1 &
  [ "$sides" = "a b c" ] && make -C /tmp/ab/c/cuda GENCODE="$gen" NVFLAGS="$nv ${C_FLAGS:-}" >"$OUT/build-c.log" 2>&1 &
  wait
  la=/tmp/ab/a/cuda/build/libfzgpu.so lb=/tmp/ab/b/cuda/build/libfzgpu.so lc=/tmp/ab/c/cuda/build/libfzgpu.so
  for x in $sides; do [ -f "/tmp/ab/$x/cuda/build/libfzgpu.so" ] || { tail -30 "$OUT"/build-*.log; exit 1; }; done
  export FZ_SHARED_DATA=$PWD/$R/data
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
  for x in $sides; do cuobjdump -sass "/tmp/ab/$x/cuda/build/libfzgpu.so" > "/tmp/ab/$x.sass" 2>/dev/null; done
  for x in $sides; do
    [ "$x" = a ] || { echo "A -> ${x^^}:"; python3 cuda/tools/sass_guards.py /tmp/ab/a.sass "/tmp/ab/$x.sass"; }
  done | tee "$OUT/sass.txt"
  if [ "${NOTESTS:-0}" != 1 ]; then
    ( cd cuda && FZ_CUDA_LIB=$lb timeout 300 "../$R/cuda.test" -test.v -test.count=1 \
        -test.run "${AB_TESTS:-RealFields|Adversarial|Clipped|DecodeShapes|Corrupted|ChunkTables|Streamer|V2Decode|Staged}" ) >"$OUT/tests-b.log" 2>&1
    echo "tests (B) rc=$?"; grep -E "^(--- FAIL|FAIL|ok)|panic" "$OUT/tests-b.log" | head -20
  fi
  if [ "${SANITIZE:-0}" = 1 ]; then
    for tool in racecheck memcheck; do FZ_CUDA_LIB=$lb sanitize $tool "${SAN_TESTS:-WalksSmall|V2DecodeMatches}" $tool-b.log 200; done
  fi
  runs=""; for k in 1 2; do for x in $sides; do runs="$runs $x$k"; done; done
  # bench_sides PREFIX VERSION FIELDS: every run of $runs into $OUT/PREFIX-RUN.json
  bench_sides() {
    for run in $runs; do
      l=/tmp/ab/${run:0:1}/cuda/build/libfzgpu.so
      tv=TILING_$(echo "${run:0:1}" | tr a-c A-C)
      FZ_CUDA_LIB=$l "$R/fzsidecar" bench --backend gpu --size 1GiB --reps "${REPS:-5}" --data "$R/data" --fields "$3" \
        --tiling "${!tv:-${TILING:-boxes}}" --format-version "$2" --json "$OUT/$1-$run.json" >"$OUT/$1-$run.log" 2>&1 ||
        { echo "bench $1 $run failed"; tail -5 "$OUT/$1-$run.log"; return 1; }
    done
    python3 cuda/tools/ab_table.py "$OUT" "$1" $sides | tee -a "$OUT/ab.txt"
  }
  bench_sides bench "${VERSION:-1}" "$FIELDS" || exit 1
  if [ -n "${V2_FIELDS:-}" ]; then
    echo "container version 2:" | tee -a "$OUT/ab.txt"
    bench_sides bench-v2 2 "$V2_FIELDS" || exit 1
  fi
  exit 0
fi
if [ "$mode" = guards ]; then
  rm -rf /tmp/gd && mkdir -p /tmp/gd/a /tmp/gd/b && tar -xzf "$R/base.tgz" -C /tmp/gd/a || exit 1
  if [ -f "$R/b.tgz" ]; then tar -xzf "$R/b.tgz" -C /tmp/gd/b || exit 1; else cp -r cuda /tmp/gd/b/ || exit 1; fi
  rm -rf /tmp/gd/b/cuda/build
  for x in a b; do
    ( cd /tmp/gd/$x/cuda && nvcc -O3 -std=c++17 -fmad=false -lineinfo -cubin -gencode arch=compute_90,code=sm_90 \
        -o fz.cubin fzgpu.cu >"$OUT/build-$x.log" 2>&1 && nvdisasm -gi -c fz.cubin > ../fz.sass ) &
  done
  wait
  for x in a b; do [ -s /tmp/gd/$x/fz.sass ] || { echo "side $x: no listing"; tail -20 "$OUT/build-$x.log"; exit 1; }; done
  k=${KERNEL:-encode_warp_kernelIfLi3ELi5ELi1ELi1ELb1ELb1E}
  { echo "A = BASE (prepare's base.tgz), B = B_REV's tree or the working tree's: the kernels that differ"
    python3 cuda/tools/sass_guards.py /tmp/gd/a/fz.sass /tmp/gd/b/fz.sass
    for x in a b; do echo "${x^^}:"; python3 cuda/tools/sass_guards.py /tmp/gd/$x/fz.sass --lines --kernel "$k"; done
  } | tee "$OUT/guards.txt"
  exit 0
fi
if [ "$mode" = source ]; then
  # a copy of cuda/ with line info, so the library the other modes use is left as it is
  rm -rf /tmp/src && mkdir -p /tmp/src && cp -r cuda /tmp/src/ && rm -rf /tmp/src/cuda/build || exit 1
  make -C /tmp/src/cuda GENCODE="-gencode arch=compute_90,code=sm_90" \
    NVFLAGS='-O3 -std=c++17 -fmad=false -Xcompiler -fPIC -cudart static -Xptxas -v -lineinfo $(GENCODE)' \
    >"$OUT/build-source.log" 2>&1 || { tail -30 "$OUT/build-source.log"; exit 1; }
  export FZ_CUDA_LIB=/tmp/src/cuda/build/libfzgpu.so
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
  f=${FIELDS%%,*} k=${KERNEL:-decode_warp_kernel}
  timeout 240 ncu --section SourceCounters --kernel-name "regex:$k" --launch-count 1 -f -o /tmp/src/prof \
    "$R/fzsidecar" bench --backend gpu --size "${SIZE:-256MiB}" --reps 1 --rel "${REL:-1e-2}" --data "$R/data" \
    --fields "$f" --format-version "${VERSION:-1}" --tiling "${TILING:-boxes}" >"$OUT/ncu-source.log" 2>&1 ||
    { echo "ncu failed (rc=$?)"; tail -5 "$OUT/ncu-source.log"; exit 1; }
  ncu --import /tmp/src/prof.ncu-rep --page source --csv --print-source cuda,sass > "$OUT/source.csv" ||
    { echo "ncu export failed"; exit 1; }
  gzip -f "$OUT/source.csv"
  python3 cuda/tools/ncu_source.py "$OUT/source.csv.gz" | tee "$OUT/source.txt"
  exit $?
fi
if [ ! -f "$lib" ]; then
  make -C cuda >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi
export FZ_CUDA_LIB=$lib FZ_SHARED_DATA=$PWD/$R/data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"

case $mode in
tests)
  ( cd cuda && FZ_GPU_BIG=1 timeout 420 "../$R/cuda.test" -test.v -test.count=1 \
      -test.run 'RealFields|Adversarial|Clipped|DecodeShapes|Corrupted|Misaligned|ChunkTables|Optimistic|Bound|Range|Streamer|Huge|IPC|V2' ) \
      >"$OUT/tests.log" 2>&1
  echo "tests rc=$?"; grep -E "^(--- |ok|FAIL|PASS)|SKIP" "$OUT/tests.log" | head -60
  for tool in memcheck racecheck; do
    sanitize $tool 'Adversarial|ChunkTables|Misaligned|V2DecodeMatches|V2RuleCasesAgree|WalksSmall|OptimisticFallback|ClippedAndHoles' $tool.log 300
  done
  ;;
compare)
  # one after the other: the GPU is timed by each. Then the runs the README's
  # side-by-side table takes (tools/sidebyside.py): version 1 with box tiles on
  # the five fields, version 2 on hst and hyg_stars_x, era5 with flat tiles;
  # gathered in $OUT/bench.json as {"runs": {"v1", "v2", "flat"}}, then the
  # table's rows in $OUT/sidebyside.md (copy both files into cuda/bench/).
  timeout 420 bash "$R/peers/compare.sh" "$R/data" >"$OUT/peers-raw.txt" 2>&1
  echo "peers rc=$?"; grep -E '^(field|[A-Za-z0-9_]+ 1e-[0-9] )' "$OUT/peers-raw.txt" | tee "$OUT/peers.txt"
  for run in "v1 smooth3d,csm_b003,era5,hst,hyg_stars_x 1 boxes" "v2 hst,hyg_stars_x 2 boxes" "flat era5 1 flat"; do
    set -- $run
    "$R/fzsidecar" bench --backend gpu --size 1GiB --reps ${REPS:-5} --data "$R/data" --fields "$2" --format-version "$3" \
      --tiling "$4" --json "$OUT/bench-$1.json" >"$OUT/bench-$1.log" 2>&1
    echo "bench $1 rc=$?"; tail -2 "$OUT/bench-$1.log"
  done
  python3 - "$OUT" <<'PY'
import json, sys
o = sys.argv[1]
json.dump({"runs": {k: json.load(open(f"{o}/bench-{k}.json")) for k in ("v1", "v2", "flat")}}, open(f"{o}/bench.json", "w"))
PY
  python3 cuda/tools/sidebyside.py "$OUT/peers.txt" "$OUT/bench.json" | tee "$OUT/sidebyside.md"
  ;;
profile)
  log=$OUT/ncu-kernels.txt; : > "$log"
  m=gpu__time_duration.sum,smsp__thread_inst_executed.sum,launch__registers_per_thread,launch__grid_size
  m=$m,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum
  rels=${RELS:-1e-2,1e-4} versions=${VERSIONS:-1}
  for f in ${FIELDS//,/ }; do for v in ${versions//,/ }; do for r in ${rels//,/ }; do
    echo "=== $f v$v $r" >> "$log"
    timeout 120 ncu --clock-control none --metrics $m "$R/fzsidecar" bench --backend gpu --size "${SIZE:-256MiB}" --reps 1 \
      --rel "$r" --data "$R/data" --fields "$f" --format-version "$v" --tiling "${TILING:-boxes}" >> "$log" 2>&1 ||
      echo "ncu $f v$v $r failed (rc=$?)"
  done; done; done
  python3 cuda/tools/ncu_sum.py "$log" | tee "$OUT/ncu-sum.txt"
  if [ -n "${KERNEL:-}" ]; then
    f=${FIELDS%%,*} v=${versions%%,*} r=${rels%%,*}
    timeout 180 ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
      --section InstructionStats --section LaunchStats --section MemoryWorkloadAnalysis --kernel-name "regex:$KERNEL" \
      --launch-skip 1 --launch-count 1 "$R/fzsidecar" bench --backend gpu --size "${SIZE:-256MiB}" --reps 1 --rel "$r" \
      --data "$R/data" --fields "$f" --format-version "$v" --tiling "${TILING:-boxes}" > "$OUT/ncu-kernel.txt" 2>&1
    echo "ncu $KERNEL rc=$?"
    grep -E "^  [a-zA-Z].*\(|Duration|Issue Slots Busy|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|No Eligible|Warp Cycles Per Issued|DRAM Throughput|L2 Hit|Executed Instructions  |stall" "$OUT/ncu-kernel.txt" | head -40
  fi
  ;;
*) echo "usage: device_verify.sh prepare|tests|compare|ab|guards|profile|source"; exit 2 ;;
esac
