#!/usr/bin/env bash
# Side by side, interleaved rounds (A B C … A B C …) so the machine's drift hits every system alike:
#   bare net/http · mqgate sync · mqgate async · NSQ 1.3 HTTP  — single 1 KiB sends (wrk -c64)
#   mqgate sync JSON and binary batch of 100 · NSQ /mpub of 100 — batches (wrk -c16)
#   mqgate pull 32 + ack (16 consumers; JSON and binary pulls) · NATS JetStream fetch 32 + ack
# Usage: make build && MQGATE=bin/mqgate tools/peers/peers.sh      (ROUNDS=3 DUR=8s by default)
# Installs nsqd (module proxy) and wrk (Debian) when missing; nats-server comes from Debian or PATH.
# Only 127.0.0.1 is used; every load is bounded in time. Prints one summary table; raw wrk output in $OUT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-8s}; MQGATE=${MQGATE:?set MQGATE to a built mqgate binary}
MQGATE=$(cd "$(dirname "$MQGATE")" && pwd)/$(basename "$MQGATE")
export PATH=$PATH:/usr/local/go/bin:$(go env GOPATH)/bin
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
command -v nsqd >/dev/null || (cd "$here/tools/nsqd" && go install github.com/nsqio/nsq/apps/nsqd)
command -v nats-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server; }
work=$(mktemp -d /tmp/mqgate-peers.XXXXXX); OUT=${OUT:-$work/raw.txt}
(cd "$here" && go build -o "$work/bin/" ./cmd/...)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work/data"; }
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
P_BARE=$(port); P_SYNC=$(port); P_ASYNC=$(port); P_NSQ=$(port); P_NSQT=$(port); P_NATS=$(port)
mkdir -p "$work/data/nsq" "$work/data/js"
"$work/bin/httpsrv" -addr 127.0.0.1:$P_BARE >/dev/null 2>&1 & pids+=($!)
"$MQGATE" serve --listen 127.0.0.1:$P_SYNC --data-dir "$work/data/sync" --flush sync --log-level warn >"$work/sync.log" 2>&1 & pids+=($!)
"$MQGATE" serve --listen 127.0.0.1:$P_ASYNC --data-dir "$work/data/async" --flush async --log-level warn >"$work/async.log" 2>&1 & pids+=($!)
nsqd --http-address=127.0.0.1:$P_NSQ --tcp-address=127.0.0.1:$P_NSQT --data-path="$work/data/nsq" --mem-queue-size=10000 >"$work/nsq.log" 2>&1 & pids+=($!)
printf 'listen: 127.0.0.1:%s\njetstream { store_dir: "%s" }\n' $P_NATS "$work/data/js" >"$work/nats.conf"
nats-server -c "$work/nats.conf" >"$work/nats.log" 2>&1 & pids+=($!)
sleep 2
for p in $P_SYNC $P_ASYNC; do curl -sf -o /dev/null -X PUT localhost:$p/v1/topics/perf -H 'Content-Type: application/json' -d '{"queues":8}'; done
curl -sf -o /dev/null -X POST "localhost:$P_NSQ/topic/create?topic=bench"
curl -sf -o /dev/null -X POST "localhost:$P_NSQ/channel/create?topic=bench&channel=c1"
declare -A sum
# quiet: before each load, wait (up to QUIET_MAX seconds, 30 by default) until the machine is
# idle — under 10 % of one core busy over half a second — so that one system's background work
# (nsqd writing its disk queue after /mpub, a broker's flusher or compaction) is not charged to
# the next system measured. QUIET=0 turns it off (the shared script's behaviour).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
quiet() {
  [ "${QUIET:-1}" = 1 ] || return 0
  local t0=$SECONDS b0 a0 b1 a1
  while [ $((SECONDS - t0)) -lt "${QUIET_MAX:-30}" ]; do
    read -r b0 a0 < <(busy); sleep 0.5; read -r b1 a1 < <(busy)
    # busy share of all cores × cores = cores busy; under 0.1 of a core is idle
    python3 -c "import sys,os; b,a=$b1-$b0,$a1-$a0; sys.exit(0 if a and b/a*os.cpu_count() < 0.1 else 1)" &&
      { echo "== quiet before $1 after $((SECONDS - t0))s" >>"$OUT"; return 0; }
  done
  echo "quiet: the machine stayed busy for ${QUIET_MAX:-30}s before $1" >&2
}
w() { # name conns script url msgs-per-request
  quiet "$1"
  local r rps; r=$(wrk -t2 -c"$2" -d"$DUR" --latency -s "$here/wrk/$3" "$4"); echo "== $1" >>"$OUT"; echo "$r" >>"$OUT"
  if echo "$r" | grep -qE 'Non-2xx|Socket errors'; then echo "$1: errors under load (see $OUT)" >&2; fi
  rps=$(echo "$r" | awk '/Requests\/sec/{print $2}'); sum[$1]+="$(python3 -c "print($rps*$5)") "
}
for i in $(seq 1 "$ROUNDS"); do
  w bare_single 64 post1k.lua http://127.0.0.1:$P_BARE/topics/t1/messages 1
  w mqgate_sync_single 64 post1k.lua http://127.0.0.1:$P_SYNC/v1/topics/perf/messages 1
  w mqgate_async_single 64 post1k.lua http://127.0.0.1:$P_ASYNC/v1/topics/perf/messages 1
  w nsq_pub 64 post1k.lua "http://127.0.0.1:$P_NSQ/pub?topic=bench" 1
  w mqgate_sync_batch100 16 mqbatch100.lua http://127.0.0.1:$P_SYNC/v1/topics/perf/messages 100
  w mqgate_sync_binbatch100 16 binbatch100.lua http://127.0.0.1:$P_SYNC/v1/topics/perf/messages 100
  w nsq_mpub100 16 mpub100.lua "http://127.0.0.1:$P_NSQ/mpub?topic=bench" 100
  quiet mqgate_pull; r=$("$work/bin/mqgbench" -url http://127.0.0.1:$P_SYNC -topic pull$i -group pb -n 100000 -c 16 -batch 32); echo "$r" >>"$OUT"
  sum[mqgate_sync_pull32_ack]+="$(echo "$r" | sed -E 's/.* = ([0-9.]+) msgs\/s.*/\1/') "
  # The same with the consumers decoding the JSON with encoding/json, as the shared script's client does.
  quiet mqgate_pull_v1json; r=$("$work/bin/mqgbench" -url http://127.0.0.1:$P_SYNC -topic pullv$i -group pb -n 100000 -c 16 -batch 32 -v1json); echo "$r" >>"$OUT"
  sum[mqgate_sync_pull32_ack_v1json]+="$(echo "$r" | sed -E 's/.* = ([0-9.]+) msgs\/s.*/\1/') "
  if [ "${BINARY_PULL:-1}" = 1 ]; then   # BINARY_PULL=0 for a build older than binary pulls
    quiet mqgate_pull_binary; r=$("$work/bin/mqgbench" -url http://127.0.0.1:$P_SYNC -topic pullb$i -group pb -n 100000 -c 16 -batch 32 -binary); echo "$r" >>"$OUT"
    sum[mqgate_sync_pull32_ack_binary]+="$(echo "$r" | sed -E 's/.* = ([0-9.]+) msgs\/s.*/\1/') "
  fi
  quiet jetstream; r=$("$work/bin/natsbench" -url nats://127.0.0.1:$P_NATS -mode=consume -n 100000 -batch=32 -max=40s); echo "$r" >>"$OUT"
  sum[jetstream_fetch32_ack]+="$(echo "$r" | sed -E 's/.*msgs_s=([0-9.]+).*/\1/') "
  if (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then   # RabbitMQ, when this machine runs one: a durable peer
    quiet rabbitmq; r=$("$work/bin/rabbitbench" -mode publish -c 64 -n 60000 -queue-type quorum -max 20s); echo "$r" >>"$OUT"
    sum[rabbitmq_quorum_publish_confirm]+="$(echo "$r" | sed -E 's/.* = ([0-9.]+) msgs\/s.*/\1/') "
    quiet rabbitmq_consume; r=$("$work/bin/rabbitbench" -mode consume -c 16 -prefetch 32 -n 60000 -queue-type quorum -max 30s); echo "$r" >>"$OUT"
    sum[rabbitmq_quorum_consume_ack]+="$(echo "$r" | sed -E 's/.* = ([0-9.]+) msgs\/s.*/\1/') "
  fi
done
med() { python3 -c "import sys,statistics;print('%.0f'%statistics.median(map(float,sys.argv[1:] or [0])))" $1; }
printf '%-26s %12s\n' measurement "msgs/s (median of $ROUNDS)"
for k in bare_single mqgate_sync_single mqgate_async_single nsq_pub mqgate_sync_batch100 mqgate_sync_binbatch100 nsq_mpub100 mqgate_sync_pull32_ack mqgate_sync_pull32_ack_v1json mqgate_sync_pull32_ack_binary jetstream_fetch32_ack rabbitmq_quorum_publish_confirm rabbitmq_quorum_consume_ack; do
  [ -n "${sum[$k]:-}" ] && printf '%-32s %12s\n' "$k" "$(med "${sum[$k]}")"
done
python3 - "$(med "${sum[mqgate_sync_single]}")" "$(med "${sum[mqgate_async_single]}")" "$(med "${sum[nsq_pub]}")" \
  "$(med "${sum[mqgate_sync_batch100]}")" "$(med "${sum[mqgate_sync_binbatch100]}")" "$(med "${sum[nsq_mpub100]}")" "$(med "${sum[mqgate_sync_pull32_ack]}")" "$(med "${sum[mqgate_sync_pull32_ack_binary]:-}")" "$(med "${sum[jetstream_fetch32_ack]}")" "$(med "${sum[mqgate_sync_pull32_ack_v1json]}")" <<'PY'
import sys
s, a, n, b, bb, m, p, pb, j, pv = map(float, sys.argv[1:])
print("ratios: sync/nsq_pub %.2f  async/nsq_pub %.2f  json_batch/nsq_mpub %.2f  binary_batch/nsq_mpub %.2f  pull+ack/jetstream %.2f  (encoding/json client %.2f)  binary_pull+ack/jetstream %.2f" % (s / n, a / n, b / m, bb / m, p / j, pv / j, pb / j if pb else float("nan")))
PY
echo "raw output: $OUT"
