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

// TestResponsesMatchSpec (part of T24) serves one request per operation,
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
	}
	calls := []call{
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x","tag":"t"}`, nil},
		{"POST", "/v1/topics/orders/messages", "application/octet-stream", "raw", nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":""}`, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrTopicNotFound},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrIdempotencyKeyReused},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrFlushTimeout},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, broker.ErrDiskFull},
		{"POST", "/v1/groups/g/topics/orders/pull", "application/json", `{"waitMs":0}`, nil},
		{"POST", "/v1/groups/g/topics/orders/pull", "text/plain", `x`, nil},
		{"POST", "/v1/groups/g/topics/orders/pull", "application/json", `{"waitMs":31000}`, nil},
		{"POST", "/v1/groups/g/ack", "application/json", `{"receipts":["r","old"]}`, nil},
		{"POST", "/v1/groups/g/nack", "application/json", `{"items":[{"receipt":"r"}]}`, nil},
		{"POST", "/v1/groups/g/leases", "application/json", `{"items":[{"receipt":"r","invisibleMs":5}]}`, nil},
		{"POST", "/v1/groups/g/ack", "application/json", `{"receipts":["r"]}`, broker.ErrGroupNotFound},
		{"GET", "/v1/topics", "", "", nil},
		{"GET", "/v1/topics/orders", "", "", nil},
		{"GET", "/v1/topics/orders", "", "", broker.ErrTopicNotFound},
		{"PUT", "/v1/topics/orders", "application/json", `{"queues":2}`, nil},
		{"PUT", "/v1/topics/orders", "application/json", `{"queues":-2}`, nil},
		{"DELETE", "/v1/topics/orders", "", "", nil},
		{"GET", "/v1/topics/orders/queues/1/messages?offset=3&max=2", "", "", nil},
		{"GET", "/v1/topics/orders/queues/1/messages", "", "", broker.ErrOffsetOutOfRange},
		{"GET", "/v1/groups", "", "", nil},
		{"GET", "/v1/groups/g", "", "", nil},
		{"PUT", "/v1/groups/g", "application/json", `{"subscriptions":[{"topic":"orders"}]}`, nil},
		{"PUT", "/v1/groups/g", "application/json", `{"push":{}}`, nil},
		{"DELETE", "/v1/groups/g", "", "", broker.ErrGroupNotFound},
		{"GET", "/v1/groups/g/offsets", "", "", nil},
		{"PUT", "/v1/groups/g/offsets", "application/json", `{"offsets":[{"topic":"orders","queueId":0,"offset":4}]}`, nil},
		{"GET", "/v1/groups/g/progress", "", "", nil},
		{"POST", "/v1/groups/g/reset-offset", "application/json", `{"timestamp":"2026-11-29T00:00:00Z"}`, nil},
		{"GET", "/v1/messages/7F00000100001F9000000000000004D2", "", "", nil},
		{"GET", "/v1/messages/7F00000100001F9000000000000004D2", "", "", broker.ErrMessageNotFound},
		{"GET", "/v1/messages?topic=orders&key=k", "", "", nil},
		{"GET", "/v1/broker/status", "", "", nil},
		{"GET", "/v1/broker/status", "", "", broker.ErrShuttingDown},
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
