#!/usr/bin/env bash
# Replicated sends against single-node sends, interleaved: per round, one
# server alone on a fresh data dir, then a three-replica cluster on one
# machine for each binary given, each under `mqgate bench produce`
# (sync flush, 1 KiB bodies, C connections to the leader, DUR each).
# Prints msgs/s, p50 and p99 per run, and the CPU each server spent per message
# (utime+stime from /proc, in µs): on a machine with fewer cores than servers plus
# the load tool, single µs/msg over the leader's is the ratio of one core's work.
# Usage: tools/peers/cluster.sh BIN [BIN…]   (the first one also runs the single node and the load)
#   e.g. go build -o /tmp/old ./cmd/mqgate   (at the base commit), then, at the new one:
#        go build -o /tmp/new ./cmd/mqgate && tools/peers/cluster.sh /tmp/new /tmp/old
# The cluster's CPU columns are the leader's, then the followers'.
# ROUNDS (3), DUR (8s), C (32); PIN=1 puts the single server, or the leader, alone on CPU 0 and
# everything else (followers, the load tool) on CPU 1.
set -euo pipefail
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-8s}; C=${C:-32}; PIN=${PIN:-}
d=$(mktemp -d "${TMPDIR:-/tmp}/mqgate-cluster.XXXXXX")
trap 'pkill -f "data-dir $d/" 2>/dev/null || true; sleep 0.5; rm -rf "$d"' EXIT
on() { if [ -n "$PIN" ]; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }
# bg CPU CMD… starts CMD in the background as on does; $! is its pid.
bg() { if [ -n "$PIN" ]; then taskset -c "$1" "${@:2}" & else "${@:2}" & fi; }
secs=${DUR%s}
tick=$(getconf CLK_TCK)
cpu() { local t=0; for p in "$@"; do t=$(awk -v t="$t" '{print t + $14 + $15}' "/proc/$p/stat"); done; echo "$t"; }
# report NAME PID… reads the load tool's output; the CPU counted is the PIDs' since mark.
mark() { before=(); for p in "$@"; do before+=("$(cpu "$p")"); done; }
report() {
  local n=$1; shift
  local out; out=$(awk '/send /{print $5, $6, $8}')
  local msgs=${out%% *} cpus="" i=0
  for p in "$@"; do
    cpus="$cpus $(awk -v a="$(cpu "$p")" -v b="${before[$i]}" -v t="$tick" -v m="$msgs" 'BEGIN{printf "%.0f", (a-b)/t*1e6/(m>0?m:1)}')"
    i=$((i+1))
  done
  echo "$out" | awk -v n="$n" -v s="$secs" -v c="$cpus" '{printf "%-28s msgs/s %6d  p50 %-8s p99 %-8s cpu µs/msg%s\n", n, $1/s, $2, $3, c}'
}
single() {
  rm -rf "$d/s"
  bg 0 "$1" serve --listen 127.0.0.1:19280 --data-dir "$d/s" --log-level warn >"$d/s.log" 2>&1
  local pid=$!
  sleep 2
  mark "$pid"
  on 1 "$1" bench produce --url http://127.0.0.1:19280 -c "$C" --duration "$DUR" 2>&1 | report "single $(basename "$1")" "$pid"
  pkill -f "data-dir $d/s" || true; sleep 1
}
cluster() {
  local peers=1=127.0.0.1:19291,2=127.0.0.1:19292,3=127.0.0.1:19293 pids=()
  rm -rf "$d/r1" "$d/r2" "$d/r3"
  for i in 1 2 3; do
    bg 1 "$1" serve --listen 127.0.0.1:1928$i --data-dir "$d/r$i" --node-id $i --peers $peers --log-level warn >"$d/r$i.log" 2>&1
    pids[$i]=$!
  done
  local lead=""
  for _ in $(seq 100); do
    lead=$(curl -sf 127.0.0.1:19281/v1/cluster | sed -n 's/.*"leader":\([0-9]*\).*"serving".*/\1/p') && [ -n "$lead" ] && break
    sleep 0.1
  done
  if [ -n "$PIN" ]; then
    for t in /proc/"${pids[$lead]}"/task/*; do taskset -cp 0 "${t##*/}" >/dev/null; done
  fi
  sleep 1
  local order=("${pids[$lead]}")
  for i in 1 2 3; do [ "$i" = "$lead" ] || order+=("${pids[$i]}"); done
  mark "${order[@]}"
  on 1 "$2" bench produce --url http://127.0.0.1:1928"$lead" -c "$C" --duration "$DUR" 2>&1 | report "cluster $(basename "$1")" "${order[@]}"
  pkill -f "data-dir $d/r" || true; sleep 1
}
for _ in $(seq "$ROUNDS"); do
  single "$1"
  for b in "$@"; do cluster "$b" "$1"; done
done
