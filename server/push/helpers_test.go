package push

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// testLevels are brokertest's millisecond levels (level 3 = 30 ms) with
// a 1 s level 10, so that a Retry-After of 1 maps onto a real level.
var testLevels = func() []time.Duration {
	l := brokertest.Levels()
	for i := 9; i < len(l); i++ {
		l[i] = time.Duration(i-8) * time.Second
	}
	return l
}()

// bundle is a real broker on a temp dir with a running dispatcher.
type bundle struct {
	b *broker.Broker
	d *Dispatcher
}

// setup opens a broker and starts a dispatcher over it; opts adjust the
// dispatcher's config. Cleanup stops the dispatcher, then the broker.
func setup(t *testing.T, opts ...func(*Config)) *bundle {
	t.Helper()
	return setupOn(t, clockwork.NewRealClock(), opts...)
}

// setupOn is setup with clock as the broker's and the dispatcher's clock.
func setupOn(t *testing.T, clock clockwork.Clock, opts ...func(*Config)) *bundle {
	t.Helper()
	b := brokertest.MustOpen(t, "", func(o *broker.Options) { o.DelayLevels, o.Clock = testLevels, clock })
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	cfg := Config{DelayLevels: testLevels, RefreshInterval: 20 * time.Millisecond, PollWait: 2 * time.Second, Clock: clock}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := New(b, cfg)
	require.NoError(t, err)
	d.TestSignals.Init()
	d.Start(context.Background())
	t.Cleanup(d.Stop)
	return &bundle{b: b, d: d}
}

// putGroup creates group subscribed to topic with push p (validated and
// completed as the API does) and returns the stored config.
func (bd *bundle) putGroup(t *testing.T, group, topic string, retryMaxTimes int, p broker.PushConfig) broker.GroupConfig {
	t.Helper()
	ctx := context.Background()
	_, _, err := bd.b.PutTopic(ctx, broker.TopicConfig{Name: topic, Queues: 2})
	require.NoError(t, err)
	g := broker.GroupConfig{Name: group, RetryMaxTimes: retryMaxTimes, Subscriptions: []broker.Subscription{{Topic: topic}}, Push: &p}
	_, err = broker.NormalizePush(&g, nil)
	require.NoError(t, err)
	g, _, err = bd.b.PutGroup(ctx, g)
	require.NoError(t, err)
	return g
}

// send stores one message in topic.
func (bd *bundle) send(t *testing.T, topic, body string) broker.SendResult {
	t.Helper()
	res, err := bd.b.Send(context.Background(), topic, []broker.SendMessage{{Body: []byte(body), Tag: "t", Keys: []string{"k1", "k2"}, Properties: map[string]string{"color": "blue"}}})
	require.NoError(t, err)
	return res[0]
}

// next waits for the next finished delivery of group.
func (bd *bundle) next(t *testing.T, group string) Delivery {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case d := <-bd.d.TestSignals.Delivered.C():
			if d.Group == group {
				return d
			}
		case <-timer.C:
			t.Fatalf("no delivery of group %s within 10s", group)
		}
	}
}

// waitRun waits until the run loop has completed a run that started after
// this call (so it saw every change made before it).
func (bd *bundle) waitRun(t *testing.T) RunResult {
	t.Helper()
	ch := bd.d.TestSignals.Ran.C()
	for len(ch) > 0 {
		<-ch
	}
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for i := 0; ; i++ {
		select {
		case r := <-ch:
			if i >= 1 { // the first may have started before the call
				return r
			}
		case <-timer.C:
			t.Fatal("the run loop did not run within 5s")
		}
	}
}

// captured is one request a receiver got.
type captured struct {
	At     time.Time
	Header http.Header
	Body   []byte
}

// receiver is an httptest server whose answers a test scripts.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []captured
	answer func(n int, w http.ResponseWriter, r *http.Request) // n counts from 0
	seen   chan captured
}

// newReceiver starts a receiver on 127.0.0.1 answering with answer.
func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer, seen: make(chan captured, 1024)}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := captured{At: time.Now(), Header: r.Header.Clone(), Body: body}
	rc.mu.Lock()
	n := len(rc.got)
	rc.got = append(rc.got, c)
	rc.mu.Unlock()
	rc.seen <- c
	rc.answer(n, w, r)
}

// requests returns what the receiver got so far.
func (rc *receiver) requests() []captured {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]captured(nil), rc.got...)
}

// status answers every request with code.
func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}
