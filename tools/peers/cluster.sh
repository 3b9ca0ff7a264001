#!/usr/bin/env bash
# Replicated sends against single-node sends, interleaved: per round, one
# server alone on a fresh data dir, then a three-replica cluster on one
# machine for each binary given, each under `mqgate bench produce`
# (sync flush, 1 KiB bodies, C connections to the leader, DUR each).
# Prints msgs/s, p50 and p99 per run.
# Usage: tools/peers/cluster.sh BIN [BIN…]   (the first one also runs the single node and the load)
#   e.g. go build -o /tmp/old ./cmd/mqgate   (at the base commit), then, at the new one:
#        go build -o /tmp/new ./cmd/mqgate && tools/peers/cluster.sh /tmp/new /tmp/old
# ROUNDS (3), DUR (8s), C (32); PIN=1 puts the single server, or the leader, alone on CPU 0 and
# everything else (followers, the load tool) on CPU 1.
set -euo pipefail
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-8s}; C=${C:-32}; PIN=${PIN:-}
d=$(mktemp -d "${TMPDIR:-/tmp}/mqgate-cluster.XXXXXX")
trap 'pkill -f "data-dir $d/" 2>/dev/null || true; sleep 0.5; rm -rf "$d"' EXIT
on() { if [ -n "$PIN" ]; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }
secs=${DUR%s}
report() { awk -v n="$1" -v s="$secs" '/send /{printf "%-28s msgs/s %6d  p50 %-8s p99 %s\n", n, $5/s, $6, $8}'; }
single() {
  rm -rf "$d/s"
  on 0 "$1" serve --listen 127.0.0.1:19280 --data-dir "$d/s" --log-level warn >"$d/s.log" 2>&1 &
  sleep 2
  on 1 "$1" bench produce --url http://127.0.0.1:19280 -c "$C" --duration "$DUR" 2>&1 | report "single $(basename "$1")"
  pkill -f "data-dir $d/s" || true; sleep 1
}
cluster() {
  local peers=1=127.0.0.1:19291,2=127.0.0.1:19292,3=127.0.0.1:19293
  rm -rf "$d/r1" "$d/r2" "$d/r3"
  for i in 1 2 3; do
    on 1 "$1" serve --listen 127.0.0.1:1928$i --data-dir "$d/r$i" --node-id $i --peers $peers --log-level warn >"$d/r$i.log" 2>&1 &
  done
  local lead=""
  for _ in $(seq 100); do
    lead=$(curl -sf 127.0.0.1:19281/v1/cluster | sed -n 's/.*"leader":\([0-9]*\).*"serving".*/\1/p') && [ -n "$lead" ] && break
    sleep 0.1
  done
  if [ -n "$PIN" ]; then
    for t in /proc/$(pgrep -f "data-dir $d/r$lead")/task/*; do taskset -cp 0 "${t##*/}" >/dev/null; done
  fi
  sleep 1
  on 1 "$2" bench produce --url http://127.0.0.1:1928"$lead" -c "$C" --duration "$DUR" 2>&1 | report "cluster $(basename "$1")"
  pkill -f "data-dir $d/r" || true; sleep 1
}
for _ in $(seq "$ROUNDS"); do
  single "$1"
  for b in "$@"; do cluster "$b" "$1"; done
done
