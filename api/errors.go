package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
)

// Errors raised by the transport itself (the broker's own sentinels live in
// server/broker). All of them, and the broker's, are turned into HTTP
// responses by classify, the one mapping in this package.
var (
	// ErrMalformedRequest: the request body or a header cannot be parsed
	// (invalid JSON, unknown field, bad base64, bad number).
	ErrMalformedRequest = errors.New("malformed request")
	// ErrUnsupportedMediaType: the Content-Type is not one the route accepts.
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	// ErrTooManyWaiters: the limit of concurrent long polls is reached.
	ErrTooManyWaiters = errors.New("too many waiting pulls")
	// ErrRouteNotFound: no route matches the path.
	ErrRouteNotFound = errors.New("no such route")
	// ErrMethodNotAllowed: the path exists but not for this method.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrRateLimited: the account is over its request or message rate.
	ErrRateLimited = errors.New("rate limit exceeded")
	// ErrNotReady: the process cannot take traffic yet (readiness probe).
	ErrNotReady = errors.New("not ready")
	// ErrNotClustered: a membership change asked of a single node.
	ErrNotClustered = errors.New("not a cluster: this node runs alone (no --node-id and --peers)")
	// ErrMembership: a membership change that does not fit the cluster's
	// configuration (a learner that is already a member, a promotion of a
	// replica that is not a learner, a removal of one that is not there).
	ErrMembership = errors.New("membership change refused")
	// ErrLearnerBehind: a promotion of a learner that has not caught up
	// with the leader's log yet (a voter that far behind would leave the
	// cluster without a majority that can commit until it catches up).
	ErrLearnerBehind = errors.New("learner not caught up")
	// ErrPushLoop: a send carries HeaderPushHop — it is a push delivery,
	// whose message must not be stored again (loop.go).
	ErrPushLoop = errors.New("push loop")
	// ErrHeaderTooLarge: the request line and header block exceed the
	// server's limit (net/http refuses the request before any handler).
	ErrHeaderTooLarge = errors.New("request header fields too large")
	// ErrExpectationFailed: the request's Expect header asks for something
	// other than 100-continue.
	ErrExpectationFailed = errors.New("expectation failed")
	// ErrHTTPVersion: the request's HTTP version is not HTTP/1.x.
	ErrHTTPVersion = errors.New("HTTP version not supported")
	// ErrTransferEncoding: the request uses a transfer coding other than
	// chunked.
	ErrTransferEncoding = errors.New("unsupported transfer encoding")
	// ErrRangeNotSatisfiable: a Range request for a file (the web console)
	// lies outside the file.
	ErrRangeNotSatisfiable = errors.New("range not satisfiable")
	// ErrHTTPSRequired: plain HTTP arrived on a port that speaks TLS.
	ErrHTTPSRequired = errors.New("https required")
	// ErrHostNotAllowed: the request's Host is not a name this server
	// answers to (DNS rebinding).
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrOriginNotAllowed: a state-changing request from a web page of an
	// origin the CORS configuration does not allow.
	ErrOriginNotAllowed = errors.New("origin not allowed")
)

// problemMediaType is the RFC 9457 media type of error bodies.
const problemMediaType = "application/problem+json"

// problemTypePrefix prefixes every problem code to form the RFC 9457 `type`
// URI. The URN is stable and not meant to be dereferenced.
const problemTypePrefix = "urn:mqgate:problem:"

// Problem is an RFC 9457 problem details object, the body of every 4xx and
// 5xx response (media type application/problem+json).
type Problem struct {
	// Type is a URI naming the problem kind: "urn:mqgate:problem:" + code.
	Type string `json:"type" example:"urn:mqgate:problem:topic-not-found"`
	// Title is the short, fixed human summary of the problem kind.
	Title string `json:"title" example:"Topic not found"`
	// Status repeats the HTTP status code.
	Status int `json:"status" example:"404"`
	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty" example:"topic not found: orders"`
	// Instance is the request path the problem occurred on.
	Instance string `json:"instance,omitempty" example:"/v1/topics/orders"`
	// Code is the stable machine-readable problem code (the last part of Type).
	Code string `json:"code" example:"topic-not-found"`
	// RequestID is the id of the request (also in the X-Request-Id header and the server logs).
	RequestID string `json:"requestId,omitempty" example:"d4m1c8sl0s73b0h3ds2g"`
	// Field names the request field over a limit (body-too-large, properties-too-large, value-too-long), the
	// quota reached (quota-exceeded: topics, queuesPerTopic, queues, groups, pushEndpoints, pendingTimers,
	// transactionsPerProducerGroup, pendingTransactions, instancesPerGroup), or
	// the filter that does not compile (invalid-sql: "subscriptions[0].sql", "sql").
	Field string `json:"field,omitempty" example:"messages[3].tag"`
	// Limit is the limit that field is over, in LimitUnit.
	Limit int `json:"limit,omitempty" example:"255"`
	// LimitUnit is the unit of Limit: bytes, properties or keys.
	LimitUnit string `json:"limitUnit,omitempty" example:"bytes"`
	// Position is, for invalid-sql, the 1-based position (in characters) in the filter named by field of the
	// token the problem is about; detail says what was expected there.
	Position int `json:"position,omitempty" example:"12"`
	// State is how a finished transaction ended (transaction-finished): committed or rolled-back.
	State string `json:"state,omitempty" enums:"committed,rolled-back" example:"committed"`
} //	@name	Problem

// problemKind is one entry of the problem catalogue.
type problemKind struct {
	status int
	code   string
	title  string
	// retryAfter, when > 0, is sent as a Retry-After header (seconds).
	retryAfter int
}

// The problem catalogue. Codes are part of the API: never change or reuse one.
var (
	kindInvalidName     = problemKind{http.StatusBadRequest, "invalid-name", "Invalid topic or group name", 0}
	kindInvalidArgument = problemKind{http.StatusBadRequest, "invalid-argument", "Invalid argument", 0}
	kindInvalidSQL      = problemKind{http.StatusBadRequest, "invalid-sql", "Invalid SQL filter", 0}
	kindClientID        = problemKind{http.StatusBadRequest, "client-id-required", "Client id required", 0}
	kindMalformed       = problemKind{http.StatusBadRequest, "malformed-request", "Malformed request", 0}
	kindHTTPSRequired   = problemKind{http.StatusBadRequest, "https-required", "HTTPS required", 0}
	kindEmptyBody       = problemKind{http.StatusBadRequest, "empty-body", "Message body is empty", 0}
	kindOffsetRange     = problemKind{http.StatusBadRequest, "offset-out-of-range", "Offset out of range", 0}
	kindNotFound        = problemKind{http.StatusNotFound, "not-found", "Not found", 0}
	kindTopicNotFound   = problemKind{http.StatusNotFound, "topic-not-found", "Topic not found", 0}
	kindGroupNotFound   = problemKind{http.StatusNotFound, "group-not-found", "Group not found", 0}
	kindMessageNotFound = problemKind{http.StatusNotFound, "message-not-found", "Message not found", 0}
	kindTxnNotFound     = problemKind{http.StatusNotFound, "transaction-not-found", "Transaction not found", 0}
	kindTxnFinished     = problemKind{http.StatusConflict, "transaction-finished", "Transaction already finished the other way", 0}
	kindMethod          = problemKind{http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", 0}
	kindInFlight        = problemKind{http.StatusConflict, "idempotency-request-in-flight", "A request with this idempotency key is in progress", 1}
	kindTooLarge        = problemKind{http.StatusRequestEntityTooLarge, "body-too-large", "Body too large", 0}
	kindPropsTooLarge   = problemKind{http.StatusRequestEntityTooLarge, "properties-too-large", "Message properties too large", 0}
	kindValueTooLong    = problemKind{http.StatusBadRequest, "value-too-long", "Value too long", 0}
	kindExpectation     = problemKind{http.StatusExpectationFailed, "expectation-failed", "Expectation failed", 0}
	kindHeaderTooLarge  = problemKind{http.StatusRequestHeaderFieldsTooLarge, "header-too-large", "Request header fields too large", 0}
	kindMediaType       = problemKind{http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", 0}
	kindRange           = problemKind{http.StatusRequestedRangeNotSatisfiable, "range-not-satisfiable", "Range not satisfiable", 0}
	kindKeyReused       = problemKind{http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused with a different request", 0}
	kindTooManyWaiters  = problemKind{http.StatusTooManyRequests, "too-many-waiters", "Too many waiting pulls", 1}
	kindUnauthenticated = problemKind{http.StatusUnauthorized, "unauthenticated", "Authentication required", 0}
	kindForbidden       = problemKind{http.StatusForbidden, "forbidden", "Forbidden", 0}
	kindOrigin          = problemKind{http.StatusForbidden, "origin-not-allowed", "Origin not allowed", 0}
	kindHost            = problemKind{http.StatusMisdirectedRequest, "host-not-allowed", "Host not allowed", 0}
	kindAuthThrottled   = problemKind{http.StatusTooManyRequests, "too-many-auth-failures", "Too many failed authentications", 0}
	kindRateLimited     = problemKind{http.StatusTooManyRequests, "rate-limited", "Rate limit exceeded", 0}
	kindClientClosed    = problemKind{499, "request-canceled", "Request canceled by the client", 0}
	kindInternal        = problemKind{http.StatusInternalServerError, "internal", "Internal server error", 0}
	kindNotImplemented  = problemKind{http.StatusNotImplemented, "not-implemented", "Not implemented", 0}
	kindShuttingDown    = problemKind{http.StatusServiceUnavailable, "shutting-down", "Shutting down", 5}
	kindNotReady        = problemKind{http.StatusServiceUnavailable, "not-ready", "Not ready", 1}
	kindReadOnly        = problemKind{http.StatusServiceUnavailable, "storage-read-only", "Storage is read-only", 0}
	kindFlushTimeout    = problemKind{http.StatusServiceUnavailable, "flush-timeout", "Flush timeout: write outcome unknown, retry with the same Idempotency-Key", 1}
	kindNotLeader       = problemKind{http.StatusServiceUnavailable, "no-leader", "No leader: retry", 1}
	kindOutcomeUnknown  = problemKind{http.StatusServiceUnavailable, "write-outcome-unknown", "Write outcome unknown: the leadership changed; retry with the same Idempotency-Key", 1}
	kindTimeout         = problemKind{http.StatusGatewayTimeout, "timeout", "Request timed out", 1}
	kindHTTPVersion     = problemKind{http.StatusHTTPVersionNotSupported, "http-version-not-supported", "HTTP version not supported", 0}
	kindDiskFull        = problemKind{http.StatusInsufficientStorage, "disk-full", "Disk full", 5}
	kindQuota           = problemKind{http.StatusConflict, "quota-exceeded", "Quota exceeded", 0}
	kindNotClustered    = problemKind{http.StatusConflict, "not-a-cluster", "Not a cluster", 0}
	kindMembership      = problemKind{http.StatusConflict, "membership-conflict", "Membership change refused", 0}
	kindLearnerBehind   = problemKind{http.StatusConflict, "learner-behind", "Learner not caught up: promote it later", 1}
	// 508 (RFC 5842): the server stopped an operation that would loop.
	kindPushLoop = problemKind{http.StatusLoopDetected, "push-loop", "Push loop detected", 0}
)

// sentinelKinds maps sentinel errors to problem kinds, checked in order
// with errors.Is.
var sentinelKinds = []struct {
	err  error
	kind problemKind
}{
	{broker.ErrInvalidName, kindInvalidName},
	{broker.ErrReservedName, kindInvalidName},
	{broker.ErrInvalidArgument, kindInvalidArgument},
	{broker.ErrInvalidSQL, kindInvalidSQL},
	{broker.ErrClientIDRequired, kindClientID},
	{ErrMalformedRequest, kindMalformed},
	{ErrHTTPSRequired, kindHTTPSRequired},
	{broker.ErrEmptyBody, kindEmptyBody},
	{broker.ErrOffsetOutOfRange, kindOffsetRange},
	{ErrRouteNotFound, kindNotFound},
	{broker.ErrTopicNotFound, kindTopicNotFound},
	{broker.ErrGroupNotFound, kindGroupNotFound},
	{broker.ErrMessageNotFound, kindMessageNotFound},
	{broker.ErrTransactionNotFound, kindTxnNotFound},
	{broker.ErrTransactionFinished, kindTxnFinished},
	{ErrMethodNotAllowed, kindMethod},
	{broker.ErrIdempotencyInFlight, kindInFlight},
	{broker.ErrTooLarge, kindTooLarge},
	{broker.ErrPropertiesTooLarge, kindPropsTooLarge},
	{broker.ErrValueTooLong, kindValueTooLong},
	{ErrUnsupportedMediaType, kindMediaType},
	{ErrRangeNotSatisfiable, kindRange},
	{ErrExpectationFailed, kindExpectation},
	{ErrHeaderTooLarge, kindHeaderTooLarge},
	{broker.ErrIdempotencyKeyReused, kindKeyReused},
	{ErrTooManyWaiters, kindTooManyWaiters},
	{auth.ErrUnauthenticated, kindUnauthenticated},
	{auth.ErrForbidden, kindForbidden},
	{ErrOriginNotAllowed, kindOrigin},
	{ErrHostNotAllowed, kindHost},
	{auth.ErrThrottled, kindAuthThrottled},
	{ErrRateLimited, kindRateLimited},
	{broker.ErrNotImplemented, kindNotImplemented},
	{ErrTransferEncoding, kindNotImplemented},
	{broker.ErrShuttingDown, kindShuttingDown},
	{ErrNotReady, kindNotReady},
	{broker.ErrReadOnly, kindReadOnly},
	{broker.ErrFlushTimeout, kindFlushTimeout},
	{broker.ErrOutcomeUnknown, kindOutcomeUnknown},
	{broker.ErrNotLeader, kindNotLeader},
	{ErrHTTPVersion, kindHTTPVersion},
	{broker.ErrDiskFull, kindDiskFull},
	{broker.ErrQuotaExceeded, kindQuota},
	{ErrNotClustered, kindNotClustered},
	{ErrLearnerBehind, kindLearnerBehind},
	{ErrMembership, kindMembership},
	{ErrPushLoop, kindPushLoop},
	{context.Canceled, kindClientClosed},
	{context.DeadlineExceeded, kindTimeout},
}

// classify is the one function that maps an error to its HTTP status and
// stable problem code. Unknown errors are internal (500).
func classify(err error) problemKind {
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		return kindTooLarge
	}
	for _, s := range sentinelKinds {
		if errors.Is(err, s.err) {
			return s.kind
		}
	}
	return kindInternal
}

// WriteError renders err as an application/problem+json response with the
// status and code classify assigns. Causes of 5xx responses are logged with
// the request id; the body of a 500 carries a generic message only.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	kind := classify(err)
	p := newProblem(kind, err)
	p.Instance = r.URL.EscapedPath()
	if s := scopeOf(r); s != nil {
		p.RequestID = s.idHeader[0]
	}
	level, msg := zerolog.DebugLevel, "request rejected"
	switch {
	case kind == kindInternal:
		level, msg = zerolog.ErrorLevel, "request failed"
	case kind.status >= 500:
		level, msg = zerolog.WarnLevel, "request failed"
	}
	if ev := logEvent(r, level); ev != nil {
		ev.Err(err).Str("code", kind.code).Msg(msg)
	}
	if kind.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(kind.retryAfter))
	}
	var wait interface{ RetryAfter() time.Duration }
	if errors.As(err, &wait) {
		// An error that knows when to come back (auth.ThrottledError).
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.RetryAfter().Seconds())))))
	}
	if kind == kindTooLarge {
		// The rest of the body stays unread: do not reuse the connection.
		// The server reads and discards what the client still sends before
		// it closes (lingering close, server/conn.go), so that a client
		// which writes its whole body before reading sees this answer.
		w.Header().Set("Connection", "close")
	}
	writeProblem(w, p)
}

// ProblemOf returns the problem the one mapping assigns to err, without
// the request's path and id. The server renders it for the errors net/http
// answers itself before any handler runs (an oversized header block, an
// unparsable request line).
func ProblemOf(err error) Problem { return newProblem(classify(err), err) }

// newProblem builds the problem of kind for err; an internal error gets a
// generic detail (its cause goes to the log only).
func newProblem(kind problemKind, err error) Problem {
	p := Problem{
		Type:   problemTypePrefix + kind.code,
		Title:  kind.title,
		Status: kind.status,
		Code:   kind.code,
		Detail: callerDetail(err.Error()),
	}
	if kind == kindInternal {
		p.Detail = "internal error; the server log has the cause under this request id"
	}
	// A value over a limit names the field and the limit.
	var limit *broker.LimitError
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		p.Limit, p.LimitUnit = int(maxBytes.Limit), "bytes"
		p.Detail = callerDetail(fmt.Sprintf("%v: the limit is %d bytes", err, maxBytes.Limit))
	} else if quota := (*broker.QuotaError)(nil); errors.As(err, &quota) {
		p.Field, p.Limit, p.LimitUnit = quota.Quota, quota.Limit, quota.Unit
	} else if sqlErr := (*broker.SQLError)(nil); errors.As(err, &sqlErr) {
		p.Field, p.Position = sqlErr.Field, sqlErr.Position
	} else if fin := (*broker.TransactionFinishedError)(nil); errors.As(err, &fin) {
		p.State = fin.Transaction.State
	} else if rl := (*RateLimitError)(nil); errors.As(err, &rl) {
		p.Limit, p.LimitUnit = int(rl.Limit), rl.What+" per second"
	} else if errors.As(err, &limit) {
		p.Field, p.Limit, p.LimitUnit = limit.Field, limit.Limit, limit.Unit
		if p.LimitUnit == "" {
			p.LimitUnit = "bytes"
		}
	}
	return p
}

// layerPrefix matches the name of one of this module's packages, or of a
// standard library package that words its errors so ("json: …",
// "http: …"), as the prefix of an error's text or of a wrapped part of it.
var layerPrefix = regexp.MustCompile(`(^|: )(?:api|auth|broker|push|storage|commitlog|consumequeue|index|message|offset|schedule|filter|timerindex|pgmirror|server|json|strconv|http): `)

// callerDetail is an error's text as a problem's detail: it speaks to the
// caller about the request, so it never names an internal layer. The
// sentinels' texts carry no package prefix; this drops any that a
// wrapped error of a package or of the standard library still adds.
func callerDetail(s string) string {
	for {
		t := layerPrefix.ReplaceAllString(s, "$1")
		if t == s {
			return s
		}
		s = t
	}
}

// writeProblem writes p with its status and the problem media type.
func writeProblem(w http.ResponseWriter, p Problem) {
	h := w.Header()
	h.Set("Content-Type", problemMediaType)
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
