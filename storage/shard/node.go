package shard

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/raftlog"
)

// proposal is one Put on its way through the log. The node loop fills
// res and the place fields; done gets the outcome once.
type proposal struct {
	class storage.Class
	msgs  []*message.Message
	res   []storage.PutResult
	taken chan struct{} // closed once the loop no longer touches msgs and res (but for the outcome)
	done  chan error    // capacity 1

	term       uint64 // the leader's term when it proposed
	index      uint64 // the entry's index once it was persisted (0 before)
	start, end int64  // the CommitLog range of its frames
}

func (p *proposal) finish(err error) {
	select {
	case p.done <- err:
	default:
	}
}

// node is the Raft replica without goroutines: the Shard's loop calls
// its methods in one goroutine; the simulation test calls them in its
// own, step by step. It owns the RawNode, the Raft log and the pending
// proposals.
type node struct {
	id   uint64
	rn   *raft.RawNode
	log  *raftlog.Storage
	send func([]*pb.Message)

	batch    []*proposal            // written, not yet proposed (proposeBatch)
	unplaced []*proposal            // proposed, not yet seen in a Ready's entries (FIFO)
	placed   map[uint64][]*proposal // persisted at their index, not yet committed
	lead     uint64
	state    raft.StateType
	term     uint64
	commit   uint64
	applied  uint64
	conf     *pb.ConfState
	// onConf is called with each configuration change applied (the
	// transport learns addresses from it); confWaits are the callers
	// waiting for a change, by its encoded bytes; confApplied those whose
	// change is applied, answered at the next publish.
	onConf      func(*pb.ConfChangeV2)
	confWaits   map[string][]chan struct{}
	confApplied []chan struct{}
	failed      error // a persist error: the node stops taking work
	// waitRoom, if set, is called when persisting a Ready failed for want
	// of disk space (noSpace), with that error: it returns nil once it is
	// time to try the same Ready again, an error to give up (the node then
	// fails as for any persist error); with a nil error, once a retry
	// succeeded. It is called from whichever goroutine persists.
	waitRoom func(err error) error
	// persisting: a Ready is being persisted beside propose (pipelined);
	// cutAt (≥ 0) is where the frames of a proposal refused meanwhile
	// start, cut once the persist is done.
	persisting bool
	cutAt      int64
	// durable is the last index persisted before the Ready being
	// persisted beside (commitBeside answers no Put above it);
	// besideErr a failure of commitBeside, returned once the persist is
	// done.
	durable   uint64
	besideErr error

	// The store's writers (doc.go, "Writers of the store"): while serving
	// (leading, fence lifted) the loop proposes what they appended past
	// proposedEnd. gen counts leaderships gained and lost; leadIndex is
	// the first index of this leader's term; autoUnfence lifts the fence
	// as soon as this replica leads (no owner to apply the log first).
	store       *storage.Store
	serving     bool
	proposedEnd int64
	gen         uint64
	leadIndex   uint64
	autoUnfence bool

	// counters, for tests and Status
	readies, proposals, entries uint64
	overlapped                  uint64 // Readies persisted beside proposals (pipelined)
	beside                      uint64 // Puts answered by commitBeside
}

func newNode(id uint64, peers []uint64, join bool, log *raftlog.Storage, cfg raft.Config, send func([]*pb.Message)) (*node, error) {
	cfg.ID = id
	cfg.Storage = log
	hs, cs, err := log.InitialState()
	if err != nil {
		return nil, err
	}
	cfg.Applied = 0 // committed entries are applied again: apply is idempotent (no state but the waiters)
	rn, err := raft.NewRawNode(&cfg)
	if err != nil {
		return nil, err
	}
	last, err := log.LastIndex()
	if err != nil {
		return nil, err
	}
	if last == 0 && raft.IsEmptyHardState(hs) && len(cs.GetVoters()) == 0 && !join {
		if len(peers) == 0 {
			return nil, fmt.Errorf("%w: an empty log and no peers to start a group with", ErrConfig)
		}
		ps := make([]raft.Peer, len(peers))
		for i, p := range peers {
			ps[i] = raft.Peer{ID: p}
		}
		if err := rn.Bootstrap(ps); err != nil {
			return nil, fmt.Errorf("shard: bootstrap: %w", err)
		}
	}
	n := &node{id: id, rn: rn, log: log, send: send, placed: map[uint64][]*proposal{}, term: hs.GetTerm(), commit: hs.GetCommit(), cutAt: -1,
		store: log.Store(), autoUnfence: true, conf: cs, confWaits: map[string][]chan struct{}{}}
	n.store.Fence() // a replica writes nothing of its own until it leads
	return n, nil
}

// tick advances the node's logical clock by one tick.
func (n *node) tick() { n.rn.Tick() }

// step hands a message from a peer to Raft.
func (n *node) step(m *pb.Message) error {
	if n.failed != nil {
		return n.failed
	}
	err := n.rn.Step(m)
	if errors.Is(err, raft.ErrStepPeerNotFound) || errors.Is(err, raft.ErrStepLocalMsg) {
		return nil // not for us; a transport's mistake, not a reason to stop
	}
	return err
}

// propose writes p's messages to the leader's CommitLog — offsets,
// queue offsets and store time decided here, once, in log order — and
// adds p to the batch that proposeBatch proposes as one entry: the
// loop writes every Put it takes in a turn, then proposes them
// together (one entry, one append message to each follower and one
// answer from it, rather than one of each per Put). Anything that stops
// it before raft took the entry cuts the frames again (this loop is the
// store's only writer, so they are the log's tail) and fails p with a
// definite error.
func (n *node) propose(p *proposal) {
	defer close(p.taken)
	if n.failed != nil {
		p.finish(fmt.Errorf("%w: %w", ErrStopped, n.failed))
		return
	}
	st := n.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		p.finish(n.notLeader(st.Lead))
		return
	}
	if st.LeadTransferee != 0 {
		p.finish(fmt.Errorf("%w: leadership is being transferred to %d", ErrDropped, st.LeadTransferee))
		return
	}
	if !n.serving {
		p.finish(fmt.Errorf("%w: this replica leads but has not applied its log yet", ErrNotLeader))
		return
	}
	if err := n.store.PutClassNoWait(p.class, p.msgs, p.res); err != nil {
		p.finish(err)
		return
	}
	n.batch = append(n.batch, p)
	if n.store.WriteOffset()-n.proposedEnd >= maxEntryBytes {
		n.proposeBatch()
	}
}

// maxEntryBytes bounds the frames of one batch's entry: past it the
// batch is proposed at once, and the next Puts start another.
const maxEntryBytes = 1 << 20

// proposeBatch proposes, as one entry, the frames the store's writers
// (the batch's Puts among them) appended past the last proposal:
// offsets, queue offsets and store time were decided once, by the
// leader, in log order. A proposal raft refuses cuts the frames again
// (under the fence, so no writer is appending): their writers learn an
// unknown outcome, the batch's Puts that they were dropped.
func (n *node) proposeBatch() {
	batch := n.batch
	n.batch = nil
	fail := func(err error) {
		for _, p := range batch {
			p.finish(err)
		}
	}
	if n.failed != nil || !n.serving {
		fail(fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrStopped))
		return
	}
	start, end := n.proposedEnd, n.store.WriteOffset()
	if end <= start {
		fail(fmt.Errorf("shard: the put's frames are not past the last proposal (%d)", start))
		return
	}
	data, err := n.store.ReadFrameRange(start, end, make([]byte, 0, end-start))
	if err == nil {
		err = n.rn.Propose(data)
		if errors.Is(err, raft.ErrProposalDropped) {
			err = fmt.Errorf("%w: %w", ErrDropped, err)
		}
	}
	if err != nil {
		// Stop serving (the writers get an unknown outcome) and give the
		// frames back; an owner applies the log again before serving.
		n.stopServing()
		if n.persisting {
			// The Raft log is persisting a Ready: cut once it is done
			// (and take nothing more until then).
			n.cutAt = start
		} else if terr := n.store.TruncateFrom(start); terr != nil {
			n.fail(fmt.Errorf("shard: cut the frames of a refused proposal at %d: %w", start, terr))
		}
		fail(err)
		return
	}
	n.proposals++
	n.proposedEnd = end
	term := n.rn.BasicStatus().GetTerm()
	for _, p := range batch {
		p.term, p.start, p.end = term, start, end
		n.unplaced = append(n.unplaced, p)
	}
}

// stopServing fences the store (no writer appends from here on; those
// waiting above the commit point get an unknown outcome) and starts a
// new generation: an owner that lifts the fence again applies the log
// first.
func (n *node) stopServing() {
	if !n.serving {
		return
	}
	n.store.Fence()
	n.serving = false
	n.gen++
}

// startServing lifts the fence of a leader whose owner applied the log
// (or at once, autoUnfence): the bytes no entry took are cut first, and
// the writers' frames are proposed from the log's end.
func (n *node) startServing() error {
	if n.serving || n.failed != nil || n.rn.BasicStatus().RaftState != raft.StateLeader {
		return fmt.Errorf("%w: not leading now", ErrNotLeader)
	}
	if _, err := n.log.DropUnindexed(); err != nil {
		n.fail(err)
		return err
	}
	n.proposedEnd = n.log.NextOffset()
	n.store.Unfence()
	n.serving = true
	return nil
}

func (n *node) notLeader(lead uint64) error {
	if lead == raft.None {
		return fmt.Errorf("%w: no leader known", ErrNotLeader)
	}
	return &NotLeaderError{Leader: lead}
}

// fail stops the node for good: every pending proposal gets
// ErrUnknownOutcome (its entry may be on the others).
func (n *node) fail(err error) {
	if n.failed == nil {
		n.failed = err
	}
	n.stopServing() // the store's writers learn it too
	n.abandon(fmt.Errorf("%w: %w", ErrUnknownOutcome, err))
}

// abandon answers every pending proposal with err.
func (n *node) abandon(err error) {
	for _, p := range n.batch {
		p.finish(err)
	}
	n.batch = nil
	for _, p := range n.unplaced {
		p.finish(err)
	}
	n.unplaced = nil
	for i, ps := range n.placed {
		for _, p := range ps {
			p.finish(err)
		}
		delete(n.placed, i)
	}
}

// processReadies handles Readies until there are none — persist the
// entries, then the hard state (which raises the dispatch limit to the
// commit point), send the messages, apply the committed entries,
// Advance — and then cuts the CommitLog bytes no entry took: with every
// Ready handled, nothing proposed is outstanding. While a leader's Ready
// is persisted, during (if set) may propose more (the Shard's loop takes
// the Puts that arrived: see pipelined); they go into the next Ready. It
// returns how many Readies it handled.
func (n *node) processReadies(during func(persisting func() error) error) (int, error) {
	if n.failed != nil {
		return 0, n.failed
	}
	k := 0
	for {
		if len(n.batch) > 0 || (n.serving && n.store.WriteOffset() > n.proposedEnd) {
			n.proposeBatch()
		}
		if !n.rn.HasReady() {
			break
		}
		leader := n.rn.BasicStatus().RaftState == raft.StateLeader
		rd, err := n.ready()
		if err != nil {
			n.fail(err)
			return k, err
		}
		if rd.SoftState != nil && rd.SoftState.RaftState != raft.StateLeader {
			// Deposed: the fence goes up before anything of this Ready is
			// persisted (it may cut the tail the writers are waiting on).
			n.stopServing()
		}
		switch {
		case during != nil && n.pipelined(rd, leader):
			n.overlapped++
			// A leader's messages (appends, heartbeats) go before its own
			// entries are persisted, so the followers' flushes run beside
			// its own (raft's section 10.2.1; etcd's server does the
			// same): it counts itself toward the commit only once its
			// own entries are durable (at Advance).
			n.send(rd.Messages)
			rd.Messages = nil
			var early bool
			early, err = n.commitEarly(rd)
			if err == nil {
				err = during(func() error { return n.persist(rd, !early) })
			}
			if err == nil {
				err = n.finish(rd, !early)
			}
		default:
			err = n.persist(rd, true)
			if err == nil {
				err = n.finish(rd, true)
			}
		}
		if err != nil {
			n.fail(err)
			return k, err
		}
		k++
	}
	// Proposals raft never put in a Ready's entries were lost to a
	// leadership change between Propose and the Ready: their messages
	// may still have gone out, so the outcome is unknown.
	if len(n.unplaced) > 0 {
		for _, p := range n.unplaced {
			p.finish(fmt.Errorf("%w: the leadership changed before the entry was persisted", ErrUnknownOutcome))
		}
		n.unplaced = nil
	}
	if n.serving {
		// Nothing past the last entry is stale: the writers' frames past
		// the last proposal are proposed at the next AppendSignal.
		return k, nil
	}
	if _, err := n.log.DropUnindexed(); err != nil {
		n.fail(err)
		return k, err
	}
	if n.autoUnfence && n.state == raft.StateLeader {
		_ = n.startServing()
	}
	return k, nil
}

// pipelined reports whether more may be proposed while rd is persisted:
// only on a leader, for a Ready whose entries are all of its term — its
// own proposals, whose frames Append verifies in place and never cuts
// or appends, so the frames of new proposals written meanwhile past them
// are not touched. Raft takes proposals between Ready and Advance (its
// Node does the same while the application persists).
func (n *node) pipelined(rd raft.Ready, leader bool) bool {
	if !leader || !raft.IsEmptySnap(rd.Snapshot) || len(rd.Entries) == 0 {
		return false
	}
	if rd.SoftState != nil && rd.SoftState.RaftState != raft.StateLeader {
		return false
	}
	term := n.rn.BasicStatus().GetTerm()
	for _, e := range rd.Entries {
		if e.GetTerm() != term {
			return false
		}
	}
	return true
}

// commitEarly handles the commit of a pipelined Ready before its entries
// are persisted, when the commit point names only entries persisted by
// earlier Readies (on a leader it always does: it counts itself only
// once its own entries are durable): the hard state is written (which
// raises the dispatch limit) and the committed entries applied, so the
// Puts they answer do not wait for the flush of the entries proposed
// since. It reports whether it did.
func (n *node) commitEarly(rd raft.Ready) (bool, error) {
	if raft.IsEmptyHardState(rd.HardState) {
		return false, nil
	}
	last, err := n.log.LastIndex()
	if err != nil || rd.HardState.GetCommit() > last {
		return false, err
	}
	if err := n.log.SetHardState(rd.HardState); err != nil {
		return false, fmt.Errorf("shard: persist hard state: %w", err)
	}
	n.term, n.commit = rd.HardState.GetTerm(), rd.HardState.GetCommit()
	for _, e := range rd.CommittedEntries {
		if err := n.apply(e); err != nil {
			return false, err
		}
	}
	return true, nil
}

// persist writes what rd asks to be durable: a snapshot, the entries,
// then (withHardState) the hard state. It touches the Raft log only
// (never the node's fields), so it may run beside propose (pipelined).
//
// A Ready that cannot be persisted for want of disk space (noSpace) is
// tried again, whole, once waitRoom says so, rather than stopping the
// replica: until it is persisted nothing of it is acknowledged (no
// message of it is sent, no Advance), so the replica only falls behind,
// and catches up once space returns. Each step is safe to repeat after
// such a failure: the CommitLog refuses an append it has no room for
// before its first byte (commitlog.ErrNoSpace), the Raft index's slots
// are written in place, an entry whose frames are already in the
// CommitLog is verified there, and the hard state is a fixed-size file.
// A failed flush is not such a failure (the CommitLog's write path is
// dead after one: storage.ErrReadOnly), and stops the replica.
func (n *node) persist(rd raft.Ready, withHardState bool) error {
	waited := false
	for {
		err := n.persistOnce(rd, withHardState)
		if err == nil || n.waitRoom == nil || !noSpace(err) {
			if err == nil && waited {
				_ = n.waitRoom(nil)
			}
			return err
		}
		waited = true
		if werr := n.waitRoom(err); werr != nil {
			return fmt.Errorf("%w (gave up waiting for disk space: %w)", err, werr)
		}
	}
}

// noSpace reports whether a persist failed for want of disk space only,
// with nothing lost: worth trying again once space returns.
func noSpace(err error) bool {
	if errors.Is(err, storage.ErrReadOnly) || errors.Is(err, commitlog.ErrReadOnly) {
		return false
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, commitlog.ErrNoSpace) || errors.Is(err, storage.ErrDiskFull)
}

func (n *node) persistOnce(rd raft.Ready, withHardState bool) error {
	if !raft.IsEmptySnap(rd.Snapshot) {
		// Nothing compacts a shard's log yet, so no leader sends one;
		// a snapshot is applied only where the CommitLog already is.
		if err := n.log.ApplySnapshot(rd.Snapshot); err != nil {
			return fmt.Errorf("shard: apply snapshot %d: %w", rd.Snapshot.GetMetadata().GetIndex(), err)
		}
	}
	if err := n.log.Append(rd.Entries); err != nil {
		return fmt.Errorf("shard: persist entries: %w", err)
	}
	if withHardState && !raft.IsEmptyHardState(rd.HardState) {
		if err := n.log.SetHardState(rd.HardState); err != nil {
			return fmt.Errorf("shard: persist hard state: %w", err)
		}
	}
	return nil
}

// finish does the rest of rd once it is persisted: place the proposals,
// note the state, send, apply (unless commitEarly did), Advance.
func (n *node) finish(rd raft.Ready, applyCommitted bool) error {
	n.readies++
	n.entries += uint64(len(rd.Entries))
	n.place(rd.Entries)
	if applyCommitted && !raft.IsEmptyHardState(rd.HardState) {
		n.term, n.commit = rd.HardState.GetTerm(), rd.HardState.GetCommit()
	}
	if rd.SoftState != nil {
		wasLeader := n.state == raft.StateLeader
		n.lead, n.state = rd.SoftState.Lead, rd.SoftState.RaftState
		if !wasLeader && n.state == raft.StateLeader {
			// The leader's empty entry of its term is in this Ready:
			// once it is committed, so is everything before it.
			n.gen++
			n.leadIndex, _ = n.log.LastIndex()
		}
		if wasLeader && n.state != raft.StateLeader {
			// Deposed: what it proposed may or may not commit under the
			// next leader.
			n.abandon(fmt.Errorf("%w: the leader stepped down before the entry was committed", ErrUnknownOutcome))
		}
	}
	if len(rd.Messages) > 0 {
		n.send(rd.Messages)
	}
	if applyCommitted {
		for _, e := range rd.CommittedEntries {
			if err := n.apply(e); err != nil {
				return err
			}
		}
	}
	n.rn.Advance(rd)
	return nil
}

// place gives the pending proposals their indexes: on the leader, the
// normal entries with frames of its own term are its batches of
// proposals, in the order it proposed them, at the offsets it wrote
// them.
func (n *node) place(ents []*pb.Entry) {
	for _, e := range ents {
		if len(n.unplaced) == 0 {
			return
		}
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		p := n.unplaced[0]
		start, _, err := commitlog.StreamExtent(e.GetData())
		if err != nil || e.GetTerm() != p.term || start != p.start {
			continue
		}
		for len(n.unplaced) > 0 && n.unplaced[0].term == p.term && n.unplaced[0].start == start {
			q := n.unplaced[0]
			q.index = e.GetIndex()
			n.placed[q.index] = append(n.placed[q.index], q)
			n.unplaced = n.unplaced[1:]
		}
	}
}

// apply applies one committed entry. The messages are in the CommitLog
// already and the dispatcher follows the commit point; what is left is
// the configuration and the proposer's answer.
func (n *node) apply(e *pb.Entry) error {
	switch e.GetType() {
	case pb.EntryConfChange:
		var cc pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return fmt.Errorf("shard: conf change %d: %w", e.GetIndex(), err)
		}
		n.conf = n.rn.ApplyConfChange(&cc)
	case pb.EntryConfChangeV2:
		var cc pb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return fmt.Errorf("shard: conf change %d: %w", e.GetIndex(), err)
		}
		n.conf = n.rn.ApplyConfChange(&cc)
		if n.onConf != nil {
			n.onConf(&cc)
		}
		// Answered once Status shows the change (Shard.publish): a caller
		// that reads Status after ChangeConf sees the configuration it made.
		n.confApplied = append(n.confApplied, n.confWaits[string(e.GetData())]...)
		delete(n.confWaits, string(e.GetData()))
	}
	if ps, ok := n.placed[e.GetIndex()]; ok {
		delete(n.placed, e.GetIndex())
		for _, p := range ps {
			if e.GetTerm() == p.term {
				p.finish(nil)
			} else {
				p.finish(fmt.Errorf("%w: another leader's entry was committed at index %d", ErrNotLeader, e.GetIndex()))
			}
		}
	}
	n.applied = e.GetIndex()
	return nil
}

// status is what Status reports.
func (n *node) status() Status {
	return Status{
		ID: n.id, Leader: n.lead, Role: roleName(n.state), Term: n.term,
		CommitIndex: n.commit, AppliedIndex: n.applied,
		CommitOffset: n.log.CommitOffset(), Readies: n.readies, Proposals: n.proposals, Entries: n.entries,
		Overlapped: n.overlapped, Gen: n.gen, LeadIndex: n.leadIndex, Serving: n.serving,
		Voters: n.conf.GetVoters(), Learners: n.conf.GetLearners(), conf: n.conf,
	}
}

func roleName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate, raft.StatePreCandidate:
		return "candidate"
	default:
		return "follower"
	}
}

// persistBeside runs persisting (a leader's Ready being persisted) in a
// goroutine of its own while propose takes what next offers, until the
// persist is done or a proposal was refused (its frames are then cut
// after it). next returns the persist's outcome with finished set once
// it is done; otherwise a proposal to take, or nil when it handled
// something else (a message stepped: commitBeside).
func (n *node) persistBeside(persisting func() error, next func(done <-chan error) (*proposal, error, bool)) error {
	n.persisting, n.cutAt = true, -1
	n.durable, n.besideErr = 0, nil
	if last, err := n.log.LastIndex(); err == nil {
		n.durable = last
	}
	done := make(chan error, 1)
	go func() { done <- persisting() }()
	var err error
	for {
		if n.cutAt >= 0 {
			err = <-done
			break
		}
		p, perr, finished := next(done)
		if finished {
			err = perr
			break
		}
		if p != nil {
			n.propose(p)
		}
	}
	n.persisting = false
	if err == nil && n.besideErr != nil {
		err = n.besideErr
	}
	if n.cutAt >= 0 {
		if terr := n.log.Store().TruncateFrom(n.cutAt); terr != nil && err == nil {
			err = fmt.Errorf("shard: cut the frames of a refused proposal at %d: %w", n.cutAt, terr)
		}
		n.cutAt = -1
	}
	return err
}

// commitBeside runs after a message was stepped while a leader's Ready
// is persisted (persistBeside): when the message moved the commit point
// over entries persisted before that Ready (a follower's answer to an
// earlier append), it writes the hard state — which raises the
// dispatch limit — and answers their Puts, without waiting for the
// flush of the entries being persisted. Raft hands the commit over in a
// Ready only after that flush (no second Ready before Advance), and a
// Put would otherwise wait for two flushes: the one its entry is in and
// the next. Those entries are applied again in the next Ready (apply
// finds no proposal left to answer); configuration changes are applied
// only there. It changes nothing unless this replica still leads in the
// term its proposals were made in.
func (n *node) commitBeside() {
	if n.besideErr != nil || n.failed != nil {
		return
	}
	st := n.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return
	}
	c := min(st.GetCommit(), n.durable)
	if c <= n.commit {
		return
	}
	hs := &pb.HardState{Term: proto.Uint64(st.GetTerm()), Vote: proto.Uint64(st.GetVote()), Commit: proto.Uint64(c)}
	if err := n.log.SetHardState(hs); err != nil {
		n.besideErr = fmt.Errorf("shard: persist hard state: %w", err)
		return
	}
	n.term, n.commit = st.GetTerm(), c
	for i, ps := range n.placed {
		if i <= c && ps[0].term == st.GetTerm() {
			delete(n.placed, i)
			for _, p := range ps {
				p.finish(nil)
				n.beside++
			}
		}
	}
}

// progress is the leader's view of every replica (nil on a follower).
func (n *node) progress() []PeerProgress {
	st := n.rn.Status()
	if st.RaftState != raft.StateLeader {
		return nil
	}
	end := n.log.NextOffset()
	out := make([]PeerProgress, 0, len(st.Progress))
	for id, pr := range st.Progress {
		p := PeerProgress{ID: id, Learner: pr.IsLearner, MatchIndex: pr.Match, LagBytes: -1}
		if off, ok := n.log.EndOffset(pr.Match); ok {
			p.LagBytes = max(end-off, 0)
		}
		// Next-1 is where the leader looks to continue the replica's log
		// (its last index, once a probe found it).
		if off, ok := n.log.EndOffset(pr.Next - 1); ok && pr.Next > 0 && off < n.store.MinPhysicalOffset() {
			p.NeedsCopy = true
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PeerProgress) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// proposeConf proposes a configuration change (leader only); done is
// closed once an identical change is applied here.
func (n *node) proposeConf(cc *pb.ConfChangeV2, done chan struct{}) error {
	if n.failed != nil {
		return fmt.Errorf("%w: %w", ErrStopped, n.failed)
	}
	st := n.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return n.notLeader(st.Lead)
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(cc)
	if err != nil {
		return err
	}
	if err := n.rn.ProposeConfChange(cc); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			return fmt.Errorf("%w: %w", ErrDropped, err)
		}
		return err
	}
	n.confWaits[string(data)] = append(n.confWaits[string(data)], done)
	return nil
}

// ErrDamaged: the replica's log is damaged — a committed entry cannot be
// read back, or its store found a frame of its flushed log damaged
// (storage's damage.go: the scrubber, a reader, the dispatcher): it stops
// — it must not vote or lead with a log shorter than the one it
// acknowledged — and is rebuilt from the others.
var ErrDamaged = errors.New("shard: the log is damaged")

// ready is RawNode.Ready, whose storage errors (a committed entry that
// cannot be read back) raft raises as panics: they come back as an error
// that stops the node.
func (n *node) ready() (rd raft.Ready, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("%w: %w", ErrDamaged, e)
			} else {
				err = fmt.Errorf("%w: %v", ErrDamaged, r)
			}
		}
	}()
	return n.rn.Ready(), nil
}
