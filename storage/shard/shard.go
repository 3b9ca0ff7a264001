package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/raftlog"
)

// Errors.
var (
	// ErrNotLeader: this replica does not lead; nothing was written. A
	// NotLeaderError names the leader when one is known. Retryable.
	ErrNotLeader = errors.New("shard: not the leader")
	// ErrUnknownOutcome: the entry was proposed, but the leadership
	// changed (or the caller stopped waiting) before it was committed: it
	// may or may not be committed by the next leader. Retryable with the
	// same idempotency key; never a success.
	ErrUnknownOutcome = errors.New("shard: outcome unknown")
	// ErrDropped: this replica leads, but raft dropped the proposal (a
	// leadership transfer under way, or more than
	// MaxUncommittedEntriesSize bytes uncommitted, as when the followers
	// are unreachable): nothing was written. Retryable.
	ErrDropped = errors.New("shard: proposal dropped")
	// ErrStopped: the shard is closed, or stopped by a persist error.
	ErrStopped = errors.New("shard: stopped")
	// ErrConfig: the options cannot start a replica.
	ErrConfig = errors.New("shard: invalid options")
)

// NotLeaderError is ErrNotLeader with the leader's id.
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("shard: not the leader (the leader is %d)", e.Leader)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Transport carries Raft messages between the replicas. Send must not
// block for long (queue and return) and may drop: Raft retransmits. It is
// called from the node loop and from its append worker (the answers due
// once an append is persisted), at the same time. The receiving side
// hands each message to its Shard.Step.
type Transport interface {
	Send(msgs []*pb.Message)
}

// Defaults.
const (
	DefaultTickInterval     = 100 * time.Millisecond
	DefaultElectionTicks    = 10
	DefaultHeartbeatTicks   = 1
	DefaultMaxProposals     = 1024
	DefaultMaxSizePerMsg    = 1 << 20
	DefaultMaxInflightMsgs  = 256
	DefaultMaxInflightBytes = 8 << 20
	DefaultMaxUncommitted   = 64 << 20
	defaultInboxMessages    = 4096
	defaultProposalsPending = 4096
)

// Options configure Open.
type Options struct {
	// ID is this replica's Raft id (not 0).
	ID uint64
	// Peers are the voters of a new group, this one among them: a
	// replica whose log is empty bootstraps with them. Ignored once the
	// log holds a configuration.
	Peers []uint64
	// Log opens the store and its Raft files (raftlog.Open). Its
	// Store.StoreID is the shard's logical address, the same on every
	// replica, so that ids minted by any leader stay valid after a
	// failover.
	Log raftlog.Options
	// Transport sends this replica's messages (nil: a single voter that
	// never sends).
	Transport Transport
	// Ticks drives the election and heartbeat timers, one tick per value
	// (tests send them); nil ticks every TickInterval.
	Ticks <-chan time.Time
	// TickInterval is the tick period without Ticks (100 ms).
	TickInterval time.Duration
	// ElectionTicks (10) and HeartbeatTicks (1) are raft's timers in
	// ticks.
	ElectionTicks, HeartbeatTicks int
	// MaxProposals is how many waiting Puts one turn of the loop takes
	// into the next Ready (1024).
	MaxProposals int
	// MaxSizePerMsg (1 MiB), MaxInflightMsgs (256) and
	// MaxUncommittedEntriesSize (64 MiB) are raft's flow control.
	MaxSizePerMsg   uint64
	MaxInflightMsgs int
	// MaxInflightBytes (8 MiB) bounds the entry bytes in flight to one
	// follower: a replica catching up is fed in steps, so reading its
	// entries never holds the loop (and its heartbeats) for long.
	MaxInflightBytes          uint64
	MaxUncommittedEntriesSize uint64
	// Logger gets the shard's lines; RaftLogger raft's (nil: discarded).
	Logger     zerolog.Logger
	RaftLogger raft.Logger
	// Join: an empty log waits to be added by the group (a learner whose
	// leader sends it the log) instead of starting a group with Peers.
	Join bool
	// OnConfChange is called, on the node loop, with each configuration
	// change as it is applied (at start-up again for every one in the
	// log): the transport learns the new replicas' addresses from it (a
	// change's Context). It must not block.
	OnConfChange func(*pb.ConfChangeV2)
	// Owned: the store's writers have an owner (the broker) that applies
	// the log before it writes, and lifts the fence itself (Serve) once
	// this replica leads and has applied it. Without it the fence is
	// lifted as soon as this replica leads (Put's own use).
	Owned bool
}

func (o *Options) setDefaults() error {
	if o.ID == 0 {
		return fmt.Errorf("%w: ID 0", ErrConfig)
	}
	if o.TickInterval <= 0 {
		o.TickInterval = DefaultTickInterval
	}
	if o.ElectionTicks <= 0 {
		o.ElectionTicks = DefaultElectionTicks
	}
	if o.HeartbeatTicks <= 0 {
		o.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if o.HeartbeatTicks >= o.ElectionTicks {
		return fmt.Errorf("%w: HeartbeatTicks %d must be below ElectionTicks %d", ErrConfig, o.HeartbeatTicks, o.ElectionTicks)
	}
	if o.MaxProposals <= 0 {
		o.MaxProposals = DefaultMaxProposals
	}
	if o.MaxSizePerMsg == 0 {
		o.MaxSizePerMsg = DefaultMaxSizePerMsg
	}
	if o.MaxInflightMsgs <= 0 {
		o.MaxInflightMsgs = DefaultMaxInflightMsgs
	}
	if o.MaxInflightBytes == 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if o.MaxUncommittedEntriesSize == 0 {
		o.MaxUncommittedEntriesSize = DefaultMaxUncommitted
	}
	if o.RaftLogger == nil {
		o.RaftLogger = discardLogger{}
	}
	return nil
}

// raftConfig is the node's raft.Config: CheckQuorum and PreVote on,
// proposals never forwarded (a follower refuses a Put; the broker
// forwards requests, not raft).
func (o *Options) raftConfig() raft.Config {
	return raft.Config{
		ElectionTick: o.ElectionTicks, HeartbeatTick: o.HeartbeatTicks,
		MaxSizePerMsg: o.MaxSizePerMsg, MaxInflightMsgs: o.MaxInflightMsgs, MaxInflightBytes: o.MaxInflightBytes,
		MaxUncommittedEntriesSize: o.MaxUncommittedEntriesSize,
		CheckQuorum:               true, PreVote: true, DisableProposalForwarding: true,
		Logger: o.RaftLogger,
	}
}

// Status is a replica's view of its group.
type Status struct {
	ID           uint64
	Leader       uint64 // 0 while none is known
	Role         string // leader, candidate, follower; stopped once Err is set
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	CommitOffset int64 // the CommitLog offset where the committed entries end
	Readies      uint64
	Proposals    uint64
	Entries      uint64 // entries persisted
	Overlapped   uint64 // appends handed to the append worker while an earlier one was outstanding
	// Gen counts the leaderships this replica gained and lost (and the
	// times it stopped serving while leading); LeadIndex is the first
	// index of its term while it leads: once CommitIndex reaches it, the
	// whole log before it is committed. Serving: the store's writers may
	// append (the fence is lifted).
	Gen       uint64
	LeadIndex uint64
	Serving   bool
	// NoSpace, when set, is why persisting Raft entries waits for disk
	// space: the replica falls behind (it acknowledges nothing it has not
	// persisted) and catches up once space returns.
	NoSpace error
	// Voters and Learners are the configuration applied here.
	Voters, Learners []uint64
	// conf is that configuration whole, at AppliedIndex (a copy's).
	conf *pb.ConfState
}

// Shard is one replica of a store whose writes go through Raft: it owns
// the store (opened with its dispatcher held at the commit point) and
// its Raft log, and runs the node loop in one goroutine (doc.go).
type Shard struct {
	opts      Options
	log       *raftlog.Storage
	node      *node
	propc     chan *proposal
	recvc     chan *pb.Message
	servc     chan serveRequest
	progc     chan chan []PeerProgress
	confc     chan confRequest
	transferc chan uint64
	unreachc  chan uint64
	rolec     chan struct{} // capacity 1: Status().Gen changed
	stopc     chan struct{}
	donec     chan struct{}
	ticks     <-chan time.Time
	timer     *time.Ticker
	worker    *appendWorker
	// serveWaits are Serve's requests waiting for the append worker to
	// be idle (startServing cuts the bytes no entry took).
	serveWaits []serveRequest

	statusMu sync.Mutex
	status   Status
	err      error // why the loop stopped
	noSpace  error // Status.NoSpace

	closeOnce sync.Once
	closeErr  error
}

// Open opens the replica's store and Raft log, bootstraps a new group
// from Options.Peers on an empty log, and starts the node loop. A single
// voter campaigns at once.
func Open(opts Options) (*Shard, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	opts.Log.Store.Replicated = true
	log, err := raftlog.Open(opts.Log)
	if err != nil {
		return nil, err
	}
	send := func([]*pb.Message) {}
	if opts.Transport != nil {
		send = opts.Transport.Send
	}
	n, err := newNode(opts.ID, opts.Peers, opts.Join, log, opts.raftConfig(), send)
	if err != nil {
		_ = log.Close()
		return nil, err
	}
	s := &Shard{
		opts: opts, log: log, node: n,
		propc: make(chan *proposal, defaultProposalsPending),
		recvc: make(chan *pb.Message, defaultInboxMessages),
		servc: make(chan serveRequest), rolec: make(chan struct{}, 1),
		progc: make(chan chan []PeerProgress), confc: make(chan confRequest), transferc: make(chan uint64),
		unreachc: make(chan uint64, 16),
		stopc:    make(chan struct{}), donec: make(chan struct{}),
		ticks: opts.Ticks,
	}
	n.autoUnfence = !opts.Owned
	n.onConf = opts.OnConfChange
	n.waitRoom = s.waitRoom
	s.worker = newAppendWorker(n)
	if s.ticks == nil {
		s.timer = time.NewTicker(opts.TickInterval)
		s.ticks = s.timer.C
	}
	if err := n.settle(); err != nil { // the bootstrap entries
		_ = log.Close()
		return nil, err
	}
	if n.soleVoter() {
		if err := n.rn.Campaign(); err != nil {
			_ = log.Close()
			return nil, err
		}
		if err := n.settle(); err != nil {
			_ = log.Close()
			return nil, err
		}
	}
	s.publish()
	n.toAppend = s.worker.push
	go s.worker.run()
	go s.run()
	return s, nil
}

// soleVoter reports whether this replica is its group's only voter.
func (n *node) soleVoter() bool {
	v := n.rn.Status().Config.Voters.IDs()
	_, in := v[n.id]
	return len(v) == 1 && in
}

// run is the node loop: wait for a tick, a message, a Put or the append
// worker's persisted appends; take every other message and Put already
// waiting; handle every Ready; publish the status.
func (s *Shard) run() {
	defer close(s.donec)
	defer s.worker.stop()
	n := s.node
	for {
		select {
		case <-s.stopc:
			s.stopLoop(ErrStopped)
			return
		case <-s.ticks:
			n.tick()
		case m := <-s.recvc:
			s.stepLogged(m)
		case p := <-s.propc:
			n.propose(p)
		case <-n.store.AppendSignal():
			// The writers' frames are proposed at the end of the turn
			// (processReadies).
		case <-s.worker.ready:
			for _, d := range s.worker.take() {
				if err := n.appended(d.ms, d.err, true); err != nil {
					s.opts.Logger.Error().Err(err).Uint64("node", n.id).Msg("shard stopped: persisting Raft state failed")
					s.stopLoop(err)
					return
				}
			}
		case r := <-s.servc:
			s.serveWaits = append(s.serveWaits, r)
		case r := <-s.progc:
			r <- n.progress()
		case r := <-s.confc:
			r.err <- n.proposeConf(r.cc, r.done)
		case to := <-s.transferc:
			n.rn.TransferLeader(to)
		case id := <-s.unreachc:
			n.rn.ReportUnreachable(id)
		case <-n.store.Damage():
			s.worker.halt() // it sends no answer from here on
			s.stopDamaged()
			return
		}
	drain:
		for k := 0; k < s.opts.MaxProposals; k++ {
			select {
			case m := <-s.recvc:
				s.stepLogged(m)
			case p := <-s.propc:
				n.propose(p)
			default:
				break drain
			}
		}
		if _, err := n.processReadies(); err != nil {
			s.opts.Logger.Error().Err(err).Uint64("node", n.id).Msg("shard stopped: persisting Raft state failed")
			s.stopLoop(err)
			return
		}
		if len(s.serveWaits) > 0 && len(n.appending) == 0 {
			for _, r := range s.serveWaits {
				r.done <- s.serve(r.gen)
			}
			s.serveWaits = nil
		}
		s.publish()
	}
}

// stopDamaged stops a replica whose store found its log damaged: it must
// not vote or lead with a log that may lack what it acknowledged. A
// leader first hands its leadership to a voter that holds its whole log,
// if one does (raft sends that voter TimeoutNow at once: it campaigns
// without waiting for an election timeout, and the others elect it), so
// writes move on within a round trip rather than an election timeout.
// Then the loop stops: nothing here is stepped again — no vote, no
// append, no proposal — and the store stays fenced.
func (s *Shard) stopDamaged() {
	n := s.node
	rec, _ := n.store.Damaged()
	cause := fmt.Errorf("%w: the record at CommitLog offset %d (found by %s: %s)", ErrDamaged, rec.Offset, rec.Stage, rec.Reason)
	n.stopServing()
	if st := n.rn.Status(); st.RaftState == raft.StateLeader {
		last, _ := n.log.LastIndex()
		var to uint64
		for id, pr := range st.Progress {
			if id != n.id && !pr.IsLearner && pr.Match == last {
				to = id
				break
			}
		}
		if to != 0 {
			n.rn.TransferLeader(to)
			// Only the messages to peers: nothing of this Ready is
			// persisted or applied any more.
			if n.rn.HasReady() {
				var out []*pb.Message
				for _, m := range n.rn.Ready().Messages {
					if to := m.GetTo(); to != raft.LocalAppendThread && to != raft.LocalApplyThread && to != n.id {
						out = append(out, m)
					}
				}
				n.send(out)
			}
		}
		s.opts.Logger.Error().Uint64("node", n.id).Uint64("to", to).Msg("damaged leader hands over its leadership and stops")
	}
	s.opts.Logger.Error().Err(cause).Uint64("node", n.id).Msg("shard stopped: this replica's log is damaged; it no longer votes or leads")
	s.stopLoop(cause)
}

// appendWorker persists the node's appends (raft's MsgStorageAppend) in
// a goroutine of its own, in order, as many at once as follow each other
// (node.persistAppends: one flush for all of them, the Raft log's group
// commit), and hands them back to the loop (node.appended), which steps
// or sends their responses. Neither side ever blocks on the other.
type appendWorker struct {
	n      *node
	mu     sync.Mutex
	queue  []*pb.Message // handed over, not yet taken
	done   []appendDone  // persisted, not yet taken back
	kick   chan struct{} // capacity 1: queue grew
	ready  chan struct{} // capacity 1: done grew
	quit   chan struct{}
	halted sync.Once
	exited chan struct{}
}

type appendDone struct {
	ms  []*pb.Message
	err error
}

func newAppendWorker(n *node) *appendWorker {
	return &appendWorker{n: n, kick: make(chan struct{}, 1), ready: make(chan struct{}, 1),
		quit: make(chan struct{}), exited: make(chan struct{})}
}

// push hands m to the worker (the loop's node.toAppend).
func (w *appendWorker) push(m *pb.Message) {
	w.mu.Lock()
	w.queue = append(w.queue, m)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// take returns what the worker persisted since the last take.
func (w *appendWorker) take() []appendDone {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.done
	w.done = nil
	return d
}

func (w *appendWorker) run() {
	defer close(w.exited)
	var pending []*pb.Message
	for {
		w.mu.Lock()
		pending = append(pending, w.queue...)
		clear(w.queue)
		w.queue = w.queue[:0]
		w.mu.Unlock()
		if len(pending) == 0 {
			select {
			case <-w.quit:
				return
			case <-w.kick:
				continue
			}
		}
		select {
		case <-w.quit:
			return
		default:
		}
		k := joinable(pending)
		ms := slices.Clone(pending[:k])
		clear(pending[:k])
		pending = pending[k:]
		err := w.n.persistAppends(ms)
		select {
		case <-w.quit:
			return // a damaged or stopped replica answers nothing more
		default:
		}
		if err == nil {
			w.n.peerResponses(ms)
		}
		w.mu.Lock()
		w.done = append(w.done, appendDone{ms: ms, err: err})
		w.mu.Unlock()
		select {
		case w.ready <- struct{}{}:
		default:
		}
		if err != nil {
			return // the loop stops on it
		}
	}
}

// halt tells the worker to stop: it persists nothing more and sends no
// answer after the append it is persisting.
func (w *appendWorker) halt() { w.halted.Do(func() { close(w.quit) }) }

// stop halts the worker and waits for it.
func (w *appendWorker) stop() {
	w.halt()
	<-w.exited
}

// serveRequest asks the loop to lift the fence for generation gen.
type serveRequest struct {
	gen  uint64
	done chan error
}

// serve lifts the fence if this replica still leads in generation gen.
func (s *Shard) serve(gen uint64) error {
	n := s.node
	if n.gen != gen {
		return fmt.Errorf("%w: generation %d is over (now %d)", ErrNotLeader, gen, n.gen)
	}
	err := n.startServing()
	s.publish()
	return err
}

// Serve lifts the store's fence (Options.Owned): the owner saw this
// replica lead in generation gen (Status().Gen), waited for CommitIndex
// to reach LeadIndex and the dispatcher to reach CommitOffset, and
// applied the log. It fails with ErrNotLeader when the generation is
// over (the replica stopped leading since, or never led in it).
func (s *Shard) Serve(ctx context.Context, gen uint64) error {
	r := serveRequest{gen: gen, done: make(chan error, 1)}
	select {
	case s.servc <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.donec:
		return ErrStopped
	}
	select {
	case err := <-r.done:
		return err
	case <-s.donec:
		return ErrStopped
	}
}

// PeerProgress is what a leader knows of one replica (itself included).
type PeerProgress struct {
	ID         uint64
	Learner    bool
	MatchIndex uint64 // the last index known to be in its log
	LagBytes   int64  // CommitLog bytes of the leader's log past MatchIndex (-1: unknown)
	// NeedsCopy: the entries the replica lacks are no longer in the
	// leader's log (retention deleted their bytes): the log cannot bring
	// it up to date, only a copy can (doc.go, "Copies").
	NeedsCopy bool
}

// Progress is the leader's view of every replica; nil on a replica that
// does not lead.
func (s *Shard) Progress(ctx context.Context) []PeerProgress {
	r := make(chan []PeerProgress, 1)
	select {
	case s.progc <- r:
	case <-ctx.Done():
		return nil
	case <-s.donec:
		return nil
	}
	select {
	case p := <-r:
		return p
	case <-ctx.Done():
		return nil
	case <-s.donec:
		return nil
	}
}

type confRequest struct {
	cc   *pb.ConfChangeV2
	done chan struct{}
	err  chan error
}

// ChangeConf proposes a configuration change on the leader (one change
// per call: add a learner, promote it, remove a replica; the new
// replica's peer address in the change's Context) and returns once it is
// applied here — committed on a majority of the configuration it
// changes. ErrNotLeader on a follower; ErrUnknownOutcome when ctx ends
// first (raft turns a change proposed while another is pending into a
// no-op: the caller checks Status and tries again).
func (s *Shard) ChangeConf(ctx context.Context, cc *pb.ConfChangeV2) error {
	r := confRequest{cc: cc, done: make(chan struct{}), err: make(chan error, 1)}
	select {
	case s.confc <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.donec:
		return ErrStopped
	}
	if err := <-r.err; err != nil {
		return err
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	case <-s.donec:
		return ErrStopped
	}
}

// ReportUnreachable tells raft that a message to replica id was lost
// (the transport's failed batch): the leader probes it instead of
// streaming appends to it. It never blocks (a report that does not fit
// is dropped: the next failure reports again).
func (s *Shard) ReportUnreachable(id uint64) {
	select {
	case s.unreachc <- id:
	default:
	}
}

// TransferLeadership asks the leader to hand its role to replica to (a
// voter) and returns at once; the caller watches Status.
func (s *Shard) TransferLeadership(ctx context.Context, to uint64) error {
	select {
	case s.transferc <- to:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.donec:
		return ErrStopped
	}
}

// RoleChanged receives (capacity 1) after Status().Gen changed: this
// replica began or stopped leading (or serving).
func (s *Shard) RoleChanged() <-chan struct{} { return s.rolec }

func (s *Shard) stepLogged(m *pb.Message) {
	if err := s.node.step(m); err != nil {
		s.opts.Logger.Debug().Err(err).Stringer("type", m.GetType()).Uint64("from", m.GetFrom()).Msg("raft message refused")
	}
}

// stopLoop answers everything still waiting once the loop stops.
func (s *Shard) stopLoop(cause error) {
	s.node.stopServing()
	s.node.abandon(fmt.Errorf("%w: %w", ErrUnknownOutcome, cause))
	s.node.refuseHeld(fmt.Errorf("%w: %w", ErrStopped, cause))
	s.statusMu.Lock()
	s.err = cause
	s.statusMu.Unlock()
	s.publish()
	for {
		select {
		case p := <-s.propc:
			p.finish(fmt.Errorf("%w: %w", ErrStopped, cause))
			close(p.taken)
		default:
			return
		}
	}
}

func (s *Shard) publish() {
	st := s.node.status()
	s.statusMu.Lock()
	if s.err != nil {
		// Whatever raft last said, a stopped replica neither leads nor
		// knows a leader; its owners hear of it as of a change of role.
		st.Role, st.Leader, st.Serving = "stopped", 0, false
		st.Gen++
	}
	changed := s.status.Gen != st.Gen
	s.status = st
	s.statusMu.Unlock()
	for _, w := range s.node.confApplied {
		close(w)
	}
	s.node.confApplied = nil
	if changed {
		select {
		case s.rolec <- struct{}{}:
		default:
		}
	}
}

// Status is the replica's view of its group after the loop's last turn.
func (s *Shard) Status() Status {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	st := s.status
	st.NoSpace = s.noSpace
	return st
}

// roomRetry is how often a persist that failed for want of disk space is
// tried again.
const roomRetry = 250 * time.Millisecond

// waitRoom is the node's waitRoom: it notes the stall (Status.NoSpace;
// logged once per stall) and waits roomRetry, or gives up when the shard
// closes; a nil err ends the stall.
func (s *Shard) waitRoom(err error) error {
	s.statusMu.Lock()
	was := s.noSpace
	s.noSpace = err
	s.statusMu.Unlock()
	switch {
	case err == nil:
		s.opts.Logger.Info().Uint64("node", s.opts.ID).Msg("disk space returned: persisting Raft entries again")
		return nil
	case was == nil:
		s.opts.Logger.Error().Err(err).Uint64("node", s.opts.ID).
			Msg("no disk space to persist Raft entries: this replica falls behind until space returns")
	}
	t := time.NewTimer(roomRetry)
	defer t.Stop()
	select {
	case <-s.stopc:
		return ErrStopped
	case <-s.worker.quit:
		return ErrStopped
	case <-t.C:
		return nil
	}
}

// Store is the replica's store: reads (ReadQueue, Lookup, …) see only
// committed messages. Nothing but the shard may write to it.
func (s *Shard) Store() *storage.Store { return s.log.Store() }

// Step hands a message from a peer to the node loop (the transport's
// receiving side). It drops the message when the loop's inbox is full:
// Raft retransmits.
func (s *Shard) Step(m *pb.Message) {
	select {
	case s.recvc <- m:
	case <-s.stopc:
	default:
	}
}

// Put appends msgs (PutClass's rules: res has len(msgs) and gets the
// results) through the log: on the leader the messages are written to
// its CommitLog in log order and their frames proposed as one entry;
// Put returns nil once the entry is committed on a majority (each copy
// durable) and the dispatch limit is past it. Otherwise nothing written
// is promised: ErrNotLeader (nothing was written), ErrUnknownOutcome
// (proposed, leadership lost or ctx ended before the commit: retry with
// the same idempotency key), ErrStopped, or the store's refusal
// (ErrInvalidMessage, ErrDiskFull, …). Put does not keep msgs or res
// after it returns.
func (s *Shard) Put(ctx context.Context, class storage.Class, msgs []*message.Message, res []storage.PutResult) error {
	if len(msgs) == 0 {
		return nil
	}
	p := &proposal{class: class, msgs: msgs, res: res, taken: make(chan struct{}), done: make(chan error, 1)}
	select {
	case s.propc <- p:
	case <-ctx.Done():
		return fmt.Errorf("shard: put not proposed: %w", ctx.Err())
	case <-s.stopc:
		return ErrStopped
	}
	select {
	case <-p.taken:
	case <-s.donec:
		select { // the loop may have answered it as it stopped
		case <-p.taken:
		default:
			return ErrStopped
		}
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	case <-s.donec:
		select {
		case err := <-p.done:
			return err
		default:
			return ErrStopped
		}
	}
}

// Close stops the node loop and closes the Raft log and the store
// (flushing them). Puts still waiting get ErrUnknownOutcome or
// ErrStopped.
func (s *Shard) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopc)
		<-s.donec
		if s.timer != nil {
			s.timer.Stop()
		}
		s.closeErr = s.log.Close()
	})
	return s.closeErr
}

// Err is why the node loop stopped (nil while it runs).
func (s *Shard) Err() error {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	return s.err
}

// discardLogger drops raft's log lines; Fatal and Panic still panic, as
// raft expects.
type discardLogger struct{}

func (discardLogger) Debug(...any)                   {}
func (discardLogger) Debugf(string, ...any)          {}
func (discardLogger) Error(...any)                   {}
func (discardLogger) Errorf(string, ...any)          {}
func (discardLogger) Info(...any)                    {}
func (discardLogger) Infof(string, ...any)           {}
func (discardLogger) Warning(...any)                 {}
func (discardLogger) Warningf(string, ...any)        {}
func (discardLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (discardLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (discardLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (discardLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
