// Package api is mqgate's HTTP transport: the /v1 routes, their request and
// response payloads, validation, the one error-to-HTTP mapping (errors.go)
// and the swag annotations the OpenAPI spec under docs/ is generated from.
//
// Handlers are thin: decode a request payload, validate it, call one method
// of the Broker interface, render a response payload. Broker types never go
// on the wire. Errors are RFC 9457 application/problem+json bodies with a
// stable `code`.
//
//	@title						mqgate API
//	@version					1
//	@description				HTTP/REST message gateway over a RocketMQ-style store: topics with queues, consumer groups with leased (pop) and offset-based consumption, retries through delay levels and dead-letter queues.
//	@description				Errors are RFC 9457 `application/problem+json` objects (schema Problem) with a stable `code`.
//	@description				Times are RFC 3339 strings; durations are integer milliseconds in fields ending in `Ms`.
//	@description				Authentication is on once the server has an ACL file (--acl-file): HTTP Basic (basicAuth), a bearer JWT (bearerAuth), or a TLS client certificate whose subject Common Name names the account (mutual TLS, which OpenAPI 3.0 cannot name: the empty security requirement). Without an ACL file every request is anonymous. Each operation says the permission it needs (also as x-mqgate-permission).
//	@description				A group with a push endpoint gets its messages POSTed to it: the push callback of putGroup (operation pushMessage) describes the request and the answers.
//	@license.name				Apache-2.0
//	@license.url				https://www.apache.org/licenses/LICENSE-2.0
//	@BasePath					/v1
//	@accept						json
//	@produce					json
//	@tag.name					messages
//	@tag.description			Send, and look messages up by id or key.
//	@tag.name					consume
//	@tag.description			Leased (pop) consumption: pull, ack, nack, lease changes.
//	@tag.name					offsets
//	@tag.description			Offset-based consumption and consumer progress.
//	@tag.name					topics
//	@tag.description			Topic administration.
//	@tag.name					groups
//	@tag.description			Consumer group administration.
//	@tag.name					dlq
//	@tag.description			Dead-letter queues: list, read, resend, discard.
//	@tag.name					timers
//	@tag.description			Pending delayMs/deliverAt timers: list, read, reschedule, cancel.
//	@tag.name					broker
//	@tag.description			Broker status.
//	@tag.name					transactions
//	@tag.description			Transactional (half) messages: commit, rollback, and the checks of unresolved transactions a producer group pulls.
package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker"
)

// Producer is the sending half of the broker.
type Producer interface {
	// Send stores msgs in topic and returns one result per message, in order.
	Send(ctx context.Context, topic string, msgs []broker.SendMessage) ([]broker.SendResult, error)
}

// Consumer is the leased (pop) and offset-based consuming half of the broker.
type Consumer interface {
	// Pull leases up to req.MaxMessages messages, long-polling up to
	// req.Wait; it honours ctx.
	Pull(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error)
	// Ack settles leased messages.
	Ack(ctx context.Context, group string, receipts []string) ([]broker.ReceiptResult, error)
	// Nack sends leased messages back for a later retry (or to the DLQ).
	Nack(ctx context.Context, group string, items []broker.NackItem) ([]broker.ReceiptResult, error)
	// ChangeLease extends or shortens leases.
	ChangeLease(ctx context.Context, group string, items []broker.LeaseItem) ([]broker.ReceiptResult, error)
	// ReadQueue reads up to max messages of one queue from offset and
	// returns them with the next offset to read.
	ReadQueue(ctx context.Context, topic string, queueID int32, offset int64, max int) ([]broker.QueueMessage, int64, error)
	// ReadQueueFor is ReadQueue for a group: its subscription's filters
	// apply, a negative offset is its committed offset, and for a
	// broadcasting group the client id of ctx (broker.WithClient) reads
	// as that consumer instance.
	ReadQueueFor(ctx context.Context, group, topic string, queueID int32, offset int64, max int) ([]broker.QueueMessage, int64, error)
	// GetOffsets returns the group's committed offsets (of the consumer
	// instance ctx names, for a broadcasting group).
	GetOffsets(ctx context.Context, group string) ([]broker.QueueProgress, error)
	// CommitOffsets stores offsets for an offset-mode group (for the
	// consumer instance ctx names, for a broadcasting group).
	CommitOffsets(ctx context.Context, group string, commits []broker.OffsetCommit) error
}

// Admin is the administrative half of the broker.
type Admin interface {
	// PutTopic creates or updates a topic; created reports a creation.
	PutTopic(ctx context.Context, cfg broker.TopicConfig) (broker.TopicConfig, bool, error)
	// PatchTopic changes an existing topic: patch maps its current
	// configuration to the new one (run under the broker's registry lock).
	PatchTopic(ctx context.Context, name string, patch func(broker.TopicConfig) (broker.TopicConfig, error)) (broker.TopicConfig, error)
	// GetTopic returns one topic.
	GetTopic(ctx context.Context, name string) (broker.TopicConfig, error)
	// TopicStatus returns the offsets and newest store time of each queue
	// of a topic.
	TopicStatus(ctx context.Context, topic string) ([]broker.QueueStatus, error)
	// ListTopics returns all user topics.
	ListTopics(ctx context.Context) ([]broker.TopicConfig, error)
	// DeleteTopic deletes a topic.
	DeleteTopic(ctx context.Context, name string) error
	// PutGroup creates or updates a group; created reports a creation.
	PutGroup(ctx context.Context, cfg broker.GroupConfig) (broker.GroupConfig, bool, error)
	// PatchGroup changes an existing group like PatchTopic.
	PatchGroup(ctx context.Context, name string, patch func(broker.GroupConfig) (broker.GroupConfig, error)) (broker.GroupConfig, error)
	// GetGroup returns one group.
	GetGroup(ctx context.Context, name string) (broker.GroupConfig, error)
	// ListGroups returns all groups.
	ListGroups(ctx context.Context) ([]broker.GroupConfig, error)
	// DeleteGroup deletes a group.
	DeleteGroup(ctx context.Context, name string) error
	// Progress returns per-queue broker offset, consumer offset, lag and
	// in-flight count of a group.
	Progress(ctx context.Context, group string) ([]broker.QueueProgress, error)
	// Instances lists a broadcasting group's consumer instances with
	// their own progress.
	Instances(ctx context.Context, group string) ([]broker.InstanceProgress, error)
	// Backlog returns what waits for a group in the delay ladder (its
	// retries, the delayed messages of its topics) and pending timers.
	Backlog(ctx context.Context, group string) (broker.GroupBacklog, error)
	// ResetOffset moves the group's offsets of topic to the first message
	// stored at or after t.
	ResetOffset(ctx context.Context, group, topic string, t time.Time) ([]broker.QueueProgress, error)
	// GetMessage looks a message up by id.
	GetMessage(ctx context.Context, id string) (broker.ReceivedMessage, error)
	// QueryByKey looks messages up by business key.
	QueryByKey(ctx context.Context, topic, key string, max int) ([]broker.ReceivedMessage, error)
	// Status reports the broker's state.
	Status(ctx context.Context) (broker.BrokerStatus, error)
	// RotateReceiptKey adds a receipt key that signs from now on.
	RotateReceiptKey(ctx context.Context) (int, error)
	// ReceiptKeys lists the ids of the keys that verify receipts.
	ReceiptKeys() []int
	// Stats returns the broker's counters (GET /v1/stats), keyed by
	// topic and group under the metrics' label limit.
	Stats() broker.Stats
	// ConsumerLags returns every group's lag and oldest unconsumed
	// message per topic it reads, under the same limit.
	ConsumerLags() []broker.ConsumerLag
	// Ready returns nil when the broker has recovered and is writable.
	Ready() error
}

// Broker is everything the transport needs from the messaging layer;
// *broker.Broker satisfies it and handler tests use fakes.
type Broker interface {
	Producer
	Consumer
	Admin
	DeadLetters
	Timers
	Transactions
	Tracer
	Browser
}

// Limits and defaults of the transport. MaxWaitMs and MaxPullMessages are
// part of the API contract.
const (
	// MaxWaitMs is the longest long poll a pull may ask for (RocketMQ's
	// broker suspend limit).
	MaxWaitMs = 30_000
	// MaxPullMessages is the most messages one pull returns.
	MaxPullMessages = broker.MaxPullMessages
	// DefaultPullMessages is maxMessages when a pull leaves it out.
	DefaultPullMessages = broker.DefaultPullMessages
	// MaxInvisibleMs is the longest lease a pull or lease change may ask for (12 h).
	MaxInvisibleMs = 12 * 60 * 60 * 1000
	// MaxBatchMessages is the most messages one send request may carry.
	MaxBatchMessages = broker.MaxSendBatch
	// MaxBatchItems is the most receipts or items one ack, nack, lease or
	// offset request may carry.
	MaxBatchItems = broker.MaxBatchItems
	// MaxReadMessages is the most messages one queue read or key query returns.
	MaxReadMessages = 32
	// DefaultMaxMessageSize is Deps.MaxMessageSize when zero (4 MiB).
	DefaultMaxMessageSize = 4 << 20
	// DefaultMaxRequestSize is Deps.MaxRequestSize when zero (8 MiB).
	DefaultMaxRequestSize = 8 << 20
	// DefaultMaxWaiters is Deps.MaxWaiters when zero.
	DefaultMaxWaiters = 10_000
	// DefaultWriteTimeout is Deps.WriteTimeout when zero.
	DefaultWriteTimeout = 30 * time.Second
	// smallBodyLimit caps the body of every route but send (bytes).
	smallBodyLimit = 1 << 20
)

// Deps is what the transport is built from. Zero values take the defaults
// above.
type Deps struct {
	// Broker serves every request.
	Broker Broker
	// Logger receives access logs and error causes; each request logs
	// through a child carrying its request id.
	Logger zerolog.Logger
	// MaxMessageSize is the largest message body in bytes.
	MaxMessageSize int
	// MaxRequestSize is the largest JSON send request body in bytes (a
	// base64 body is 4/3 of its decoded size, so keep it above
	// MaxMessageSize×4/3 plus the envelope).
	MaxRequestSize int64
	// MaxWaiters caps the number of concurrent long polls (waitMs > 0);
	// the next one gets 429 too-many-waiters.
	MaxWaiters int
	// WriteTimeout is the http.Server's WriteTimeout. A pull moves its own
	// write (and read) deadline to now + wait + WriteTimeout so that a long
	// poll outlives the server-wide timeout.
	WriteTimeout time.Duration
	// PollContext ends every waiting pull when cancelled (at shutdown); the
	// pulls answer 200 with the messages they have (none). Default:
	// context.Background().
	PollContext context.Context
	// Draining, when it returns true, makes every request answer 503
	// shutting-down with Retry-After. Default: never.
	Draining func() bool
	// DrainError is what a draining server answers (default
	// broker.ErrShuttingDown, 503 shutting-down). A replica's broker that
	// stops leading drains with broker.ErrNotLeader (503 no-leader): the
	// node is not going away, the next leader serves the retry.
	DrainError error
	// Auth, when not nil, authenticates every request and checks its
	// route's permission (auth.go). Nil: authentication off.
	Auth Authenticator
	// SQS, when not nil, lists the SQS-compatible endpoint's queues (GET
	// /v1/sqs/queues); nil: the endpoint is off.
	SQS SQSCatalog
	// Mirror, when not nil, reports the PostgreSQL mirror's state for
	// GET /v1/stats. Nil: no mirror (all zero).
	Mirror func() MirrorStat
	// Cluster, when not nil, is this node's view of its cluster (GET
	// /v1/cluster). Nil: a single node.
	Cluster func(context.Context) (Cluster, error)
	// Members changes a cluster's membership (POST /v1/cluster/learners,
	// POST /v1/cluster/members/{id}/promote, DELETE
	// /v1/cluster/members/{id}). Nil: a single node (409 not-a-cluster).
	Members ClusterMembers
	// Limits are the default abuse limits of every account (limits.go);
	// zero fields are unlimited. With Auth nil every caller is one
	// account.
	Limits AccountLimits
}

// withDefaults returns d with zero values replaced by defaults.
func (d Deps) withDefaults() Deps {
	if d.MaxMessageSize <= 0 {
		d.MaxMessageSize = DefaultMaxMessageSize
	}
	if d.MaxRequestSize <= 0 {
		d.MaxRequestSize = DefaultMaxRequestSize
	}
	if d.MaxWaiters <= 0 {
		d.MaxWaiters = DefaultMaxWaiters
	}
	if d.WriteTimeout <= 0 {
		d.WriteTimeout = DefaultWriteTimeout
	}
	if d.PollContext == nil {
		d.PollContext = context.Background()
	}
	if d.Draining == nil {
		d.Draining = func() bool { return false }
	}
	if d.DrainError == nil {
		d.DrainError = fmt.Errorf("%w: the server is draining; retry on another instance or later", broker.ErrShuttingDown)
	}
	return d
}

// handler holds what every route handler needs.
type handler struct {
	deps Deps
	// waiters is a semaphore of MaxWaiters slots taken by long polls.
	waiters chan struct{}
	// limits are the per-account rates and long-poll counts.
	limits *accountLimiter
}

// NewHandler returns the /v1 router; mount it at "/v1". It carries its own
// middleware: request id, access log, panic recovery, the shutdown gate,
// authorization and the per-account request rate.
func NewHandler(d Deps) http.Handler {
	d = d.withDefaults()
	h := &handler{deps: d, waiters: make(chan struct{}, d.MaxWaiters), limits: newAccountLimiter(d.Limits)}

	r := chi.NewRouter()
	r.Use(requestScope(d.Logger), h.drainGate, h.authorize(r), h.rateLimit, clientIdentity)
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		WriteError(w, req, ErrRouteNotFound)
	})
	r.MethodNotAllowed(methodNotAllowed(r))

	h.registerSendRoutes(r)
	h.registerPullRoutes(r)
	h.registerAckRoutes(r)
	h.registerTopicRoutes(r)
	h.registerGroupRoutes(r)
	h.registerMessageRoutes(r)
	h.registerBrokerRoutes(r)
	h.registerStatsRoutes(r)
	h.registerClusterRoutes(r)
	h.registerDLQRoutes(r)
	h.registerTimerRoutes(r)
	h.registerTransactionRoutes(r)
	h.registerTraceRoutes(r)
	h.registerSQSRoutes(r)
	h.registerBrowseRoutes(r)
	return r
}
