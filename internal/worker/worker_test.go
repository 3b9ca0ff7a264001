package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const long = time.Hour // an interval that never ticks during a test

func wait(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
	}
}

func TestServiceStartStop(t *testing.T) {
	var running, returned atomic.Bool
	s := New(func(ctx context.Context) {
		running.Store(true)
		<-ctx.Done()
		returned.Store(true)
	})
	s.Start(context.Background())
	s.Start(context.Background()) // no second goroutine
	s.Stop()
	if !running.Load() || !returned.Load() {
		t.Fatalf("Stop returned before the goroutine: running %v returned %v", running.Load(), returned.Load())
	}
	s.Stop() // idempotent
}

func TestServiceStopBeforeStart(t *testing.T) {
	var ran atomic.Bool
	s := New(func(ctx context.Context) { ran.Store(true) })
	s.Stop()
	s.Start(context.Background())
	s.Stop()
	if ran.Load() {
		t.Fatal("Start after Stop ran the goroutine")
	}
}

func TestServiceParentContextEnds(t *testing.T) {
	done := make(chan struct{})
	s := New(func(ctx context.Context) { <-ctx.Done(); close(done) })
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	cancel()
	wait(t, done)
	s.Stop()
}

func TestServiceConcurrentStartStop(t *testing.T) {
	for range 200 {
		var live atomic.Int32
		s := New(func(ctx context.Context) { live.Add(1); <-ctx.Done(); live.Add(-1) })
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				if i%2 == 0 {
					s.Start(context.Background())
				} else {
					s.Stop()
				}
			})
		}
		wg.Wait()
		s.Stop()
		if n := live.Load(); n != 0 {
			t.Fatalf("%d goroutines alive after Stop", n)
		}
	}
}

func TestEveryTicks(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	p := Every(5*time.Millisecond, func(_ context.Context, now time.Time) {
		mu.Lock()
		times = append(times, now)
		mu.Unlock()
	})
	start := time.Now()
	p.Start(context.Background())
	for p.Passes() < 3 {
		wait(t, p.Ran())
	}
	p.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(times) < 3 || times[0].Before(start) {
		t.Fatalf("passes at %v (started %v)", times, start)
	}
	n := p.Passes()
	time.Sleep(20 * time.Millisecond)
	if p.Passes() != n {
		t.Fatal("a pass ran after Stop")
	}
}

func TestKickRunsAtOnce(t *testing.T) {
	var count atomic.Int32
	p := Every(long, func(context.Context, time.Time) { count.Add(1) })
	p.Start(context.Background())
	defer p.Stop()
	p.Kick()
	wait(t, p.Ran())
	if count.Load() != 1 {
		t.Fatalf("%d passes after one kick", count.Load())
	}
}

func TestKickBeforeStart(t *testing.T) {
	p := Every(long, func(context.Context, time.Time) {})
	p.Kick()
	p.Start(context.Background())
	defer p.Stop()
	wait(t, p.Ran())
}

func TestKickCoalesces(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	var count atomic.Int32
	p := Every(long, func(context.Context, time.Time) {
		count.Add(1)
		entered <- struct{}{}
		<-release
	})
	p.Start(context.Background())
	defer p.Stop()
	p.Kick()
	wait(t, entered) // first pass running
	for range 10 {
		p.Kick() // all pending at once: one more pass
	}
	close(release)
	wait(t, entered)
	// Let the loop settle: no third pass may come.
	time.Sleep(30 * time.Millisecond)
	if n := count.Load(); n != 2 {
		t.Fatalf("%d passes for a kick plus ten coalesced kicks, want 2", n)
	}
}

func TestStopWaitsForPass(t *testing.T) {
	entered := make(chan struct{})
	var finished atomic.Bool
	p := Every(long, func(ctx context.Context, _ time.Time) {
		close(entered)
		<-ctx.Done() // the pass sees the stop through ctx
		time.Sleep(5 * time.Millisecond)
		finished.Store(true)
	})
	p.Start(context.Background())
	p.Kick()
	wait(t, entered)
	p.Stop()
	if !finished.Load() {
		t.Fatal("Stop returned during a pass")
	}
}

func TestRanCoalesces(t *testing.T) {
	p := Every(long, func(context.Context, time.Time) {})
	p.Start(context.Background())
	defer p.Stop()
	for i := range 3 {
		p.Kick()
		for p.Passes() <= int64(i) {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(20 * time.Millisecond) // the last pass's signal is sent after its count
	wait(t, p.Ran())                  // three passes, nobody listening: one signal
	select {
	case <-p.Ran():
		t.Fatal("a second signal for passes nobody waited on")
	default:
	}
}

func TestEveryRejectsZeroInterval(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	Every(0, func(context.Context, time.Time) {})
}

func TestBackoffGrowthAndReset(t *testing.T) {
	const lo, hi = 10 * time.Millisecond, 80 * time.Millisecond
	for range 100 {
		b := NewBackoff(lo, hi)
		want := lo
		for i := range 8 {
			d := b.Next()
			if d < want/2 || d > min(want*3/2, hi) {
				t.Fatalf("failure %d: wait %v outside [%v, %v]", i+1, d, want/2, min(want*3/2, hi))
			}
			want = min(2*want, hi)
		}
		if b.Failures() != 8 {
			t.Fatalf("Failures %d, want 8", b.Failures())
		}
		if n := b.Reset(); n != 8 {
			t.Fatalf("Reset reported %d failures, want 8", n)
		}
		if n := b.Reset(); n != 0 {
			t.Fatalf("second Reset reported %d failures", n)
		}
		if d := b.Next(); d < lo/2 || d > lo*3/2 {
			t.Fatalf("after Reset: wait %v, want about %v", d, lo)
		}
	}
}

func TestBackoffJitterSpreads(t *testing.T) {
	const d = 100 * time.Millisecond
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 1000 {
		w := NewBackoff(d, time.Second).Next()
		lo, hi = min(lo, w), max(hi, w)
	}
	if lo < d/2 || hi > d*3/2 {
		t.Fatalf("jitter out of bounds: [%v, %v]", lo, hi)
	}
	if hi-lo < d/2 { // 1000 draws over [50ms, 150ms]
		t.Fatalf("jitter barely spreads: [%v, %v]", lo, hi)
	}
}

func TestBackoffMaxCapsJitter(t *testing.T) {
	b := NewBackoff(time.Millisecond, 4*time.Millisecond)
	for range 1000 {
		if d := b.Next(); d > 4*time.Millisecond {
			t.Fatalf("wait %v above Max", d)
		}
	}
}

func TestBackoffRejectsBadBounds(t *testing.T) {
	for _, c := range [][2]time.Duration{{0, time.Second}, {2 * time.Second, time.Second}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("NewBackoff(%v, %v): no panic", c[0], c[1])
				}
			}()
			NewBackoff(c[0], c[1])
		}()
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep on a live context reported false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) || Sleep(ctx, 0) {
		t.Fatal("Sleep on a cancelled context reported true")
	}
}
