#!/usr/bin/env bash
# One server alone on a fresh data dir: a wrk load of tools/peers/wrk/<script> for DUR, then the
# requests per second, messages per second and the server's CPU per request (from /proc), split
# into user and system time.
# Usage: tools/peers/cpu.sh BIN sync|async [script conns msgs-per-request]
#   e.g. tools/peers/cpu.sh bin/mqgate sync binbatch100.lua 16 100      (DUR=4s by default)
#        tools/peers/cpu.sh bare -      the bare net/http handler (cmd/httpsrv), single sends
#        tools/peers/cpu.sh nsq -       nsqd's POST /pub, single sends (nsqd from the PATH)
# TMPDIR chooses where the data dir goes (TMPDIR=/dev/shm: a tmpfs, where fdatasync is free).
# Run builds interleaved (A B A B …) and compare medians: the machine drifts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=$1; FLUSH=$2; S=${3:-post1k.lua}; C=${4:-64}; M=${5:-1}; DUR=${DUR:-4s}; PORT=${PORT:-19111}
d=$(mktemp -d "${TMPDIR:-/tmp}/mqgate-cpu.XXXXXX")
url=http://127.0.0.1:$PORT/v1/topics/perf/messages
case $BIN in
bare)
  (cd "$here" && go build -o "$d/httpsrv" ./cmd/httpsrv)
  "$d/httpsrv" -addr 127.0.0.1:$PORT >"$d/log" 2>&1 & p=$!
  url=http://127.0.0.1:$PORT/topics/t1/messages ;;
nsq)
  mkdir -p "$d/nsq"
  nsqd --http-address=127.0.0.1:$PORT --tcp-address=127.0.0.1:$((PORT + 1)) --data-path="$d/nsq" --mem-queue-size=10000 >"$d/log" 2>&1 & p=$!
  url="http://127.0.0.1:$PORT/pub?topic=bench" ;;
*)
  "$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$d/data" --flush "$FLUSH" --log-level warn >"$d/log" 2>&1 & p=$! ;;
esac
trap 'kill $p 2>/dev/null || true; wait $p 2>/dev/null || true; rm -rf "$d"' EXIT
sleep 1.5
case $BIN in
bare) ;;
nsq)
  curl -sf -o /dev/null -X POST "localhost:$PORT/topic/create?topic=bench"
  curl -sf -o /dev/null -X POST "localhost:$PORT/channel/create?topic=bench&channel=c1" ;;
*) curl -sf -o /dev/null -X PUT localhost:$PORT/v1/topics/perf -H 'Content-Type: application/json' -d '{"queues":8}' ;;
esac
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$p/stat)
r=$(wrk -t2 -c"$C" -d"$DUR" -s "$here/wrk/$S" "$url" | awk '/Requests\/sec/{print $2}')
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$p/stat)
python3 - "$BIN" "$FLUSH" "$S" "$r" "$M" "$((u1 - u0))" "$((s1 - s0))" "${DUR%s}" "$(getconf CLK_TCK)" <<'PY'
import sys
b, f, s, r, m, ut, st, dur, hz = sys.argv[1:]
r, hz, dur = float(r), float(hz), float(dur)
user, sys_ = int(ut) / hz / dur, int(st) / hz / dur
cores = user + sys_
print("%s %s %s rps=%.0f msgs=%.0f cores=%.2f us/req=%.1f (user %.1f, system %.1f)" % (
    b.split("/")[-1], f, s, r, r * int(m), cores, cores / r * 1e6, user / r * 1e6, sys_ / r * 1e6))
PY
