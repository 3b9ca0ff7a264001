package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

// fakeBroker is an api.Broker that records what it is asked and answers
// with canned values, or with err when it is set.
type fakeBroker struct {
	mu sync.Mutex
	// err, when set, is returned by every method.
	err error
	// pull, when set, replaces the canned Pull.
	pull func(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error)
	// panicWith, when set, makes every method panic with it.
	panicWith any
	// duplicate marks every send result as a dedup replay.
	duplicate bool
	// created is what PutTopic and PutGroup report.
	created bool
	// groupPush is the push endpoint GetGroup reports.
	groupPush *broker.PushConfig

	topic    string
	sent     []broker.SendMessage
	pulls    []broker.PullRequest
	receipts []string
	nacks    []broker.NackItem
	leases   []broker.LeaseItem
	commits  []broker.OffsetCommit
	group    string
	args     []any
}

func (f *fakeBroker) check() error {
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.err
}

func (f *fakeBroker) record(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.args = args
}

func (f *fakeBroker) Send(ctx context.Context, topic string, msgs []broker.SendMessage) ([]broker.SendResult, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topic, f.sent = topic, msgs
	out := make([]broker.SendResult, len(msgs))
	for i := range msgs {
		out[i] = broker.SendResult{MessageID: strings.Repeat("A", 31) + string(rune('0'+i%10)), QueueID: int32(i % 4), QueueOffset: int64(100 + i), Duplicate: f.duplicate}
	}
	return out, nil
}

func (f *fakeBroker) Pull(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.pulls = append(f.pulls, req)
	pull := f.pull
	f.mu.Unlock()
	if pull != nil {
		return pull(ctx, req)
	}
	return nil, nil
}

func (f *fakeBroker) settle(group string, receipts []string) ([]broker.ReceiptResult, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.group, f.receipts = group, receipts
	out := make([]broker.ReceiptResult, len(receipts))
	for i, r := range receipts {
		out[i] = broker.ReceiptResult{Receipt: r, Status: broker.ReceiptOK}
		if strings.HasPrefix(r, "old") {
			out[i] = broker.ReceiptResult{Receipt: r, Status: broker.ReceiptExpired, Error: "lease expired"}
		}
	}
	return out, nil
}

func (f *fakeBroker) Ack(ctx context.Context, group string, receipts []string) ([]broker.ReceiptResult, error) {
	return f.settle(group, receipts)
}

func (f *fakeBroker) Nack(ctx context.Context, group string, items []broker.NackItem) ([]broker.ReceiptResult, error) {
	f.mu.Lock()
	f.nacks = items
	f.mu.Unlock()
	receipts := make([]string, len(items))
	for i, it := range items {
		receipts[i] = it.Receipt
	}
	return f.settle(group, receipts)
}

func (f *fakeBroker) ChangeLease(ctx context.Context, group string, items []broker.LeaseItem) ([]broker.ReceiptResult, error) {
	f.mu.Lock()
	f.leases = items
	f.mu.Unlock()
	receipts := make([]string, len(items))
	for i, it := range items {
		receipts[i] = it.Receipt
	}
	out, err := f.settle(group, receipts)
	for i := range out {
		if out[i].Status == broker.ReceiptOK {
			out[i].NewReceipt = "new-" + out[i].Receipt
		}
	}
	return out, err
}

func (f *fakeBroker) ReadQueue(ctx context.Context, topic string, queueID int32, offset int64, max int) ([]broker.QueueMessage, int64, error) {
	if err := f.check(); err != nil {
		return nil, 0, err
	}
	f.record(topic, queueID, offset, max)
	return []broker.QueueMessage{sampleMessage("", []byte("q"))}, offset + 1, nil
}

func (f *fakeBroker) ReadQueueFor(ctx context.Context, group, topic string, queueID int32, offset int64, limit int) ([]broker.QueueMessage, int64, error) {
	if err := f.check(); err != nil {
		return nil, 0, err
	}
	f.record(group, broker.ClientOf(ctx), topic, queueID, offset, limit)
	return []broker.QueueMessage{sampleMessage("", []byte("q"))}, max(offset, 0) + 1, nil
}

func (f *fakeBroker) Instances(ctx context.Context, group string) ([]broker.InstanceProgress, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return nil, nil
}

func (f *fakeBroker) PutTopic(ctx context.Context, cfg broker.TopicConfig) (broker.TopicConfig, bool, error) {
	if err := f.check(); err != nil {
		return broker.TopicConfig{}, false, err
	}
	f.record(cfg)
	if cfg.Queues == 0 {
		cfg.Queues = 4
	}
	cfg.CreatedAt = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return cfg, f.created, nil
}

func (f *fakeBroker) PatchTopic(ctx context.Context, name string, patch func(broker.TopicConfig) (broker.TopicConfig, error)) (broker.TopicConfig, error) {
	cur, err := f.GetTopic(ctx, name)
	if err != nil {
		return cur, err
	}
	next, err := patch(cur)
	if err != nil {
		return cur, err
	}
	f.record(next)
	return next, nil
}

func (f *fakeBroker) GetTopic(ctx context.Context, name string) (broker.TopicConfig, error) {
	if err := f.check(); err != nil {
		return broker.TopicConfig{}, err
	}
	f.record(name)
	return broker.TopicConfig{Name: name, Queues: 4, Perm: "rw"}, nil
}

func (f *fakeBroker) TopicStatus(ctx context.Context, name string) ([]broker.QueueStatus, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.record(name)
	return []broker.QueueStatus{{QueueID: 0, MinOffset: 2, MaxOffset: 5, LastStoredAt: time.UnixMilli(1_764_000_000_000)}, {QueueID: 1}}, nil
}

func (f *fakeBroker) ListTopics(ctx context.Context) ([]broker.TopicConfig, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return []broker.TopicConfig{{Name: "orders", Queues: 4, Perm: "rw", RetentionHours: 72}}, nil
}

func (f *fakeBroker) DeleteTopic(ctx context.Context, name string) error {
	f.record(name)
	return f.check()
}

func (f *fakeBroker) PutGroup(ctx context.Context, cfg broker.GroupConfig) (broker.GroupConfig, bool, error) {
	if err := f.check(); err != nil {
		return broker.GroupConfig{}, false, err
	}
	f.record(cfg)
	return cfg, f.created, nil
}

func (f *fakeBroker) PatchGroup(ctx context.Context, name string, patch func(broker.GroupConfig) (broker.GroupConfig, error)) (broker.GroupConfig, error) {
	cur, err := f.GetGroup(ctx, name)
	if err != nil {
		return cur, err
	}
	next, err := patch(cur)
	if err != nil {
		return cur, err
	}
	f.record(next)
	return next, nil
}

func (f *fakeBroker) GetGroup(ctx context.Context, name string) (broker.GroupConfig, error) {
	if err := f.check(); err != nil {
		return broker.GroupConfig{}, err
	}
	f.record(name)
	return broker.GroupConfig{Name: name, ConsumeMode: "clustering", RetryMaxTimes: 16, Invisible: 30 * time.Second,
		Subscriptions: []broker.Subscription{{Topic: "orders", TagExpression: "*"}}, Push: f.groupPush}, nil
}

func (f *fakeBroker) ListGroups(ctx context.Context) ([]broker.GroupConfig, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return []broker.GroupConfig{{Name: "billing", ConsumeMode: "clustering"}}, nil
}

func (f *fakeBroker) DeleteGroup(ctx context.Context, name string) error {
	f.record(name)
	return f.check()
}

func (f *fakeBroker) progressRows() []broker.QueueProgress {
	return []broker.QueueProgress{
		{Topic: "orders", QueueID: 0, BrokerOffset: 10, ConsumerOffset: 7, Lag: 3, InFlight: 1},
		{Topic: "orders", QueueID: 1, BrokerOffset: 5, ConsumerOffset: 5, Lag: 0},
	}
}

func (f *fakeBroker) GetOffsets(ctx context.Context, group string) ([]broker.QueueProgress, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.progressRows(), nil
}

func (f *fakeBroker) CommitOffsets(ctx context.Context, group string, commits []broker.OffsetCommit) error {
	if err := f.check(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.group, f.commits = group, commits
	return nil
}

func (f *fakeBroker) Progress(ctx context.Context, group string) ([]broker.QueueProgress, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.progressRows(), nil
}

func (f *fakeBroker) Backlog(ctx context.Context, group string) (broker.GroupBacklog, error) {
	if err := f.check(); err != nil {
		return broker.GroupBacklog{}, err
	}
	return broker.GroupBacklog{}, nil
}

func (f *fakeBroker) ResetOffset(ctx context.Context, group, topic string, t time.Time) ([]broker.QueueProgress, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.record(group, topic, t)
	return f.progressRows(), nil
}

func (f *fakeBroker) SkipBacklog(ctx context.Context, group, topic string) ([]broker.QueueProgress, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.record(group, topic)
	return f.progressRows(), nil
}

// SearchByTime answers one message and, on the first page, a next
// position.
func (f *fakeBroker) SearchByTime(ctx context.Context, s broker.TimeSearch) (broker.TimeSearchResult, error) {
	if err := f.check(); err != nil {
		return broker.TimeSearchResult{}, err
	}
	f.record(s)
	res := broker.TimeSearchResult{Messages: []broker.ReceivedMessage{sampleMessage(s.Topic, []byte("by time"))}, Scanned: 1}
	if s.After == nil {
		res.Next = &broker.SearchPosition{QueueID: 1, Offset: 12}
	}
	return res, nil
}

func (f *fakeBroker) GetMessage(ctx context.Context, id string) (broker.ReceivedMessage, error) {
	if err := f.check(); err != nil {
		return broker.ReceivedMessage{}, err
	}
	f.record(id)
	m := sampleMessage("", []byte("found"))
	m.MessageID = id
	return m, nil
}

func (f *fakeBroker) Trace(ctx context.Context, id string) (broker.MessageTrace, error) {
	if err := f.check(); err != nil {
		return broker.MessageTrace{}, err
	}
	f.record(id)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return broker.MessageTrace{MessageID: id, OriginMessageID: id, Events: []broker.TraceEvent{
		{Type: broker.TraceStored, At: at, MessageID: id, Topic: "orders", QueueID: 1, QueueOffset: 7, HasPosition: true},
		{Type: broker.TraceDelivered, At: at.Add(time.Millisecond), MessageID: id, Group: "g", ClientID: "w1", Epoch: 1 << 60, Attempt: 1, LeaseUntil: at.Add(time.Minute)},
		{Type: broker.TraceNacked, At: at.Add(2 * time.Millisecond), MessageID: id, Group: "g", Reason: "busy", DelayLevel: 0, HasDelayLevel: true},
		{Type: broker.TraceRetried, At: at.Add(3 * time.Millisecond), MessageID: id, Group: "g", DueAt: at.Add(time.Second), RetryMessageID: id, ReconsumeTimes: 1},
		{Type: broker.TracePushed, At: at.Add(4 * time.Millisecond), MessageID: id, Group: "g", HTTPStatus: 200, Result: "ok"},
		{Type: broker.TraceDropped, At: at.Add(5 * time.Millisecond), Count: 3},
	}, DroppedEvents: 3}, nil
}

func (f *fakeBroker) QueryByKey(ctx context.Context, topic, key string, max int) ([]broker.ReceivedMessage, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.record(topic, key, max)
	return nil, nil
}

func (f *fakeBroker) RotateReceiptKey(context.Context) (int, error) { return 2, f.check() }
func (f *fakeBroker) ReceiptKeys() []int                            { return []int{1, 2} }

func (f *fakeBroker) Status(ctx context.Context) (broker.BrokerStatus, error) {
	if err := f.check(); err != nil {
		return broker.BrokerStatus{}, err
	}
	return broker.BrokerStatus{FlushMode: "sync", StoreBytes: 1 << 20, Uptime: 90 * time.Second, CommitLogMin: 0, CommitLogMax: 4096}, nil
}

func (f *fakeBroker) Ready() error { return f.check() }

func (f *fakeBroker) Stats() broker.Stats {
	return broker.Stats{Sent: map[string]uint64{"orders": 3}, Delivered: map[string]uint64{"g": 2},
		Acked: map[string]uint64{"g": 1}, InFlight: map[string]int{"g": 1}}
}

func (f *fakeBroker) ConsumerLags() []broker.ConsumerLag {
	return []broker.ConsumerLag{{Group: "g", Topic: "orders", Lag: 2, OldestUnacked: 1500 * time.Millisecond}}
}

// sampleMessage is a delivered message with the given receipt and body.
func sampleMessage(receipt string, body []byte) broker.ReceivedMessage {
	return broker.ReceivedMessage{
		MessageID: "7F00000100001F9000000000000004D2", Receipt: receipt, Topic: "orders", QueueID: 1, QueueOffset: 42,
		ReconsumeTimes: 2, OriginMessageID: "7F00000100001F900000000000000001", Tag: "created", Keys: []string{"k1"},
		Properties: map[string]string{"p": "v"}, Body: body,
		BornAt:   time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		StoredAt: time.Date(2026, 11, 29, 10, 0, 0, 5_000_000, time.UTC),
		// Not UTC: the wire form is.
		LeaseUntil: time.Date(2026, 11, 29, 11, 0, 30, 7_900_000, time.FixedZone("CET", 3600)),
	}
}

// testBundle is one handler under test with its fake broker.
type testBundle struct {
	broker  *fakeBroker
	handler http.Handler
}

// setup builds the /v1 handler over a fake broker, mounted as the server
// mounts it; opts adjust the dependencies.
func setup(t *testing.T, opts ...func(*api.Deps)) *testBundle {
	t.Helper()
	fake := &fakeBroker{}
	deps := api.Deps{Broker: fake, Logger: zerolog.New(io.Discard), MaxMessageSize: 1024, MaxRequestSize: 4096,
		Cluster: func(context.Context) (api.Cluster, error) {
			return api.Cluster{NodeID: 1, Role: "leader", Leader: 1, Serving: true, Term: 2, CommitIndex: 9, AppliedIndex: 9,
				Peers: []api.ClusterPeer{{ID: 1, Address: "127.0.0.1:7101", Role: "leader", MatchIndex: 9}}}, fake.check()
		},
		Members: fakeMembers{fake}}
	for _, opt := range opts {
		opt(&deps)
	}
	// The root router answers like the server's: chi rejects unknown methods
	// there, before the /v1 router sees them.
	root := chi.NewRouter()
	root.NotFound(func(w http.ResponseWriter, r *http.Request) { api.WriteError(w, r, api.ErrRouteNotFound) })
	root.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) { api.WriteError(w, r, api.ErrMethodNotAllowed) })
	root.Mount("/v1", api.NewHandler(deps))
	return &testBundle{broker: fake, handler: root}
}

// do serves one request; headers alternate name, value.
func (b *testBundle) do(t *testing.T, method, target, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, reader)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	return rec
}

// doJSON serves one request with a JSON body.
func (b *testBundle) doJSON(t *testing.T, method, target, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	return b.do(t, method, target, body, append([]string{"Content-Type", "application/json"}, headers...)...)
}

// requireProblem checks that rec is a problem+json response with the given
// status and code, and returns it.
func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) api.Problem {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body.String())
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	var p api.Problem
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.Equal(t, status, p.Status)
	require.Equal(t, code, p.Code)
	require.Equal(t, "urn:mqgate:problem:"+code, p.Type)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.RequestID)
	require.Equal(t, rec.Header().Get("X-Request-Id"), p.RequestID)
	return p
}

// decode decodes a 2xx JSON response.
func decode[T any](t *testing.T, rec *httptest.ResponseRecorder, status int) T {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var v T
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v))
	return v
}

func TestRouting(t *testing.T) {
	t.Parallel()

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, setup(t).do(t, http.MethodGet, "/v1/nope", ""), http.StatusNotFound, "not-found")
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		t.Parallel()
		rec := setup(t).do(t, http.MethodPost, "/v1/topics/orders", "")
		requireProblem(t, rec, http.StatusMethodNotAllowed, "method-not-allowed")
		require.Equal(t, "GET, PUT, DELETE, PATCH", rec.Header().Get("Allow"))
	})
	t.Run("Draining", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(d *api.Deps) { d.Draining = func() bool { return true } })
		rec := b.do(t, http.MethodGet, "/v1/topics", "")
		requireProblem(t, rec, http.StatusServiceUnavailable, "shutting-down")
		require.Equal(t, "5", rec.Header().Get("Retry-After"))
	})
	t.Run("PanicIsLogged500", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.panicWith = "boom"
		p := requireProblem(t, b.do(t, http.MethodGet, "/v1/topics", ""), http.StatusInternalServerError, "internal")
		require.NotContains(t, p.Detail, "boom")
	})
	t.Run("AbortHandlerPanicPropagates", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.panicWith = http.ErrAbortHandler
		require.PanicsWithValue(t, http.ErrAbortHandler, func() { b.do(t, http.MethodGet, "/v1/topics", "") })
	})
}

// fakeMembers answers the membership changes with the fake's error.
type fakeMembers struct{ f *fakeBroker }

func (m fakeMembers) view() (api.Cluster, error) {
	return api.Cluster{NodeID: 1, Role: "leader", Leader: 1, Serving: true, Peers: []api.ClusterPeer{{ID: 1, Address: "127.0.0.1:7101", Role: "leader"}}}, m.f.check()
}

func (m fakeMembers) AddLearner(context.Context, uint64, string) (api.Cluster, error) {
	return m.view()
}
func (m fakeMembers) Promote(context.Context, uint64) (api.Cluster, error) { return m.view() }
func (m fakeMembers) Remove(context.Context, uint64) (api.Cluster, error)  { return m.view() }
