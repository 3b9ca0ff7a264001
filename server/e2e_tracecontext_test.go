package server_test

// End-to-end tests of W3C trace context through mqgate: the traceparent
// and tracestate of a send reach the consumer, in the message's
// properties on a pull and as the request's own headers on a webhook
// push; a malformed traceparent is ignored, and a message's own one kept.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

const (
	producerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	producerTracestate  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

// sendTraced sends body to topic with header and returns its message id.
func (e *e2eServer) sendTraced(t *testing.T, topic string, msg api.SendMessage, header http.Header) string {
	t.Helper()
	b, err := json.Marshal(msg)
	require.NoError(t, err)
	var out api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/"+topic+"/messages", "application/json", b, header), http.StatusOK, &out)
	require.Len(t, out.Results, 1)
	return out.Results[0].MessageID
}

func TestE2ETraceparentReachesPull(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/traced", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/tg", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "traced"}}}), http.StatusCreated, nil)

	traced := e.sendTraced(t, "traced", api.SendMessage{Body: "traced"},
		http.Header{"Traceparent": {producerTraceparent}, "Tracestate": {producerTracestate}})
	malformed := e.sendTraced(t, "traced", api.SendMessage{Body: "malformed"},
		http.Header{"Traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, "Tracestate": {producerTracestate}})
	ownParent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	own := e.sendTraced(t, "traced", api.SendMessage{Body: "own", Properties: map[string]string{"traceparent": ownParent}},
		http.Header{"Traceparent": {producerTraceparent}})
	binary := e.Do(t, http.MethodPost, "/v1/topics/traced/messages", "application/octet-stream", []byte("raw"),
		http.Header{"Traceparent": {producerTraceparent}})
	require.Equal(t, http.StatusOK, binary.Status, "%s", binary)

	got := map[string]api.PulledMessage{}
	for _, m := range e.PullN(t, "tg", "traced", 4, 30_000, 10*time.Second) {
		got[m.MessageID] = m
	}
	require.Equal(t, producerTraceparent, got[traced].Properties["traceparent"], "the consumer gets the producer's trace context")
	require.Equal(t, producerTracestate, got[traced].Properties["tracestate"])
	require.NotContains(t, got[malformed].Properties, "traceparent", "an all-zero trace id is not propagated")
	require.NotContains(t, got[malformed].Properties, "tracestate", "nor a tracestate without a valid traceparent")
	require.Equal(t, ownParent, got[own].Properties["traceparent"], "a message's own traceparent wins")
	n := 0
	for _, m := range got {
		if m.Properties["traceparent"] == producerTraceparent {
			n++
		}
	}
	require.Equal(t, 2, n, "the raw-body send carries it too")
	// The message lookup shows it as well.
	require.Equal(t, producerTraceparent, e.Message(t, traced).Properties["traceparent"])
}

func TestE2ETraceparentReachesPush(t *testing.T) {
	t.Parallel()
	type seen struct{ traceparent, tracestate, body string }
	var mu sync.Mutex
	var pushes []seen
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		pushes = append(pushes, seen{r.Header.Get("Traceparent"), r.Header.Get("Tracestate"), string(b)})
		mu.Unlock()
	}))
	defer receiver.Close()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/pushed", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	for _, mode := range []string{"json", "binary"} {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/hook-"+mode, map[string]any{
			"subscriptions": []map[string]string{{"topic": "pushed"}},
			"push":          map[string]any{"url": receiver.URL + "/" + mode, "mode": mode},
		}), http.StatusCreated, nil)
	}
	e.sendTraced(t, "pushed", api.SendMessage{Body: "to the hooks"},
		http.Header{"Traceparent": {producerTraceparent}, "Tracestate": {producerTracestate}})
	e.sendTraced(t, "pushed", api.SendMessage{Body: "untraced"}, nil)

	servertest.Eventually(t, 15*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(pushes) >= 4, "pushes so far: " + func() string { b, _ := json.Marshal(len(pushes)); return string(b) }()
	})
	mu.Lock()
	defer mu.Unlock()
	traced := 0
	for _, p := range pushes {
		if p.traceparent == "" {
			require.NotContains(t, p.body, producerTraceparent, "only the traced message carries a trace context")
			require.Empty(t, p.tracestate)
			continue
		}
		traced++
		require.Equal(t, producerTraceparent, p.traceparent, "the push request continues the producer's trace")
		require.Equal(t, producerTracestate, p.tracestate)
	}
	require.Equal(t, 2, traced, "the traced message, pushed to both groups (json and binary)")
}
