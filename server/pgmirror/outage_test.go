package pgmirror

import (
	"context"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
	"github.com/mqgate/mqgate/storage/offset"
)

// load drives sends, pulls, acks and a few dead-letter nacks through the
// broker from one goroutine per group until stopped, counting operations
// and failures.
type load struct {
	b        *broker.Broker
	groups   []string
	stop     chan struct{}
	wg       sync.WaitGroup
	sent     atomic.Int64
	acked    atomic.Int64
	dead     atomic.Int64
	failures atomic.Int64
	firstErr atomic.Value
}

func startLoad(b *broker.Broker, groups ...string) *load {
	l := &load{b: b, groups: groups, stop: make(chan struct{})}
	for _, g := range groups {
		l.wg.Add(1)
		go l.run(g)
	}
	return l
}

func (l *load) fail(err error) {
	l.failures.Add(1)
	l.firstErr.CompareAndSwap(nil, err)
}

func (l *load) run(group string) {
	defer l.wg.Done()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(len(group)), 7))
	body := []broker.SendMessage{{Body: []byte("x")}, {Body: []byte("y")}, {Body: []byte("z")}, {Body: []byte("w")}}
	topic := "t17-" + group
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		if _, err := l.b.Send(ctx, topic, body); err != nil {
			l.fail(err)
			continue
		}
		l.sent.Add(int64(len(body)))
		msgs, err := l.b.Pull(ctx, broker.PullRequest{Group: group, Topic: topic, MaxMessages: 8, Invisible: time.Minute})
		if err != nil {
			l.fail(err)
			continue
		}
		var acks []string
		var nacks []broker.NackItem
		for _, m := range msgs {
			if rng.IntN(50) == 0 {
				nacks = append(nacks, broker.NackItem{Receipt: m.Receipt, DelayLevel: -1, Reason: "t17 poison"})
			} else {
				acks = append(acks, m.Receipt)
			}
		}
		for _, a := range acks { // one progress record per ack, like HTTP clients acking one by one
			res, err := l.b.Ack(ctx, group, []string{a})
			if err != nil || res[0].Status != broker.ReceiptOK {
				l.fail(err)
				continue
			}
			l.acked.Add(1)
		}
		if len(nacks) > 0 {
			res, err := l.b.Nack(ctx, group, nacks)
			if err != nil {
				l.fail(err)
				continue
			}
			for _, r := range res {
				if r.Status != broker.ReceiptOK {
					l.fail(nil)
				}
			}
			l.dead.Add(int64(len(nacks)))
		}
	}
}

func (l *load) halt() {
	close(l.stop)
	l.wg.Wait()
}

// run drives the load for d and returns operations (sends + acks) per second.
func (l *load) rate(d time.Duration) float64 {
	before := l.sent.Load() + l.acked.Load()
	start := time.Now()
	<-time.After(d) // a measured window of load, not a wait for a condition
	return float64(l.sent.Load()+l.acked.Load()-before) / time.Since(start).Seconds()
}

// aheadSampler checks, while the test runs, that no mirrored committed
// offset is ever above the live one read after it (the load only acks,
// so live offsets only grow).
type aheadSampler struct {
	stop       chan struct{}
	done       chan struct{}
	samples    atomic.Int64
	violations atomic.Int64
	example    atomic.Value
}

func startAheadSampler(t *testing.T, url string, b *broker.Broker, groups ...string) *aheadSampler {
	s := &aheadSampler{stop: make(chan struct{}), done: make(chan struct{})}
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	go func() {
		defer close(s.done)
		defer pool.Close()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			rows, err := pool.Query(ctx, `SELECT group_name, topic, queue_id, committed_offset FROM consumer_offsets`)
			mirror := map[offset.Key]int64{}
			if err == nil {
				var k offset.Key
				var c int64
				for rows.Next() {
					if rows.Scan(&k.Group, &k.Topic, &k.QueueID, &c) == nil {
						mirror[k] = c
					}
				}
				rows.Close()
				err = rows.Err()
			}
			cancel()
			if err != nil {
				continue // PostgreSQL is down
			}
			s.samples.Add(1)
			// A progress record is readable by the mirror once flushed, a
			// moment before the broker applies it: wait for the appends in
			// flight, as GET /v1/groups/{g}/progress does (server/mirror.go).
			b.AwaitApplied()
			for _, g := range groups {
				qs, err := b.Progress(context.Background(), g)
				if err != nil {
					continue
				}
				for _, q := range qs {
					k := offset.Key{Group: g, Topic: q.Topic, QueueID: q.QueueID}
					if mirror[k] > q.ConsumerOffset {
						s.violations.Add(1)
						s.example.CompareAndSwap(nil, k)
					}
				}
			}
		}
	}()
	return s
}

func (s *aheadSampler) halt() {
	close(s.stop)
	<-s.done
}

// TestPostgresOutage: PostgreSQL crashes under a load of sends and
// acks and comes back; no operation fails, the mirror reports itself
// degraded, then converges to the live state and is never ahead of the
// log. The outage lasts 3 s (LONG=1: 30 s).
func TestPostgresOutage(t *testing.T) {
	outage := 3 * time.Second
	if os.Getenv("LONG") != "" {
		outage = 30 * time.Second
	}
	cluster := pgtest.NewCluster(t)
	url := cluster.URL()
	ctx := context.Background()
	b := mustOpenBroker(t, t.TempDir(), "sync")
	m := mustOpenMirror(t, url, b, func(c *Config) { c.RetryMax = 500 * time.Millisecond })
	groups := []string{"ga", "gb"}

	l := startLoad(b, groups...)
	defer func() {
		select {
		case <-l.stop:
		default:
			l.halt()
		}
	}()
	window := min(outage/3, 2*time.Second)
	without := l.rate(window)

	m.Start(ctx)
	waitFor(t, 10*time.Second, "mirror healthy", func() bool { return m.Health() == nil })
	sampler := startAheadSampler(t, url, b, groups...)
	with := l.rate(window)

	cluster.Stop("immediate")
	down := time.Now()
	waitFor(t, outage, "mirror reports degraded", func() bool { return m.Health() != nil })
	t.Logf("degraded %v after the crash: %v", time.Since(down).Round(time.Millisecond), m.Health())
	during := l.rate(outage - time.Since(down))
	lagRecords, lagAge := m.Lag()
	require.Positive(t, lagRecords, "progress records pile up in the log")
	require.Positive(t, lagAge)
	require.Zero(t, l.failures.Load(), "no send, pull or ack fails while PostgreSQL is down: %v", l.firstErr.Load())

	cluster.Start()
	up := time.Now()
	l.halt()
	require.Zero(t, l.failures.Load(), "no failure at all: %v", l.firstErr.Load())

	converged := waitFor(t, 30*time.Second, "mirror converges to the live state", func() bool {
		for _, g := range groups {
			if len(diff(mirrored(t, url, g), live(t, b, g))) != 0 {
				return false
			}
		}
		r, _ := m.Lag()
		return r == 0 && m.Health() == nil
	})
	for _, g := range groups {
		want := 0
		for cursor := ""; ; {
			page, next, err := b.ListDeadLetters(ctx, g, broker.DLQFilter{}, cursor, 500)
			require.NoError(t, err)
			want += len(page)
			if next == "" {
				break
			}
			cursor = next
		}
		require.Equal(t, want, count(t, url, `SELECT count(*) FROM dead_letters WHERE group_name = $1 AND dead_at IS NOT NULL`, g), "dead letters of %s", g)
	}
	sampler.halt()
	require.Zero(t, sampler.violations.Load(), "mirror ahead of the log at %v", sampler.example.Load())
	require.Positive(t, sampler.samples.Load())

	st, err := Migrate(ctx, url, "version")
	require.NoError(t, err)
	require.False(t, st.Dirty)
	stats := m.Stats()
	t.Logf("outage %v: sends+acks/s without mirror %.0f, with mirror %.0f, PostgreSQL down %.0f; "+
		"sent %d, acked %d, dead-lettered %d, failures %d; lag at the end of the outage %d records / %v; "+
		"converged %v after restart (%v after the load stopped); never ahead in %d samples; passes %d (failed %d)",
		outage, without, with, during, l.sent.Load(), l.acked.Load(), l.dead.Load(), l.failures.Load(),
		lagRecords, lagAge.Round(time.Millisecond), time.Since(up).Round(time.Millisecond), converged.Round(time.Millisecond),
		sampler.samples.Load(), stats.Passes, stats.Failures)
}
