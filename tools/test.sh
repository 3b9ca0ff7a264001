#!/usr/bin/env bash
# make test (what CI runs): every check of `make lint` and `go test -race
# ./...`, in three steps so that the slow parts overlap:
#   1. the checks that regenerate files in the tree (docs/, clients/go,
#      clients/ts/src/schema.ts) and fail when they were stale — first,
#      because the tests compile and read those files (a failure is
#      reported at the end; the rest still runs);
#   2. the race tests in the foreground and, once the first test binary
#      runs, the remaining lint (gofmt, go vet, staticcheck, the
#      TypeScript typecheck, the spec's lint and breaking-change check) in
#      the background; the tests' output shows as go test prints it
#      (tools/testsum reads go test -json). The tests run with -vet=off:
#      the lint's go vet ./... runs every check of the subset go test
#      would run again;
#   3. the lint's output, then the summary: the PostgreSQL tests skipped
#      (TEST_DATABASE_URL unset) and, last, "N passed, N failed".
# Exit status 0 only when everything passed.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
PKGS=${PKGS:-./...}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s; }
t0=$(now)
echo "== lint (generated files): $MAKE lint-generated"
"$MAKE" --no-print-directory lint-generated
genrc=$?
t1=$(now)

"$GO" build -o "$tmp/testsum" ./tools/testsum || exit 1
# The lint starts once the first test binary runs: until then go test
# compiles every package for the race detector on both CPUs, and the
# lint's own compiles (go vet, staticcheck, oasdiff) would only slow that
# down. The long test packages then leave a CPU partly idle (they wait on
# leases, long polls and restarts), which the lint fills.
(
	while [ ! -e "$tmp/tests.started" ]; do sleep 1; done
	s=$(now)
	"$MAKE" --no-print-directory lint-static >"$tmp/lint.log" 2>&1
	echo $? >"$tmp/lint.rc"
	echo $(($(now) - s)) >"$tmp/lint.secs"
) &
lint=$!

# The tests' temporary files (t.TempDir, os.MkdirTemp) go to tmpfs when
# /dev/shm has room (8 GiB free): thousands of stores created, synced and
# deleted cost the disk's journal minutes of CPU on a 2-core machine, and
# no test needs a disk's durability (kill -9 leaves the page cache;
# crash images are built by the tests; the disk-full tests mount their own
# tmpfs). The directory is world-writable with the sticky bit, as /tmp
# is: the throwaway PostgreSQL runs as the postgres user. TMPDIR set by
# the caller wins.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')" -ge $((8 * 1024 * 1024)) ] 2>/dev/null; then
	export TMPDIR
	TMPDIR=$(mktemp -d /dev/shm/mqgate-test.XXXXXX)
	chmod 1777 "$TMPDIR"
	trap 'rm -rf "$tmp" "$TMPDIR"' EXIT
	echo "== the tests' temporary files on tmpfs: $TMPDIR"
fi

# go test runs two packages at a time, in the order they are named; the
# whole tree (./...) names them alphabetically, so the three packages of
# three to four minutes each (server, server/broker, cmd/mqgate) started
# late and ran on alone at the end. Named first, they start first and the
# short ones fill in beside them (the longest first: most of a minute of
# the run). So do the ones of about a minute (server/sqs, storage,
# internal/clustercheck, internal/loadgen, server/broker/timerindex):
# named in the alphabetical rest, server/sqs started last and ran alone.
run=$PKGS
if [ "$PKGS" = "./..." ]; then
	first="./server ./server/broker ./cmd/mqgate ./server/sqs ./storage ./internal/clustercheck ./internal/loadgen ./server/broker/timerindex"
	rest=$("$GO" list ./... | sed 's#^github.com/mqgate/mqgate#.#' | grep -vxF -e ./server -e ./server/broker -e ./cmd/mqgate -e ./server/sqs -e ./storage -e ./internal/clustercheck -e ./internal/loadgen -e ./server/broker/timerindex)
	run="$first $(echo $rest)"
fi
# Two packages at a time, go test's default on 2 CPUs: three (-p 3) took
# 8-9 minutes instead of 9-10, but one run in four slowed the long
# packages by half and failed two tests that wait on wall time.
echo "== go test -race -vet=off -count=1 -timeout 30m $PKGS (the longest first; with $MAKE lint-static in the background)"
"$GO" test -race -vet=off -count=1 -timeout 30m -json $run 2>&1 |
	tee >(grep -m 1 -q '"Action":"start"' && touch "$tmp/tests.started"; cat >/dev/null) |
	"$tmp/testsum" -summary "$tmp/summary"
tests=$?
touch "$tmp/tests.started" # no test binary ran (a build failed): the lint still runs
t2=$(now)
wait "$lint"
lintrc=$(cat "$tmp/lint.rc")

echo "== $MAKE lint-static"
cat "$tmp/lint.log"
if [ "$genrc" = 0 ] && [ "$lintrc" = 0 ]; then
	echo "lint: ok"
else
	echo "lint: FAILED (lint-generated exit $genrc, lint-static exit $lintrc)"
fi
echo "time: lint-generated $((t1 - t0))s, tests $((t2 - t1))s, lint-static $(cat "$tmp/lint.secs")s (beside the tests), all $(($(now) - t0))s"
cat "$tmp/summary"
[ "$tests" = 0 ] && [ "$genrc" = 0 ] && [ "$lintrc" = 0 ]
