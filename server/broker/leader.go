package broker

import (
	"context"
	"sync"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
)

// Leader-only work (ARCHITECTURE.md, "The broker as a state machine"):
// the services that act on the clock and write records of their own — the
// delay scheduler, timer delivery, the transaction roll-back loop, the
// trace follower, the lease reaper, the idle-instance sweep, the dedup
// window — run only while the broker leads, and so do those a server adds
// with OnLeader (webhook push, the PostgreSQL mirror's writer). Promote
// starts them, after the log is applied; Demote stops them, cancelling
// their context and waiting for each. A single node promotes itself at the
// end of Open (Options.NoPromote leaves it a follower). What every replica
// runs whatever its role: the store's dispatcher, flusher, checkpointer and
// retention, the timer index's maintenance and the snapshots.

// LeaderRun starts one leader-only service under ctx (cancelled at
// Demote) and returns the function that stops it and waits for it.
type LeaderRun func(ctx context.Context) (stop func())

type leadership struct {
	mu      sync.Mutex
	leading bool
	runs    []namedRun
	ctx     context.Context // the services' context while leading
	cancel  context.CancelFunc
	stops   []func()
}

type namedRun struct {
	name string
	run  LeaderRun
}

// leaderRuns are the broker's own leader-only services, in start order.
func (b *Broker) leaderRuns() []namedRun {
	service := func(run func(context.Context)) LeaderRun {
		return func(ctx context.Context) func() {
			s := worker.New(run)
			s.Start(ctx)
			return s.Stop
		}
	}
	every := func(interval time.Duration, fn func(context.Context, time.Time)) LeaderRun {
		return func(ctx context.Context) func() {
			p := worker.EveryOn(b.clock, interval, fn)
			p.Start(ctx)
			return p.Stop
		}
	}
	runs := []namedRun{
		{"delay scheduler", func(ctx context.Context) func() {
			b.scheduler.Start(ctx)
			return func() {
				if err := b.scheduler.Stop(); err != nil {
					b.log.Error().Err(err).Msg("stopping the delay scheduler")
				}
			}
		}},
		{"timer delivery", service(b.timers.Loop)},
		{"transaction roll-back", service(b.txnLoop)},
		{"lease reaper", every(200*time.Millisecond, func(context.Context, time.Time) { b.consume.ReapExpired() })},
		{"dedup window", every(time.Minute, func(_ context.Context, now time.Time) { b.sends.Expire(now) })},
		{"instance sweep", every(instanceSweepInterval, func(_ context.Context, now time.Time) { b.forgetIdleInstances(now) })},
	}
	if !b.trace.Off() {
		runs = append(runs, namedRun{"trace follower", service(b.trace.Run)})
	}
	return runs
}

// OnLeader adds a leader-only service: it runs from the next Promote (at
// once when the broker leads) until the Demote after it, and again at
// every later Promote.
func (b *Broker) OnLeader(name string, run LeaderRun) {
	l := &b.leader
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, namedRun{name, run})
	if l.leading {
		l.stops = append(l.stops, run(l.ctx))
	}
}

// Promote makes the broker the leader: the leader-only services start.
// It does nothing when the broker already leads and fails when it is
// closed.
func (b *Broker) Promote(ctx context.Context) error {
	l := &b.leader
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.closed.Load() {
		return ErrShuttingDown
	}
	if l.leading {
		return nil
	}
	if err := b.takeOver(ctx); err != nil {
		return err
	}
	l.ctx, l.cancel = context.WithCancel(b.closingCtx)
	for _, r := range l.runs {
		l.stops = append(l.stops, r.run(l.ctx))
	}
	l.leading = true
	b.log.Info().Int("services", len(l.runs)).Msg("leading")
	return nil
}

// Demote stops the leader-only services and waits for them; requests go
// on being served. It does nothing when the broker does not lead.
func (b *Broker) Demote() {
	l := &b.leader
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return
	}
	l.cancel()
	for i := len(l.stops) - 1; i >= 0; i-- {
		l.stops[i]()
	}
	l.stops, l.leading = nil, false
	b.log.Info().Msg("following")
}

// Leading reports whether the broker runs the leader-only services.
func (b *Broker) Leading() bool {
	b.leader.mu.Lock()
	defer b.leader.mu.Unlock()
	return b.leader.leading
}
