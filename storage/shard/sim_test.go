package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/raftlog"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The simulation: three replicas in one goroutine, driven step by step
// through their node (the Shard's loop body), over a seeded network that
// drops, delays, reorders and partitions messages (one-way too), with the
// leader crashed to a power-loss image (only what it had synced) and
// restarted from it. Every step checks the invariants. The network's
// faults follow the seed; raft draws its randomized election timeouts
// from crypto/rand (the library offers no seed), so elections — and with
// them the counts logged — differ from run to run of one seed; the
// invariants hold for every run. SHARD_SIM_SEEDS=n runs seeds 1..n.

type inflight struct {
	m  *pb.Message
	at int // the step it is delivered at
}

type simNet struct {
	rng      *rand.Rand
	now      int
	queue    []inflight
	cut      map[[2]uint64]bool // from→to blocked
	hold     map[[2]uint64]bool // from→to held until release
	dropP    float64
	maxDelay int
	sent     int
	dropped  int
}

func (n *simNet) send(msgs []*pb.Message) {
	for _, m := range msgs {
		n.sent++
		if n.cut[[2]uint64{m.GetFrom(), m.GetTo()}] || n.rng.Float64() < n.dropP {
			n.dropped++
			continue
		}
		if n.hold[[2]uint64{m.GetFrom(), m.GetTo()}] {
			n.queue = append(n.queue, inflight{m: proto.Clone(m).(*pb.Message), at: math.MaxInt})
			continue
		}
		n.queue = append(n.queue, inflight{m: proto.Clone(m).(*pb.Message), at: n.now + 1 + n.rng.IntN(n.maxDelay)})
	}
}

// release delivers the held messages at the next step.
func (n *simNet) release() {
	clear(n.hold)
	for k := range n.queue {
		if n.queue[k].at == math.MaxInt {
			n.queue[k].at = n.now + 1
		}
	}
}

// dueFor takes the messages to one replica due by the step at.
func (n *simNet) dueFor(to uint64, at int) []*pb.Message {
	var out []*pb.Message
	keep := n.queue[:0]
	for _, f := range n.queue {
		if f.at <= at && f.m.GetTo() == to {
			out = append(out, f.m)
		} else {
			keep = append(keep, f)
		}
	}
	n.queue = keep
	return out
}

// due takes the messages due now, in a shuffled order.
func (n *simNet) due() []*pb.Message {
	var out []*pb.Message
	keep := n.queue[:0]
	for _, f := range n.queue {
		if f.at <= n.now {
			out = append(out, f.m)
		} else {
			keep = append(keep, f)
		}
	}
	n.queue = keep
	n.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

type simReplica struct {
	id  uint64
	dir string
	rec *storagetest.CrashRecorder
	log *raftlog.Storage
	n   *node
	up  bool
	// crashed: restarted from a power-loss image at least once
	crashed bool
	// frozen: not ticked (its clock stands still)
	frozen bool
}

type ackedMsg struct {
	res         storage.PutResult
	topic, body string
}

type sim struct {
	t     *testing.T
	rng   *rand.Rand
	net   *simNet
	nodes []*simReplica
	// committed is every committed entry any replica reported: index →
	// term and data (the same on every replica that has it).
	committed  map[uint64]*pb.Entry
	checked    map[uint64]uint64 // per replica: committed entries compared so far
	commitHigh map[uint64]int64  // per replica: the highest commit offset it reported
	pending    []*proposal
	acked      []ackedMsg
	outcomes   map[string]int
	crashes    int
	logStats   raftlog.Stats // of the replicas' Raft logs closed so far
	overlapped uint64        // appends handed over while one was outstanding, by the replicas closed so far
	beside     uint64        // Puts answered while an append was outstanding, by the replicas closed so far
	// lazy: the append worker (a queue this goroutine drains) persists
	// a random part of what waits, in random groups, at each step (else
	// everything, until no append is outstanding).
	lazy bool
}

func (s *sim) addStats(st raftlog.Stats) {
	s.logStats.Verified += st.Verified
	s.logStats.Appended += st.Appended
	s.logStats.Conflicts += st.Conflicts
	s.logStats.ConflictEntries += st.ConflictEntries
	s.logStats.TailCuts += st.TailCuts
	s.logStats.TailBytes += st.TailBytes
}

func newSim(t *testing.T, seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &sim{t: t, rng: rng, net: &simNet{rng: rng, cut: map[[2]uint64]bool{}, hold: map[[2]uint64]bool{}, maxDelay: 4},
		committed: map[uint64]*pb.Entry{}, checked: map[uint64]uint64{}, commitHigh: map[uint64]int64{}, outcomes: map[string]int{}}
	for id := uint64(1); id <= 3; id++ {
		r := &simReplica{id: id, dir: t.TempDir()}
		s.nodes = append(s.nodes, r)
		s.start(r, []uint64{1, 2, 3})
	}
	return s
}

func (s *sim) start(r *simReplica, peers []uint64) {
	t := s.t
	r.rec = storagetest.NewCrashRecorder(t, r.dir, 0)
	opts := testLogOptions(r.dir)
	opts.Store.FS = r.rec.FS()
	log, err := raftlog.Open(opts)
	require.NoError(t, err)
	o := Options{ID: r.id, ElectionTicks: 10, HeartbeatTicks: 1}
	require.NoError(t, o.setDefaults())
	n, err := newNode(r.id, peers, false, log, o.raftConfig(), s.net.send)
	require.NoError(t, err)
	r.log, r.n, r.up = log, n, true
	s.checked[r.id] = 0
}

// crash takes a power-loss image of r now (only what it synced) and
// restarts it from there, down for a while: the caller brings it up.
func (s *sim) crash(r *simReplica) {
	t := s.t
	p := r.rec.Capture(nil)
	images := p.Images(2, s.rng.Uint64())
	require.Equal(t, "none", images[0].Name)
	r.n.abandon(fmt.Errorf("%w: crashed", ErrUnknownOutcome))
	r.n.refuseHeld(fmt.Errorf("%w: crashed", ErrStopped))
	s.addStats(r.log.Stats())
	s.overlapped += r.n.overlapped
	s.beside += r.n.beside
	_ = r.log.Close()
	dir := t.TempDir()
	require.NoError(t, p.Materialize(images[0], dir))
	r.dir, r.up, r.n, r.log, r.crashed = dir, false, nil, nil, true
	s.crashes++
}

func (s *sim) leader() *simReplica {
	var lead *simReplica
	for _, r := range s.nodes {
		if r.up && r.n.state == raft.StateLeader {
			if lead == nil || r.n.term > lead.n.term {
				lead = r
			}
		}
	}
	return lead
}

// step runs one step: deliver what is due, tick, maybe propose, handle
// every Ready, collect outcomes, check the invariants.
func (s *sim) step(propose bool) {
	t := s.t
	s.net.now++
	// Proposals go in before or after the messages of the step: before,
	// a message can depose the leader between its Propose and its Ready.
	early := s.rng.IntN(2) == 0
	if propose && early {
		s.propose()
	}
	for _, m := range s.net.due() {
		r := s.nodes[m.GetTo()-1]
		if r.up {
			require.NoError(t, r.n.step(m))
		}
	}
	for _, r := range s.nodes {
		if r.up && !r.frozen && s.rng.IntN(10) < 8 { // clocks that drift
			r.n.tick()
		}
	}
	if propose && !early {
		s.propose()
	}
	for _, r := range s.nodes {
		if !r.up {
			continue
		}
		_, err := r.n.processReadies()
		require.NoError(t, err)
		s.persist(r)
	}
	s.check()
	s.collect()
}

// persist is r's append worker: it persists r's outstanding appends (in
// groups, as the Shard's worker joins them) and hands them back, then r
// handles the Readies that follow. Lazy, it persists a random part of
// them, sometimes none, and steps the messages due to r in between (a
// follower's next append, the answers to a leader's), as the Shard's
// loop does while its worker flushes.
func (s *sim) persist(r *simReplica) {
	t := s.t
	for round := 0; len(r.n.appending) > 0; round++ {
		if s.lazy && (round > 0 || s.rng.IntN(3) == 0) {
			return
		}
		k := len(r.n.appending)
		if s.lazy {
			k = 1 + s.rng.IntN(k)
		}
		for k > 0 {
			g := min(joinable(r.n.appending), k)
			if s.lazy {
				g = 1 + s.rng.IntN(g)
			}
			ms := slices.Clone(r.n.appending[:g])
			require.NoError(t, r.n.appended(ms, r.n.persistAppends(ms), false))
			k -= g
			if s.lazy && s.rng.IntN(2) == 0 {
				for _, m := range s.net.dueFor(r.id, s.net.now+1) {
					require.NoError(t, r.n.step(m))
				}
			}
		}
		_, err := r.n.processReadies()
		require.NoError(t, err)
	}
}

// propose puts a few batches on the leader, sometimes on another replica.
func (s *sim) propose() {
	if s.rng.IntN(3) == 0 {
		return
	}
	r := s.nodes[s.rng.IntN(3)]
	if l := s.leader(); l != nil && s.rng.IntN(4) > 0 {
		r = l
	}
	if !r.up {
		return
	}
	for k := 0; k < 1+s.rng.IntN(3); k++ {
		ms := batch(fmt.Sprintf("s%d-%d", s.net.now, k), 1+s.rng.IntN(3))
		p := &proposal{class: storage.ClassSend, msgs: ms, res: make([]storage.PutResult, len(ms)), taken: make(chan struct{}), done: make(chan error, 1)}
		r.n.propose(p)
		s.pending = append(s.pending, p)
	}
}

func (s *sim) collect() {
	keep := s.pending[:0]
	for _, p := range s.pending {
		select {
		case err := <-p.done:
			switch {
			case err == nil:
				s.outcomes["ok"]++
				e, ok := s.committed[p.index]
				require.True(s.t, ok, "an acknowledged entry %d is committed", p.index)
				require.Equal(s.t, p.term, e.GetTerm())
				for i, m := range p.msgs {
					s.acked = append(s.acked, ackedMsg{p.res[i], m.Topic, string(m.Body)})
				}
			case errors.Is(err, ErrNotLeader):
				s.outcomes["not leader"]++
			case errors.Is(err, ErrDropped):
				s.outcomes["dropped"]++
			case errors.Is(err, ErrUnknownOutcome):
				s.outcomes["unknown"]++
			default:
				s.t.Fatalf("unexpected outcome: %v", err)
			}
		default:
			keep = append(keep, p)
		}
	}
	s.pending = keep
}

// check: every committed entry is byte-identical on every replica that
// has it, and no replica dispatches past its commit point.
func (s *sim) check() {
	t := s.t
	for _, r := range s.nodes {
		if !r.up {
			continue
		}
		commit := r.n.commit
		from := s.checked[r.id] + 1
		if first, _ := r.log.FirstIndex(); from < first {
			from = first
		}
		if commit >= from {
			ents, err := r.log.Entries(from, commit+1, 1<<40)
			require.NoError(t, err)
			for _, e := range ents {
				if c, ok := s.committed[e.GetIndex()]; ok {
					require.Equal(t, c.GetTerm(), e.GetTerm(), "replica %d: committed entry %d's term", r.id, e.GetIndex())
					require.True(t, bytes.Equal(c.GetData(), e.GetData()), "replica %d: committed entry %d's bytes", r.id, e.GetIndex())
				} else {
					s.committed[e.GetIndex()] = e
				}
			}
			s.checked[r.id] = commit
		}
		// The dispatcher never passes what this replica knew committed:
		// after a crash its persisted commit point may be behind what it
		// had dispatched (a change of the commit point alone is not
		// synced), but never behind a committed entry.
		st := r.log.Store()
		s.commitHigh[r.id] = max(s.commitHigh[r.id], r.log.CommitOffset())
		require.LessOrEqual(t, st.Dispatched(), s.commitHigh[r.id], "replica %d dispatched past its commit point", r.id)
		if !r.crashed {
			require.LessOrEqual(t, st.Dispatched(), r.log.CommitOffset(), "replica %d dispatched past its commit point", r.id)
		}
	}
}

func (s *sim) partition(kind int) {
	clear(s.net.cut)
	victim := uint64(1 + s.rng.IntN(3))
	switch kind {
	case 1: // isolate one replica
		for o := uint64(1); o <= 3; o++ {
			if o != victim {
				s.net.cut[[2]uint64{victim, o}] = true
				s.net.cut[[2]uint64{o, victim}] = true
			}
		}
	case 2: // one-way: the victim hears nobody
		for o := uint64(1); o <= 3; o++ {
			if o != victim {
				s.net.cut[[2]uint64{o, victim}] = true
			}
		}
	case 3: // one-way: nobody hears the victim
		for o := uint64(1); o <= 3; o++ {
			if o != victim {
				s.net.cut[[2]uint64{victim, o}] = true
			}
		}
	}
}

// TestSimulatedCluster: three replicas under drops, delays, reordering,
// symmetric and one-way partitions, crashes of the leader to its
// synced bytes and one power loss of all three at once; then the network heals and every replica converges. Every
// step: committed entries byte-identical wherever they are, nothing
// dispatched past the commit point, every acknowledged Put committed. At
// the end: every acknowledged message is on every replica at its offset
// with its id, body and queue offset, and the ConsumeQueues agree.
// Quick: 8 seeds of 900 steps; LONG=1: 300 seeds of 2 000 steps;
// SHARD_SIM_SEEDS=n sets the seeds.
func TestSimulatedCluster(t *testing.T) {
	t.Parallel()
	seeds, steps := uint64(8), 900
	if os.Getenv("LONG") != "" {
		seeds, steps = 300, 2000
	}
	if n, err := strconv.ParseUint(os.Getenv("SHARD_SIM_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	var mu sync.Mutex
	var total raftlog.Stats
	t.Run("seeds", func(t *testing.T) {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				t.Parallel()
				st := runSim(t, seed, steps)
				mu.Lock()
				total.Conflicts += st.Conflicts
				mu.Unlock()
			})
		}
	})
	// The paths that give back a deposed leader's writes ran.
	require.Positive(t, total.Conflicts, "conflicting suffixes were cut")
}

func runSim(t *testing.T, seed uint64, steps int) raftlog.Stats {
	s := newSim(t, seed)
	s.lazy = true
	defer func() {
		for _, r := range s.nodes {
			if r.up {
				_ = r.log.Close()
			}
		}
	}()
	var down *simReplica
	downUntil := 0
	for i := 0; i < steps; i++ {
		switch {
		case i%150 == 60:
			s.net.dropP = 0.05 + 0.1*s.rng.Float64()
			s.partition(s.rng.IntN(4))
		case i%150 == 120:
			s.net.dropP = 0
			s.partition(0)
		}
		if i%300 == 200 && down == nil {
			if l := s.leader(); l != nil {
				s.crash(l)
				down, downUntil = l, i+30+s.rng.IntN(40)
			}
		}
		if i == steps-150 && down == nil {
			// Power loss of all three at once, then all restart.
			for _, r := range s.nodes {
				s.crash(r)
			}
			for _, r := range s.nodes {
				s.start(r, nil)
			}
		}
		if down != nil && i >= downUntil {
			s.start(down, nil)
			down = nil
		}
		s.step(true)
	}
	// Heal and converge.
	if down != nil {
		s.start(down, nil)
	}
	s.net.dropP = 0
	s.partition(0)
	for i := 0; i < 2000; i++ {
		s.step(false)
		if s.converged() {
			break
		}
	}
	require.True(t, s.converged(), "the replicas converge once the network heals")
	require.Empty(t, s.pending, "every Put got an answer")
	require.Positive(t, s.outcomes["ok"])
	overlapped, beside := s.overlapped, s.beside
	for _, r := range s.nodes {
		s.addStats(r.log.Stats())
		overlapped += r.n.overlapped
		beside += r.n.beside
	}
	require.Positive(t, overlapped, "some appends were handed over while one was outstanding")
	require.Positive(t, beside, "some Puts were answered while an append was outstanding")
	t.Logf("seed %d: %d entries committed, outcomes %v, %d crashes, network sent %d dropped %d; Raft logs: %+v; %d appends behind another, %d Puts answered beside",
		seed, len(s.committed), s.outcomes, s.crashes, s.net.sent, s.net.dropped, s.logStats, overlapped, beside)

	// Every acknowledged message on every replica, the same everywhere.
	for _, r := range s.nodes {
		st := r.log.Store()
		require.NoError(t, st.AwaitDispatch(t.Context()))
		for _, a := range s.acked {
			m, err := st.Lookup(a.res.PhysicalOffset)
			require.NoError(t, err, "replica %d: acknowledged message at %d", r.id, a.res.PhysicalOffset)
			require.Equal(t, a.body, string(m.Body))
			require.Equal(t, a.res.QueueOffset, m.QueueOffset)
			require.Equal(t, a.res.ID, message.NewID(m.StoreHost, m.PhysicalOffset))
		}
	}
	ref := readAll(t, s.nodes[0].log.Store())
	for _, r := range s.nodes[1:] {
		got := readAll(t, r.log.Store())
		require.Equal(t, len(ref), len(got), "replica %d serves as many messages", r.id)
		for id, m := range ref {
			g, ok := got[id]
			require.True(t, ok, "replica %d serves %v", r.id, id)
			require.Equal(t, m.QueueOffset, g.QueueOffset)
			require.Equal(t, m.Body, g.Body)
		}
	}
	ids := make([]message.ID, 0, len(ref))
	for id := range ref {
		ids = append(ids, id)
	}
	require.Equal(t, len(ids), len(slices.Compact(ids)))
	return s.logStats
}

// converged: every replica up, one leader, every log applied to the same
// commit point and dispatched to it.
func (s *sim) converged() bool {
	l := s.leader()
	if l == nil || len(s.pending) > 0 {
		return false
	}
	for _, r := range s.nodes {
		if !r.up || r.n.commit != l.n.commit || r.n.applied != l.n.commit {
			return false
		}
		if last, _ := r.log.LastIndex(); last != l.n.commit {
			return false
		}
	}
	return true
}

// convergedSim is a simulation of seed stepped (no losses) until its
// replicas agree on a leader; its logs are closed when the test ends.
func convergedSim(t *testing.T, seed uint64) *sim {
	t.Helper()
	s := newSim(t, seed)
	t.Cleanup(func() {
		for _, r := range s.nodes {
			_ = r.log.Close()
		}
	})
	for i := 0; i < 500 && !s.converged(); i++ {
		s.step(false)
	}
	require.True(t, s.converged())
	return s
}

// TestDeposedLeaderGivesBackItsTail: a leader cut off from the others
// (its clock stopped, so CheckQuorum does not depose it) takes a Put —
// its frames written, the entry proposed — and then hears the new
// leader's append before its next Ready: raft drops the proposal from
// its unstable log, the entry that takes its index is the new leader's,
// and the frames no entry took are cut from its CommitLog with the queue
// offsets they held. The Put's answer is ErrUnknownOutcome, never
// success, and the replicas converge on the new leader's log.
func TestDeposedLeaderGivesBackItsTail(t *testing.T) {
	t.Parallel()
	s := convergedSim(t, 7)
	old := s.leader()
	oldTerm := old.n.term
	for o := uint64(1); o <= 3; o++ {
		if o != old.id {
			s.net.cut[[2]uint64{old.id, o}] = true
			s.net.hold[[2]uint64{o, old.id}] = true
		}
	}
	old.frozen = true
	var next *simReplica
	for i := 0; i < 500; i++ {
		s.step(false)
		for _, r := range s.nodes {
			if r != old && r.n.state == raft.StateLeader && r.n.commit > 0 {
				if last, _ := r.log.LastIndex(); r.n.commit == last {
					next = r
				}
			}
		}
		if next != nil {
			break
		}
	}
	require.NotNil(t, next, "the others elect a leader")
	require.Equal(t, raft.StateLeader, old.n.state, "the old leader does not know yet")

	st := old.log.Store()
	before := st.WriteOffset()
	ms := batch("orphan", 2)
	p := &proposal{class: storage.ClassSend, msgs: ms, res: make([]storage.PutResult, 2), taken: make(chan struct{}), done: make(chan error, 1)}
	old.n.propose(p)
	old.n.proposeBatch() // as the loop does at the end of the turn that took the Put
	require.Greater(t, st.WriteOffset(), before, "the frames are written when proposed")

	clear(s.net.cut)
	s.net.release()
	old.frozen = false
	s.step(false)
	require.NotEqual(t, raft.StateLeader, old.n.state)
	require.Greater(t, old.n.term, oldTerm)
	require.ErrorIs(t, <-p.done, ErrUnknownOutcome)
	ls := old.log.Stats()
	require.Positive(t, ls.TailCuts, "the frames no entry took were cut")
	require.Equal(t, old.log.NextOffset(), st.WriteOffset())

	for i := 0; i < 500 && !s.converged(); i++ {
		s.step(false)
	}
	require.True(t, s.converged())
	// The queue offsets the orphan took were given back: every replica
	// serves the same messages at the same queue offsets.
	ref := readAll(t, next.log.Store())
	got := readAll(t, st)
	require.Equal(t, len(ref), len(got))
	for id, m := range ref {
		require.Equal(t, m.QueueOffset, got[id].QueueOffset)
	}
	ms2 := batch("orphan", 2)
	res := make([]storage.PutResult, 2)
	p2 := &proposal{class: storage.ClassSend, msgs: ms2, res: res, taken: make(chan struct{}), done: make(chan error, 1)}
	next.n.propose(p2)
	for i := 0; i < 100 && len(p2.done) == 0; i++ {
		s.step(false)
	}
	require.NoError(t, <-p2.done)
	require.Equal(t, p.res[0].QueueOffset, res[0].QueueOffset, "the new leader hands out the queue offset the orphan held")
}

// TestAppendsPersistedBeforeTheyAreAcknowledged drives three nodes by hand
// (no lossy network, no clocks): the leader's append messages for an
// entry go out before its own append worker persisted it; a follower
// steps two appends while neither is persisted (raft hands both to its
// worker) and answers neither until its worker persisted them, together;
// the leader answers the Put only once a follower's answer and
// its own persist are in, with the dispatch limit past the entry.
func TestAppendsPersistedBeforeTheyAreAcknowledged(t *testing.T) {
	t.Parallel()
	s := convergedSim(t, 11)
	lead := s.leader()
	var f *simReplica
	for _, r := range s.nodes {
		if r != lead {
			f = r
			break
		}
	}
	// f's progress streams appends (no probing: one append per entry).
	for i := 0; i < 500 && lead.n.rn.Status().Progress[f.id].State != tracker.StateReplicate; i++ {
		s.step(false)
	}
	require.Equal(t, tracker.StateReplicate, lead.n.rn.Status().Progress[f.id].State)
	require.Equal(t, raft.StateLeader, lead.n.state)
	// Only the leader and f from here on, driven by hand.
	deliver := func(to *simReplica, typ pb.MessageType) int {
		k := 0
		for _, m := range s.net.dueFor(to.id, math.MaxInt-1) {
			if m.GetFrom() != lead.id && m.GetFrom() != f.id {
				continue
			}
			if m.GetType() == typ {
				k++
			}
			require.NoError(t, to.n.step(m))
			_, err := to.n.processReadies() // a turn per message
			require.NoError(t, err)
		}
		return k
	}
	sentBy := func(from, to uint64, typ pb.MessageType) int {
		k := 0
		for _, q := range s.net.queue {
			if q.m.GetFrom() == from && q.m.GetTo() == to && q.m.GetType() == typ {
				k++
			}
		}
		return k
	}
	s.net.queue = nil
	s.net.maxDelay = 1

	puts := make([]*proposal, 2)
	for k := range puts {
		ms := batch(fmt.Sprint("hand", k), 1)
		puts[k] = &proposal{class: storage.ClassSend, msgs: ms, res: make([]storage.PutResult, 1), taken: make(chan struct{}), done: make(chan error, 1)}
		lead.n.propose(puts[k])
		lead.n.proposeBatch() // two entries (the loop would propose the second after the first's flush)
		_, err := lead.n.processReadies()
		require.NoError(t, err)
	}
	require.Len(t, lead.n.appending, 2, "the leader's entries wait for its worker")
	require.Equal(t, 2, sentBy(lead.id, f.id, pb.MsgApp), "their appends went out already")

	require.Equal(t, 2, deliver(f, pb.MsgApp))
	require.Len(t, f.n.appending, 2, "the follower stepped both appends")
	require.Zero(t, sentBy(f.id, lead.id, pb.MsgAppResp), "nothing is acknowledged before it is persisted")

	appendsBefore := f.log.Stats().Appended
	ms := slices.Clone(f.n.appending)
	require.Equal(t, 2, joinable(ms))
	require.NoError(t, f.n.appended(ms, f.n.persistAppends(ms), false))
	require.Equal(t, appendsBefore+2, f.log.Stats().Appended)
	require.Equal(t, 2, sentBy(f.id, lead.id, pb.MsgAppResp), "acknowledged once persisted")

	deliver(lead, pb.MsgAppResp)
	require.Empty(t, puts[0].done, "the leader's own copy is not persisted yet")

	ms = slices.Clone(lead.n.appending)
	require.NoError(t, lead.n.appended(ms, lead.n.persistAppends(ms), false))
	_, err := lead.n.processReadies()
	require.NoError(t, err)
	for _, p := range puts {
		require.NoError(t, <-p.done)
		require.GreaterOrEqual(t, lead.log.Store().DispatchLimit(), p.end, "the dispatch limit passed the entry")
	}
}
