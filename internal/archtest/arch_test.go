// Package archtest enforces the import rules of ARCHITECTURE.md's package table,
// so the dependency direction is mechanical rather than a review habit
// (what depguard does in golangci-lint, without the extra tool).
package archtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/mqgate/mqgate"

// forbidden lists, per package (prefix match on the path below the
// module), the module packages it must never import directly.
var forbidden = map[string][]string{
	"storage":              {"server", "api", "cmd", "web", "docs", "migrations"},
	"storage/internal":     {"storage/commitlog", "storage/consumequeue", "storage/index", "storage/message", "storage/offset", "storage/schedule", "storage/storagetest"},
	"storage/message":      {"storage/commitlog", "storage/consumequeue", "storage/index", "storage/offset", "storage/schedule", "storage/internal"},
	"storage/commitlog":    {"storage/message", "storage/consumequeue", "storage/index", "storage/offset", "storage/schedule"},
	"storage/consumequeue": {"storage/commitlog", "storage/message", "storage/index", "storage/offset", "storage/schedule"},
	"storage/index":        {"storage/commitlog", "storage/message", "storage/consumequeue", "storage/offset", "storage/schedule"},
	// The Raft log works through the store's facade and the frame format
	// of the CommitLog, never on the derived files.
	"storage/raftlog": {"server", "api", "cmd", "web", "docs", "migrations", "storage/consumequeue", "storage/index", "storage/offset", "storage/schedule"},
	// A replica of a store over Raft: the facade and the Raft log, never
	// the derived files or anything above storage.
	"storage/shard":   {"server", "api", "cmd", "web", "docs", "migrations", "storage/consumequeue", "storage/index", "storage/offset", "storage/schedule"},
	"server/broker":   {"api", "server/pgmirror", "server/push", "storage/commitlog", "storage/consumequeue", "storage/index", "storage/internal"},
	"server/pgmirror": {"api", "server/broker/consume", "storage/commitlog", "storage/consumequeue", "storage/index", "storage/internal", "storage/schedule"},
	"server/push":     {"server/pgmirror", "server/broker/consume", "storage"},
	"server/auth":     {"api", "server/broker", "server/pgmirror", "server/push", "storage", "web", "docs"},
	"api":             {"server/pgmirror", "server/push", "server/broker/consume", "storage/commitlog", "storage/consumequeue", "storage/index", "storage/internal", "storage/offset", "storage/schedule"},
	"web":             {"api", "server", "storage"},
	"migrations":      {"api", "server", "storage"},
	"cmd/mqgate":      {"storage", "api", "server/broker", "server/pgmirror", "server/push"},

	// The load generator talks HTTP only (its tests start a real server).
	"internal/loadgen": {"storage", "server", "api", "cmd", "web", "docs", "migrations"},
	// So does the history workload and checker (its test builds and runs
	// the binary).
	"internal/clustercheck": {"storage", "server", "api", "cmd", "web", "docs", "migrations", "internal/loadgen"},
	// The background-worker shape is a leaf every package may use (the
	// storage engines included), so it imports nothing of the module.
	"internal/worker": {"storage", "server", "api", "cmd", "web", "docs", "migrations", "internal/loadgen", "internal/clustercheck", "internal/archtest"},
	// The test harnesses: the broker's knows nothing above the broker, the
	// server's nothing above the server.
	"server/broker/brokertest": {"server/servertest", "server/pgmirror", "server/push", "cmd"},
	"server/servertest":        {"cmd"},

	// A leaf: the timer index knows no other package of the module.
	"server/broker/timerindex": {"storage", "api", "server/pgmirror", "server/push", "cmd", "web", "docs", "migrations"},
	// The generated Go client is what users import: nothing of the module
	// (its tests start a real server).
	"clients/go": {"storage", "server", "api", "cmd", "web", "docs", "migrations", "internal", "tools"},
	// The SQS endpoint is an adapter on the broker's facade and the ACL
	// accounts (ARCHITECTURE.md "The broker as a state machine").
	"server/sqs": {"api", "storage", "server/pgmirror", "server/push", "server/broker/consume", "cmd", "web", "docs", "migrations"},
	// A leaf: the SQL92 filter language imports nothing of the module.
	"server/broker/filter": {"storage", "api", "server", "cmd", "web", "docs", "migrations", "internal"},
	// The trace family holds its query, its follower and retention's
	// carry of traces: it reads and writes the store through the storage
	// facade and its leaf packages (never the engines below it), reads the
	// other families' records through their leaf packages and uses
	// internal/worker (all excepted below); what it needs of the broker it
	// declares (trace.Broker), so it never imports server/broker itself.
	"server/broker/trace": {"api", "server", "cmd", "web", "docs", "migrations", "internal",
		"storage/commitlog", "storage/consumequeue", "storage/index", "storage/internal", "storage/raftlog", "storage/shard", "storage/storagetest"},
	// The receipt family (the receipt codec, the keyring and its key
	// record) is a leaf too: the broker holds the ring and proposes keys.
	"server/broker/receipt": {"storage", "api", "server", "cmd", "web", "docs", "migrations", "internal"},
	// The retry family holds its failure path's write too (the retry and
	// dead-letter copies with the progress record that ends the failed
	// deliveries, the ladder's counts, the scheduler's sink dropping a
	// deleted topic's entries), beside the retry policy and the attempt
	// history: it works on the store's facade and its leaf packages
	// (storage, storage/message, storage/offset, storage/schedule; the
	// server/broker row above keeps it off the engines), never on the
	// replication layers under the store; of the server only quote
	// (excepted below): registry and dlq import it (a group's policy, a
	// letter's history), so what it needs of them, of the timer and
	// instance families and of the broker comes in its Config, never as
	// an import of server/broker, api or cmd.
	"server/broker/retry": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The transaction family (its records, the state and its apply, and
	// since the requests moved too: following the queues, the snapshot
	// file, the requests, the roll-back loop, retention's carry) works on
	// the store's facade (storage and its leaf packages; the server/broker
	// row above keeps it off the engines) and asks the broker for the rest
	// through its Config: never server/broker itself nor anything else of
	// server (server/broker/quote excepted below), api or cmd, nor the
	// replication layers under the store; of internal only internal/worker
	// (excepted below).
	"server/broker/txn": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The registry family holds its requests too (the META record codec,
	// the state and its apply, the snapshot files, the registry lock, the
	// topic and group requests with their quotas, the replay at open and
	// the follower's, retention's carry, the receipt key requests): it
	// appends rmq_sys_META and writes the files through the store's facade
	// (storage and its leaf packages; the server/broker row above keeps
	// it off the engines), never the replication layers under the store;
	// of the server it imports the receipt keyring, whose key records are
	// META records, a group's retry policy and the rule for quoting a name
	// in an error (all excepted below); what it needs of the broker (the
	// replay of a system queue, the other families' checks of a group, a
	// group's start offsets, what a group's deletion drops) comes in its
	// Config, so never server/broker itself, api or cmd.
	"server/broker/registry": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The timer family holds its request logic and its services too (the
	// record codecs, the state beside the timer index and its apply,
	// following the queues into the index, the requests, the delivery
	// loop, the index's maintenance, retention's carry): it works on the
	// store's facade (storage and its leaf packages; the server/broker row
	// above keeps it off the engines; nor the replication layers under the
	// store), holds the index (server/broker/timerindex) and uses
	// internal/worker (both excepted below), and asks the broker for the
	// rest through its Config: never server/broker itself nor anything
	// else of server, api or cmd.
	"server/broker/timer": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The consumer-instance family holds its request logic and its leader
	// service (registration with the start offsets, the sweep with its
	// forget records, the snapshot file, the queries), not only its names,
	// set and codec: it may import the store and its leaf packages (the
	// server/broker row still bans the engines' files; nor the
	// replication layers under the store) and, of the server, only the
	// family packages it builds on (progress's Ledger, registry's
	// configurations: excepted below); never server/broker, whose pop
	// states and registry it reaches through instance.Broker.
	"server/broker/instance": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The lease family holds its lease log, not only its codecs and fold:
	// noting lease changes and writing their records, the snapshot
	// workers and file, the follower's and the replicated leader's fold
	// under its lock, which folded leases are still owed; and the pop
	// states with their locks, cursors and leases (the pull, the receipt
	// loop and the send-back that decide with them are server/broker/
	// consume's, above it, which hands the pop states what they ask:
	// whether an offset is acked, a cursor's committed offset; a lease's
	// in-place attempt history, retry's, is opaque to it: retry is above
	// it). It works on the
	// store's facade (storage and its leaf packages, storage/offset's Key
	// among them; the server/broker row above keeps it off the engines;
	// nor the replication layers under the store), reads its records with
	// internal/wire (excepted below), and asks the broker for the rest
	// (progress generations, whether a lease is owed, the epoch counter,
	// the cursors' leases) through its Config: never server/broker itself
	// nor anything else of server, api or cmd.
	"server/broker/lease": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The send family holds its request too (the checks of a send, the
	// messages it builds, the dedup table with the store lookup of a key
	// it no longer holds, the write, the results, the dedup window's
	// expiry): it works on the store's facade (storage and its leaf
	// packages; the server/broker row above keeps it off the engines),
	// never on the replication layers under the store; of the server it
	// reads only the families it builds on — registry (a topic's
	// configuration), timer and txn (what a timer's and a half message's
	// records hold) — and quote (excepted below); what it needs of the
	// broker comes in its Config, so never server/broker itself, api or
	// cmd.
	"server/broker/send": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The progress family holds its request logic, not only its records:
	// the ledger that writes rmq_sys_OFFSET through the store, the
	// consume-from rules, the progress and backlog queries. It may import
	// the store and its leaf packages (no storage row bans them; the
	// server/broker row still bans the engines' files; nor the
	// replication layers under the store) and, of the server, only the
	// family packages it reads (registry's configurations, quote:
	// excepted below); never server/broker, whose pop states, registry,
	// instances, ladder and timers it reaches through the interfaces it
	// declares.
	"server/broker/progress": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The dead-letter family holds its requests too (following
	// rmq_sys_DLQ into the status table, the view, list, get, resend with
	// its pacer, discard, the projection feed, retention's carry): it
	// works on the store's facade (storage and its leaf packages; the
	// server/broker row above keeps it off the engines), never on the
	// replication layers under the store; of the server it reads only
	// what has moved of retry (a letter's attempt history) and quote
	// (excepted below); what it needs of the broker comes in its Config,
	// so never server/broker itself, api or cmd.
	"server/broker/dlq": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The retention family holds the leader's retention decisions (the
	// floors, the logical expiry of a topic with a shorter retention, the
	// carries' order before a deletion, the counts of the unconsumed
	// messages a deletion takes) and the rmq_sys_CUT record with its
	// apply: it works on the store's facade (storage and its leaf
	// packages; the server/broker row above keeps it off the engines),
	// never on the replication layers under the store; of the server it
	// reads only the families it builds on — registry (the topics' and
	// groups' configurations), progress (a group's view of a queue, the
	// retry view's id, the bound of a count) and instance (an instance's
	// progress group, the broadcasting mode) — excepted below; what it
	// needs of the other families (their carries, the records no snapshot
	// covers, the pop states) and of the broker comes in its Config, so
	// never server/broker itself, api or cmd.
	"server/broker/retention": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The consumer's requests (the map of pop states, the pull with its
	// filters and long poll, an ordered message's failure in place, the
	// send-back and the lease reaper, what the lease log asks of the pop
	// states) decide across the state families, so they sit above them:
	// registry, progress, lease, retry, instance, the filter language,
	// the receipt codec and quote (excepted below), and the store's facade
	// with its leaf packages (the server/broker row above keeps it off the
	// engines; nor the replication layers under the store); what else it
	// needs of the broker comes in its Config, never as an import of
	// server/broker, api or cmd. Only the facade imports it (the rows of
	// api, server/push, server/sqs and server/pgmirror ban it).
	"server/broker/consume": {"api", "server", "cmd", "web", "docs", "migrations", "internal", "storage/raftlog", "storage/shard"},
	// The big-endian reader of mqgate's binary records (a leaf: nothing of
	// the module).
	"internal/wire": {"storage", "api", "server", "cmd", "web", "docs", "migrations", "internal/worker", "internal/loadgen", "internal/clustercheck", "internal/testnet", "tools"},
	// The broker's rule for quoting a client's value in an error message,
	// shared by the family packages (a leaf: nothing of the module).
	"server/broker/quote": {"storage", "api", "server", "cmd", "web", "docs", "migrations", "internal"},
	// The Raft messages' network transport knows raftpb, not the shard
	// (its tests run real shards): nothing of storage or of the server.
	"server/peer": {"storage", "api", "server", "cmd", "web", "docs", "migrations", "internal/loadgen"},
}

// excepted lists, per package of forbidden, the packages under one of its
// bans that it may import all the same (prefix match, as there).
var excepted = map[string][]string{
	"server/broker/txn":      {"server/broker/quote", "internal/worker"},
	"server/broker/dlq":      {"server/broker/retry", "server/broker/quote"},
	"server/broker/timer":    {"server/broker/timerindex", "internal/worker"},
	"server/broker/retry":    {"server/broker/quote"},
	"server/broker/registry": {"server/broker/receipt", "server/broker/retry", "server/broker/quote"},
	"server/broker/instance": {"server/broker/progress", "server/broker/registry"},
	"server/broker/send":     {"server/broker/registry", "server/broker/timer", "server/broker/txn", "server/broker/quote"},
	"server/broker/lease":    {"internal/wire"},
	"server/broker/trace": {"internal/worker", "server/broker/dlq", "server/broker/lease", "server/broker/quote",
		"server/broker/receipt", "server/broker/retry", "server/broker/timer", "server/broker/txn"},
	"server/broker/progress":  {"server/broker/registry", "server/broker/quote"},
	"server/broker/retention": {"server/broker/instance", "server/broker/progress", "server/broker/registry"},
	"server/broker/consume": {"server/broker/registry", "server/broker/progress", "server/broker/lease", "server/broker/retry",
		"server/broker/instance", "server/broker/filter", "server/broker/receipt", "server/broker/quote", "internal/wire", "internal/worker"},
}

// testOnly are helper packages no production package may import (one
// helper may build on another: servertest on brokertest).
var testOnly = []string{"storage/storagetest", "server/pgmirror/pgtest", "server/broker/brokertest", "server/servertest"}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			for _, helper := range testOnly {
				if under(dep, helper) && !isTestOnly(rel) {
					t.Errorf("%s imports the test helper %s", rel, dep)
				}
			}
			for scope, bans := range forbidden {
				if !under(rel, scope) {
					continue
				}
				for _, ban := range bans {
					if under(dep, ban) && !under(dep, rel) && !allowedInside(rel, dep) && !isExcepted(scope, dep) {
						t.Errorf("%s must not import %s (rule for %s)", rel, dep, scope)
					}
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no module imports checked: is the module path right?")
	}
}

// isTestOnly reports whether rel is one of the test helper packages.
func isTestOnly(rel string) bool {
	for _, helper := range testOnly {
		if under(rel, helper) {
			return true
		}
	}
	return false
}

// isExcepted reports whether scope's bans let it import dep (excepted).
func isExcepted(scope, dep string) bool {
	for _, ok := range excepted[scope] {
		if under(dep, ok) {
			return true
		}
	}
	return false
}

// under reports whether path is pkg or below it.
func under(path, pkg string) bool { return path == pkg || strings.HasPrefix(path, pkg+"/") }

// allowedInside: the storage root's rule bans nothing of storage itself,
// and a package may use its own internal packages.
func allowedInside(rel, dep string) bool {
	return strings.HasPrefix(dep, "storage/internal") && under(rel, "storage") && !under(rel, "storage/message")
}

// maxTrackedFile bounds the size of a file in the repository: the largest
// are the generated specs (about 150 KB); a build output committed by
// mistake (a 40 MB binary once was) fails here.
const maxTrackedFile = 1 << 20

// TestNoBuildOutputsTracked fails on a tracked file over maxTrackedFile
// or an executable binary (ELF) anywhere in the tree.
func TestNoBuildOutputsTracked(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("no git checkout to list (%v)", err)
	}
	root := strings.TrimSpace(string(top))
	ls := exec.Command("git", "ls-files", "-z")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	names := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(names) < 100 {
		t.Fatalf("git ls-files listed %d files: not the repository", len(names))
	}
	for _, name := range names {
		path := filepath.Join(root, name)
		st, err := os.Lstat(path)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		if st.Size() > maxTrackedFile {
			t.Errorf("%s is %d bytes: a build output or data file committed by mistake? (limit %d)", name, st.Size(), maxTrackedFile)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		_ = f.Close()
		if n == 4 && string(head) == "\x7fELF" {
			t.Errorf("%s is an executable binary: build outputs are not committed (see .gitignore)", name)
		}
	}
}
