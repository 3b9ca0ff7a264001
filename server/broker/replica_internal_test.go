package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage"
)

// TestALiveFollowerIsTheBroker: a leader runs a seeded workload (sends
// and batches, pulls, acks, nacks to the retry ladder and to the DLQ, lease
// changes, delayMs timers, committed and rolled-back transactions, dead
// letters resent and discarded, a broadcasting group's instances, a topic
// deleted and created again) on a virtual
// clock; after every step its new frames are shipped to a follower's store
// (AppendFrames) and the follower applies them (Follow). Both then hold
// the same state (digest: topics, groups, progress, leases, dead letters,
// pending timers, receipt keys), nothing but the log having carried it.
// At a seeded step the follower stops and starts again from its own files
// (its snapshots cover what it applied, not what it stored). At another the
// leader steps down and the follower is promoted; a
// new, empty follower catches up from the first frame, and the workload
// goes on against the new leader. At the end every message whose send was
// answered is accounted for (acked, dead, or delivered when the clock has
// run past every lease, retry and timer) and none is delivered after its
// ack.
func TestALiveFollowerIsTheBroker(t *testing.T) {
	// Quick: many short runs (a restart and a promotion in each), a few
	// long ones; LONG=1: two thousand long ones.
	runs := []struct{ seeds, steps int }{{224, 24}, {8, 150}}
	if os.Getenv("LONG") != "" {
		runs = []struct{ seeds, steps int }{{2000, 300}}
	}
	seed := uint64(0)
	for _, r := range runs {
		for range r.seeds {
			seed++
			t.Run(fmt.Sprintf("seed%d-steps%d", seed, r.steps), func(t *testing.T) {
				t.Parallel()
				liveFollowerRun(t, seed, r.steps)
			})
		}
	}
}

func liveFollowerRun(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	open := func(follower bool) *Broker { return openReplica(t, replicaOptions(fc, follower)) }
	// same ships the leader's new frames to the follower until both show
	// the same state: the leader's own background work (the lease reaper,
	// the scheduler and the timer loop after a clock advance) may still be
	// writing when a step returns.
	same := func(leader, follower *Broker) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ship(t, leader, follower)
			want, got := digest(t, leader), digest(t, follower)
			if want == got {
				return
			}
			if time.Now().After(deadline) {
				require.Equal(t, want, got, "the follower's state is not the leader's")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	leader, follower := open(false), open(true)
	rng := rand.New(rand.NewPCG(seed, 27))
	_, _, err := leader.PutGroup(ctx, GroupConfig{Name: "g", RetryMaxTimes: 2})
	require.NoError(t, err)
	topics := []string{"orders", "payments", "audit"}
	for _, topic := range topics {
		_, _, err := leader.PutTopic(ctx, TopicConfig{Name: topic, Queues: 4})
		require.NoError(t, err)
	}
	// A broadcasting group: each consumer instance has progress and
	// leases of its own.
	_, _, err = leader.PutGroup(ctx, GroupConfig{Name: "bg", ConsumeMode: ConsumeBroadcasting,
		Subscriptions: []Subscription{{Topic: "audit"}}})
	require.NoError(t, err)
	same(leader, follower)

	sent, acked := map[string]bool{}, map[string]bool{}
	nextID := 0
	send := func(topic string, msgs []SendMessage) []SendResult {
		for i := range msgs {
			if msgs[i].Properties == nil {
				msgs[i].Properties = map[string]string{}
			}
			nextID++
			msgs[i].Properties["id"] = fmt.Sprint(nextID)
		}
		res, err := leader.Send(ctx, topic, msgs)
		require.NoError(t, err)
		if !msgs[0].Transactional {
			for _, m := range msgs {
				sent[m.Properties["id"]] = true
			}
		}
		return res
	}
	promoteAt := steps/3 + rng.IntN(steps/2)
	restartAt := rng.IntN(steps) // the follower stops and starts again from its own files
	for step := 0; step < steps; step++ {
		if step == restartAt {
			opts := follower.opts
			require.NoError(t, follower.Close(ctx))
			reopened, err := Open(ctx, opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = reopened.Close(ctx) })
			follower = reopened
			require.True(t, follower.Following())
			same(leader, follower)
		}
		if step == promoteAt {
			// The leader steps down (its scheduler, reaper and timer loop
			// stop writing) and is gone; the follower, fully applied, is
			// promoted; a new follower starts from nothing.
			leader.Demote()
			same(leader, follower)
			require.NoError(t, leader.Close(ctx))
			require.NoError(t, follower.Promote(ctx))
			require.False(t, follower.Following())
			require.ErrorIs(t, follower.Follow(ctx), ErrLeading)
			leader, follower = follower, open(true)
			same(leader, follower)
		}
		topic := topics[rng.IntN(3)]
		switch r := rng.IntN(14); {
		case r < 4:
			msgs := make([]SendMessage, 1+rng.IntN(5))
			for i := range msgs {
				msgs[i] = SendMessage{Body: []byte(fmt.Sprintf("s%d-%d", step, i)), Properties: map[string]string{"k": fmt.Sprint(rng.IntN(9))}}
			}
			send(topic, msgs)
		case r < 8:
			got, err := leader.Pull(ctx, PullRequest{Group: "g", Topic: topic, MaxMessages: 4, Invisible: time.Hour})
			require.NoError(t, err)
			for _, m := range got {
				require.False(t, acked[m.Properties["id"]], "message %s delivered after its ack (step %d, promoted at %d): %+v", m.Properties["id"], step, promoteAt, m)
				switch rng.IntN(3) {
				case 0:
					res, err := leader.Ack(ctx, "g", []string{m.Receipt})
					require.NoError(t, err)
					if res[0].Status == ReceiptOK {
						acked[m.Properties["id"]] = true
					}
				case 1:
					_, err := leader.Nack(ctx, "g", []NackItem{{Receipt: m.Receipt, Reason: "seeded"}})
					require.NoError(t, err)
				default:
					// A lease change: longer, shorter, or 0 (visible again).
					inv := time.Duration(rng.IntN(3)) * time.Duration(rng.IntN(90)) * time.Minute
					_, err := leader.ChangeLease(ctx, "g", []LeaseItem{{Receipt: m.Receipt, Invisible: inv}})
					require.NoError(t, err)
				}
			}
		case r == 10:
			// A dead letter resent or discarded.
			dead, _, err := leader.ListDeadLetters(ctx, "g", DLQFilter{Status: DLQDead}, "", 100)
			require.NoError(t, err)
			if len(dead) > 0 {
				d := dead[rng.IntN(len(dead))]
				if rng.IntN(2) == 0 {
					_, err = leader.ResendDeadLetters(ctx, "g", []string{d.MessageID}, nil)
				} else {
					err = leader.DiscardDeadLetter(ctx, "g", d.MessageID)
				}
				require.NoError(t, err)
			}
		case r == 11:
			// A broadcasting group's instances pull and ack what they get.
			client := WithClient(ctx, fmt.Sprint("c", rng.IntN(2)))
			got, err := leader.Pull(client, PullRequest{Group: "bg", Topic: "audit", MaxMessages: 4, Invisible: time.Hour})
			require.NoError(t, err)
			for _, m := range got {
				if rng.IntN(2) == 0 {
					_, err := leader.Ack(client, "bg", []string{m.Receipt})
					require.NoError(t, err)
				}
			}
		case r == 12:
			// A scratch topic sent to, deleted and created again (its
			// messages are not counted: a deleted topic's are gone).
			if rng.IntN(3) == 0 {
				err := leader.DeleteTopic(ctx, "scratch")
				if !errors.Is(err, ErrTopicNotFound) {
					require.NoError(t, err)
				}
			} else {
				_, err := leader.Send(ctx, "scratch", []SendMessage{{Body: []byte("scratch")}})
				require.NoError(t, err)
			}
		case r == 8 || r == 13:
			send(topic, []SendMessage{{Body: []byte("later"), DelayMs: int64(1+rng.IntN(3600)) * 1000}})
		default:
			res := send(topic, []SendMessage{{Body: []byte("txn"), Transactional: true, ProducerGroup: "pg"}})
			if rng.IntN(2) == 0 {
				_, err = leader.CommitTransaction(ctx, res[0].TransactionID)
				nextIDs := fmt.Sprint(nextID)
				sent[nextIDs] = true
			} else {
				_, err = leader.RollbackTransaction(ctx, res[0].TransactionID)
			}
			require.NoError(t, err)
		}
		fc.Advance(time.Duration(rng.IntN(30)) * time.Second)
		same(leader, follower)
	}

	// Drain: the clock runs past every lease, retry and timer; what is
	// delivered is acked. Every message whose send was answered ends
	// acked or dead.
	dead := func() map[string]bool {
		letters, _, err := leader.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10000)
		require.NoError(t, err)
		ids := map[string]bool{}
		for _, d := range letters {
			ids[d.Properties["id"]] = true
		}
		return ids
	}
	missing := func() []string {
		d := dead()
		var out []string
		for id := range sent {
			if !acked[id] && !d[id] {
				out = append(out, id)
			}
		}
		return out
	}
	for round := 0; round < 400 && len(missing()) > 0; round++ {
		for _, topic := range topics {
			got, err := leader.Pull(ctx, PullRequest{Group: "g", Topic: topic, MaxMessages: 32, Invisible: time.Hour})
			require.NoError(t, err)
			for _, m := range got {
				id := m.Properties["id"]
				require.False(t, acked[id], "message %s delivered after its ack", id)
				res, err := leader.Ack(ctx, "g", []string{m.Receipt})
				require.NoError(t, err)
				if res[0].Status == ReceiptOK {
					acked[id] = true
				}
			}
		}
		if round%4 == 3 {
			fc.Advance(10 * time.Minute)
		}
		time.Sleep(time.Millisecond)
	}
	require.Empty(t, missing(), "messages lost (sent and answered, never acked or dead)")
	same(leader, follower)
}

// digest is the broker's state as its read API shows it.
func digest(t *testing.T, b *Broker) string {
	t.Helper()
	ctx := context.Background()
	var out []any
	topics, err := b.ListTopics(ctx)
	require.NoError(t, err)
	for i := range topics {
		topics[i].CreatedAt = topics[i].CreatedAt.UTC()
	}
	groups, err := b.ListGroups(ctx)
	require.NoError(t, err)
	for i := range groups {
		groups[i].CreatedAt = groups[i].CreatedAt.UTC()
	}
	progress, err := b.Progress(ctx, "g")
	require.NoError(t, err)
	bprogress, err := b.Progress(ctx, "bg") // the broadcasting group, where the workload has one
	if !errors.Is(err, ErrGroupNotFound) {
		require.NoError(t, err)
		progress = append(progress, bprogress...)
	}
	// A row without progress on record (a queue the group only pulled
	// from, or nothing yet) is memory only: a follower shows none.
	progress = slices.DeleteFunc(progress, func(p QueueProgress) bool { return p.ConsumerOffset == 0 })
	for i := range progress {
		progress[i].InFlight = 0 // leases are compared below, from the cursors or the fold
	}
	dead, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 1000)
	require.NoError(t, err)
	var timers []Timer
	for _, topic := range []string{"orders", "payments", "audit"} {
		ts, _, err := b.ListTimers(ctx, topic, "", 1000)
		require.NoError(t, err)
		timers = append(timers, ts...)
	}
	out = append(out, topics, groups, len(dead), b.ReceiptKeys())
	for _, p := range progress {
		out = append(out, p)
	}
	for _, x := range timers {
		out = append(out, x)
	}
	for _, l := range leaseDigest(b) {
		out = append(out, l)
	}
	var lines []string
	for _, x := range out {
		j, err := json.Marshal(x)
		require.NoError(t, err)
		lines = append(lines, string(j))
	}
	return strings.Join(lines, "\n")
}

// leaseDigest lists the leases a broker owes: a leader's from its pop
// cursors, a follower's from its fold (what Promote would install).
func leaseDigest(b *Broker) []string {
	var out []string
	if b.Following() {
		b.follow.mu.Lock()
		for _, o := range b.leases.Owed() {
			out = append(out, fmt.Sprintf("%s/%s/%d@%d e%d d%d w%v", o.At.Key.Group, o.At.Key.Topic, o.At.Key.QueueID, o.At.Off,
				o.Lease.Item.Epoch, o.Lease.Item.Deadline, o.Lease.Item.State == leaselog.Waiting))
		}
		b.follow.mu.Unlock()
	} else {
		states := b.consume.States()
		for k, ps := range states {
			ps.Lock()
			for qid, c := range ps.Cursors() {
				for off, l := range c.Leases() {
					it := l.Item(off) // a waiting lease's deadline is its retry time
					out = append(out, fmt.Sprintf("%s/%s/%d@%d e%d d%d w%v", k.Group, k.Topic, qid, off,
						it.Epoch, it.Deadline, l.Waiting()))
				}
			}
			ps.Unlock()
		}
	}
	sort.Strings(out)
	return out
}

// TestAFollowerOfConcurrentRequests: several clients act on one leader at
// once — sends, pulls, and acks, nacks and lease changes racing on the
// same receipts, offset commits — while a follower applies the leader's
// frames; once the clients stop, the follower's state is the leader's.
// Records of one family written by racing requests reach the log in some
// order; the state a follower derives from that order must be the one the
// leader holds.
func TestAFollowerOfConcurrentRequests(t *testing.T) {
	rounds := 3
	if os.Getenv("LONG") != "" {
		rounds = 30
	}
	for round := 0; round < rounds; round++ {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			concurrentFollowerRun(t, uint64(round))
		})
	}
}

func concurrentFollowerRun(t *testing.T, seed uint64) {
	ctx := context.Background()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	open := func(follower bool) *Broker { return openReplica(t, replicaOptions(fc, follower)) }
	leader, follower := open(false), open(true)
	_, _, err := leader.PutGroup(ctx, GroupConfig{Name: "g", RetryMaxTimes: 3})
	require.NoError(t, err)
	topics := []string{"orders", "payments"}
	for _, topic := range topics {
		_, _, err := leader.PutTopic(ctx, TopicConfig{Name: topic, Queues: 2})
		require.NoError(t, err)
	}
	receipts := make(chan string, 256)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := func(id int) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			topic := topics[rng.IntN(len(topics))]
			switch r := rng.IntN(10); {
			case r < 3:
				msgs := make([]SendMessage, 1+rng.IntN(4))
				for j := range msgs {
					msgs[j] = SendMessage{Body: []byte(fmt.Sprintf("c%d-%d-%d", id, i, j))}
				}
				if _, err := leader.Send(ctx, topic, msgs); err != nil {
					t.Error(err)
					return
				}
			case r < 6:
				got, err := leader.Pull(ctx, PullRequest{Group: "g", Topic: topic, MaxMessages: 4, Invisible: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range got {
					// Each receipt is acted on twice, by racing clients.
					for range 2 {
						select {
						case receipts <- m.Receipt:
						default:
						}
					}
				}
			case r < 9:
				var rc string
				var err error
				select {
				case rc = <-receipts:
				default:
					continue
				}
				switch rng.IntN(3) {
				case 0:
					_, err = leader.Ack(ctx, "g", []string{rc})
				case 1:
					_, err = leader.Nack(ctx, "g", []NackItem{{Receipt: rc, Reason: "raced"}})
				default:
					_, err = leader.ChangeLease(ctx, "g", []LeaseItem{{Receipt: rc, Invisible: time.Duration(1+rng.IntN(120)) * time.Minute}})
				}
				if err != nil {
					t.Error(err)
					return
				}
			default:
				if rng.IntN(8) == 0 {
					q := int32(rng.IntN(2))
					top := leader.store.MaxOffset(topic, q)
					err := leader.CommitOffsets(ctx, "g", []OffsetCommit{{Topic: topic, QueueID: q, Offset: rng.Int64N(top + 1)}})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		}
	}
	for id := range 4 {
		wg.Add(1)
		go client(id)
	}
	// The follower applies while the clients run.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		ship(t, leader, follower)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	leader.Demote() // the reaper and the scheduler stop writing
	// Frames are shipped once flushed: the last pulls' grants wait for
	// the next flush (they do not wait for one of their own).
	require.NoError(t, leader.store.Settle(ctx, leader.store.WriteOffset()))
	want := digest(t, leader)
	ship(t, leader, follower)
	require.Equal(t, want, digest(t, follower), "the follower's state is not the leader's")
}

// TestAFollowerAppliesTheLeadersRetention: the leader's retention deletes
// old segments (after carrying the dead letters and timers that must
// outlive them); the follower, whose store runs no retention of its own,
// deletes the same segments when it applies the leader's cut records, and
// still holds the same state — the carried dead letter and timer included.
func TestAFollowerAppliesTheLeadersRetention(t *testing.T) {
	ctx := context.Background()
	open := func(follower bool) *Broker {
		opts := replicaOptions(nil, follower)
		opts.SnapshotInterval, opts.MaxMessageSize = 50*time.Millisecond, 4<<10
		opts.Storage = storage.Options{SegmentSize: 128 << 10, FileReservedTime: 300 * time.Millisecond,
			RetentionInterval: 20 * time.Millisecond, DiskMaxUsedRatio: 1}
		return openReplica(t, opts)
	}
	leader, follower := open(false), open(true)
	catchUp := func() { t.Helper(); ship(t, leader, follower) }
	_, _, err := leader.PutGroup(ctx, GroupConfig{Name: "g", RetryMaxTimes: 1})
	require.NoError(t, err)
	_, err = leader.Send(ctx, "keep", []SendMessage{{Body: []byte("precious")}, {Body: []byte("later"), DelayMs: time.Hour.Milliseconds()}})
	require.NoError(t, err)
	got, err := leader.Pull(ctx, PullRequest{Group: "g", Topic: "keep", MaxMessages: 1, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, err = leader.Nack(ctx, "g", []NackItem{{Receipt: got[0].Receipt, DelayLevel: -1, Reason: "poison"}})
	require.NoError(t, err)
	catchUp()

	filler := []SendMessage{{Body: []byte(strings.Repeat("f", 3000))}}
	for i := 0; i < 400; i++ {
		_, err := leader.Send(ctx, "filler", filler)
		require.NoError(t, err)
		if i%10 == 9 {
			catchUp()
		}
	}
	// Retention catches up with the old segments; then every cut it made
	// is shipped and applied.
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(400 * time.Millisecond)
		catchUp()
		lmin, fmin := leader.store.Stats().CommitLogMin, follower.store.Stats().CommitLogMin
		if lmin > 4*(128<<10) && lmin == fmin && digest(t, leader) == digest(t, follower) {
			break
		}
		require.True(t, time.Now().Before(deadline), "leader min %d, follower min %d", lmin, fmin)
	}
	dead, _, err := follower.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1, "the carried dead letter")
	timers, _, err := follower.ListTimers(ctx, "keep", "", 10)
	require.NoError(t, err)
	require.Len(t, timers, 1, "the carried timer")
	names := func(b *Broker) []string {
		entries, err := os.ReadDir(filepath.Join(b.opts.DataDir, "commitlog"))
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	// The same segment files, but for the one a store makes ahead of its
	// writes.
	ln, fn := names(leader), names(follower)
	require.LessOrEqual(t, len(ln)-len(fn), 1, "leader %v, follower %v", ln, fn)
	require.Equal(t, ln[:len(fn)], fn, "the same segment files")

	require.NoError(t, leader.Close(ctx))
	require.NoError(t, follower.Promote(ctx))
	one, err := follower.GetDeadLetter(ctx, "g", dead[0].MessageID)
	require.NoError(t, err)
	require.Equal(t, "precious", string(one.Body))
}

// replicaOptions are the options of the replica tests' brokers: on fc
// (nil: the wall clock), a follower when follower is set.
func replicaOptions(fc clockwork.Clock, follower bool) Options {
	return Options{
		AutoCreate: true, SnapshotInterval: time.Hour, MaxMessageSize: 16 << 10,
		DelayLevels: DefaultDelayLevels, Clock: fc, NoPromote: follower,
		Storage: storage.Options{SegmentSize: 256 << 10, RetentionInterval: time.Hour},
	}
}

// openReplica opens a broker with opts on a fresh data dir, closed when
// the test ends.
func openReplica(t *testing.T, opts Options) *Broker {
	t.Helper()
	opts.DataDir = memDir(t)
	b, err := Open(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// memDir is a fresh directory on tmpfs (/dev/shm) when there is one,
// else t.TempDir(): these tests compare states, not what survives a
// crash, and a store's files (a ConsumeQueue file and its directory per
// queue, each synced) cost most of a short run on a disk.
func memDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "mqgate-replica-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// ship copies the leader's flushed frames the follower lacks into the
// follower's store and applies them (Follow).
func ship(t *testing.T, leader, follower *Broker) {
	t.Helper()
	ctx := context.Background()
	for {
		stream, _, err := leader.store.ReadFrames(follower.store.WriteOffset(), 64<<10, nil)
		require.NoError(t, err)
		if len(stream) == 0 {
			break
		}
		_, err = follower.store.AppendFrames(stream)
		require.NoError(t, err)
	}
	require.NoError(t, follower.store.AwaitDispatch(ctx))
	require.NoError(t, follower.Follow(ctx))
}
