// Package server is mqgate's composition root: it turns a Config into a
// running process — logger, broker, HTTP router (the /v1 API, health,
// metrics, API docs, web console) and http.Server — and takes it down again
// in reverse order.
//
// Lifecycle: Open builds everything and listens; Serve serves until Close;
// Close drains (readiness 503, new API requests 503 shutting-down with
// Retry-After, waiting long polls answered empty), waits up to the context
// deadline for in-flight requests, then closes the broker. Run wraps the
// three for main and end-to-end tests.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	httpSwagger "github.com/swaggo/http-swagger/v2"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/docs"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/pgmirror"
	"github.com/mqgate/mqgate/server/push"
	"github.com/mqgate/mqgate/server/sqs"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/web"
)

// Lifecycle states of a Server.
const (
	stateRunning int32 = iota
	stateDraining
	stateClosed
)

// backend is what the server needs from the broker: the API's method set
// plus Close. *broker.Broker satisfies it.
type backend interface {
	api.Broker
	// Degraded lists what is wrong without making the broker unready.
	Degraded() []string
	Close(ctx context.Context) error
}

// Server is one running mqgate process.
type Server struct {
	cfg Config
	// rootLog is the process logger; log is its "server" child.
	rootLog zerolog.Logger
	log     zerolog.Logger
	broker  backend
	// brokerRef is the broker itself (nil in servers built by newServer
	// alone); cluster is the replica this server fronts (cluster.go), nil
	// on a single node; clusterView answers GET /v1/cluster on a
	// replica's servers (nil: a single node).
	brokerRef   *broker.Broker
	cluster     *clusterNode
	clusterView func(context.Context) (api.Cluster, error)
	members     api.ClusterMembers
	mirror      *pgmirror.Mirror // nil in embedded mode
	pushMu      sync.Mutex
	push        *push.Dispatcher // webhook delivery while the broker leads; nil in servers built by newServer alone
	registry    *prometheus.Registry
	listener    net.Listener
	http        *http.Server

	// security is authentication (nil: off).
	security *security
	// tracing exports server spans over OTLP (nil without --otlp-endpoint).
	tracing *tracing
	// tls is the key pair and client CAs (nil: plain HTTP).
	tls *tlsFiles
	// adminListener and admin serve --admin-listen (nil without it);
	// adminServed reports the end of its Serve.
	adminListener net.Listener
	admin         *http.Server
	adminServed   chan error
	adminStarted  atomic.Bool
	// sqsListener and sqs serve --sqs-listen (nil without it); sqsServed
	// reports the end of its Serve.
	sqsListener net.Listener
	sqs         *http.Server
	sqsHandler  *sqs.Handler
	sqsServed   chan error
	sqsStarted  atomic.Bool
	// adminH is adminHandler's (a replica's front serves it); sqsAddr is
	// the front's --sqs-listen address on a replica.
	adminH  http.Handler
	sqsAddr string

	// pushConfig is where push endpoints may point (the deny flags and
	// this server's own listener), for the dispatcher and for the check
	// when a group is saved.
	pushConfig push.Config

	// state is stateRunning, stateDraining or stateClosed.
	state atomic.Int32
	// drainErr, when not nil, is what requests get while the server
	// drains (default: 503 shutting-down).
	drainErr error
	// pollCtx ends waiting long polls when cancelPolls is called.
	pollCtx     context.Context
	cancelPolls context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// Open validates cfg, opens the broker and starts listening on cfg.Listen
// (use "127.0.0.1:0" for a free port; Addr reports it). Call Serve to serve
// and Close to stop.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NodeID != 0 {
		return openCluster(ctx, cfg)
	}
	return openServer(ctx, cfg, newLogger(cfg), replicaParts{})
}

// brokerOptions are the broker's options from the configuration.
func brokerOptions(cfg Config, log zerolog.Logger) broker.Options {
	so := cfg.Storage
	so.FileReservedTime, so.RetentionInterval = cfg.Retention, cfg.RetentionInterval
	so.DiskMaxUsedRatio, so.DiskSendCeiling, so.DiskSystemCeiling = cfg.DiskMaxUsedRatio, cfg.DiskSendCeiling, cfg.DiskSystemCeiling
	so.DiskPressureDelete, so.DiskCheckInterval = cfg.DiskPressureDelete, cfg.DiskCheckInterval
	so.ScrubRate = scrubRate(cfg.ScrubRate)
	return broker.Options{
		DataDir:            cfg.DataDir,
		FlushMode:          cfg.Flush,
		SegmentSize:        int64(cfg.SegmentSize),
		MaxMessageSize:     int(cfg.MaxMessageSize),
		AutoCreate:         cfg.AutoCreate,
		NoAutoCreateGroups: !cfg.AutoCreateGroups,
		NoMessageTrace:     !cfg.MessageTrace,
		DelayLevels:        cfg.DelayLevels,
		Logger:             log, // the broker names its own components

		MetricsMaxLabelValues: cfg.MetricsMaxLabelValues,
		Quotas: broker.Quotas{
			MaxTopics:         cfg.MaxTopics,
			MaxQueues:         cfg.MaxQueues,
			MaxQueuesPerTopic: cfg.MaxQueuesPerTopic,
			MaxGroups:         cfg.MaxGroups,
			MaxPushEndpoints:  cfg.MaxPushEndpoints,
			MaxPendingTimers:  cfg.MaxPendingTimers,

			MaxTransactionsPerProducerGroup: cfg.MaxTransactionsPerProducerGroup,
			MaxPendingTransactions:          cfg.MaxPendingTransactions,
			MaxInstancesPerGroup:            cfg.MaxInstancesPerGroup,
		},
		TransactionMaxChecks:     cfg.TransactionMaxChecks,
		TransactionCheckInterval: cfg.TransactionCheckInterval,
		Storage:                  so,
	}
}

// replicaParts are what a replica of a cluster lends the server it builds
// over each broker it opens (cluster.go): the client listener (the
// cluster's front serves it; this server never does) and the replicated
// store. Zero: a single node, which opens both itself.
type replicaParts struct {
	listener net.Listener
	store    *storage.Store
	follower bool // open the broker as a follower (broker.Options.NoPromote)
	// sqsAddr is the front's --sqs-listen address: the front serves
	// --admin-listen and --sqs-listen with this server's handlers
	// (adminHandler, sqsHandler), which never listen themselves.
	sqsAddr string
}

func openServer(ctx context.Context, cfg Config, log zerolog.Logger, parts replicaParts) (*Server, error) {
	// The ACL file first: a bad one fails the start before anything opens.
	sec, err := openSecurity(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	tf, err := openTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	// Listen next: a busy port fails fast, and message ids carry the port
	// actually bound.
	var listener net.Listener
	if parts.listener != nil {
		listener = borrowedListener{parts.listener}
	} else if listener, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	var adminListener net.Listener
	if cfg.AdminListen != "" && parts.store == nil {
		if adminListener, err = net.Listen("tcp", cfg.AdminListen); err != nil {
			return nil, errors.Join(fmt.Errorf("listen on %s (admin): %w", cfg.AdminListen, err), listener.Close())
		}
		if tf != nil {
			// The admin server is a plain net/http server: it handles the
			// *tls.Conn itself.
			adminListener = tls.NewListener(adminListener, tf.serverConfig())
		}
	}
	if tf != nil && parts.listener == nil {
		listener = tls.NewListener(listener, tf.serverConfig())
	}
	opened := false
	defer func() {
		if !opened && adminListener != nil {
			_ = adminListener.Close() // a failed Open leaves nothing listening
		}
	}()
	var sqsListener net.Listener
	if cfg.SQSListen != "" && parts.store == nil {
		if sqsListener, err = net.Listen("tcp", cfg.SQSListen); err != nil {
			return nil, errors.Join(fmt.Errorf("listen on %s (sqs): %w", cfg.SQSListen, err), listener.Close())
		}
		if tf != nil {
			sqsListener = tls.NewListener(sqsListener, tf.serverConfig())
		}
		defer func() {
			if !opened {
				_ = sqsListener.Close()
			}
		}()
	}
	bo := brokerOptions(cfg, log)
	bo.Store, bo.NoPromote = parts.store, parts.follower
	b, err := broker.Open(ctx, bo)
	if err != nil {
		return nil, errors.Join(repairHint(fmt.Errorf("open broker: %w", err), cfg.DataDir), listener.Close())
	}
	secureDataDir(cfg.DataDir, log.With().Str("component", "server").Logger())
	mirror, err := openMirror(ctx, cfg, b, log)
	if err != nil {
		return nil, errors.Join(err, listener.Close(), b.Close(ctx))
	}
	var be backend = b
	if mirror != nil {
		be = mirroredBroker{Broker: b, mirror: mirror}
	}
	var drainErr error
	if parts.follower {
		// A replica's broker: it drains when the replica stops leading,
		// and the next leader serves the retry.
		drainErr = fmt.Errorf("%w: this replica stopped leading", broker.ErrNotLeader)
	}
	s := newServerOn(cfg, log, be, listener, sec, tf, drainErr)
	s.brokerRef = b
	s.adminH = s.adminHandler()
	if adminListener != nil {
		s.serveAdminOn(adminListener, s.adminH)
	}
	if cfg.SQSListen != "" {
		s.sqsHandler = s.newSQSHandler()
		if sqsListener != nil {
			s.serveSQSOn(sqsListener, s.sqsHandler)
		}
		s.sqsAddr = parts.sqsAddr
		b.OnLeader("sqs redrive", s.sqsHandler.StartRedrive)
	}
	s.registry.MustRegister(newBrokerCollector(b), newDispatchCollector(b), newTraceCollector(b))
	if mirror != nil {
		s.mirror = mirror
		registerMirrorMetrics(s.registry, mirror)
		// Only a leader writes the mirror (the broker starts it at once:
		// a single node leads from Open).
		b.OnLeader("postgres mirror", func(ctx context.Context) func() {
			mirror.Start(ctx)
			return mirror.Stop
		})
	}
	// Push delivery drives the broker itself (not the mirror wrapper): it
	// runs while the broker leads and stops before it closes.
	pushConfig := s.pushConfig
	pushConfig.DelayLevels = cfg.DelayLevels
	pushConfig.Metrics = push.NewMetrics(s.registry, cfg.MetricsMaxLabelValues)
	pushConfig.Logger = log
	first, err := push.New(b, pushConfig) // checks the configuration once
	if err != nil {
		s.cancelPolls()
		err = errors.Join(fmt.Errorf("push: %w", err), s.listener.Close())
		if mirror != nil {
			err = errors.Join(err, mirror.Close())
		}
		return nil, errors.Join(err, b.Close(ctx))
	}
	b.OnLeader("webhook push", func(ctx context.Context) func() {
		d := first
		if d == nil { // a dispatcher runs once: a later promotion makes another
			var err error
			if d, err = push.New(b, pushConfig); err != nil {
				log.Error().Err(err).Msg("push: no webhook delivery while this node leads")
				return func() {}
			}
		}
		first = nil
		s.pushMu.Lock()
		s.push = d
		s.pushMu.Unlock()
		d.Start(ctx)
		return d.Stop
	})
	s.security.start()
	opened = true
	return s, nil
}

// newServer wires an opened broker into a server listening on
// cfg.Listen. Tests use it with fakes.
func newServer(cfg Config, log zerolog.Logger, b backend) (*Server, error) {
	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	return newServerOn(cfg, log, b, listener, nil, nil, nil), nil
}

// newServerOn wires an opened broker into a server on listener, with
// authentication sec (nil: off) and TLS tf (nil: off; listener is then a
// tls.Listener).
func newServerOn(cfg Config, log zerolog.Logger, b backend, listener net.Listener, sec *security, tf *tlsFiles, drainErr error) *Server {
	s := &Server{cfg: cfg, rootLog: log, log: log.With().Str("component", "server").Logger(), security: sec, tls: tf, drainErr: drainErr}
	tr, err := newTracing(cfg) // cannot fail on a validated config (the endpoint is a URL)
	if err != nil {
		s.log.Error().Err(err).Msg("no OpenTelemetry export")
	}
	s.tracing = tr
	s.pollCtx, s.cancelPolls = context.WithCancel(context.Background())
	s.registry = newRegistry(cfg.Version, cfg.Commit)
	if sec != nil {
		s.registry.MustRegister(sec.metrics)
	}
	cl := newConnListener(listener, int64(cfg.MaxHeaderBytes), s.log)
	cl.tls, cl.handshakeTimeout = tf != nil, cfg.ReadHeaderTimeout
	s.listener = cl
	s.pushConfig = push.Config{DenyCIDRs: cfg.PushDenyCIDRs, DenyPrivate: cfg.PushDenyPrivate}
	if addr, ok := listener.Addr().(*net.TCPAddr); ok {
		s.pushConfig.Self = []netip.AddrPort{addr.AddrPort()}
	}
	s.broker = pushCheckedBroker{backend: b, checkURL: s.pushConfig.CheckURL, checkResolved: s.pushConfig.CheckURLResolved}
	s.http = &http.Server{
		Handler:           trackConn(s.routes()),
		ConnContext:       connContext,
		ConnState:         connStateChanged,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    int(cfg.MaxHeaderBytes),
		ErrorLog:          stdlog.New(log.With().Str("component", "net/http").Logger(), "", 0),
	}
	s.log.Info().
		Str("addr", s.Addr()).
		Str("version", cfg.Version).
		Str("commit", cfg.Commit).
		Str("data_dir", cfg.DataDir).
		Str("flush", cfg.Flush).
		Str("segment_size", cfg.SegmentSize.String()).
		Str("scrub_rate", cfg.ScrubRate.String()).
		Str("max_message_size", cfg.MaxMessageSize.String()).
		Str("delay_levels", cfg.DelayLevels.String()).
		Bool("auto_create", cfg.AutoCreate).
		Bool("message_trace", cfg.MessageTrace).
		Str("database_url", cfg.redactedDatabaseURL()).
		Bool("pprof", cfg.Pprof).
		Str("push_deny_cidrs", cfg.PushDenyCIDRs.String()).
		Bool("push_deny_private", cfg.PushDenyPrivate).
		Str("auth", sec.mode()).
		Bool("tls", tf != nil).
		Str("acl_file", cfg.ACLFile).
		Str("admin_listen", cfg.AdminListen).
		Msg("mqgate configured")
	if sec == nil {
		s.log.Warn().Str("addr", s.Addr()).
			Msg("AUTHENTICATION IS OFF: anyone who can reach this address can send, read, reconfigure and delete everything; give --acl-file to turn it on")
	}
	return s
}

// hosts is the Host policy (browser.go): the configured names plus the
// hosts of the listen, admin and advertise addresses.
func (s *Server) hosts() hostPolicy {
	p := newHostPolicy(s.cfg.AllowedHosts, s.cfg.Listen, s.cfg.AdvertiseAddr)
	if host, _, err := net.SplitHostPort(s.cfg.AdminListen); err == nil && host != "" {
		p.names = append(p.names, strings.ToLower(host))
	}
	return p
}

// authenticator is the API's guard, nil when authentication is off.
func (s *Server) authenticator() api.Authenticator {
	if s.security == nil {
		return nil
	}
	return s.security.guard
}

// routes builds the root router.
func (s *Server) routes() http.Handler {
	metrics := newHTTPMetrics(s.registry)
	r := chi.NewRouter()
	r.Use(metrics.middleware, s.tracing.middleware, s.hosts().check, newOriginPolicy(s.cfg.CORSAllowedOrigins).handler)
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		api.WriteError(w, req, api.ErrRouteNotFound)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		api.WriteError(w, req, fmt.Errorf("%w: %s %s", api.ErrMethodNotAllowed, req.Method, req.URL.Path))
	})

	// GET /livez, /healthz — the process serves HTTP (no dependency checks).
	r.Get("/livez", livez)
	r.Get("/healthz", livez)
	// GET /readyz — recovered, writable and not shutting down.
	r.Get("/readyz", s.readyz)
	r.Group(func(r chi.Router) {
		// These handlers answer errors in plain text (http.Error).
		r.Use(problemErrors)
		if s.cfg.AdminListen == "" {
			// GET /metrics and /debug/pprof/ — for admins (anyone without
			// authentication), unless --admin-listen serves them.
			r.Group(func(r chi.Router) {
				r.Use(api.RequireAdmin(s.authenticator()))
				s.adminRoutes(r)
			})
		}
		// GET /openapi.json — the OpenAPI 3.0 spec.
		r.Get("/openapi.json", openAPI)
		// GET /swagger/ — Swagger UI over the OpenAPI 3.0 spec (relative,
		// so that it works behind a proxy's path prefix). doc.json, where
		// the UI's handler would serve swag's Swagger 2.0 document, is the
		// same OpenAPI 3.0 spec: the server serves one.
		r.Get("/swagger", redirect("/swagger/index.html"))
		r.Get("/swagger/doc.json", openAPI)
		r.Get("/swagger/*", httpSwagger.Handler(httpSwagger.URL("../openapi.json")))
		// GET /ui/ — the web console.
		r.Get("/", redirect("/ui/"))
		r.Get("/ui", redirect("/ui/"))
		r.Handle("/ui/*", http.StripPrefix("/ui", web.Handler()))
	})
	// /v1 — the REST API.
	r.Mount("/v1", api.NewHandler(api.Deps{
		Broker:         s.broker,
		Logger:         s.rootLog.With().Str("component", "http").Logger(),
		MaxMessageSize: int(s.cfg.MaxMessageSize),
		MaxRequestSize: int64(s.cfg.MaxRequestSize),
		MaxWaiters:     s.cfg.MaxWaiters,
		WriteTimeout:   s.cfg.WriteTimeout,
		PollContext:    s.pollCtx,
		Draining:       func() bool { return s.state.Load() != stateRunning },
		DrainError:     s.drainErr,
		Auth:           s.authenticator(),
		SQS:            s.sqsCatalog(),
		Mirror:         s.mirrorStat,
		Cluster:        s.clusterInfo,
		Members:        s.clusterMembers(),
		Limits: api.AccountLimits{
			RequestsPerSecond: s.cfg.RequestsPerSecond,
			MessagesPerSecond: s.cfg.MessagesPerSecond,
			MaxLongPolls:      s.cfg.MaxLongPolls,
		},
	}))
	return r
}

// Sampling of the mutex and block profiles with --pprof: cheap enough to
// leave on while profiling a server under load.
const (
	pprofMutexFraction = 100
	pprofBlockRate     = int(100 * time.Microsecond)
)

// adminRoutes are the operator's routes: /metrics, and /debug/pprof/
// with --pprof.
func (s *Server) adminRoutes(r chi.Router) {
	// GET /metrics — Prometheus exposition.
	r.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	if s.cfg.Pprof {
		// /debug/pprof/ — profiles (only with --pprof), with the mutex and
		// block profiles sampling: one contention event in
		// pprofMutexFraction, and on average one block per
		// pprofBlockRate of blocked time.
		runtime.SetMutexProfileFraction(pprofMutexFraction)
		runtime.SetBlockProfileRate(pprofBlockRate)
		r.Mount("/debug", middleware.Profiler())
	}
}

// pushCheckedBroker is the broker as the API sees it: saving a group
// whose push endpoint delivery would refuse — a literal (or localhost)
// address that is forbidden, denied, or this server's own listener, a
// numeric host form, a metadata service's name, or a name that resolves
// to such an address now — is a 400 invalid-argument
// (push.Config.CheckURLResolved). Push delivery drives the broker
// directly and checks every address it dials.
type pushCheckedBroker struct {
	backend
	// checkURL checks without resolving (under the registry lock);
	// checkResolved resolves names too (never under a lock).
	checkURL      func(rawURL string) error
	checkResolved func(ctx context.Context, rawURL string) error
}

// PutGroup checks the group's push URL, then stores the group.
func (b pushCheckedBroker) PutGroup(ctx context.Context, g broker.GroupConfig) (broker.GroupConfig, bool, error) {
	if g.Push != nil {
		if err := b.checkResolved(ctx, g.Push.URL); err != nil {
			return g, false, err
		}
	}
	return b.backend.PutGroup(ctx, g)
}

// PatchGroup checks the patched group's push URL before it is stored. The
// patch runs under the broker's registry lock, where no name may be
// resolved: it is applied once before, to the current group, to resolve
// and check the URL it gives; under the lock a URL other than that one
// (the group changed meanwhile) gets the checks without resolution.
func (b pushCheckedBroker) PatchGroup(ctx context.Context, name string, patch func(broker.GroupConfig) (broker.GroupConfig, error)) (broker.GroupConfig, error) {
	checked := ""
	if cur, err := b.backend.GetGroup(ctx, name); err == nil {
		if g, err := patch(cur); err == nil && g.Push != nil {
			if err := b.checkResolved(ctx, g.Push.URL); err != nil {
				return g, err
			}
			checked = g.Push.URL
		}
	}
	return b.backend.PatchGroup(ctx, name, func(old broker.GroupConfig) (broker.GroupConfig, error) {
		g, err := patch(old)
		if err == nil && g.Push != nil && g.Push.URL != checked {
			err = b.checkURL(g.Push.URL)
		}
		return g, err
	})
}

// Addr is the address the server listens on (with the real port when the
// configured one was 0).
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Registry is the Prometheus registry served at /metrics; components may
// register their collectors into it.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// serveAdminOn prepares the --admin-listen server on l: /livez, /readyz,
// /metrics and (with --pprof) /debug/pprof/, without authentication
// (adminHandler). Serve serves it.
func (s *Server) serveAdminOn(l net.Listener, h http.Handler) {
	s.adminListener = l
	s.adminServed = make(chan error, 1)
	s.admin = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          stdlog.New(s.rootLog.With().Str("component", "net/http").Str("listener", "admin").Logger(), "", 0),
	}
	s.log.Info().Str("admin_addr", l.Addr().String()).Msg("/metrics and /debug/pprof are served on the admin address, without authentication")
}

// adminHandler is what --admin-listen serves: /livez, /readyz, /metrics
// and (with --pprof) /debug/pprof/.
func (s *Server) adminHandler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.hosts().check) // unauthenticated: no page may read it by rebinding
	r.Get("/livez", livez)
	r.Get("/readyz", s.readyz)
	r.Group(func(r chi.Router) {
		r.Use(problemErrors)
		s.adminRoutes(r)
	})
	return r
}

// newSQSHandler is the SQS API over this server's broker (package
// server/sqs).
func (s *Server) newSQSHandler() *sqs.Handler {
	opts := sqs.Options{
		Broker:         s.broker,
		Logger:         s.rootLog,
		MaxMessageSize: int(s.cfg.MaxMessageSize),
		MaxRequestSize: int64(s.cfg.MaxRequestSize),
		PollContext:    s.pollCtx,

		MaxWaitingReceives: s.cfg.SQSMaxWaitingReceives,
	}
	if s.security != nil {
		opts.ACL = s.security.file // requests must be signed (SigV4)
		opts.Failures = s.security.guard
	}
	return sqs.New(opts)
}

// serveSQSOn prepares the --sqs-listen server on l, serving h.
func (s *Server) serveSQSOn(l net.Listener, h http.Handler) {
	s.sqsListener = l
	s.sqsServed = make(chan error, 1)
	s.sqs = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		// A receive waits up to 20 s before it answers.
		WriteTimeout:   s.cfg.WriteTimeout + 20*time.Second,
		IdleTimeout:    s.cfg.IdleTimeout,
		MaxHeaderBytes: int(s.cfg.MaxHeaderBytes),
		ErrorLog:       stdlog.New(s.rootLog.With().Str("component", "net/http").Str("listener", "sqs").Logger(), "", 0),
	}
	s.log.Info().Str("sqs_addr", l.Addr().String()).Msg("the SQS API is served on its own address")
}

// sqsCatalog is what GET /v1/sqs/queues lists: nil without --sqs-listen.
func (s *Server) sqsCatalog() api.SQSCatalog {
	if s.cfg.SQSListen == "" {
		return nil
	}
	return sqsCatalog{s}
}

// sqsCatalog adapts the SQS endpoint's queue list to the REST API.
type sqsCatalog struct{ s *Server }

// SQSQueues implements api.SQSCatalog.
func (c sqsCatalog) SQSQueues(ctx context.Context, prefix string) (string, []api.SQSQueue, error) {
	h := c.s.sqsHandler
	if h == nil { // not wired yet (the routes are built first)
		return "", nil, broker.ErrShuttingDown
	}
	scheme := "http"
	if c.s.tls != nil {
		scheme = "https"
	}
	endpoint := scheme + "://" + c.s.SQSAddr()
	queues, err := h.Queues(ctx, prefix, endpoint)
	if err != nil {
		return "", nil, err
	}
	out := make([]api.SQSQueue, 0, len(queues))
	for _, q := range queues {
		out = append(out, api.SQSQueue{
			Name: q.Name, Fifo: q.FIFO, Topic: q.Topic, Group: q.Group, URL: q.URL, Arn: q.ARN,
			DeadLetterQueue: q.DeadLetterQueue, MaxReceiveCount: q.MaxReceiveCount,
			DeadLetterSourceQueues: q.DeadLetterSources, Attributes: q.Attributes, Tags: q.Tags,
			CreatedAt: q.Created.Format(time.RFC3339), LastModifiedAt: q.Modified.Format(time.RFC3339),
		})
	}
	return endpoint, out, nil
}

// SQSAddr is the --sqs-listen address bound ("" without one): a
// replica's broker's server gives the front's.
func (s *Server) SQSAddr() string {
	if s.sqsListener == nil {
		return s.sqsAddr
	}
	return s.sqsListener.Addr().String()
}

// closeSQS stops the SQS server (nil without one).
func (s *Server) closeSQS(ctx context.Context) error {
	if s.sqs == nil {
		if s.sqsHandler != nil {
			s.sqsHandler.Close() // a replica's: the front serves it
		}
		return nil
	}
	err := s.sqs.Shutdown(ctx)
	_ = s.sqsListener.Close() // when Serve never ran
	if s.sqsHandler != nil {
		s.sqsHandler.Close() // its redrive mover, before the broker closes
	}
	if s.sqsStarted.Load() {
		if serveErr := <-s.sqsServed; serveErr != nil {
			err = errors.Join(err, serveErr)
		}
	}
	if err != nil {
		return fmt.Errorf("shutdown sqs http: %w", err)
	}
	return nil
}

// AdminAddr is the --admin-listen address bound ("" without one).
func (s *Server) AdminAddr() string {
	if s.adminListener == nil {
		return ""
	}
	return s.adminListener.Addr().String()
}

// closeAdmin stops the admin server (nil without one).
func (s *Server) closeAdmin(ctx context.Context) error {
	if s.admin == nil {
		return nil
	}
	err := s.admin.Shutdown(ctx)
	_ = s.adminListener.Close() // when Serve never ran
	if s.adminStarted.Load() {
		if serveErr := <-s.adminServed; serveErr != nil {
			err = errors.Join(err, serveErr)
		}
	}
	if err != nil {
		return fmt.Errorf("shutdown admin http: %w", err)
	}
	return nil
}

// Serve serves HTTP until Close; it returns nil after a graceful Close.
func (s *Server) Serve() error {
	if s.admin != nil && s.adminStarted.CompareAndSwap(false, true) {
		go func() {
			err := s.admin.Serve(s.adminListener)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			s.adminServed <- err
		}()
	}
	if s.sqs != nil && s.sqsStarted.CompareAndSwap(false, true) {
		go func() {
			err := s.sqs.Serve(s.sqsListener)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			s.sqsServed <- err
		}()
	}
	s.log.Info().Str("addr", s.Addr()).Msg("serving")
	if err := s.http.Serve(s.listener); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Close shuts the server down gracefully and is idempotent:
//
//  1. readiness turns 503, new API requests get 503 shutting-down with
//     Retry-After, waiting long polls return their (empty) answer, and
//     push delivery stops (requests in flight get the dispatcher's drain
//     timeout, then give their leases back);
//  2. for ShutdownDelay the listener stays open so load balancers notice;
//  3. the listener closes and in-flight requests get until ctx's deadline
//     to finish (then their connections are closed);
//  4. the broker closes (flushing), with a fresh ShutdownTimeout if ctx
//     has already expired, so that an impatient caller never skips the
//     final flush.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.close(ctx) })
	return s.closeErr
}

func (s *Server) close(ctx context.Context) error {
	start := time.Now()
	s.state.Store(stateDraining)
	s.cancelPolls()
	s.log.Info().Dur("delay", s.cfg.ShutdownDelay).Msg("shutting down: draining")
	s.pushMu.Lock()
	d := s.push
	s.pushMu.Unlock()
	if d != nil {
		// Like the long polls: no new push deliveries; those in flight get
		// the dispatcher's drain timeout, then give their leases back.
		d.Stop()
	}
	s.security.stop()

	if s.cfg.ShutdownDelay > 0 {
		timer := time.NewTimer(s.cfg.ShutdownDelay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}

	var errs []error
	if err := s.http.Shutdown(ctx); err != nil {
		s.log.Warn().Err(err).Msg("in-flight requests did not finish in time; closing their connections")
		errs = append(errs, fmt.Errorf("shutdown http: %w", err), s.http.Close())
	}
	errs = append(errs, s.closeAdmin(ctx), s.closeSQS(ctx))

	brokerCtx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		brokerCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
		defer cancel()
	}
	if s.mirror != nil {
		if err := s.mirror.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close postgres mirror: %w", err))
		}
	}
	if s.cluster != nil {
		// The replica's own broker and server, the peer port, the Raft
		// replica.
		errs = append(errs, s.cluster.close(brokerCtx))
	} else if err := s.broker.Close(brokerCtx); err != nil {
		errs = append(errs, fmt.Errorf("close broker: %w", err))
	}
	if err := s.tracing.shutdown(brokerCtx); err != nil {
		errs = append(errs, fmt.Errorf("flush otlp spans: %w", err))
	}
	s.state.Store(stateClosed)
	err := errors.Join(errs...)
	s.log.Info().Err(err).Dur("took", time.Since(start)).Msg("shut down")
	return err
}

// Run opens a server, serves until ctx is cancelled (SIGINT/SIGTERM in
// main), then closes it within cfg.ShutdownDelay + cfg.ShutdownTimeout.
// started, when not nil, is called with the server once it listens (tests
// read the address from it).
func Run(ctx context.Context, cfg Config, started func(*Server)) error {
	s, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	if started != nil {
		started(s)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()

	var serveErr error
	select {
	case serveErr = <-served:
		served = nil
	case <-ctx.Done():
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownDelay+s.cfg.ShutdownTimeout)
	defer cancel()
	closeErr := s.Close(closeCtx)
	if served != nil {
		serveErr = <-served
	}
	return errors.Join(serveErr, closeErr)
}

// livez answers 200 while the process can serve HTTP.
func livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 when the broker is recovered and writable, its
// dispatcher's passes succeed and the server is not shutting down, else
// 503 not-ready. A 200 names what is degraded without making the server
// unready: records the store quarantined, a dispatcher behind the log, a
// PostgreSQL mirror that cannot write: "ok (degraded: …; …)".
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.state.Load() != stateRunning {
		api.WriteError(w, r, fmt.Errorf("%w: shutting down", api.ErrNotReady))
		return
	}
	if err := s.broker.Ready(); err != nil {
		api.WriteError(w, r, fmt.Errorf("%w: broker: %v", api.ErrNotReady, err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	degraded := append(s.broker.Degraded(), s.security.degraded()...)
	degraded = append(degraded, s.tls.degraded()...)
	// The PostgreSQL mirror is a projection: it never makes mqgate unready,
	// but a degraded mirror is reported.
	if s.mirror != nil {
		if err := s.mirror.Health(); err != nil {
			degraded = append(degraded, fmt.Sprintf("postgres mirror degraded: %v", err))
		}
	}
	if len(degraded) > 0 {
		_, _ = fmt.Fprintf(w, "ok (%s)\n", strings.Join(degraded, "; "))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// openAPI serves the embedded OpenAPI 3.0 spec.
func openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(docs.OpenAPI)
}

// redirect answers with a permanent redirect to target.
func redirect(target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusMovedPermanently)
	}
}

// logTimeFormat is the time of log lines: RFC 3339 with milliseconds,
// so the lines of one second keep their order and line up with traces.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// The time field of every zerolog logger of the process (zerolog keeps
// the format in a package variable; set once, before any logger logs).
func init() { zerolog.TimeFieldFormat = logTimeFormat }

// newLogger builds the process logger from the log flags.
func newLogger(cfg Config) zerolog.Logger {
	out := cfg.LogOutput
	if out == nil {
		out = os.Stderr
	}
	format := cfg.LogFormat
	if format == "auto" {
		format = "json"
		if f, ok := out.(*os.File); ok {
			if info, err := f.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
				format = "console"
			}
		}
	}
	if format == "console" {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: logTimeFormat}
	}
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// borrowedListener is a listener lent to a server that never serves it
// (cluster.go): closing it is its owner's business.
type borrowedListener struct{ net.Listener }

func (borrowedListener) Close() error { return nil }

// clusterInfo answers GET /v1/cluster.
func (s *Server) clusterInfo(ctx context.Context) (api.Cluster, error) {
	if s.clusterView == nil {
		return api.Cluster{Role: "standalone", Peers: []api.ClusterPeer{}}, nil
	}
	return s.clusterView(ctx)
}

// clusterMembers is the membership API of a replica's server (nil on a
// single node). It reads s.members when a request comes: the replica sets
// it after the server is built.
func (s *Server) clusterMembers() api.ClusterMembers { return lateMembers{s} }

type lateMembers struct{ s *Server }

func (l lateMembers) members() (api.ClusterMembers, error) {
	if l.s.members == nil {
		return nil, api.ErrNotClustered
	}
	return l.s.members, nil
}

func (l lateMembers) AddLearner(ctx context.Context, id uint64, address string) (api.Cluster, error) {
	m, err := l.members()
	if err != nil {
		return api.Cluster{}, err
	}
	return m.AddLearner(ctx, id, address)
}

func (l lateMembers) Promote(ctx context.Context, id uint64) (api.Cluster, error) {
	m, err := l.members()
	if err != nil {
		return api.Cluster{}, err
	}
	return m.Promote(ctx, id)
}

func (l lateMembers) Remove(ctx context.Context, id uint64) (api.Cluster, error) {
	m, err := l.members()
	if err != nil {
		return api.Cluster{}, err
	}
	return m.Remove(ctx, id)
}
