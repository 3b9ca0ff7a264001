package api_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestResponsesMatchSpec serves requests of every operation, successful
// and failing, and validates each response — status (listed for the
// operation, not only covered by its default), media type, headers and
// body schema — against the generated OpenAPI 3 spec in docs/, with the
// check every real-HTTP test's client applies (servertest.ValidateResponse).
// A handler change that the annotations do not follow fails here (after
// `make docs`).
func TestResponsesMatchSpec(t *testing.T) {
	t.Parallel()
	type call struct {
		method, path, contentType, body string
		brokerErr                       error
		header                          []string // name, value
	}
	propsTooLarge := &broker.LimitError{Field: "properties", Size: 20000, Limit: broker.MaxUserPropertiesBytes, Kind: broker.ErrPropertiesTooLarge}
	tagTooLong := &broker.LimitError{Field: "tag", Size: 300, Limit: broker.MaxTagBytes, Kind: broker.ErrValueTooLong}
	finished := &broker.TransactionFinishedError{Transaction: broker.Transaction{ID: "7F00000100001F9000000000000004D2", State: broker.TxnRolledBack}}
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
		{"GET", "/v1/topics/orders/status", "", "", nil, nil},
		{"GET", "/v1/topics/orders/status", "", "", broker.ErrTopicNotFound, nil},
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
		{"GET", "/v1/messages/7F00000100001F9000000000000004D2/trace", "", "", nil, nil},
		{"GET", "/v1/messages/7F00000100001F9000000000000004D2/trace", "", "", broker.ErrMessageNotFound, nil},
		{"GET", "/v1/messages/not-an-id/trace", "", "", nil, nil},
		{"GET", "/v1/broker/status", "", "", nil, nil},
		{"GET", "/v1/broker/status", "", "", broker.ErrShuttingDown, nil},
		{"POST", "/v1/broker/receipt-keys/rotate", "", "", nil, nil},
		{"POST", "/v1/broker/receipt-keys/rotate", "", "", broker.ErrDiskFull, nil},
		{"GET", "/v1/cluster", "", "", nil, nil},
		{"GET", "/v1/cluster", "", "", broker.ErrShuttingDown, nil},
		{"POST", "/v1/cluster/learners", "application/json", `{"id":4,"address":"127.0.0.1:7104"}`, nil, nil},
		{"POST", "/v1/cluster/learners", "application/json", `{"id":0,"address":"127.0.0.1:7104"}`, nil, nil},
		{"POST", "/v1/cluster/learners", "application/json", `{"id":4,"address":"nowhere"}`, nil, nil},
		{"POST", "/v1/cluster/members/4/promote", "", "", nil, nil},
		{"POST", "/v1/cluster/members/4/promote", "", "", broker.ErrNotLeader, nil},
		{"DELETE", "/v1/cluster/members/4", "", "", nil, nil},
		{"DELETE", "/v1/cluster/members/4", "", "", broker.ErrShuttingDown, nil},
		{"GET", "/v1/stats", "", "", nil, nil},
		{"GET", "/v1/stats", "", "", broker.ErrShuttingDown, nil},
		{"GET", "/v1/sqs/queues", "", "", nil, nil},
		{"GET", "/v1/sqs/queues?prefix=orders-", "", "", nil, nil},
		{"GET", "/v1/sqs/queues?prefix=%2F..", "", "", nil, nil},
		{"POST", "/v1/topics/orders/messages", "application/vnd.mqgate.batch", "\x00\x00\x00\x01\x00\x00\x00\x01x", nil, nil},
		{"POST", "/v1/topics/orders/messages", "application/json", `{"body":"x"}`, nil, []string{"Idempotency-Key", "k1"}},
		{"POST", "/v1/groups/g/ack", "application/json", `{"receipts":["r"]}`, nil, []string{"X-Mqgate-Client-Id", "has space"}},
		{"GET", "/v1/groups/g/dlq?originalTopic=orders&status=dead&limit=5", "", "", nil, nil},
		{"GET", "/v1/groups/g/dlq?status=gone", "", "", nil, nil},
		{"GET", "/v1/groups/g/dlq", "", "", broker.ErrGroupNotFound, nil},
		{"GET", "/v1/groups/g/dlq/7F00000100001F9000000000000009A4", "", "", nil, nil},
		{"GET", "/v1/groups/g/dlq/7F00000100001F9000000000000009A4", "", "", broker.ErrMessageNotFound, nil},
		{"DELETE", "/v1/groups/g/dlq/7F00000100001F9000000000000009A4", "", "", nil, nil},
		{"DELETE", "/v1/groups/g/dlq/7F00000100001F9000000000000009A4", "", "", broker.ErrDiskFull, nil},
		{"POST", "/v1/groups/g/dlq/resend", "application/json", `{"messageIds":["7F00000100001F9000000000000009A4"]}`, nil, nil},
		{"POST", "/v1/groups/g/dlq/resend", "application/json", `{}`, nil, nil},
		{"POST", "/v1/groups/g/dlq/resend", "text/plain", `x`, nil, nil},
		{"GET", "/v1/timers?topic=orders&limit=5", "", "", nil, nil},
		{"GET", "/v1/timers?limit=0", "", "", nil, nil},
		{"GET", "/v1/timers/7F00000100001F900000000000000A10", "", "", nil, nil},
		{"GET", "/v1/timers/7F00000100001F900000000000000A10", "", "", broker.ErrMessageNotFound, nil},
		{"DELETE", "/v1/timers/7F00000100001F900000000000000A10", "", "", nil, nil},
		{"DELETE", "/v1/timers/7F00000100001F900000000000000A10", "", "", broker.ErrReadOnly, nil},
		{"PUT", "/v1/timers/7F00000100001F900000000000000A10", "application/json", `{"delayMs":60000}`, nil, nil},
		{"PUT", "/v1/timers/7F00000100001F900000000000000A10", "application/json", `{}`, nil, nil},
		{"PUT", "/v1/topics/orders", "application/json", `{}`, &broker.QuotaError{Quota: "topics", Limit: 1, Unit: "topics"}, nil},
		{"POST", "/v1/groups/g/leases", "application/json", `{"items":[{"receipt":"r","invisibleMs":-1}]}`, nil, nil},
		{"PUT", "/v1/groups/g/offsets", "application/json", `{"offsets":[]}`, nil, nil},
		{"DELETE", "/v1/groups/g", "", "", nil, nil},
		{"DELETE", "/v1/topics/orders", "", "", broker.ErrReadOnly, nil},
		{"GET", "/v1/messages?topic=orders", "", "", nil, nil},
		{"GET", "/v1/groups/g", "", "", broker.ErrGroupNotFound, nil},
		{"GET", "/v1/groups/g/offsets", "", "", broker.ErrGroupNotFound, nil},
		{"GET", "/v1/groups/g/progress", "", "", broker.ErrGroupNotFound, nil},
		{"GET", "/v1/groups", "", "", broker.ErrShuttingDown, nil},
		{"GET", "/v1/topics", "", "", errors.New("disk on fire"), nil},
		{"POST", "/v1/groups/g/nack", "application/json", `{"items":[{"receipt":"r","delayLevel":-2}]}`, nil, nil},
		{"POST", "/v1/groups/g/reset-offset", "application/json", `{"timestamp":"yesterday"}`, nil, nil},
		{"POST", "/v1/transactions/7F00000100001F9000000000000004D2/commit", "", "", nil, nil},
		{"POST", "/v1/transactions/7F00000100001F9000000000000004D2/commit", "", "", finished, nil},
		{"POST", "/v1/transactions/not-an-id/commit", "", "", nil, nil},
		{"POST", "/v1/transactions/7F00000100001F9000000000000004D2/rollback", "", "", nil, nil},
		{"POST", "/v1/transactions/7F00000100001F9000000000000004D2/rollback", "", "", broker.ErrTransactionNotFound, nil},
		{"GET", "/v1/transactions/7F00000100001F9000000000000004D2", "", "", nil, nil},
		{"GET", "/v1/transactions/7F00000100001F9000000000000004D2", "", "", broker.ErrTransactionNotFound, nil},
		{"POST", "/v1/producer-groups/pg/transactions/pull", "application/json", `{"maxMessages":2,"waitMs":0}`, nil, nil},
		{"POST", "/v1/producer-groups/pg/transactions/pull", "application/json", `{"maxMessages":99}`, nil, nil},
		{"GET", "/v1/topics/orders/messages?from=2026-11-29T00:00:00Z&to=2026-11-30T00:00:00Z", "", "", nil, nil},
		{"GET", "/v1/topics/orders/messages?from=2026-11-29T00:00:00Z", "", "", nil, nil},
		{"GET", "/v1/topics/orders/messages?from=2026-11-29T00:00:00Z&to=2026-11-30T00:00:00Z", "", "", broker.ErrTopicNotFound, nil},
		{"POST", "/v1/groups/g/skip-backlog", "application/json", `{"topic":"orders"}`, nil, nil},
		{"POST", "/v1/groups/g/skip-backlog", "", "", nil, nil},
		{"POST", "/v1/groups/g/skip-backlog", "application/json", `{"topic":"a b"}`, nil, nil},
		{"POST", "/v1/groups/g/skip-backlog", "application/json", `{}`, broker.ErrGroupNotFound, nil},
		{"GET", "/v1/stats/stream?intervalMs=500", "", "", nil, nil}, // ends with the request's context (below)
		{"GET", "/v1/stats/stream?intervalMs=1", "", "", nil, nil},
		{"GET", "/v1/stats/stream", "", "", broker.ErrShuttingDown, nil},
	}
	succeeded, failed := map[string]bool{}, map[string]bool{}
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
		if strings.HasPrefix(c.path, "/v1/stats/stream") {
			// A stream lasts until the client goes: here, after its first event.
			ctx, cancel := context.WithTimeout(req.Context(), 300*time.Millisecond)
			defer cancel()
			req = req.WithContext(ctx)
		}
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)

		require.NoError(t, servertest.ValidateResponse(c.method, c.path, rec.Code, rec.Header(), rec.Body.Bytes()),
			"%s %s -> %d %s", c.method, c.path, rec.Code, rec.Body.String())
		id := servertest.OperationID(c.method, c.path)
		require.NotEmpty(t, id, "%s %s is not in the spec", c.method, c.path)
		if rec.Code >= 400 {
			failed[id] = true
		} else {
			succeeded[id] = true
		}
		if c.brokerErr != nil || rec.Code >= 400 {
			require.GreaterOrEqual(t, rec.Code, 400, "%s %s", c.method, c.path)
		} else {
			require.Less(t, rec.Code, 300, "%s %s: %s", c.method, c.path, rec.Body.String())
		}
	}
	var missing []string
	for _, id := range servertest.OperationIDs() {
		if !succeeded[id] {
			missing = append(missing, id+" (a success)")
		}
		if !failed[id] {
			missing = append(missing, id+" (an error)")
		}
	}
	require.Empty(t, missing, "operations no call above answers")
}
