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

func sampleTimer() broker.Timer {
	return broker.Timer{ID: "7F00000100001F900000000000000A10", Topic: "orders", QueueID: 1,
		DeliverAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), ScheduledAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Body: []byte("later")}
}

func (f *fakeBroker) ListTimers(ctx context.Context, topic, cursor string, limit int) ([]broker.Timer, string, error) {
	if err := f.check(); err != nil {
		return nil, "", err
	}
	f.record(topic, cursor, limit)
	return []broker.Timer{sampleTimer()}, "", nil
}

func (f *fakeBroker) GetTimer(ctx context.Context, id string) (broker.Timer, error) {
	if err := f.check(); err != nil {
		return broker.Timer{}, err
	}
	f.record(id)
	return sampleTimer(), nil
}

func (f *fakeBroker) CancelTimer(ctx context.Context, id string) error {
	if err := f.check(); err != nil {
		return err
	}
	f.record(id)
	return nil
}

func (f *fakeBroker) RescheduleTimer(ctx context.Context, id string, at time.Time) (broker.Timer, error) {
	if err := f.check(); err != nil {
		return broker.Timer{}, err
	}
	f.record(id, at)
	t := sampleTimer()
	t.DeliverAt = at
	return t, nil
}

func TestTimerRoutes(t *testing.T) {
	b := setup(t)
	rec := b.do(t, http.MethodGet, "/v1/timers?topic=orders&limit=5", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var list api.TimerList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list.Items, 1)
	require.Empty(t, list.Items[0].Body)
	require.Equal(t, []any{"orders", "", 5}, b.broker.args)

	rec = b.do(t, http.MethodGet, "/v1/timers/7F00000100001F900000000000000A10", "")
	require.Equal(t, http.StatusOK, rec.Code)
	var one api.Timer
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &one))
	require.Equal(t, "later", one.Body)

	rec = b.doJSON(t, http.MethodPut, "/v1/timers/X", `{"deliverAt":"2026-12-02T00:00:00Z"}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, 2, b.broker.args[1].(time.Time).Day())
	rec = b.doJSON(t, http.MethodPut, "/v1/timers/X", `{"delayMs":60000}`)
	require.Equal(t, http.StatusOK, rec.Code)
	requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/timers/X", `{}`), http.StatusBadRequest, "invalid-argument")
	requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/timers/X", `{"deliverAt":"soon"}`), http.StatusBadRequest, "invalid-argument")
	requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/timers/X", `{"deliverAt":"2026-12-02T00:00:00Z","delayMs":5}`), http.StatusBadRequest, "invalid-argument")

	require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/timers/X", "").Code)
	b.broker.err = broker.ErrMessageNotFound
	requireProblem(t, b.do(t, http.MethodDelete, "/v1/timers/X", ""), http.StatusNotFound, "message-not-found")
}
