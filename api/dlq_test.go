package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

func sampleDeadLetter() broker.DeadLetter {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return broker.DeadLetter{
		MessageID: "7F00000100001F9000000000000009A4", OriginMessageID: "7F00000100001F9000000000000004D2",
		OriginalTopic: "orders", ReconsumeTimes: 17, Reason: "boom", FirstFailedAt: at, DeadAt: at.Add(time.Minute),
		Status: broker.DLQDead, Attempts: []broker.Attempt{{At: at, Outcome: "nack", Reason: "boom"}}, Body: []byte("payload"),
	}
}

func (f *fakeBroker) ListDeadLetters(ctx context.Context, group string, filter broker.DLQFilter, cursor string, limit int) ([]broker.DeadLetter, string, error) {
	if err := f.check(); err != nil {
		return nil, "", err
	}
	f.record(group, filter, cursor, limit)
	return []broker.DeadLetter{sampleDeadLetter()}, "7", nil
}

func (f *fakeBroker) GetDeadLetter(ctx context.Context, group, id string) (broker.DeadLetter, error) {
	if err := f.check(); err != nil {
		return broker.DeadLetter{}, err
	}
	f.record(group, id)
	return sampleDeadLetter(), nil
}

func (f *fakeBroker) ResendDeadLetters(ctx context.Context, group string, ids []string, filter *broker.DLQFilter) (broker.ResendResult, error) {
	if err := f.check(); err != nil {
		return broker.ResendResult{}, err
	}
	f.record(group, ids, filter)
	return broker.ResendResult{Resent: ids}, nil
}

func (f *fakeBroker) DiscardDeadLetter(ctx context.Context, group, id string) error {
	if err := f.check(); err != nil {
		return err
	}
	f.record(group, id)
	return nil
}

func TestDLQRoutes(t *testing.T) {
	b := setup(t)
	rec := b.do(t, http.MethodGet, "/v1/groups/g/dlq?originalTopic=orders&from=2026-11-29T00:00:00Z&reasonContains=boo&status=dead&limit=5&cursor=3", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var list api.DeadLetterList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list.Items, 1)
	require.Equal(t, "7", list.Next)
	require.Equal(t, "orders", list.Items[0].OriginalTopic)
	require.Len(t, list.Items[0].Attempts, 1)
	require.Empty(t, list.Items[0].Body, "the list carries no bodies")
	f := b.broker.args[1].(broker.DLQFilter)
	require.Equal(t, "orders", f.OriginalTopic)
	require.Equal(t, "boo", f.ReasonContains)
	require.Equal(t, broker.DLQDead, f.Status)
	require.Equal(t, 2026, f.From.Year())
	require.Equal(t, "3", b.broker.args[2])
	require.Equal(t, 5, b.broker.args[3])

	requireProblem(t, b.do(t, http.MethodGet, "/v1/groups/g/dlq?from=yesterday", ""), http.StatusBadRequest, "invalid-argument")
	requireProblem(t, b.do(t, http.MethodGet, "/v1/groups/g/dlq?status=zombie", ""), http.StatusBadRequest, "invalid-argument")
	requireProblem(t, b.do(t, http.MethodGet, "/v1/groups/g/dlq?limit=501", ""), http.StatusBadRequest, "invalid-argument")

	rec = b.do(t, http.MethodGet, "/v1/groups/g/dlq/7F00000100001F9000000000000009A4", "")
	require.Equal(t, http.StatusOK, rec.Code)
	var one api.DeadLetter
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &one))
	require.Equal(t, "payload", one.Body)
	require.Equal(t, "utf8", one.BodyEncoding)

	rec = b.doJSON(t, http.MethodPost, "/v1/groups/g/dlq/resend", `{"messageIds":["A","B"]}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"resent":["A","B"],"skipped":[]}`, rec.Body.String())
	rec = b.doJSON(t, http.MethodPost, "/v1/groups/g/dlq/resend", `{"filter":{"originalTopic":"orders","to":"2026-12-01T00:00:00Z"}}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "orders", b.broker.args[2].(*broker.DLQFilter).OriginalTopic)
	requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/g/dlq/resend", `{}`), http.StatusBadRequest, "invalid-argument")
	requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/g/dlq/resend", `{"messageIds":["A"],"filter":{}}`), http.StatusBadRequest, "invalid-argument")
	requireProblem(t, b.do(t, http.MethodPost, "/v1/groups/g/dlq/resend", `{"messageIds":["A"]}`, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, "unsupported-media-type")

	rec = b.do(t, http.MethodDelete, "/v1/groups/g/dlq/7F00000100001F9000000000000009A4", "")
	require.Equal(t, http.StatusNoContent, rec.Code)
	b.broker.err = broker.ErrMessageNotFound
	requireProblem(t, b.do(t, http.MethodDelete, "/v1/groups/g/dlq/nope", ""), http.StatusNotFound, "message-not-found")
}
