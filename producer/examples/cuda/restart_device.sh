#!/bin/bash
# The sidecar SIGKILLed (with its embedded NATS server) while the CUDA
# stencil publishes device buffers, then restarted on the same state: every
# step must still be stored once, identical to the CPU codec (the producer
# keeps its buffer until the result; the restarted sidecar gets the
# notification again after --ack-wait and opens the handles anew).
# Needs what run_device.sh needs; logs to $OUT.
set -u
R=${R:-.devrun}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$R/lib:${LD_LIBRARY_PATH:-}
FZS=$PWD/$R/fzsidecar
E=producer/examples/cuda
if [ ! -f cuda/build/libfzgpu.so ]; then mkdir -p cuda/build && cp "$R/libfzgpu.so" cuda/build/; fi
[ -x /tmp/stencil ] || nvcc -O2 -arch=sm_90 -Iproducer/include "$E/stencil.cu" -L"$R/lib" -lfzproducer \
  -Xlinker -rpath-link="$R/lib" -o /tmp/stencil || exit 1
rm -rf /dev/shm/fzsidecar /tmp/fzdata-r /dev/shm/sink-r /tmp/sr
serve() {
  "$FZS" serve --backend gpu --sink /dev/shm/sink-r --data-dir /tmp/fzdata-r --metrics-listen off --ack-wait 2s >>"$OUT/serve-restart.log" 2>&1 &
  SERVE=$!
  for i in $(seq 100); do grep -q "fzsidecar ready" "$OUT/serve-restart.log" 2>/dev/null && [ "$(grep -c 'fzsidecar ready' "$OUT/serve-restart.log")" -ge "$1" ] && return 0; sleep 0.1; done
  echo "serve did not start"; return 1
}
serve 1 || exit 1
mkdir -p /tmp/sr
# 20 snapshots of 64 MiB; the sidecar is killed once 3 are stored, while
# the producer has the next one published (it publishes right after each
# result)
timeout 180 /tmp/stencil --nx 4096 --ny 4096 --steps 8000 --every 400 --dump /tmp/sr --run restart >"$OUT/stencil-restart.log" 2>&1 &
ST=$!
for i in $(seq 2000); do [ "$(grep -c 'snapshot stored' "$OUT/serve-restart.log")" -ge 3 ] && break; sleep 0.005; done
kill -KILL $SERVE; wait $SERVE 2>/dev/null
echo "sidecar SIGKILLed at $(date +%T.%N) after $(grep -c 'snapshot stored' "$OUT/serve-restart.log") stored snapshots"
sleep 1
serve 2 || exit 1
wait $ST
echo "stencil exit $?"; tail -2 "$OUT/stencil-restart.log"
echo "stored snapshots logged by the two sidecars: $(grep -c 'snapshot stored' "$OUT/serve-restart.log") (20 steps)"
python3 $E/check_stored.py "$FZS" /dev/shm/sink-r restart temperature /tmp/sr 4096x4096 1e-3 2>&1 | tail -3
"$FZS" ls --sink /dev/shm/sink-r 2>&1 | tail -3
kill -TERM $SERVE; wait $SERVE
