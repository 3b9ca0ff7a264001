package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

// TestErrorMapping checks the one error mapping for every broker sentinel,
// wrapped as the broker wraps them, and for the transport's own errors.
func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{broker.ErrInvalidName, 400, "invalid-name", ""},
		{broker.ErrReservedName, 400, "invalid-name", ""},
		{broker.ErrInvalidArgument, 400, "invalid-argument", ""},
		{broker.ErrEmptyBody, 400, "empty-body", ""},
		{broker.ErrOffsetOutOfRange, 400, "offset-out-of-range", ""},
		{broker.ErrClientIDRequired, 400, "client-id-required", ""},
		{broker.ErrTopicNotFound, 404, "topic-not-found", ""},
		{broker.ErrGroupNotFound, 404, "group-not-found", ""},
		{broker.ErrMessageNotFound, 404, "message-not-found", ""},
		{broker.ErrIdempotencyInFlight, 409, "idempotency-request-in-flight", "1"},
		{broker.ErrTooLarge, 413, "body-too-large", ""},
		{broker.ErrIdempotencyKeyReused, 422, "idempotency-key-reused", ""},
		{broker.ErrNotImplemented, 501, "not-implemented", ""},
		{broker.ErrShuttingDown, 503, "shutting-down", "5"},
		{broker.ErrReadOnly, 503, "storage-read-only", ""},
		{broker.ErrFlushTimeout, 503, "flush-timeout", "1"},
		{broker.ErrOutcomeUnknown, 503, "write-outcome-unknown", "1"},
		{broker.ErrNotLeader, 503, "no-leader", "1"},
		{api.ErrNotClustered, 409, "not-a-cluster", ""},
		{api.ErrMembership, 409, "membership-conflict", ""},
		{api.ErrLearnerBehind, 409, "learner-behind", "1"},
		{broker.ErrDiskFull, 507, "disk-full", "5"},
		{api.ErrMalformedRequest, 400, "malformed-request", ""},
		{api.ErrUnsupportedMediaType, 415, "unsupported-media-type", ""},
		{api.ErrTooManyWaiters, 429, "too-many-waiters", "1"},
		{api.ErrRouteNotFound, 404, "not-found", ""},
		{api.ErrMethodNotAllowed, 405, "method-not-allowed", ""},
		{api.ErrNotReady, 503, "not-ready", "1"},
		{api.ErrPushLoop, 508, "push-loop", ""},
		{api.ErrHeaderTooLarge, 431, "header-too-large", ""},
		{api.ErrExpectationFailed, 417, "expectation-failed", ""},
		{api.ErrHTTPVersion, 505, "http-version-not-supported", ""},
		{api.ErrTransferEncoding, 501, "not-implemented", ""},
		{api.ErrRangeNotSatisfiable, 416, "range-not-satisfiable", ""},
		{&http.MaxBytesError{Limit: 10}, 413, "body-too-large", ""},
		{context.DeadlineExceeded, 504, "timeout", "1"},
		{context.Canceled, 499, "request-canceled", ""},
	} {
		t.Run(tc.code+"/"+tc.err.Error(), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.broker.err = fmt.Errorf("list topics: %w", tc.err)
			rec := b.do(t, http.MethodGet, "/v1/topics", "")
			p := requireProblem(t, rec, tc.status, tc.code)
			require.Equal(t, tc.retryAfter, rec.Header().Get("Retry-After"))
			require.Equal(t, "/v1/topics", p.Instance)
			// the standard library's "http: " prefix is dropped
			require.Contains(t, p.Detail, strings.TrimPrefix(tc.err.Error(), "http: "), "4xx/5xx details of known errors explain the cause")
		})
	}

	t.Run("UnknownErrorIsGeneric500", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.err = errors.New("segment 00000000001073741824: secret internal path /var/lib/x")
		p := requireProblem(t, b.do(t, http.MethodGet, "/v1/topics", ""), http.StatusInternalServerError, "internal")
		require.NotContains(t, p.Detail, "secret")
	})
	t.Run("ProblemOf", func(t *testing.T) {
		t.Parallel()
		p := api.ProblemOf(fmt.Errorf("%w: over 64KiB", api.ErrHeaderTooLarge))
		require.Equal(t, api.Problem{Type: "urn:mqgate:problem:header-too-large", Title: "Request header fields too large",
			Status: 431, Detail: "request header fields too large: over 64KiB", Code: "header-too-large"}, p)
		p = api.ProblemOf(errors.New("secret cause"))
		require.Equal(t, 500, p.Status)
		require.NotContains(t, p.Detail, "secret")
	})
	t.Run("WriteErrorWithoutMiddleware", func(t *testing.T) {
		t.Parallel()
		rec := httptest.NewRecorder()
		api.WriteError(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil), fmt.Errorf("%w: closing", api.ErrNotReady))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		require.JSONEq(t, `{"type":"urn:mqgate:problem:not-ready","title":"Not ready","status":503,
			"detail":"not ready: closing","instance":"/readyz","code":"not-ready"}`, rec.Body.String())
	})
}

// TestProblemDetailNamesNoLayer: a detail speaks to the caller; a package
// prefix that a wrapped error still carries (a package of the server, or
// the standard library's "json: ", "http: ") is dropped wherever it sits.
func TestProblemDetailNamesNoLayer(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"storage: message not found":                          "message not found",
		"invalid argument: push url: push: forbidden address": "invalid argument: push url: forbidden address",
		"api: broker: auth: unauthenticated":                  "unauthenticated",
		"malformed request: json: unknown field":              "malformed request: unknown field",
		"topic not found: orders":                             "topic not found: orders",
		"properties: too many":                                "properties: too many",
	} {
		err := fmt.Errorf("%w: %s", broker.ErrInvalidArgument, in)
		require.Equal(t, "invalid argument: "+want, api.ProblemOf(err).Detail, in)
	}
	for _, sentinel := range []error{broker.ErrTopicNotFound, broker.ErrShuttingDown, broker.ErrReadOnly, broker.ErrFlushTimeout,
		broker.ErrIdempotencyInFlight, broker.ErrTransactionFinished, api.ErrMalformedRequest, api.ErrRateLimited} {
		require.NotRegexp(t, `^[a-z]+: `, api.ProblemOf(sentinel).Detail)
	}
}
