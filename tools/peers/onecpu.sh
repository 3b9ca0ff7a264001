#!/usr/bin/env bash
# Single 1 KiB sends (wrk/post1k.lua, 64 connections) on one CPU: builds side by side in interleaved
# rounds, each server pinned to CPU 0 (taskset: Go then runs it with GOMAXPROCS=1, as in a container
# limited to one CPU) and the load tool to CPU 1; sync and async sends on one CPU, and sync sends
# with the server on both CPUs. Prints the median msgs/s of each and the records each CommitLog
# flush carried (from /metrics).
# Builds run in the order given in odd rounds and reversed in even ones.
# Usage: tools/peers/onecpu.sh BIN_BEFORE BIN_AFTER [more builds…]   (ROUNDS=4 DUR=3s by default;
#        CONFIGS='sync 0-1' measures only sync sends on both CPUs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-4}; DUR=${DUR:-3s}
IFS=, read -r -a CONFIGS <<<"${CONFIGS:-sync 0,async 0,sync 0-1}"   # "flush server-CPUs", comma-separated
BINS=(); for b in "$@"; do BINS+=("$(cd "$(dirname "$b")" && pwd)/$(basename "$b")"); done
[ ${#BINS[@]} -gt 0 ] || { echo "usage: $0 BIN [BIN…]" >&2; exit 2; }
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
work=$(mktemp -d /tmp/mqgate-onecpu.XXXXXX); p=
cleanup() { [ -n "$p" ] && kill "$p" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
metric() { curl -s "localhost:$2/metrics" | awk -v k="$1" '$1==k{print $2}'; }
# run BIN FLUSH CPUS: one server on a fresh data dir, one load; appends "rate records/flush" to $work/<key>
run() {
  local bin=$1 fl=$2 cpus=$3 key P A a0 f0 a1 f1 r
  key="$(basename "$(dirname "$bin")")/$(basename "$bin") $fl cpus=$cpus"; P=$(port); A=$(port)
  taskset -c "$cpus" "$bin" serve --listen 127.0.0.1:$P --admin-listen 127.0.0.1:$A --data-dir "$work/data" \
    --flush "$fl" --log-level warn >"$work/log" 2>&1 & p=$!
  for _ in $(seq 50); do curl -sf -o /dev/null localhost:$A/metrics && break; sleep 0.1; done
  curl -sf -o /dev/null -X PUT localhost:$P/v1/topics/perf -H 'Content-Type: application/json' -d '{"queues":8}'
  a0=$(metric mqgate_commitlog_appends_total $A); f0=$(metric mqgate_commitlog_flushes_total $A)
  r=$(taskset -c 1 wrk -t1 -c64 -d"$DUR" -s "$here/wrk/post1k.lua" http://127.0.0.1:$P/v1/topics/perf/messages | awk '/Requests\/sec/{print $2}')
  a1=$(metric mqgate_commitlog_appends_total $A); f1=$(metric mqgate_commitlog_flushes_total $A)
  kill "$p"; wait "$p" 2>/dev/null || true; p=; rm -rf "$work/data"
  echo "$r $(python3 -c "import sys;a0,a1,f0,f1=map(float,sys.argv[1:]);print('%.1f'%((a1-a0)/max(1,f1-f0)))" "$a0" "$a1" "$f0" "$f1")" >>"$work/$(echo "$key" | tr ' /=' '___')"
  echo "$key: $r msgs/s" >&2
}
for i in $(seq "$ROUNDS"); do
  order=("${BINS[@]}")   # A B, then B A: what a run leaves behind (writeback) weighs on every build alike
  if [ $((i % 2)) = 0 ]; then order=(); for ((j = ${#BINS[@]} - 1; j >= 0; j--)); do order+=("${BINS[j]}"); done; fi
  for cfg in "${CONFIGS[@]}"; do
    for bin in "${order[@]}"; do run "$bin" $cfg; sleep 1; done
  done
done
printf '%-40s %12s %14s\n' "build, flush, server CPUs" "msgs/s (med)" "records/flush"
for cfg in "${CONFIGS[@]}"; do
  read -r fl cpus <<<"$cfg"
  for bin in "${BINS[@]}"; do
    key="$(basename "$(dirname "$bin")")/$(basename "$bin") $fl cpus=$cpus"
    f="$work/$(echo "$key" | tr ' /=' '___')"
    python3 - "$key" "$f" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[2])]
print('%-40s %12.0f %14s' % (sys.argv[1], statistics.median(float(r[0]) for r in rows), '-' if 'async' in sys.argv[1] else '%.1f' % statistics.median(float(r[1]) for r in rows)))
PY
  done
done
