package broker_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// brokerAck is one acknowledged send.
type brokerAck struct {
	id, topic, body string
	queue           int32
	offset          int64
}

// brokerFloor is a committed offset the broker acknowledged: an ack, nack
// or commit that returned nil.
type brokerFloor struct {
	group, topic string
	queue        int32
	offset       int64
}

// brokerTxn is one acknowledged transaction step: its send (state
// pending), its commit or its rollback.
type brokerTxn struct{ id, body, state string }

// brokerLease is a lease a pull answered with (of an hour: it outlives
// the test).
type brokerLease struct{ receipt, body string }

// brokerLabel is what a crash point knows was acknowledged before it.
type brokerLabel struct{ sends, floors, topics, groups, txns, leases int }

type brokerLog struct {
	mu     sync.Mutex
	sends  []brokerAck
	floors []brokerFloor
	topics []string
	groups []string
	txns   []brokerTxn
	leases []brokerLease
}

func (l *brokerLog) label() any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return brokerLabel{len(l.sends), len(l.floors), len(l.topics), len(l.groups), len(l.txns), len(l.leases)}
}

// TestBrokerCrashImageSweep runs a broker whose store writes every file
// (CommitLog, ConsumeQueues, index, checkpoint, queue table, config/*
// snapshots: topics.json, groups.json, offsets.snapshot, delay.progress,
// receipt.key, transactions.snapshot) through the recording file system,
// through topic and group creation, sends, pulls, acks, a nack (a retry
// through the delay-level scheduler), delayed timers, offset commits,
// transactions (sent, committed, rolled back, left open), leases left
// running and metadata snapshots, and opens a broker on the crash images
// of many points of the run. Each must open, serve every acknowledged
// message by its queue offset and id, know every acknowledged topic and
// group, never report a committed offset below one the broker
// acknowledged, know every acknowledged transaction as it was
// acknowledged (a committed one's message by its id), and keep every lease
// a pull answered with: not offered again, its receipt ok.
func TestBrokerCrashImageSweep(t *testing.T) {
	rounds, every, lim := 8, 1, storagetest.SweepLimits{Points: 80, PerPoint: 8, Seed: 2}
	if os.Getenv("LONG") != "" {
		rounds, every, lim = 20, 1, storagetest.SweepLimits{Points: 300, PerPoint: 16, Seed: 2}
	}
	ctx := context.Background()
	dir := t.TempDir()
	rec := storagetest.NewCrashRecorder(t, dir, every)
	var log brokerLog
	rec.Label(log.label)
	opts := brokertest.Options(dir)
	opts.MaxMessageSize = 4 << 10
	opts.SegmentSize = 80 << 10 // about the smallest that fits the broker's largest record: rolls every few rounds
	opts.SnapshotInterval = 10 * time.Millisecond
	opts.Storage.FS = rec.FS()
	opts.Storage.QueueEntriesPerFile = 16
	opts.Storage.IndexSlots = 64
	opts.Storage.IndexEntries = 256
	opts.Storage.CheckpointInterval = 10 * time.Millisecond
	opts.Storage.ScrubRate = -1
	b, err := broker.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders", "audit"} {
		if _, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: name, Queues: 2}); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		log.topics = append(log.topics, name)
		log.mu.Unlock()
	}
	if _, _, err := b.PutGroup(ctx, broker.GroupConfig{Name: "g1"}); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	log.groups = append(log.groups, "g1")
	log.mu.Unlock()

	seq := 0
	var sentTxns []brokerTxn
	for r := 0; r < rounds; r++ {
		for _, topic := range []string{"orders", "audit"} {
			var msgs []broker.SendMessage
			for i := 0; i < 4; i++ {
				m := broker.SendMessage{Body: fmt.Appendf(nil, "%s-%03d-%0*d", topic, seq, 1500+seq%700, 0)}
				if seq%9 == 4 {
					m.DelayMs = 3_600_000 // a pending timer
				}
				msgs = append(msgs, m)
				seq++
			}
			res, err := b.Send(ctx, topic, msgs)
			if err != nil {
				t.Fatal(err)
			}
			log.mu.Lock()
			for i, sr := range res {
				if msgs[i].DelayMs == 0 {
					log.sends = append(log.sends, brokerAck{sr.MessageID, topic, string(msgs[i].Body), sr.QueueID, sr.QueueOffset})
				}
			}
			log.mu.Unlock()
		}
		// A transaction per round; the one of the round before is
		// committed or rolled back (every third is left open).
		body := fmt.Sprintf("txn-%03d", r)
		res, err := b.Send(ctx, "audit", []broker.SendMessage{{Body: []byte(body), Transactional: true, ProducerGroup: "pg", CheckAfterMs: 3_600_000}})
		if err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		log.txns = append(log.txns, brokerTxn{res[0].TransactionID, body, broker.TxnPending})
		log.mu.Unlock()
		sentTxns = append(sentTxns, log.txns[len(log.txns)-1])
		if r > 0 && (r-1)%3 != 2 {
			prev := sentTxns[r-1]
			end, state := b.CommitTransaction, broker.TxnCommitted
			if r%2 == 0 {
				end, state = b.RollbackTransaction, broker.TxnRolledBack
			}
			if _, err := end(ctx, prev.id); err != nil {
				t.Fatal(err)
			}
			log.mu.Lock()
			log.txns = append(log.txns, brokerTxn{prev.id, prev.body, state})
			log.mu.Unlock()
		}
		got, err := b.Pull(ctx, broker.PullRequest{Group: "g1", Topic: "orders", MaxMessages: 32, Wait: time.Second, Invisible: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var acks []string
		var nacks []broker.NackItem
		for i, m := range got {
			if m.ReconsumeTimes > 0 {
				acks = append(acks, m.Receipt)
				continue
			}
			if i == 0 && r%2 == 0 {
				nacks = append(nacks, broker.NackItem{Receipt: m.Receipt, DelayLevel: 1, Reason: "sweep"})
				continue
			}
			acks = append(acks, m.Receipt)
		}
		if len(nacks) > 0 {
			if _, err := b.Nack(ctx, "g1", nacks); err != nil {
				t.Fatal(err)
			}
		}
		if len(acks) > 0 { // none when the pull brought only the message nacked above
			if _, err := b.Ack(ctx, "g1", acks); err != nil {
				t.Fatal(err)
			}
		}
		// Every delivery of these queues up to the pulled ones is settled.
		done := map[int32]int64{}
		for _, m := range got {
			if m.Topic == "orders" && m.ReconsumeTimes == 0 {
				done[m.QueueID] = max(done[m.QueueID], m.QueueOffset+1)
			}
		}
		prog, err := b.Progress(ctx, "g1")
		if err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		for _, p := range prog {
			if p.Topic == "orders" && p.QueueID >= 0 && p.ConsumerOffset > 0 {
				log.floors = append(log.floors, brokerFloor{"g1", "orders", p.QueueID, min(p.ConsumerOffset, done[p.QueueID])})
			}
		}
		log.mu.Unlock()
		// A lease left running: a third group takes one message of the
		// other topic for an hour.
		held, err := b.Pull(ctx, broker.PullRequest{Group: "g3", Topic: "audit", MaxMessages: 1, Wait: time.Second, Invisible: time.Hour})
		if err != nil || len(held) != 1 {
			t.Fatalf("pull for g3: %v (%d messages)", err, len(held))
		}
		log.mu.Lock()
		if r == 0 {
			log.groups = append(log.groups, "g3")
		}
		log.mu.Unlock()
		// An explicit commit for a second group on the other topic. A
		// pull does not wait for its lease record's flush, so a crash of
		// the machine may take the lease back until a reply that waited
		// for a flush after it: this commit's. Only then is it promised.
		commit := []broker.OffsetCommit{{Topic: "audit", QueueID: int32(r % 2), Offset: int64(r + 1)}}
		if err := b.CommitOffsets(ctx, "g2", commit); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		log.leases = append(log.leases, brokerLease{held[0].Receipt, string(held[0].Body)})
		if r == 0 {
			log.groups = append(log.groups, "g2")
		}
		log.floors = append(log.floors, brokerFloor{"g2", "audit", commit[0].QueueID, commit[0].Offset})
		log.mu.Unlock()
		time.Sleep(15 * time.Millisecond) // let snapshots and checkpoints run
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	points := append(rec.Points(), rec.Capture(log.label()))
	images := storagetest.ForEachImage(t, points, lim, func(t testing.TB, img string, label any, name string) {
		checkBrokerImage(t, img, opts, &log, label.(brokerLabel), name)
	})
	t.Logf("%d file operations recorded, %d crash points taken, %d crash images recovered; %d sends, %d commits, %d topics, %d groups, %d transaction steps acknowledged",
		rec.Ops(), len(points), images, len(log.sends), len(log.floors), len(log.topics), len(log.groups), len(log.txns))
}

func checkBrokerImage(t testing.TB, img string, base broker.Options, log *brokerLog, label brokerLabel, name string) {
	t.Helper()
	ctx := context.Background()
	o := base
	o.DataDir, o.Storage.FS = img, nil
	b, err := broker.Open(ctx, o)
	if err != nil {
		t.Fatalf("%s: start-up refused a crash image: %v", name, err)
	}
	defer b.Close(ctx)
	for _, topic := range log.topics[:label.topics] {
		if _, err := b.GetTopic(ctx, topic); err != nil {
			t.Fatalf("%s: acknowledged topic %s lost: %v", name, topic, err)
		}
	}
	for _, g := range log.groups[:label.groups] {
		if _, err := b.GetGroup(ctx, g); err != nil {
			t.Fatalf("%s: acknowledged group %s lost: %v", name, g, err)
		}
	}
	for _, a := range log.sends[:label.sends] {
		m, err := b.GetMessage(ctx, a.id)
		if err != nil || string(m.Body) != a.body {
			t.Fatalf("%s: acknowledged message %s (%s/%d@%d) lost: %v", name, a.id, a.topic, a.queue, a.offset, err)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ms, _, err := b.ReadQueue(rctx, a.topic, a.queue, a.offset, 1)
		if rctx.Err() != nil {
			t.Fatalf("%s: the dispatcher does not reach the end of the recovered log", name)
		}
		cancel()
		if err != nil || len(ms) != 1 || ms[0].MessageID != a.id {
			t.Fatalf("%s: acknowledged message %s is not at %s/%d@%d: %v (%d messages; ready: %v)", name, a.id, a.topic, a.queue, a.offset, err, len(ms), b.Ready())
		}
	}
	progress := map[string][]broker.QueueProgress{}
	for _, f := range log.floors[:label.floors] {
		ps, ok := progress[f.group]
		if !ok {
			ps, err = b.Progress(ctx, f.group)
			if err != nil {
				t.Fatalf("%s: progress of %s: %v", name, f.group, err)
			}
			progress[f.group] = ps
		}
		found := false
		for _, p := range ps {
			if p.Topic == f.topic && p.QueueID == f.queue {
				found = true
				if p.ConsumerOffset < f.offset {
					t.Fatalf("%s: %s's committed offset of %s/%d went back to %d (acknowledged %d)", name, f.group, f.topic, f.queue, p.ConsumerOffset, f.offset)
				}
			}
		}
		if !found {
			t.Fatalf("%s: %s's committed offset of %s/%d (acknowledged %d) lost", name, f.group, f.topic, f.queue, f.offset)
		}
	}
	state := map[string]brokerTxn{}
	for _, s := range log.txns[:label.txns] {
		state[s.id] = s
	}
	for id, s := range state {
		tx, err := b.GetTransaction(ctx, id)
		if err != nil {
			t.Fatalf("%s: acknowledged transaction %s (%s) lost: %v", name, id, s.state, err)
		}
		if s.state != broker.TxnPending && tx.State != s.state {
			t.Fatalf("%s: transaction %s acknowledged %s is %s", name, id, s.state, tx.State)
		}
		if tx.State == broker.TxnCommitted {
			m, err := b.GetMessage(ctx, id)
			if err != nil || string(m.Body) != s.body {
				t.Fatalf("%s: the message of committed transaction %s lost: %v", name, id, err)
			}
		}
	}
	if label.leases > 0 {
		leased := map[string]bool{}
		var rs []string
		for _, l := range log.leases[:label.leases] {
			leased[l.body] = true
			rs = append(rs, l.receipt)
		}
		got, err := b.Pull(ctx, broker.PullRequest{Group: "g3", Topic: "audit", MaxMessages: 32, Invisible: time.Hour})
		if err != nil {
			t.Fatalf("%s: pull for g3: %v", name, err)
		}
		for _, m := range got {
			if leased[string(m.Body)] {
				t.Fatalf("%s: %.16s…, leased for an hour before the crash, delivered again", name, m.Body)
			}
		}
		res, err := b.Ack(ctx, "g3", rs)
		if err != nil {
			t.Fatalf("%s: ack for g3: %v", name, err)
		}
		for i, r := range res {
			if r.Status != broker.ReceiptOK {
				t.Fatalf("%s: the receipt of %.16s…, leased before the crash, answered %s: %s", name, log.leases[i].body, r.Status, r.Error)
			}
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("%s: close: %v", name, err)
	}
}
