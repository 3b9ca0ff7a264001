package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/internal/worker"
)

// Defaults of Options.
const (
	DefaultQueueMessages  = 4096
	DefaultQueueBytes     = 64 << 20
	DefaultMaxBatchBytes  = 8 << 20
	DefaultRequestTimeout = 10 * time.Second
	DefaultBackoffMin     = 50 * time.Millisecond
	DefaultBackoffMax     = time.Second
)

// ErrConfig: the options cannot start a transport.
var ErrConfig = errors.New("peer: invalid options")

// Options configure NewTransport.
type Options struct {
	// ID is this node's Raft id (not 0); messages to it are not sent.
	ID uint64
	// Peers maps each other replica's id to the host:port of its peer
	// listener (an entry for ID is ignored).
	Peers map[uint64]string
	// Secret, when not empty, goes with every request as
	// "Authorization: Bearer <Secret>"; the peers' handlers check it.
	Secret string
	// Logger gets the transport's lines (failures at debug, rate limited).
	Logger zerolog.Logger
	// Unreachable, when set, is called from a peer's goroutine after a
	// batch to it failed (the shard reports the peer unreachable to raft,
	// which then probes it instead of streaming). It must not block.
	Unreachable func(id uint64)
	// QueueMessages (4096) and QueueBytes (64 MiB, counting entry and
	// snapshot data) bound each peer's queue; Send drops what does not fit.
	QueueMessages int
	QueueBytes    int64
	// MaxBatchBytes (8 MiB) bounds one write into a stream; a single
	// message larger than it goes alone.
	MaxBatchBytes int
	// RequestTimeout (10 s) bounds the opening of a stream (dial
	// included, up to the peer's 200) and each write into it.
	RequestTimeout time.Duration
	// BackoffMin (50 ms) and BackoffMax (1 s) space a failing peer's
	// requests (doubling, jittered); what Send queues meanwhile waits in
	// the queue (and is dropped when it overflows).
	BackoffMin, BackoffMax time.Duration
	// TLS, when set (ClientTLS), makes the peers' URLs https and the
	// transport the Transport makes speak TLS.
	TLS *tls.Config
	// Certs, when set, is TLS with the key pair and CA pool it holds at
	// each dial (a rotation reaches the connections opened after it).
	Certs *Certs
	// Client sends the requests (nil: Client(Secret, TLS)'s transport,
	// owned and closed by the Transport). A Client given here must speak
	// HTTP/2 to the peers (over TLS when TLS is set) and add the secret
	// itself; Close leaves it open.
	Client *http.Client
}

func (o *Options) setDefaults() error {
	if o.ID == 0 {
		return fmt.Errorf("%w: ID 0", ErrConfig)
	}
	if o.QueueMessages <= 0 {
		o.QueueMessages = DefaultQueueMessages
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = DefaultBackoffMin
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffMin)
	}
	return nil
}

// Stats are a transport's counters since it started (peers removed
// since included).
type Stats struct {
	Sent    uint64 // messages written into a stream the peer accepted
	Batches uint64 // writes of those
	Dropped uint64 // messages Send found no room for in their peer's queue
	Unknown uint64 // messages to an id with no peer (or after Close)
	Failed  uint64 // messages lost with a failed stream, or that did not marshal
	Errors  uint64 // failed streams (and streams that did not open)
}

type counters struct {
	sent, batches, dropped, unknown, failed, errors atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{Sent: c.sent.Load(), Batches: c.batches.Load(), Dropped: c.dropped.Load(),
		Unknown: c.unknown.Load(), Failed: c.failed.Load(), Errors: c.errors.Load()}
}

// Transport sends a replica's Raft messages to its peers over HTTP/2
// (shard.Transport): one bounded queue and one goroutine per peer, which
// writes what is queued in batches into a stream it keeps open to the
// peer (doc.go).
type Transport struct {
	opts   Options
	client *http.Client
	owned  *http.Transport // closed by Close when the transport made it

	mu     sync.RWMutex
	peers  map[uint64]*peer
	closed bool
	total  counters

	closeOnce sync.Once
}

// NewTransport starts a transport with a goroutine for each of
// opts.Peers.
func NewTransport(opts Options) (*Transport, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	t := &Transport{opts: opts, client: opts.Client, peers: map[uint64]*peer{}}
	if t.client == nil {
		t.owned = newTransport(opts.TLS, opts.Certs)
		t.client = &http.Client{Transport: bearer{secret: opts.Secret, next: t.owned}}
	}
	t.opts.Logger = t.opts.Logger.With().Str("component", "peer").Uint64("node", opts.ID).Logger()
	t.SetPeers(opts.Peers)
	return t, nil
}

// Send queues each message for its peer and returns at once: a message
// whose peer's queue is full is dropped (Dropped), one to an id with no
// peer too (Unknown). Raft retransmits. The messages must not be changed
// afterwards (raft never does).
func (t *Transport) Send(msgs []*pb.Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			t.total.unknown.Add(1)
			continue
		}
		p.enqueue(m)
	}
}

// AddPeer starts sending to id at addr (host:port of its peer listener);
// a peer already known at another address is restarted there (its queue
// dropped).
func (t *Transport) AddPeer(id uint64, addr string) {
	if id == t.opts.ID || id == 0 {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	old := t.peers[id]
	if old != nil && old.addr == addr {
		t.mu.Unlock()
		return
	}
	t.peers[id] = t.startPeer(id, addr)
	t.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

// RemovePeer stops sending to id; what its queue held is dropped.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	p := t.peers[id]
	delete(t.peers, id)
	t.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// SetPeers makes peers the set of peers: the others are removed, new
// ones added, those at a new address restarted.
func (t *Transport) SetPeers(peers map[uint64]string) {
	t.mu.RLock()
	var gone []uint64
	for id := range t.peers {
		if _, ok := peers[id]; !ok {
			gone = append(gone, id)
		}
	}
	t.mu.RUnlock()
	for _, id := range gone {
		t.RemovePeer(id)
	}
	for id, addr := range peers {
		t.AddPeer(id, addr)
	}
}

// Peers is the current set of peers: id → address.
func (t *Transport) Peers() map[uint64]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[uint64]string, len(t.peers))
	for id, p := range t.peers {
		out[id] = p.addr
	}
	return out
}

// Stats are the transport's counters.
func (t *Transport) Stats() Stats { return t.total.stats() }

// PeerStats are the counters of the peer id as it is now (the zero Stats
// when there is none); Unknown is always 0.
func (t *Transport) PeerStats(id uint64) Stats {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if p := t.peers[id]; p != nil {
		return p.own.stats()
	}
	return Stats{}
}

// Close stops every peer's goroutine (its stream is
// cancelled; queued messages are dropped) and closes the connections
// the transport opened. Idempotent; Send after Close drops everything.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		peers := t.peers
		t.peers = map[uint64]*peer{}
		t.mu.Unlock()
		for _, p := range peers {
			p.stop()
		}
		if t.owned != nil {
			t.owned.CloseIdleConnections()
		}
	})
	return nil
}

// scheme is the peers' URL scheme.
func (t *Transport) scheme() string {
	if t.opts.Certs != nil {
		return "https"
	}
	return Scheme(t.opts.TLS)
}

// startPeer makes a peer and starts its goroutine (t.mu held).
func (t *Transport) startPeer(id uint64, addr string) *peer {
	ctx, cancel := context.WithCancel(context.Background())
	log := t.opts.Logger.With().Uint64("peer", id).Str("addr", addr).Logger()
	p := &peer{
		t: t, id: id, addr: addr, url: t.scheme() + "://" + addr + MessagesPath,
		queue:  make(chan *pb.Message, t.opts.QueueMessages),
		cancel: cancel, done: make(chan struct{}),
		log: log.Sample(&zerolog.BurstSampler{Burst: 1, Period: 5 * time.Second}),
	}
	go p.run(ctx)
	return p
}

// peer is one destination: its queue and the goroutine that empties it.
type peer struct {
	t      *Transport
	id     uint64
	addr   string
	url    string
	queue  chan *pb.Message
	queued atomic.Int64 // the weight (msgWeight) of what is in queue
	own    counters
	cancel context.CancelFunc
	done   chan struct{}
	log    zerolog.Logger // sampled: failures are logged at most every few seconds
}

// msgWeight estimates what a message holds in memory: its entries' and
// snapshot's data, plus a little for the rest. Cheap on Send's path.
func msgWeight(m *pb.Message) int64 {
	w := int64(64)
	for _, e := range m.Entries {
		w += int64(len(e.GetData())) + 32
	}
	if s := m.Snapshot; s != nil {
		w += int64(len(s.GetData()))
	}
	return w
}

func (p *peer) enqueue(m *pb.Message) {
	w := msgWeight(m)
	if p.queued.Add(w) > p.t.opts.QueueBytes && len(p.queue) > 0 {
		p.queued.Add(-w)
		p.drop()
		return
	}
	select {
	case p.queue <- m:
	default:
		p.queued.Add(-w)
		p.drop()
	}
}

func (p *peer) drop() {
	p.own.dropped.Add(1)
	p.t.total.dropped.Add(1)
}

func (p *peer) stop() {
	p.cancel()
	<-p.done
}

// run sends what is queued, one batch at a time, on a stream it keeps
// open to the peer, until ctx ends: when a stream fails (or does not
// open) what was being written is lost and counted, and the next stream
// is opened after a wait (backoff).
func (p *peer) run(ctx context.Context) {
	defer close(p.done)
	bo := worker.NewBackoff(p.t.opts.BackoffMin, p.t.opts.BackoffMax)
	var (
		buf  []byte
		next *pb.Message // taken from the queue, not written yet
		s    *stream
	)
	defer func() {
		if s != nil {
			s.close()
		}
	}()
	fail := func(err error, n int) bool {
		p.own.errors.Add(1)
		p.t.total.errors.Add(1)
		p.own.failed.Add(uint64(n))
		p.t.total.failed.Add(uint64(n))
		p.log.Debug().Err(err).Int("messages", n).Int("failures", bo.Failures()+1).Msg("raft stream to peer failed")
		if f := p.t.opts.Unreachable; f != nil {
			f(p.id)
		}
		return worker.Sleep(ctx, bo.Next())
	}
	for {
		if next == nil {
			select {
			case <-ctx.Done():
				return
			case next = <-p.queue:
			}
		}
		if s != nil && s.ended() {
			s.close() // ended while idle (the peer restarted): nothing lost
			s = nil
		}
		if s == nil {
			var err error
			if s, err = p.open(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				p.queued.Add(-msgWeight(next))
				next = nil
				if !fail(err, 1) {
					return
				}
				continue
			}
		}
		var n int
		buf, n, next = p.fill(buf[:0], next)
		if n == 0 {
			continue
		}
		if err := s.write(buf, p.t.opts.RequestTimeout); err != nil {
			if ctx.Err() != nil {
				return
			}
			if cause := s.close(); errors.Is(err, io.ErrClosedPipe) && cause != nil {
				err = cause // the request ended first: say why, not "closed pipe"
			}
			s = nil
			if !fail(err, n) {
				return
			}
			continue
		}
		if k := bo.Reset(); k > 0 {
			p.t.opts.Logger.Debug().Uint64("peer", p.id).Int("failures", k).Msg("peer reachable again")
		}
		p.own.sent.Add(uint64(n))
		p.t.total.sent.Add(uint64(n))
		p.own.batches.Add(1)
		p.t.total.batches.Add(1)
		if cap(buf) > 4*p.t.opts.MaxBatchBytes { // a huge lone message: do not keep its buffer
			buf = nil
		}
	}
}

// stream is one open stream to a peer: a POST whose body is the pipe the
// peer's goroutine writes batches into.
type stream struct {
	pw     *io.PipeWriter
	cancel context.CancelFunc
	done   chan struct{} // closed when the request is over; err says why
	err    error
}

// open starts a stream and waits (RequestTimeout at most) for the peer's
// 200, which says the secret was right and the peer reads the stream;
// then writes the header.
func (p *peer) open(ctx context.Context) (*stream, error) {
	sctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, p.url, pr)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", StreamContentType)
	s := &stream{pw: pw, cancel: cancel, done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(s.done)
		resp, err := p.t.client.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
			_ = resp.Body.Close()
			err = fmt.Errorf("peer answered %s: %s", resp.Status, bytes.TrimSpace(msg))
		}
		ready <- err
		if err == nil {
			// Cancelling the request does not reach a body write that waits
			// for flow control once the answer has come (net/http's HTTP/2
			// client); closing the answer's body aborts the whole stream.
			stop := context.AfterFunc(sctx, func() { _ = resp.Body.Close() })
			defer stop()
			// The peer ends its answer when it ends the stream; what it
			// wrote says why.
			msg, rerr := io.ReadAll(io.LimitReader(resp.Body, 256))
			_ = resp.Body.Close()
			switch {
			case rerr != nil:
				err = fmt.Errorf("stream: %w", rerr)
			case len(msg) > 0:
				err = fmt.Errorf("peer ended the stream: %s", bytes.TrimSpace(msg))
			default:
				err = errors.New("peer ended the stream")
			}
		}
		s.err = err
		pr.CloseWithError(err)
	}()
	timer := time.NewTimer(p.t.opts.RequestTimeout)
	defer timer.Stop()
	select {
	case err = <-ready:
	case <-timer.C:
		err = fmt.Errorf("peer did not answer within %s", p.t.opts.RequestTimeout)
	}
	if err == nil {
		err = s.write(appendHeader(nil), p.t.opts.RequestTimeout)
	}
	if err != nil {
		if cerr := s.close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = cerr
		}
		return nil, err
	}
	return s, nil
}

// write writes b into the stream; a write the peer has not taken within
// timeout (flow control: the peer stopped reading) cancels the stream.
func (s *stream) write(b []byte, timeout time.Duration) error {
	late := fmt.Errorf("write not taken within %s", timeout)
	t := time.AfterFunc(timeout, func() {
		_ = s.pw.CloseWithError(late) // a Write blocked in the pipe returns
		s.cancel()
	})
	_, err := s.pw.Write(b)
	if !t.Stop() {
		err = late
	}
	return err
}

// ended reports whether the request is over.
func (s *stream) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// close ends the stream (cancelling it: what is in flight may be lost)
// and returns why it ended.
func (s *stream) close() error {
	s.cancel()
	_ = s.pw.Close()
	<-s.done
	return s.err
}

// fill encodes first and what else is queued into a batch, up to
// MaxBatchBytes; it returns the batch, how many messages it holds, and
// the message taken from the queue that did not fit (nil if none).
func (p *peer) fill(buf []byte, first *pb.Message) ([]byte, int, *pb.Message) {
	n := 0
	m := first
	for {
		p.queued.Add(-msgWeight(m))
		mark := len(buf)
		var err error
		buf, err = appendMessage(buf, m)
		switch {
		case err != nil:
			p.own.failed.Add(1)
			p.t.total.failed.Add(1)
			p.log.Debug().Err(err).Msg("raft message dropped")
		case n > 0 && len(buf) > p.t.opts.MaxBatchBytes:
			buf = buf[:mark]
			p.queued.Add(msgWeight(m))
			return buf, n, m
		default:
			n++
		}
		select {
		case m = <-p.queue:
		default:
			return buf, n, nil
		}
	}
}
