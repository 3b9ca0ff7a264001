#!/usr/bin/env bash
# One mqgate build alone on a fresh data dir: a wrk load of tools/peers/wrk/<script> for DUR,
# then the requests per second, messages per second and the server's CPU per request (from /proc).
# Usage: tools/peers/cpu.sh BIN sync|async [script conns msgs-per-request]
#   e.g. tools/peers/cpu.sh bin/mqgate sync binbatch100.lua 16 100      (DUR=4s by default)
# Run builds interleaved (A B A B …) and compare medians: the machine drifts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=$1; FLUSH=$2; S=${3:-post1k.lua}; C=${4:-64}; M=${5:-1}; DUR=${DUR:-4s}; PORT=${PORT:-19111}
d=$(mktemp -d /tmp/mqgate-cpu.XXXXXX)
"$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$d/data" --flush "$FLUSH" --log-level warn >"$d/log" 2>&1 & p=$!
trap 'kill $p 2>/dev/null || true; wait $p 2>/dev/null || true; rm -rf "$d"' EXIT
sleep 1.5
curl -sf -o /dev/null -X PUT localhost:$PORT/v1/topics/perf -H 'Content-Type: application/json' -d '{"queues":8}'
t0=$(awk '{print $14+$15}' /proc/$p/stat)
r=$(wrk -t2 -c"$C" -d"$DUR" -s "$here/wrk/$S" http://127.0.0.1:$PORT/v1/topics/perf/messages | awk '/Requests\/sec/{print $2}')
t1=$(awk '{print $14+$15}' /proc/$p/stat)
python3 - "$BIN" "$FLUSH" "$S" "$r" "$M" "$((t1 - t0))" "${DUR%s}" "$(getconf CLK_TCK)" <<'PY'
import sys
b, f, s, r, m, ticks, dur, hz = sys.argv[1:]
r, cores = float(r), int(ticks) / float(hz) / float(dur)
print("%s %s %s rps=%.0f msgs=%.0f cores=%.2f us/req=%.1f" % (b.split("/")[-1], f, s, r, r * int(m), cores, cores / r * 1e6))
PY
