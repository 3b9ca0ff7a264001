package sqs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
)

// Broker is what the endpoint needs of the broker's facade; *broker.Broker
// satisfies it (and so does the server's wrapped broker).
type Broker interface {
	Send(ctx context.Context, topic string, msgs []broker.SendMessage) ([]broker.SendResult, error)
	Pull(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error)
	Ack(ctx context.Context, group string, receipts []string) ([]broker.ReceiptResult, error)
	Nack(ctx context.Context, group string, items []broker.NackItem) ([]broker.ReceiptResult, error)
	ChangeLease(ctx context.Context, group string, items []broker.LeaseItem) ([]broker.ReceiptResult, error)
	ReadQueue(ctx context.Context, topic string, queueID int32, offset int64, max int) ([]broker.QueueMessage, int64, error)
	PutTopic(ctx context.Context, cfg broker.TopicConfig) (broker.TopicConfig, bool, error)
	GetTopic(ctx context.Context, name string) (broker.TopicConfig, error)
	TopicStatus(ctx context.Context, topic string) ([]broker.QueueStatus, error)
	ListTopics(ctx context.Context) ([]broker.TopicConfig, error)
	DeleteTopic(ctx context.Context, name string) error
	PutGroup(ctx context.Context, cfg broker.GroupConfig) (broker.GroupConfig, bool, error)
	PatchGroup(ctx context.Context, name string, patch func(broker.GroupConfig) (broker.GroupConfig, error)) (broker.GroupConfig, error)
	GetGroup(ctx context.Context, name string) (broker.GroupConfig, error)
	DeleteGroup(ctx context.Context, name string) error
	Progress(ctx context.Context, group string) ([]broker.QueueProgress, error)
	Backlog(ctx context.Context, group string) (broker.GroupBacklog, error)
	ResetOffset(ctx context.Context, group, topic string, t time.Time) ([]broker.QueueProgress, error)
	ListDeadLetters(ctx context.Context, group string, f broker.DLQFilter, cursor string, limit int) ([]broker.DeadLetter, string, error)
	GetDeadLetter(ctx context.Context, group, id string) (broker.DeadLetter, error)
}

// Options configure the endpoint. Zero values take the defaults.
type Options struct {
	// Broker serves every request.
	Broker Broker
	// Logger receives the causes of internal errors.
	Logger zerolog.Logger
	// MaxMessageSize is the largest message body the broker accepts
	// (MaximumMessageSize can only lower it); default 256 KiB.
	MaxMessageSize int
	// MaxRequestSize bounds a request body; default 2 MiB.
	MaxRequestSize int64
	// PollContext ends waiting receives (at shutdown): they answer with
	// what they have. Default: context.Background().
	PollContext context.Context
	// Now is the clock (time stamps of the queues); default time.Now.
	Now func() time.Time
	// ACL, when not nil, turns authentication on: every request must be
	// signed (sigv4.go) by an account of the ACL in force, which must hold
	// the permission its operation needs (authorize). Nil: unsigned
	// requests are served and signatures are not checked.
	ACL auth.Source
	// Failures, when not nil, counts the signatures that fail to verify
	// (the server's auth failure limiter, *auth.Guard): over its limit they
	// are answered late with RequestThrottled.
	Failures FailureCounter
	// MaxWaitingReceives caps the ReceiveMessage calls waiting at once
	// (WaitTimeSeconds > 0); the next one is refused with RequestThrottled
	// (receiveMessage). Default DefaultMaxWaitingReceives.
	MaxWaitingReceives int
	// RedriveInterval is how often the redrive mover copies new dead
	// letters to their SQS dead-letter queues (redrive.go); default 1 s.
	RedriveInterval time.Duration
}

// FailureCounter counts failed authentications and slows guessers
// (*auth.Guard).
type FailureCounter interface {
	SignatureFailed(ctx context.Context, addr netip.Addr, accessKey string, why auth.SignatureFailure) error
}

// DefaultMaxWaitingReceives is Options.MaxWaitingReceives when zero (the
// REST API's --max-waiters default).
const DefaultMaxWaitingReceives = 10_000

// Handler serves the SQS API.
type Handler struct {
	opts Options
	b    Broker
	log  zerolog.Logger
	meta *metaStore
	sig  *sigV4 // nil: authentication off
	// waiting is a semaphore of MaxWaitingReceives slots, one taken by
	// each waiting receive.
	waiting chan struct{}

	// redriveMu serialises the redrive mover's passes.
	redriveMu sync.Mutex
	// runCtx ends with Close: the message move tasks run in it; stop
	// cancels it.
	runCtx context.Context
	stop   context.CancelFunc
	// moves are the message move tasks (movetasks.go).
	moves moveTasks
}

// New builds the endpoint's handler.
func New(opts Options) *Handler {
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = defaultMaxMessageSize
	}
	if opts.MaxRequestSize <= 0 {
		opts.MaxRequestSize = 2 << 20
	}
	if opts.PollContext == nil {
		opts.PollContext = context.Background()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxWaitingReceives <= 0 {
		opts.MaxWaitingReceives = DefaultMaxWaitingReceives
	}
	if opts.RedriveInterval <= 0 {
		opts.RedriveInterval = time.Second
	}
	h := &Handler{opts: opts, b: opts.Broker, log: opts.Logger.With().Str("component", "sqs").Logger()}
	h.waiting = make(chan struct{}, opts.MaxWaitingReceives)
	h.meta = &metaStore{b: opts.Broker, now: opts.Now, log: h.log, current: -1}
	if opts.ACL != nil {
		h.sig = &sigV4{acl: opts.ACL, now: opts.Now}
	}
	h.runCtx, h.stop = context.WithCancel(context.Background())
	return h
}

// StartRedrive runs the redrive mover (redrive.go) under ctx until the
// stop it returns is called, which waits for it. Only a leader copies dead
// letters, so the server runs it among the broker's leader-only services
// (Broker.OnLeader).
func (h *Handler) StartRedrive(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.runRedrive(ctx, h.opts.RedriveInterval)
	}()
	return func() { cancel(); <-done }
}

// Close stops the running message move tasks and waits for them (before
// the broker closes): they stay RUNNING in the queue table, to be resumed
// at the next start.
func (h *Handler) Close() {
	h.stop()
	h.moves.mu.Lock()
	var running []*moveTask
	for _, list := range h.moves.tasks {
		for _, t := range list {
			t.mu.Lock()
			if t.running {
				running = append(running, t)
			}
			t.mu.Unlock()
		}
	}
	h.moves.mu.Unlock()
	for _, t := range running {
		<-t.finished
	}
}

// request is one decoded call: its operation and a way to decode its
// input into the operation's struct.
type request struct {
	op     string
	decode func(v any) error
	// query answers in the query protocol's XML.
	query bool
	// base is the scheme and host the queue URLs are built on.
	base string
	// account is the signer (nil with authentication off).
	account *auth.Account
}

// ServeHTTP decodes the call in either protocol and answers in the same.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var account *auth.Account
	if h.sig != nil {
		// The signature covers the body: read it first.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestSize))
		if err != nil {
			req := &request{query: r.Header.Get("X-Amz-Target") == ""}
			writeError(w, req, errSerialization("reading the request body: %v", err), h.requestID())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var failure *sigFailure
		if account, failure = h.sig.verify(r, body); failure != nil {
			req := &request{query: r.Header.Get("X-Amz-Target") == ""}
			writeError(w, req, h.countFailure(r, failure), h.requestID())
			return
		}
	}
	req, err := h.decodeRequest(w, r)
	if req != nil {
		req.account = account
	}
	if err != nil {
		writeError(w, req, asAPIError(err), h.requestID())
		return
	}
	out, err := h.dispatch(r.Context(), req)
	if err != nil {
		ae := asAPIError(err)
		if ae.status >= 500 {
			h.log.Error().Err(err).Str("operation", req.op).Msg("SQS request failed")
		}
		writeError(w, req, ae, h.requestID())
		return
	}
	writeResult(w, req, out, h.requestID())
}

// countFailure reports a refused signature to the failure limiter and
// returns the error to answer: its own, or RequestThrottled (with
// Retry-After) over the limit.
func (h *Handler) countFailure(r *http.Request, f *sigFailure) *apiError {
	if h.opts.Failures == nil || f.count == 0 {
		return f.err
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return f.err
	}
	err = h.opts.Failures.SignatureFailed(r.Context(), peer.Addr(), f.accessKey, f.count)
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		e := errThrottled("Too many failed signatures for this access key from this address: retry in %v.", throttled.RetryAfter().Round(time.Second))
		e.retryAfter = throttled.RetryAfter()
		return e
	}
	return f.err
}

// decodeRequest reads the protocol from the request: a POST with
// X-Amz-Target AmazonSQS.<Op> is the JSON 1.0 protocol, anything else the
// query protocol (Action=<Op>).
func (h *Handler) decodeRequest(w http.ResponseWriter, r *http.Request) (*request, error) {
	req := &request{base: baseURL(r)}
	target := r.Header.Get("X-Amz-Target")
	if target == "" {
		req.query = true
		return req, h.decodeQuery(w, r, req)
	}
	op, ok := strings.CutPrefix(target, "AmazonSQS.")
	if !ok || r.Method != http.MethodPost {
		req.op = target
		return req, errInvalidAction(target)
	}
	req.op = op
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestSize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, errBatchTooLong(int(tooBig.Limit)+1, int(tooBig.Limit))
		}
		return req, errSerialization("reading the request body: %v", err)
	}
	req.decode = func(v any) error { return decodeJSON(body, v) }
	return req, nil
}

// decodeJSON decodes a JSON 1.0 request body into v: members the
// operation does not know are ignored (newer SDKs send them), a member of
// the wrong type is a SerializationException.
func decodeJSON(body []byte, v any) error {
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errSerialization("member %s: expected %s", te.Field, te.Type)
		}
		return errSerialization("the request body is not a JSON object: %v", err)
	}
	return nil
}

// baseURL is the scheme and host of r, on which queue URLs are built.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// requestID is a fresh request id for the answer.
func (h *Handler) requestID() string { return newRequestID() }

// dispatch runs the operation req names.
func (h *Handler) dispatch(ctx context.Context, req *request) (any, error) {
	op, ok := operations[req.op]
	if !ok {
		return nil, errInvalidAction(req.op)
	}
	return op(h, ctx, req)
}

// operations maps the operation names to their implementations.
var operations map[string]func(h *Handler, ctx context.Context, req *request) (any, error)

func init() {
	operations = map[string]func(h *Handler, ctx context.Context, req *request) (any, error){
		"CreateQueue":                  opFunc((*Handler).createQueue),
		"GetQueueUrl":                  opFunc((*Handler).getQueueURL),
		"ListQueues":                   opFunc((*Handler).listQueues),
		"DeleteQueue":                  opFunc((*Handler).deleteQueue),
		"GetQueueAttributes":           opFunc((*Handler).getQueueAttributes),
		"SetQueueAttributes":           opFunc((*Handler).setQueueAttributes),
		"PurgeQueue":                   opFunc((*Handler).purgeQueue),
		"SendMessage":                  opFunc((*Handler).sendMessage),
		"SendMessageBatch":             opFunc((*Handler).sendMessageBatch),
		"ReceiveMessage":               opFunc((*Handler).receiveMessage),
		"DeleteMessage":                opFunc((*Handler).deleteMessage),
		"DeleteMessageBatch":           opFunc((*Handler).deleteMessageBatch),
		"ChangeMessageVisibility":      opFunc((*Handler).changeMessageVisibility),
		"ChangeMessageVisibilityBatch": opFunc((*Handler).changeMessageVisibilityBatch),
		"ListDeadLetterSourceQueues":   opFunc((*Handler).listDeadLetterSourceQueues),
		"TagQueue":                     opFunc((*Handler).tagQueue),
		"UntagQueue":                   opFunc((*Handler).untagQueue),
		"ListQueueTags":                opFunc((*Handler).listQueueTags),
		"StartMessageMoveTask":         opFunc((*Handler).startMessageMoveTask),
		"ListMessageMoveTasks":         opFunc((*Handler).listMessageMoveTasks),
		"CancelMessageMoveTask":        opFunc((*Handler).cancelMessageMoveTask),
	}
}

// opFunc adapts a typed operation to the dispatch table: it decodes the
// input, runs the operation and returns its output.
func opFunc[In, Out any](f func(h *Handler, ctx context.Context, req *request, in *In) (*Out, error)) func(*Handler, context.Context, *request) (any, error) {
	return func(h *Handler, ctx context.Context, req *request) (any, error) {
		in := new(In)
		if err := req.decode(in); err != nil {
			return nil, err
		}
		if err := authorize(req, in); err != nil {
			return nil, err
		}
		return f(h, ctx, req, in)
	}
}

// mapBrokerErr maps the broker's errors to SQS errors.
func mapBrokerErr(err error) *apiError {
	var limit *broker.LimitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &limit):
		return errInvalidParameter("%v", strings.TrimPrefix(err.Error(), "broker: "))
	case errors.Is(err, broker.ErrTooLarge):
		return errInvalidParameter("%v", strings.TrimPrefix(err.Error(), "broker: "))
	case errors.Is(err, broker.ErrEmptyBody):
		return errInvalidParameter("The request must contain the parameter MessageBody.")
	case errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, broker.ErrInvalidName), errors.Is(err, broker.ErrReservedName),
		errors.Is(err, broker.ErrPropertiesTooLarge), errors.Is(err, broker.ErrValueTooLong), errors.Is(err, broker.ErrIdempotencyKeyReused):
		return errInvalidParameter("%s", strings.TrimPrefix(err.Error(), "broker: "))
	case errors.Is(err, broker.ErrQuotaExceeded):
		return errOverLimit("%s", strings.TrimPrefix(err.Error(), "broker: "))
	case errors.Is(err, broker.ErrIdempotencyInFlight):
		return errThrottled("%s", strings.TrimPrefix(err.Error(), "broker: "))
	case errors.Is(err, broker.ErrShuttingDown), errors.Is(err, broker.ErrReadOnly), errors.Is(err, broker.ErrDiskFull),
		errors.Is(err, broker.ErrFlushTimeout), errors.Is(err, broker.ErrDispatchStalled):
		return errUnavailable("%s", strings.TrimPrefix(err.Error(), "broker: "))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errUnavailable("the request was cancelled")
	}
	return errInternal("%v", err)
}

// newRequestID is a fresh request id (a random UUID, as AWS's).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
