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
	// waitRoom, if set, is called when persisting an append failed for
	// want of disk space (noSpace), with that error: it returns nil once
	// it is time to try the same append again, an error to give up (the
	// node then fails as for any persist error); with a nil error, once a
	// retry succeeded. It is called from the goroutine that persists.
	waitRoom func(err error) error
	// appending are raft's MsgStorageAppend messages handed to the append
	// worker and not yet persisted, in order: their entries, hard state
	// and snapshot (persistAppends), after which their responses are
	// stepped or sent (appended). toAppend hands each new one to the
	// worker; without it (Open before the worker starts, the simulation)
	// the caller persists them itself.
	appending []*pb.Message
	toAppend  func(*pb.Message)
	// held are Puts taken by a leader without an owner before it serves
	// (startServing waits for the appends outstanding): proposed once it
	// does, refused if it stops leading first.
	held     []*proposal
	retrying bool // proposing the held Puts: none is held again

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
	overlapped                  uint64 // appends handed to the worker while an earlier one was outstanding
	beside                      uint64 // Puts answered while an append was outstanding
}

func newNode(id uint64, peers []uint64, join bool, log *raftlog.Storage, cfg raft.Config, send func([]*pb.Message)) (*node, error) {
	cfg.ID = id
	cfg.Storage = log
	hs, cs, err := log.InitialState()
	if err != nil {
		return nil, err
	}
	cfg.Applied = 0 // committed entries are applied again: apply is idempotent (no state but the waiters)
	cfg.AsyncStorageWrites = true
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
	n := &node{id: id, rn: rn, log: log, send: send, placed: map[uint64][]*proposal{}, term: hs.GetTerm(), commit: hs.GetCommit(),
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
// definite error. A leader without an owner that does not serve yet (its
// first entries are being persisted) holds p until it does.
func (n *node) propose(p *proposal) {
	held := false
	defer func() {
		if !held {
			close(p.taken)
		}
	}()
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
	if !n.serving && n.autoUnfence && !n.retrying {
		n.held, held = append(n.held, p), true
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

// mayPropose reports whether the leader proposes its batch now: only
// when its append worker persists no entries. The Puts it takes during a
// flush go into one entry, proposed — and sent to the followers — as
// soon as that flush is done, when the worker can start on it at once:
// one entry, one append message to each follower and one answer from
// each per flush. Proposing them as they come (raft's async examples)
// sends them to the followers earlier but in entries of a few Puts each,
// and on a machine short of CPU the messages and steps that costs
// outweighed the head start (BENCHMARKS.md, "Asynchronous storage
// writes in the node loop").
func (n *node) mayPropose() bool {
	for _, m := range n.appending {
		if len(m.GetEntries()) > 0 {
			return false
		}
	}
	return true
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
		if len(n.appending) == 0 {
			if terr := n.store.TruncateFrom(start); terr != nil {
				n.fail(fmt.Errorf("shard: cut the frames of a refused proposal at %d: %w", start, terr))
			}
		} // else the append worker is persisting entries before them: DropUnindexed cuts them once it is done

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
	if len(n.appending) > 0 {
		// DropUnindexed would cut the frames of entries being persisted.
		return fmt.Errorf("%w: entries are being persisted", ErrNotLeader)
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
	n.refuseHeld(fmt.Errorf("%w: %w", ErrStopped, err))
}

// refuseHeld answers the held Puts (nothing of them was written) with err.
func (n *node) refuseHeld(err error) {
	for _, p := range n.held {
		p.finish(err)
		close(p.taken)
	}
	n.held = nil
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

// processReadies handles Readies until there are none (handle): the
// messages to peers go out at once, raft's appends to the append
// worker, committed entries are applied. With no append outstanding and
// the store not serving, it then cuts the CommitLog bytes no entry took
// (DropUnindexed) and, without an owner, lifts the fence of a leader. It
// returns how many Readies it handled.
func (n *node) processReadies() (int, error) {
	if n.failed != nil {
		return 0, n.failed
	}
	k := 0
	for {
		if (len(n.batch) > 0 || (n.serving && n.store.WriteOffset() > n.proposedEnd)) && n.mayPropose() {
			n.proposeBatch()
		}
		if !n.rn.HasReady() {
			break
		}
		rd, err := n.ready()
		if err == nil {
			err = n.handle(rd)
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
	if n.serving || len(n.appending) > 0 {
		// Serving: nothing past the last entry is stale (the writers'
		// frames past the last proposal are proposed at the next
		// AppendSignal). Appending: the bytes past the persisted entries
		// are those being persisted.
		return k, nil
	}
	if _, err := n.log.DropUnindexed(); err != nil {
		n.fail(err)
		return k, err
	}
	if n.autoUnfence && n.state == raft.StateLeader {
		_ = n.startServing()
	}
	if held := n.held; len(held) > 0 {
		n.held, n.retrying = nil, true
		for _, p := range held {
			n.propose(p) // proposed, or refused
		}
		n.retrying = false
		if len(n.batch) > 0 {
			kk, err := n.processReadies()
			return k + kk, err
		}
	}
	return k, nil
}

// handle takes one Ready (raft's AsyncStorageWrites: no Advance). A
// deposed leader's fence goes up first, before anything of the Ready is
// persisted. The proposals get their indexes; the messages to peers go
// out now — a leader's appends before its own entries are durable, so
// the followers' flushes run beside its own (raft's section 10.2.1): it
// counts itself toward the commit only once its append worker persisted
// them. Raft's MsgStorageAppend goes to the append worker; its
// MsgStorageApply (committed entries, all persisted here already) is
// applied at once: the commit point is raised in the hard-state file
// (SetCommit, which moves the dispatcher's limit) and the entries
// applied, and its response stepped. So a Put's answer waits for no
// flush but its own entry's, wherever the worker is.
func (n *node) handle(rd raft.Ready) error {
	n.readies++
	n.place(rd.Entries)
	if rd.SoftState != nil {
		wasLeader := n.state == raft.StateLeader
		n.lead, n.state = rd.SoftState.Lead, rd.SoftState.RaftState
		if wasLeader && n.state != raft.StateLeader {
			// Deposed: the fence goes up before anything of this Ready is
			// persisted (its append may cut the tail the writers wait
			// on), and what it proposed may or may not commit under the
			// next leader.
			n.stopServing()
			for _, p := range n.batch {
				// Written, never proposed (its frames are cut once no
				// append is outstanding): it cannot commit.
				p.finish(n.notLeader(rd.SoftState.Lead))
			}
			n.batch = nil
			n.abandon(fmt.Errorf("%w: the leader stepped down before the entry was committed", ErrUnknownOutcome))
		}
		if !wasLeader && n.state == raft.StateLeader {
			// The leader's empty entry of its term is in this Ready:
			// once it is committed, so is everything before it.
			n.gen++
			n.leadIndex = n.firstOfTerm(rd.Entries)
		}
	}
	var out []*pb.Message
	var apply []*pb.Message
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			if len(n.appending) > 0 {
				n.overlapped++
			}
			n.appending = append(n.appending, m)
			if n.toAppend != nil {
				n.toAppend(m)
			}
		case raft.LocalApplyThread:
			apply = append(apply, m)
		default:
			out = append(out, m)
		}
	}
	if len(out) > 0 {
		n.send(out)
	}
	for _, m := range apply {
		if err := n.applyCommitted(m); err != nil {
			return err
		}
	}
	return nil
}

// firstOfTerm is the index of the first of ents in the current term (a
// new leader's empty entry); the last index if there is none.
func (n *node) firstOfTerm(ents []*pb.Entry) uint64 {
	term := n.rn.BasicStatus().GetTerm()
	for _, e := range ents {
		if e.GetTerm() == term {
			return e.GetIndex()
		}
	}
	last, _ := n.log.LastIndex()
	return last
}

// applyCommitted applies raft's MsgStorageApply: committed entries that
// are persisted here. The hard-state file's commit point is raised to
// them first (their hard state may still wait in the append worker's
// queue), so the dispatcher's limit passes them before their Puts are
// answered.
func (n *node) applyCommitted(m *pb.Message) error {
	ents := m.GetEntries()
	if len(ents) > 0 {
		last := ents[len(ents)-1].GetIndex()
		if err := n.log.SetCommit(last); err != nil {
			return fmt.Errorf("shard: persist the commit point %d: %w", last, err)
		}
		n.commit = max(n.commit, last)
		for _, e := range ents {
			if err := n.apply(e); err != nil {
				return err
			}
		}
	}
	for _, r := range m.GetResponses() {
		n.stepLocal(r)
	}
	return nil
}

// stepLocal steps a response of the append worker or of apply addressed
// to this replica.
func (n *node) stepLocal(m *pb.Message) {
	// ErrStepPeerNotFound: a replica removed from the configuration
	// answering itself; nothing to do.
	_ = n.rn.Step(m)
}

// persistAppends persists raft's MsgStorageAppend messages ms, in
// order, as one: a snapshot (only a message of its own), the entries
// (raftlog.Storage.Append: one CommitLog flush and one index fdatasync
// for all of them), then the last hard state (its commit point is the
// highest, its term and vote the latest). It touches the Raft log only
// (never the node's fields): the append worker runs it beside the loop.
//
// An append that cannot be persisted for want of disk space (noSpace) is
// tried again, whole, once waitRoom says so, rather than stopping the
// replica: until it is persisted nothing of it is acknowledged (its
// responses are not sent), so the replica only falls behind, and catches
// up once space returns. Each step is safe to repeat after such a
// failure: the CommitLog refuses an append it has no room for before its
// first byte (commitlog.ErrNoSpace), the Raft index's slots are written
// in place, an entry whose frames are already in the CommitLog is
// verified there, and the hard state is a fixed-size file. A failed
// flush is not such a failure (the CommitLog's write path is dead after
// one: storage.ErrReadOnly), and stops the replica.
func (n *node) persistAppends(ms []*pb.Message) error {
	waited := false
	for {
		err := n.persistOnce(ms)
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

func (n *node) persistOnce(ms []*pb.Message) error {
	var ents []*pb.Entry
	var hs *pb.HardState
	for _, m := range ms {
		if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
			// Nothing compacts a shard's log yet, so no leader sends one;
			// a snapshot is applied only where the CommitLog already is.
			if err := n.log.ApplySnapshot(snap); err != nil {
				return fmt.Errorf("shard: apply snapshot %d: %w", snap.GetMetadata().GetIndex(), err)
			}
		}
		if len(ms) == 1 {
			ents = m.GetEntries()
		} else {
			ents = append(ents, m.GetEntries()...)
		}
		if h := (&pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}); !raft.IsEmptyHardState(h) {
			hs = h
		}
	}
	if err := n.log.Append(ents); err != nil {
		return fmt.Errorf("shard: persist entries: %w", err)
	}
	if hs != nil {
		if err := n.log.SetHardState(hs); err != nil {
			return fmt.Errorf("shard: persist hard state: %w", err)
		}
	}
	return nil
}

// joinable reports how many of ms, from the first, persistAppends may
// persist as one: entries that follow each other (none cut another's),
// and a snapshot only alone.
func joinable(ms []*pb.Message) int {
	k, next := 0, uint64(0)
	for _, m := range ms {
		if !raft.IsEmptySnap(m.GetSnapshot()) {
			if k == 0 {
				return 1
			}
			break
		}
		if es := m.GetEntries(); len(es) > 0 {
			if next != 0 && es[0].GetIndex() != next {
				break
			}
			next = es[len(es)-1].GetIndex() + 1
		}
		k++
	}
	return k
}

// peerResponses sends the responses of the persisted appends ms that are
// addressed to other replicas (a follower's MsgAppResp, a vote: they go
// out only once what they promise is durable). The append worker calls
// it as soon as it persisted them (n.send is safe beside the loop), or
// appended does.
func (n *node) peerResponses(ms []*pb.Message) {
	var out []*pb.Message
	for _, m := range ms {
		for _, r := range m.GetResponses() {
			if r.GetTo() != n.id {
				out = append(out, r)
			}
		}
	}
	if len(out) > 0 {
		n.send(out)
	}
}

// appended takes back from the append worker the messages it persisted
// (err nil) or failed to (the node then fails): the first of appending,
// in order. Their responses addressed to this replica are stepped (its
// own MsgAppResp, MsgStorageAppendResp: raft learns the entries are
// durable); unless sent (by the worker), the others are sent.
func (n *node) appended(ms []*pb.Message, err error, sent bool) error {
	if n.failed != nil {
		return n.failed
	}
	if err != nil {
		n.fail(err)
		return err
	}
	for _, m := range ms {
		if len(n.appending) == 0 || n.appending[0] != m {
			err := errors.New("shard: the append worker answered out of order")
			n.fail(err)
			return err
		}
		n.appending[0] = nil
		n.appending = n.appending[1:]
		n.entries += uint64(len(m.GetEntries()))
		if m.Term != nil {
			n.term, n.commit = m.GetTerm(), max(n.commit, m.GetCommit())
		}
		for _, r := range m.GetResponses() {
			if r.GetTo() == n.id {
				n.stepLocal(r)
			}
		}
	}
	if !sent {
		n.peerResponses(ms)
	}
	return nil
}

// settle persists, in this goroutine, every append outstanding and
// handles the Readies that follow, until none is left (Open, before the
// append worker starts).
func (n *node) settle() error {
	for {
		if _, err := n.processReadies(); err != nil {
			return err
		}
		if len(n.appending) == 0 {
			return nil
		}
		ms := slices.Clone(n.appending)
		if err := n.appended(ms, n.persistAppends(ms), false); err != nil {
			return err
		}
	}
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
				if len(n.appending) > 0 {
					n.beside++
				}
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
