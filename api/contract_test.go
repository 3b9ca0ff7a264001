package api_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/docs"
	"github.com/mqgate/mqgate/server/broker"
)

// TestResponsesMatchSpec serves one request per operation,
// successful and failing, and validates each response — status, media type
// and body schema — against the generated OpenAPI 3 spec in docs/. A
// handler change that the annotations do not follow fails here (after
// `make docs`).
func TestResponsesMatchSpec(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	doc.Servers = openapi3.Servers{{URL: "http://mqgate.test/v1"}}
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)

	type call struct {
		method, path, contentType, body string
		brokerErr                       error
		header                          []string // name, value
	}
	propsTooLarge := &broker.LimitError{Field: "properties", Size: 20000, Limit: broker.MaxUserPropertiesBytes, Kind: broker.ErrPropertiesTooLarge}
	tagTooLong := &broker.LimitError{Field: "tag", Size: 300, Limit: broker.MaxTagBytes, Kind: broker.ErrValueTooLong}
	badSQL := &broker.SQLError{Field: "subscriptions[0].sql", Position: 4, Msg: "expected a value"}
	calls := []call{
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x","tag":"t"}`, nil, nil},
		{"POST", "/v1/topics/orders/messages", "application/octet-stream", "raw", nil, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":""}`, nil, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrTopicNotFound, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrIdempotencyKeyReused, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrFlushTimeout, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrDiskFull, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, propsTooLarge, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, tagTooLong, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x","body":"y"}`, nil, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, nil, []string{"X-Mqgate-Push-Hop", "1"}},
		{"POST", "/v1/groups/g/topics/orders/pull", "application/json", `{"waitMs":0}`, nil, nil},
		{"POST", "/v1/groups/g/topics/orders/pull", "text/plain", `x`, nil, nil},
		{"POST", "/v1/groups/g/topics/orders/pull", "application/json", `{"waitMs":31000}`, nil, nil},
		{"POST", "/v1/groups/g/ack", "application/json", `{"receipts":["r","old"]}`, nil, nil},
		{"POST", "/v1/groups/g/nack", "application/json", `{"items":[{"receipt":"r"}]}`, nil, nil},
		{"POST", "/v1/groups/g/leases", "application/json", `{"items":[{"receipt":"r","invisibleMs":5}]}`, nil, nil},
		{"POST", "/v1/groups/g/ack", "application/json", `{"receipts":["r"]}`, broker.ErrGroupNotFound, nil},
		{"GET", "/v1/topics", "", "", nil, nil},
		{"GET", "/v1/topics/orders", "", "", nil, nil},
		{"GET", "/v1/topics/orders", "", "", broker.ErrTopicNotFound, nil},
		{"PUT", "/v1/topics/orders", "application/json", `{"queues":2}`, nil, nil},
		{"PUT", "/v1/topics/orders", "application/json", `{"queues":-2}`, nil, nil},
		{"DELETE", "/v1/topics/orders", "", "", nil, nil},
		{"PATCH", "/v1/topics/orders", "application/merge-patch+json", `{"perm":"r"}`, nil, nil},
		{"PATCH", "/v1/topics/orders", "application/merge-patch+json", `{"queues":"x"}`, nil, nil},
		{"PATCH", "/v1/topics/orders", "application/merge-patch+json", `{"perm":"r"}`, broker.ErrTopicNotFound, nil},
		{"GET", "/v1/topics/orders/queues/1/messages?offset=3&max=2", "", "", nil, nil},
		{"GET", "/v1/topics/orders/queues/1/messages", "", "", broker.ErrOffsetOutOfRange, nil},
		{"GET", "/v1/groups", "", "", nil, nil},
		{"GET", "/v1/groups/g", "", "", nil, nil},
		{"PUT", "/v1/groups/g", "application/json", `{"subscriptions":[{"topic":"orders"}]}`, nil, nil},
		{"PUT", "/v1/groups/g", "application/json", `{"push":{}}`, nil, nil},
		{"PUT", "/v1/groups/g", "application/json", `{"subscriptions":[{"topic":"orders","sql":"a = 1"}]}`, nil, nil},
		{"PUT", "/v1/groups/g", "application/json", `{"subscriptions":[{"topic":"orders","sql":"a >"}]}`, badSQL, nil},
		{"POST", "/v1/groups/g/topics/orders/pull", "application/json", `{"sql":"a >"}`, &broker.SQLError{Field: "sql", Position: 4, Msg: "expected a value"}, nil},
		{"DELETE", "/v1/groups/g", "", "", broker.ErrGroupNotFound, nil},
		{"PATCH", "/v1/groups/g", "application/merge-patch+json", `{"retryMaxTimes":3}`, nil, nil},
		{"PATCH", "/v1/groups/g", "application/merge-patch+json", `{"retryMaxTimes":3}`, broker.ErrGroupNotFound, nil},
		{"GET", "/v1/groups/g/offsets", "", "", nil, nil},
		{"PUT", "/v1/groups/g/offsets", "application/json", `{"offsets":[{"topic":"orders","queueId":0,"offset":4}]}`, nil, nil},
		{"GET", "/v1/groups/g/progress", "", "", nil, nil},
		{"POST", "/v1/groups/g/reset-offset", "application/json", `{"timestamp":"2026-11-29T00:00:00Z"}`, nil, nil},
		{"GET", "/v1/messages/7F00000100001F9000000000000004D2", "", "", nil, nil},
		{"GET", "/v1/messages/7F00000100001F9000000000000004D2", "", "", broker.ErrMessageNotFound, nil},
		{"GET", "/v1/messages?topic=orders&key=k", "", "", nil, nil},
		{"GET", "/v1/broker/status", "", "", nil, nil},
		{"GET", "/v1/broker/status", "", "", broker.ErrShuttingDown, nil},
	}
	for _, c := range calls {
		b := setup(t)
		b.broker.err = c.brokerErr
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req := httptest.NewRequest(c.method, c.path, body)
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		if len(c.header) == 2 {
			req.Header.Set(c.header[0], c.header[1])
		}
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)

		specReq := httptest.NewRequest(c.method, "http://mqgate.test"+c.path, nil)
		route, pathParams, err := router.FindRoute(specReq)
		require.NoError(t, err, "%s %s is not in the spec", c.method, c.path)
		input := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request: specReq, PathParams: pathParams, Route: route,
				Options: &openapi3filter.Options{IncludeResponseStatus: true},
			},
			Status:  rec.Code,
			Header:  rec.Header(),
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		input.SetBodyBytes(rec.Body.Bytes())
		require.NoError(t, openapi3filter.ValidateResponse(context.Background(), input),
			"%s %s -> %d %s", c.method, c.path, rec.Code, rec.Body.String())
		if c.brokerErr != nil || rec.Code >= 400 {
			require.GreaterOrEqual(t, rec.Code, 400, "%s %s", c.method, c.path)
		} else {
			require.Less(t, rec.Code, 300, "%s %s: %s", c.method, c.path, rec.Body.String())
		}
	}
}
