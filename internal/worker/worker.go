// Package worker is the one shape of mqgate's background goroutines: a
// Service that is started once and stopped once (Stop cancels it and waits
// for it), a periodic runner (Every) whose next pass can be brought forward
// (Kick) and whose completed passes tests can wait on (Ran), and a backoff
// with jitter for passes that fail.
//
// The pass itself stays an ordinary function of its owner (runCheckpoint,
// runOnce, ...), which tests call directly instead of sleeping; the worker
// only decides when it runs. The package imports nothing from the module,
// so every package may use it.
package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jonboulle/clockwork"
)

// Service runs one goroutine from Start until its context ends or Stop is
// called. The zero value is not usable: build one with New or Every.
type Service struct {
	run func(ctx context.Context)

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns a Service that runs run in its goroutine. run must return
// once ctx ends.
func New(run func(ctx context.Context)) *Service { return &Service{run: run} }

// Start launches the goroutine with a context derived from ctx. Only the
// first call does anything, and none after Stop.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func(run func(context.Context), done chan struct{}) {
		defer close(done)
		run(ctx)
	}(s.run, s.done)
}

// Stop cancels the goroutine and waits for it to return. It is idempotent
// and safe from several goroutines (each waits); before Start it only
// makes later Starts no-ops.
func (s *Service) Stop() {
	s.mu.Lock()
	s.stopped = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Periodic is a Service that runs a pass every interval, and at once after
// Kick.
type Periodic struct {
	*Service
	clock    clockwork.Clock
	interval time.Duration
	fn       func(ctx context.Context, now time.Time)
	kick     chan struct{}
	ran      chan struct{}
	passes   atomic.Int64
}

// Every returns a Periodic that calls fn every interval (the first time
// one interval after Start) with the tick's time. A pass that is still
// running when a tick falls due delays it, as time.Ticker does; fn should
// return soon after ctx ends.
func Every(interval time.Duration, fn func(ctx context.Context, now time.Time)) *Periodic {
	return EveryOn(clockwork.NewRealClock(), interval, fn)
}

// EveryOn is Every on clock's time: with a clockwork.FakeClock, passes
// run as the test advances it.
func EveryOn(clock clockwork.Clock, interval time.Duration, fn func(ctx context.Context, now time.Time)) *Periodic {
	if interval <= 0 {
		panic("worker: Every needs a positive interval")
	}
	p := &Periodic{clock: clock, interval: interval, fn: fn, kick: make(chan struct{}, 1), ran: make(chan struct{}, 1)}
	p.Service = New(p.loop)
	return p
}

func (p *Periodic) loop(ctx context.Context) {
	t := p.clock.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.Chan():
			p.pass(ctx, now)
		case <-p.kick:
			p.pass(ctx, p.clock.Now())
		}
	}
}

func (p *Periodic) pass(ctx context.Context, now time.Time) {
	if ctx.Err() != nil { // a tick and the stop ready together: stop
		return
	}
	p.fn(ctx, now)
	p.passes.Add(1)
	select {
	case p.ran <- struct{}{}:
	default:
	}
}

// Kick asks for a pass now, without waiting for it. Kicks that come while
// one is pending coalesce into one pass; a kick before Start runs right
// after it.
func (p *Periodic) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Ran receives a value after a pass completes: "at least one pass finished
// since the last receive" (signals coalesce). For tests.
func (p *Periodic) Ran() <-chan struct{} { return p.ran }

// Passes counts the completed passes.
func (p *Periodic) Passes() int64 { return p.passes.Load() }

// Backoff spaces the retries of a failing pass: the first wait is about
// Min, each further one twice the last, up to Max, every wait jittered by
// ±50% (never above Max) so that workers failing together do not retry
// together. Reset it after a pass succeeds. Not safe for concurrent use: a
// Backoff belongs to one loop.
type Backoff struct {
	min, max time.Duration
	exp      backoff.ExponentialBackOff
	failures int
}

// NewBackoff returns a Backoff between min and max (max >= min > 0).
func NewBackoff(min, max time.Duration) *Backoff {
	if min <= 0 || max < min {
		panic("worker: NewBackoff needs 0 < min <= max")
	}
	b := &Backoff{min: min, max: max}
	b.exp = backoff.ExponentialBackOff{
		InitialInterval:     min,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         max,
	}
	b.exp.Reset()
	return b
}

// Next records a failure and returns how long to wait before the next try.
func (b *Backoff) Next() time.Duration {
	b.failures++
	return min(b.exp.NextBackOff(), b.max)
}

// Reset records a success: the next failure waits about Min again. It
// reports how many failures came before (0: the pass was not failing).
func (b *Backoff) Reset() (failures int) {
	failures, b.failures = b.failures, 0
	b.exp.Reset()
	return failures
}

// Failures is the number of failures since the last Reset.
func (b *Backoff) Failures() int { return b.failures }

// Sleep waits d or until ctx ends; it reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
