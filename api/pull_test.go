package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

const pullPath = "/v1/groups/billing/topics/orders/pull"

func TestPull(t *testing.T) {
	t.Parallel()

	t.Run("OKDefaultsWithoutBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := decode[api.PullResponse](t, b.do(t, http.MethodPost, pullPath, ""), http.StatusOK)
		require.NotNil(t, resp.Messages)
		require.Empty(t, resp.Messages)
		require.Equal(t, []broker.PullRequest{{Group: "billing", Topic: "orders", MaxMessages: api.DefaultPullMessages}}, b.broker.pulls)
	})
	t.Run("OKEmptyListIsAnArray", func(t *testing.T) {
		t.Parallel()
		rec := setup(t).doJSON(t, http.MethodPost, pullPath, `{}`)
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"messages":[]}`, rec.Body.String())
	})
	t.Run("OKFieldsMapped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.PullResponse](t, b.doJSON(t, http.MethodPost, pullPath,
			`{"maxMessages":32,"waitMs":0,"invisibleMs":45000,"tagExpression":"a || b","sql":"x > 1"}`), http.StatusOK)
		require.Equal(t, broker.PullRequest{Group: "billing", Topic: "orders", MaxMessages: 32, Invisible: 45 * time.Second, TagExpression: "a || b", SQL: "x > 1"}, b.broker.pulls[0])
	})
	t.Run("OKMessageShape", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.pull = func(context.Context, broker.PullRequest) ([]broker.ReceivedMessage, error) {
			return []broker.ReceivedMessage{sampleMessage("r1", []byte("text ✓")), sampleMessage("r2", []byte{0xff, 0x00})}, nil
		}
		rec := b.doJSON(t, http.MethodPost, pullPath, `{"maxMessages":2}`)
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"messages":[
			{"messageId":"7F00000100001F9000000000000004D2","receipt":"r1","leaseUntil":"2026-11-29T10:00:30.007Z","topic":"orders","queueId":1,"queueOffset":42,
			 "reconsumeTimes":2,"originMessageId":"7F00000100001F900000000000000001","tag":"created","keys":["k1"],
			 "properties":{"p":"v"},"body":"text ✓","bodyEncoding":"utf8",
			 "bornAt":"2026-11-29T10:00:00.000Z","storedAt":"2026-11-29T10:00:00.005Z"},
			{"messageId":"7F00000100001F9000000000000004D2","receipt":"r2","leaseUntil":"2026-11-29T10:00:30.007Z","topic":"orders","queueId":1,"queueOffset":42,
			 "reconsumeTimes":2,"originMessageId":"7F00000100001F900000000000000001","tag":"created","keys":["k1"],
			 "properties":{"p":"v"},"body":"/wA=","bodyEncoding":"base64",
			 "bornAt":"2026-11-29T10:00:00.000Z","storedAt":"2026-11-29T10:00:00.005Z"}]}`, rec.Body.String())
	})
	t.Run("WaitBounds", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			body string
			code string // "" = accepted
		}{
			{`{"waitMs":0}`, ""},
			{`{"waitMs":30000}`, ""},
			{`{"waitMs":30001}`, "invalid-argument"},
			{`{"waitMs":31000}`, "invalid-argument"},
			{`{"waitMs":-1}`, "invalid-argument"},
			{`{"maxMessages":33}`, "invalid-argument"},
			{`{"maxMessages":-1}`, "invalid-argument"},
			{`{"invisibleMs":-5}`, "invalid-argument"},
			{`{"invisibleMs":43200001}`, "invalid-argument"},
			{`{"waitMs":1e20}`, "malformed-request"},
			{`{"waitMs":"5"}`, "malformed-request"},
		} {
			b := setup(t)
			// The fake answers at once, so an accepted 30 s wait costs nothing.
			rec := b.doJSON(t, http.MethodPost, pullPath, tc.body)
			if tc.code == "" {
				require.Equal(t, http.StatusOK, rec.Code, tc.body)
				continue
			}
			requireProblem(t, rec, http.StatusBadRequest, tc.code)
			require.Empty(t, b.broker.pulls, tc.body)
		}
	})
	t.Run("WaitPassedToBroker", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.PullResponse](t, b.doJSON(t, http.MethodPost, pullPath, `{"waitMs":30000}`), http.StatusOK)
		require.Equal(t, 30*time.Second, b.broker.pulls[0].Wait)
	})
	t.Run("UnsupportedMediaType", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireProblem(t, b.do(t, http.MethodPost, pullPath, `waitMs=5`, "Content-Type", "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType, "unsupported-media-type")
		requireProblem(t, b.do(t, http.MethodPost, pullPath, `{}`), http.StatusUnsupportedMediaType, "unsupported-media-type")
		requireProblem(t, b.do(t, http.MethodPost, pullPath, `{}`, "Content-Type", "application/json; charset"), http.StatusUnsupportedMediaType, "unsupported-media-type")
		decode[api.PullResponse](t, b.do(t, http.MethodPost, pullPath, `{}`, "Content-Type", "application/json; charset=utf-8"), http.StatusOK)
	})
	t.Run("BodyOverLimit", func(t *testing.T) {
		t.Parallel()
		body := `{"tagExpression":"` + strings.Repeat("a", 1<<20) + `"}`
		requireProblem(t, setup(t).doJSON(t, http.MethodPost, pullPath, body), http.StatusRequestEntityTooLarge, "body-too-large")
	})
	t.Run("ShutdownEndsWaitWithEmptyAnswer", func(t *testing.T) {
		t.Parallel()
		pollCtx, stopPolls := context.WithCancel(context.Background())
		defer stopPolls()
		b := setup(t, func(d *api.Deps) { d.PollContext = pollCtx })
		waiting := make(chan struct{})
		b.broker.pull = func(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error) {
			close(waiting)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- b.doJSON(t, http.MethodPost, pullPath, `{"waitMs":30000}`) }()
		<-waiting
		stopPolls()
		select {
		case rec := <-done:
			require.Equal(t, http.StatusOK, rec.Code)
			require.JSONEq(t, `{"messages":[]}`, rec.Body.String())
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting pull did not end at shutdown")
		}
	})
	t.Run("ClientGoneIsNotAnEmptyAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.pull = func(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, pullPath, strings.NewReader(`{"waitMs":1000}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		requireProblem(t, rec, 499, "request-canceled")
	})
	t.Run("TooManyWaiters", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(d *api.Deps) { d.MaxWaiters = 1 })
		waiting, release := make(chan struct{}), make(chan struct{})
		b.broker.pull = func(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error) {
			if req.Wait == 0 {
				return nil, nil
			}
			close(waiting)
			<-release
			return nil, nil
		}
		done := make(chan int)
		go func() { done <- b.doJSON(t, http.MethodPost, pullPath, `{"waitMs":20000}`).Code }()
		<-waiting
		rec := b.doJSON(t, http.MethodPost, pullPath, `{"waitMs":100}`)
		requireProblem(t, rec, http.StatusTooManyRequests, "too-many-waiters")
		require.Equal(t, "1", rec.Header().Get("Retry-After"))
		// A pull that does not wait needs no slot.
		decode[api.PullResponse](t, b.doJSON(t, http.MethodPost, pullPath, `{"waitMs":0}`), http.StatusOK)
		close(release)
		require.Equal(t, http.StatusOK, <-done)
		// The slot is free again.
		b.broker.pull = nil
		decode[api.PullResponse](t, b.doJSON(t, http.MethodPost, pullPath, `{"waitMs":100}`), http.StatusOK)
	})
	t.Run("InvalidGroupName", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, setup(t).doJSON(t, http.MethodPost, "/v1/groups/a|b/topics/orders/pull", `{}`), http.StatusBadRequest, "invalid-name")
	})
}
