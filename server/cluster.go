package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/peer"
	"github.com/mqgate/mqgate/server/sqs"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/raftlog"
	"github.com/mqgate/mqgate/storage/shard"
)

// A replica of a cluster (ARCHITECTURE.md, "Three replicas, one shard")
// is this process with --node-id and --peers. Its store is a Raft replica
// (package shard) whose peers talk over the peer port (package peer,
// h2c). Over that store it runs a broker and, around the broker, the same
// server a single node runs (openServer, never served itself): a
// follower's broker applies the committed log as it comes (Broker.Follow),
// and the node's owner loop promotes it once the replica leads and has
// applied its log; when the replica stops leading, that broker and its
// server are closed and a new follower's opened (its memory may hold
// changes the next leader's log does not).
//
// The front on --listen serves /livez, /readyz, /metrics, the console,
// the spec and GET /v1/cluster itself; every other /v1 request goes to
// the leader: served here when this replica serves, else forwarded over
// the peer port (never redirected), where the leader serves it. A
// forwarded request is never forwarded again: a node that stopped
// leading answers 503 no-leader, and a forward whose answer was lost
// answers 503 write-outcome-unknown (retry with the same
// Idempotency-Key).

// Headers of forwarded requests.
const (
	// forwardedAuthHeader carries the client's Authorization header to
	// the leader (the peer port's own is the cluster secret).
	forwardedAuthHeader = "X-Mqgate-Forwarded-Authorization"
	// forwardedByHeader names the node that forwarded the request;
	// forwardedClientHeader is the client's address as the forwarding
	// node saw it: the leader checks address rules (an account's
	// whiteRemoteAddress) and keys its limits on it, not on the peer's.
	forwardedByHeader     = "X-Mqgate-Forwarded-By"
	forwardedClientHeader = "X-Mqgate-Forwarded-Client"
	forwardPrefix         = "/forward"
	// forwardSQSPrefix prefixes SQS calls forwarded to the leader's
	// --sqs-listen handler (the peer port; the path after it, which a
	// SigV4 signature covers, is the client's).
	forwardSQSPrefix = "/forward-sqs"
)

// clusterNode is one replica: the shard, the peer port, the current
// broker's server and the owner loop.
type clusterNode struct {
	cfg     Config
	rootLog zerolog.Logger // the process logger (the broker's servers name their components)
	log     zerolog.Logger

	addrMu sync.RWMutex
	peers  map[uint64]string // every replica's peer address: --peers, then the membership changes applied

	shard     *shard.Shard
	transport *peer.Transport
	// leaderSeen is the leader last noted (noteLeader); leaderCtx ends
	// when it changes: requests forwarded to it are abandoned then (a
	// retryable 503) rather than left hanging on a replica that may be
	// cut off.
	leaderMu     sync.Mutex
	leaderSeen   uint64
	leaderCtx    context.Context
	leaderCancel context.CancelFunc
	// peerScheme is the peer port's: https with --peer-tls-*, else http
	// (h2c).
	peerScheme string
	peerSrv    *http.Server
	peerLn     net.Listener
	fwd        *http.Client
	listener   net.Listener // the client listener (the outer server's)
	sqsAddr    string       // the --sqs-listen address bound ("" without it)

	forwardTracked, readyTracked http.Handler // the front's own routes

	copies chan struct{} // the copies being sent (cluster_copy.go), at most maxCopies

	current    atomic.Pointer[Server] // the server over the current broker
	serving    atomic.Bool            // the current broker leads (promoted)
	servingGen uint64                 // the shard's generation it leads in (owner loop only)

	mu     sync.Mutex // orders the owner loop's swaps against close
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// clusterStoreID is the store id of a cluster's replicas: the same on
// every one (message ids must hold after a failover), derived from the
// replicas' ids.
func clusterStoreID(peers map[uint64]string) message.Host {
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := sha256.New()
	_, _ = h.Write([]byte("mqgate cluster"))
	for _, id := range ids {
		_, _ = h.Write([]byte(strconv.FormatUint(id, 10) + ","))
	}
	var out message.Host
	copy(out[:], h.Sum(nil))
	return out
}

func openCluster(ctx context.Context, cfg Config) (_ *Server, err error) {
	log := newLogger(cfg)
	peers, err := cfg.peerMap()
	if err != nil {
		return nil, err
	}
	tf, err := openTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	ptls, err := openPeerTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	var certs *peer.Certs
	if ptls != nil {
		certs = ptls.certs
	}
	n := &clusterNode{cfg: cfg, rootLog: log, log: log.With().Str("component", "cluster").Uint64("node", cfg.NodeID).Logger(),
		peers: maps.Clone(peers), done: make(chan struct{}), copies: make(chan struct{}, maxCopies)}
	var cleanup []func() error
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				_ = cleanup[i]()
			}
		}
	}()
	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	cleanup = append(cleanup, listener.Close)
	if n.peerLn, err = net.Listen("tcp", peers[cfg.NodeID]); err != nil {
		return nil, fmt.Errorf("listen on %s (peer port): %w", peers[cfg.NodeID], err)
	}
	cleanup = append(cleanup, n.peerLn.Close)
	n.peerScheme = "http"
	if certs != nil {
		n.peerLn = tls.NewListener(n.peerLn, certs.ServerTLS())
		n.peerScheme = "https"
	}
	others := map[uint64]string{}
	for id, addr := range peers {
		if id != cfg.NodeID {
			others[id] = addr
		}
	}
	var reportTo atomic.Pointer[shard.Shard] // the transport starts before the shard
	if n.transport, err = peer.NewTransport(peer.Options{ID: cfg.NodeID, Peers: others, Secret: cfg.ClusterSecret, Certs: certs,
		Logger: log, Unreachable: func(id uint64) {
			if s := reportTo.Load(); s != nil {
				s.ReportUnreachable(id)
			}
		}}); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, n.transport.Close)
	so, err := broker.StorageOptions(brokerOptions(cfg, log))
	if err != nil {
		return nil, err
	}
	so.StoreID = clusterStoreID(peers)
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	lo := raftlog.Options{Store: so, Logger: log}
	if cfg.Join {
		empty, err := shard.EmptyDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if empty {
			client := peer.Client(cfg.ClusterSecret, nil)
			if certs != nil {
				client = peer.ClientCerts(cfg.ClusterSecret, certs)
			}
			err := fetchCopy(ctx, n.log, client, n.peerScheme, cfg.NodeID, others, lo)
			client.CloseIdleConnections()
			if err != nil {
				return nil, err
			}
		}
	}
	if n.shard, err = shard.Open(shard.Options{ID: cfg.NodeID, Peers: ids,
		Log:       lo,
		Transport: n.transport, TickInterval: cfg.RaftTick, Owned: true, Join: cfg.Join,
		OnConfChange: n.confChanged, Logger: log}); err != nil {
		return nil, replicaHint(fmt.Errorf("open replica: %w", err), cfg.DataDir, cfg.NodeID)
	}
	cleanup = append(cleanup, n.shard.Close)
	reportTo.Store(n.shard)
	n.listener = listener
	if tf != nil {
		n.listener = tls.NewListener(listener, tf.serverConfig())
	}
	// --admin-listen and --sqs-listen belong to the front, like --listen:
	// they serve the current broker's server's handlers (the SQS calls on
	// a follower forwarded to the leader).
	var adminLn, sqsLn net.Listener
	for _, l := range []struct {
		addr, what string
		ln         *net.Listener
	}{{cfg.AdminListen, "admin", &adminLn}, {cfg.SQSListen, "sqs", &sqsLn}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s (%s): %w", l.addr, l.what, err)
		}
		cleanup = append(cleanup, ln.Close)
		if tf != nil {
			ln = tls.NewListener(ln, tf.serverConfig())
		}
		*l.ln = ln
	}
	if sqsLn != nil {
		n.sqsAddr = sqsLn.Addr().String()
	}
	inner, err := n.openFollower(ctx)
	if err != nil {
		return nil, err
	}
	n.current.Store(inner)

	n.fwd = peer.Client(cfg.ClusterSecret, nil)
	if certs != nil {
		n.fwd = peer.ClientCerts(cfg.ClusterSecret, certs)
	}
	mux := http.NewServeMux()
	mux.Handle(peer.MessagesPath, peer.Handler(n.shard.Step, peer.HandlerOptions{ID: cfg.NodeID, Secret: cfg.ClusterSecret, Logger: log}))
	mux.HandleFunc(peer.CopyPath, n.serveCopy)
	mux.HandleFunc(forwardPrefix+"/", n.serveForwarded)
	mux.HandleFunc(forwardSQSPrefix+"/", n.serveForwarded)
	var serverTLS *tls.Config
	if certs != nil {
		serverTLS = certs.ServerTLS()
	}
	n.peerSrv = peer.NewServer(peers[cfg.NodeID], mux, serverTLS)
	n.peerSrv.ErrorLog = stdlog.New(log.With().Str("component", "net/http").Str("listener", "peer").Logger(), "", 0)
	go func() {
		if err := n.peerSrv.Serve(n.peerLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error().Err(err).Msg("peer port stopped")
		}
	}()

	outer := newServerOn(cfg, log, inner.broker, n.listener, inner.security, nil, nil)
	outer.cluster = n
	if adminLn != nil {
		outer.serveAdminOn(adminLn, http.HandlerFunc(n.adminFront))
	}
	if sqsLn != nil {
		outer.serveSQSOn(sqsLn, http.HandlerFunc(n.sqsFront))
	}
	// The front's own routes are tracked (trackConn: the connection
	// wrapper tells a handler's answers from net/http's own); the broker's
	// server's handler tracks itself (twice, the body would wrap itself).
	n.forwardTracked, n.readyTracked = trackConn(http.HandlerFunc(n.forward)), trackConn(http.HandlerFunc(n.readyz))
	outer.http.Handler = http.HandlerFunc(n.front)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	go n.run()
	n.log.Info().Str("peer_addr", peers[cfg.NodeID]).Str("peers", cfg.Peers).Msg("replica started")
	return outer, nil
}

// openFollower opens a follower's broker over the replica's store and the
// server around it.
func (n *clusterNode) openFollower(ctx context.Context) (*Server, error) {
	cfg := n.cfg
	cfg.ShutdownDelay = 0 // the front drains, not this server
	inner, err := openServer(ctx, cfg, n.rootLog, replicaParts{listener: n.listener, store: n.shard.Store(), follower: true, sqsAddr: n.sqsAddr})
	if err != nil {
		return nil, err
	}
	inner.clusterView, inner.members = n.view, n
	return inner, nil
}

// run is the owner loop: the follower's broker applies the committed log;
// once the replica leads and its commit point reached its first entry
// of the term, the broker applies the rest, the store's fence is lifted
// and the broker promoted; when the replica stops leading, the broker is
// closed and a follower's opened.
func (n *clusterNode) run() {
	defer close(n.done)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.shard.RoleChanged():
		case <-tick.C:
		}
		n.noteLeader(n.shard.Status().Leader)
		n.mu.Lock()
		if !n.closed {
			n.turn()
		}
		n.mu.Unlock()
	}
}

// turn is one pass of the owner loop (under n.mu).
func (n *clusterNode) turn() {
	st := n.shard.Status()
	cur := n.current.Load()
	b := cur.brokerRef
	if n.serving.Load() {
		if st.Gen != n.servingGen || !st.Serving {
			n.stepDown()
		}
		return
	}
	if b == nil || !b.Following() {
		return
	}
	if err := b.Follow(n.ctx); err != nil && n.ctx.Err() == nil {
		n.log.Warn().Err(err).Msg("applying the log failed; retrying")
		return
	}
	if st.Role != "leader" || st.Serving || st.LeadIndex == 0 || st.CommitIndex < st.LeadIndex {
		return
	}
	store := n.shard.Store()
	if store.DispatchStatus().Dispatched < st.CommitOffset {
		return // the next turn
	}
	if err := b.Follow(n.ctx); err != nil {
		return
	}
	if err := n.shard.Serve(n.ctx, st.Gen); err != nil {
		return
	}
	start := time.Now()
	if err := b.Promote(n.ctx); err != nil {
		n.log.Error().Err(err).Msg("promotion failed; reopening as a follower")
		n.servingGen = st.Gen
		n.serving.Store(true)
		n.stepDown()
		return
	}
	n.servingGen = st.Gen
	n.serving.Store(true)
	n.log.Info().Uint64("term", st.Term).Uint64("commit_index", st.CommitIndex).Dur("promote", time.Since(start)).Msg("leading: serving the API")
}

// stepDown closes the broker that led and opens a follower's (under
// n.mu).
func (n *clusterNode) stepDown() {
	n.serving.Store(false)
	old := n.current.Load()
	n.log.Info().Msg("no longer leading: reopening the broker as a follower")
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	if err := old.Close(ctx); err != nil {
		n.log.Warn().Err(err).Msg("closing the broker that led")
	}
	for n.ctx.Err() == nil {
		inner, err := n.openFollower(ctx)
		if err == nil {
			n.current.Store(inner)
			return
		}
		n.log.Error().Err(err).Msg("reopening the broker as a follower failed; retrying")
		time.Sleep(time.Second)
	}
}

// front serves the client listener (see the comment at the top).
func (n *clusterNode) front(w http.ResponseWriter, r *http.Request) {
	cur := n.current.Load()
	p := r.URL.Path
	switch {
	case p == "/readyz":
		n.readyTracked.ServeHTTP(w, r)
	case strings.HasPrefix(p, "/v1/") && p != "/v1/cluster" && !n.serving.Load():
		n.forwardTracked.ServeHTTP(w, r)
	default:
		cur.http.Handler.ServeHTTP(w, r)
	}
}

// readyz: ready while a leader is known (this replica, serving, or
// another one to forward to).
func (n *clusterNode) readyz(w http.ResponseWriter, r *http.Request) {
	st := n.shard.Status()
	switch {
	case n.shard.Err() != nil:
		api.WriteError(w, r, fmt.Errorf("%w: %s", api.ErrNotReady, n.stopped(n.shard.Err())))
		return
	case st.NoSpace != nil:
		api.WriteError(w, r, fmt.Errorf("%w: this replica cannot persist Raft entries for want of disk space (%v): it falls behind until space returns", api.ErrNotReady, st.NoSpace))
		return
	case st.Leader == 0:
		api.WriteError(w, r, fmt.Errorf("%w: no leader: this replica cannot reach a quorum of %d", api.ErrNotReady, len(st.Voters)/2+1))
		return
	case st.Leader == n.cfg.NodeID && !n.serving.Load():
		api.WriteError(w, r, fmt.Errorf("%w: leading, applying the log before serving", api.ErrNotReady))
		return
	}
	n.current.Load().readyz(w, r)
}

// noteLeader records the leader this replica knows now; a change ends
// the previous one's context. It returns the context of lead.
func (n *clusterNode) noteLeader(lead uint64) context.Context {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	if n.leaderCtx == nil || lead != n.leaderSeen {
		if n.leaderCancel != nil {
			n.leaderCancel()
		}
		n.leaderSeen = lead
		n.leaderCtx, n.leaderCancel = context.WithCancel(context.Background())
	}
	return n.leaderCtx
}

// forward hands a request to the leader's peer port. When this replica
// learns of another leader meanwhile, the request is abandoned: a write
// gets 503 write-outcome-unknown, anything else 503 no-leader, and the
// client's retry reaches the new leader instead of hanging on an old one
// that may be cut off.
func (n *clusterNode) forward(w http.ResponseWriter, r *http.Request) {
	n.forwardTo(w, r, forwardPrefix, api.WriteError)
}

// forwardTo forwards r to the leader's peer port under prefix; failures
// are answered with fail (the API's problems, or SQS errors).
func (n *clusterNode) forwardTo(w http.ResponseWriter, r *http.Request, prefix string, fail func(http.ResponseWriter, *http.Request, error)) {
	lead := n.shard.Status().Leader
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stopCut := context.AfterFunc(n.noteLeader(lead), cancel)
	defer stopCut()
	r = r.WithContext(ctx)
	addr, ok := n.peerAddr(lead)
	if lead == 0 || lead == n.cfg.NodeID || !ok {
		fail(w, r, broker.ErrNotLeader)
		return
	}
	if r.Header.Get(forwardedByHeader) != "" {
		fail(w, r, broker.ErrNotLeader) // never twice
		return
	}
	sent := false
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = n.peerScheme, addr
			pr.Out.URL.Path = prefix + pr.In.URL.Path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = pr.In.Host
			if a := pr.In.Header.Get("Authorization"); a != "" {
				pr.Out.Header.Set(forwardedAuthHeader, a)
			}
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set(forwardedByHeader, strconv.FormatUint(n.cfg.NodeID, 10))
			pr.Out.Header.Set(forwardedClientHeader, pr.In.RemoteAddr)
			pr.SetXForwarded()
			sent = true
		},
		Transport:     n.fwd.Transport,
		FlushInterval: -1, // long polls and event streams pass as they come
		// An answer whose length the leader gave is passed on whole even
		// if this replica learns of another leader meanwhile: cut then,
		// the client would read a truncated body (unexpected EOF) instead
		// of the leader's answer. A stream (length unknown) is still cut.
		ModifyResponse: func(resp *http.Response) error {
			if resp.ContentLength < 0 || stopCut() {
				return nil
			}
			return context.Canceled // cut already: answered as a forward abandoned
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			n.log.Debug().Err(err).Uint64("leader", lead).Str("path", req.URL.Path).Msg("forwarding failed")
			if sent && req.Method != http.MethodGet && req.Method != http.MethodHead {
				fail(w, r, broker.ErrOutcomeUnknown)
				return
			}
			fail(w, r, broker.ErrNotLeader)
		},
	}
	proxy.ServeHTTP(w, r)
}

// serveForwarded serves a request another replica forwarded (the peer
// port): only while this one serves; never forwarded on.
func (n *clusterNode) serveForwarded(w http.ResponseWriter, r *http.Request) {
	if !peer.Authorized(r, n.cfg.ClusterSecret) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	r.Header.Del("Authorization")
	if a := r.Header.Get(forwardedAuthHeader); a != "" {
		r.Header.Set("Authorization", a)
		r.Header.Del(forwardedAuthHeader)
	}
	if c := r.Header.Get(forwardedClientHeader); c != "" {
		if _, _, err := net.SplitHostPort(c); err == nil {
			r.RemoteAddr = c // a peer that holds the secret vouches for it
		}
		r.Header.Del(forwardedClientHeader)
	}
	if p, ok := strings.CutPrefix(r.URL.Path, forwardSQSPrefix+"/"); ok {
		r.URL.Path, r.URL.RawPath = "/"+p, ""
		cur := n.current.Load()
		if !n.serving.Load() || cur.sqsHandler == nil {
			sqs.WriteUnavailable(w, r, broker.ErrNotLeader.Error())
			return
		}
		cur.sqsHandler.ServeHTTP(w, r)
		return
	}
	r.URL.Path = strings.TrimPrefix(r.URL.Path, forwardPrefix)
	r.URL.RawPath = ""
	if !n.serving.Load() {
		api.WriteError(w, r, broker.ErrNotLeader)
		return
	}
	n.current.Load().http.Handler.ServeHTTP(w, r)
}

// adminFront serves --admin-listen: /readyz is the replica's (as on
// --listen), the rest the current broker's server's.
func (n *clusterNode) adminFront(w http.ResponseWriter, r *http.Request) {
	cur := n.current.Load()
	if r.URL.Path == "/readyz" {
		cur.hosts().check(http.HandlerFunc(n.readyz)).ServeHTTP(w, r)
		return
	}
	cur.adminH.ServeHTTP(w, r)
}

// sqsFront serves --sqs-listen: the leader's SQS handler, here when this
// replica serves, else over the peer port (SQS errors, never a problem).
func (n *clusterNode) sqsFront(w http.ResponseWriter, r *http.Request) {
	if cur := n.current.Load(); n.serving.Load() && cur.sqsHandler != nil {
		cur.sqsHandler.ServeHTTP(w, r)
		return
	}
	n.forwardTo(w, r, forwardSQSPrefix, func(w http.ResponseWriter, r *http.Request, err error) {
		sqs.WriteUnavailable(w, r, err.Error())
	})
}

// stopped says why the replica stopped, and for a damaged one how it is
// rebuilt.
func (n *clusterNode) stopped(err error) string {
	if errors.Is(err, shard.ErrDamaged) {
		return fmt.Sprintf("the replica stopped: %v; it no longer votes or leads: %s", err, rebuildSteps(n.cfg.DataDir, n.cfg.NodeID))
	}
	return fmt.Sprintf("the replica stopped: %v", err)
}

// view is GET /v1/cluster's answer.
func (n *clusterNode) view(ctx context.Context) (api.Cluster, error) {
	if err := n.shard.Err(); err != nil {
		return api.Cluster{}, fmt.Errorf("%w: %s", broker.ErrShuttingDown, n.stopped(err))
	}
	st := n.shard.Status()
	out := api.Cluster{NodeID: n.cfg.NodeID, Role: st.Role, Leader: st.Leader, Serving: n.serving.Load(),
		Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, Peers: []api.ClusterPeer{}}
	progress := map[uint64]shard.PeerProgress{}
	if st.Role == "leader" {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		for _, p := range n.shard.Progress(pctx) {
			progress[p.ID] = p
		}
		cancel()
	}
	ids := append(slices.Clone(st.Voters), st.Learners...)
	slices.Sort(ids)
	learners := map[uint64]bool{}
	for _, id := range st.Learners {
		learners[id] = true
	}
	for _, id := range ids {
		addr, _ := n.peerAddr(id)
		p := api.ClusterPeer{ID: id, Address: addr, Role: "follower"}
		if learners[id] {
			p.Role = "learner"
		}
		if id == st.Leader {
			p.Role = "leader"
		}
		if pr, ok := progress[id]; ok {
			p.MatchIndex = pr.MatchIndex
			p.LagBytes = max(pr.LagBytes, 0)
			p.NeedsRebuild = pr.NeedsCopy
		}
		out.Peers = append(out.Peers, p)
	}
	return out, nil
}

// close stops the owner loop, the broker's server, the peer port and the
// replica, in that order.
func (n *clusterNode) close(ctx context.Context) error {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	<-n.done
	n.serving.Store(false)
	var errs []error
	if err := n.current.Load().Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close broker: %w", err))
	}
	errs = append(errs, n.peerSrv.Close(), n.transport.Close())
	n.fwd.CloseIdleConnections()
	if err := n.shard.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close replica: %w", err))
	}
	_ = n.listener.Close()
	return errors.Join(errs...)
}

// peerAddr is replica id's peer address.
func (n *clusterNode) peerAddr(id uint64) (string, bool) {
	n.addrMu.RLock()
	defer n.addrMu.RUnlock()
	a, ok := n.peers[id]
	return a, ok
}

// confChanged follows a configuration change applied by the shard (on
// its loop: it must not block): a new replica's address (the change's
// Context) goes to the transport; a removed one's goes away.
func (n *clusterNode) confChanged(cc *pb.ConfChangeV2) {
	addr := string(cc.GetContext())
	for _, c := range cc.GetChanges() {
		id := c.GetNodeId()
		switch c.GetType() {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode:
			if _, _, err := net.SplitHostPort(addr); err != nil {
				continue // a promotion names no address
			}
			n.addrMu.Lock()
			n.peers[id] = addr
			n.addrMu.Unlock()
			if id != n.cfg.NodeID {
				n.transport.AddPeer(id, addr)
			}
		case pb.ConfChangeRemoveNode:
			n.addrMu.Lock()
			delete(n.peers, id)
			n.addrMu.Unlock()
			if id != n.cfg.NodeID {
				n.transport.RemovePeer(id)
			} else {
				n.log.Warn().Msg("this replica was removed from the cluster: it no longer takes part")
			}
		}
	}
}

// membershipTimeout bounds a membership change.
const membershipTimeout = 10 * time.Second

// AddLearner adds replica id, reached at address, as a learner.
func (n *clusterNode) AddLearner(ctx context.Context, id uint64, address string) (api.Cluster, error) {
	st := n.shard.Status()
	if slices.Contains(st.Voters, id) || slices.Contains(st.Learners, id) {
		return api.Cluster{}, fmt.Errorf("%w: replica %d is already a member", api.ErrMembership, id)
	}
	return n.change(ctx, pb.ConfChangeAddLearnerNode, id, address)
}

// promoteMaxLag is how far behind the leader's log (CommitLog bytes) a
// learner may be to be promoted: one window of in-flight appends. One
// that has acknowledged nothing yet (match index 0) is never promoted.
const promoteMaxLag = 8 << 20

// Promote makes learner id a voter, once it caught up with the leader's
// log: a voter far behind would count in every majority while it cannot
// acknowledge anything new (etcd refuses such a promotion too).
func (n *clusterNode) Promote(ctx context.Context, id uint64) (api.Cluster, error) {
	if !slices.Contains(n.shard.Status().Learners, id) {
		return api.Cluster{}, fmt.Errorf("%w: replica %d is not a learner", api.ErrMembership, id)
	}
	for _, p := range n.shard.Progress(ctx) {
		if p.ID != id {
			continue
		}
		if p.MatchIndex == 0 || p.LagBytes < 0 || p.LagBytes > promoteMaxLag {
			lag := "an unknown amount"
			if p.MatchIndex > 0 && p.LagBytes >= 0 {
				lag = fmt.Sprintf("%d bytes", p.LagBytes)
			}
			return api.Cluster{}, fmt.Errorf("%w: replica %d is %s behind the leader's log (at most %d to be promoted); retry once it caught up",
				api.ErrLearnerBehind, id, lag, promoteMaxLag)
		}
	}
	return n.change(ctx, pb.ConfChangeAddNode, id, "")
}

// Remove removes replica id; the leader first hands its role to the
// voter most caught up (the caller retries against the new leader).
func (n *clusterNode) Remove(ctx context.Context, id uint64) (api.Cluster, error) {
	st := n.shard.Status()
	if !slices.Contains(st.Voters, id) && !slices.Contains(st.Learners, id) {
		return api.Cluster{}, fmt.Errorf("%w: replica %d is not a member", api.ErrMembership, id)
	}
	if slices.Contains(st.Voters, id) && len(st.Voters) == 1 {
		return api.Cluster{}, fmt.Errorf("%w: replica %d is the only voter", api.ErrMembership, id)
	}
	if id == n.cfg.NodeID {
		var to uint64
		var best uint64
		for _, p := range n.shard.Progress(ctx) {
			if p.ID != id && !p.Learner && p.MatchIndex >= best {
				to, best = p.ID, p.MatchIndex
			}
		}
		if to == 0 {
			return api.Cluster{}, fmt.Errorf("%w: no other voter to hand the leadership to", api.ErrMembership)
		}
		if err := n.shard.TransferLeadership(ctx, to); err != nil {
			return api.Cluster{}, err
		}
		return api.Cluster{}, fmt.Errorf("%w: replica %d leads; it is handing its role to %d: retry", broker.ErrNotLeader, id, to)
	}
	return n.change(ctx, pb.ConfChangeRemoveNode, id, "")
}

func (n *clusterNode) change(ctx context.Context, typ pb.ConfChangeType, id uint64, address string) (api.Cluster, error) {
	cctx, cancel := context.WithTimeout(ctx, membershipTimeout)
	defer cancel()
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: &id}}}
	if address != "" {
		cc.Context = []byte(address)
	}
	switch err := n.shard.ChangeConf(cctx, cc); {
	case errors.Is(err, shard.ErrNotLeader):
		return api.Cluster{}, fmt.Errorf("%w: %v", broker.ErrNotLeader, err)
	case errors.Is(err, shard.ErrUnknownOutcome):
		return api.Cluster{}, fmt.Errorf("%w: %v", broker.ErrOutcomeUnknown, err)
	case err != nil:
		return api.Cluster{}, err
	}
	n.log.Info().Stringer("change", typ).Uint64("replica", id).Str("address", address).Msg("membership changed")
	return n.view(ctx)
}
