package loadgen

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// counters are a run's running totals, shared by its workers (atomics:
// the progress line reads them while the workers count).
type counters struct {
	requests atomic.Int64
	sent     atomic.Int64 // messages stored (200 to a send)
	acked    atomic.Int64 // messages acked with status ok
	stale    atomic.Int64 // acked messages from before this run (e2e)
	bytes    atomic.Int64 // body bytes sent or received
	errors   atomic.Int64

	mu      sync.Mutex
	samples []string // the first distinct errors
}

const maxErrorSamples = 5

// fail counts one failed request and keeps its message when it is new.
func (c *counters) fail(err error) {
	c.errors.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) >= maxErrorSamples {
		return
	}
	msg := err.Error()
	for _, s := range c.samples {
		if s == msg {
			return
		}
	}
	c.samples = append(c.samples, msg)
}

func (c *counters) errorSamples() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.samples...)
}

// progress draws a live line on w: messages so far (against total when
// there is one), the rate of the last interval, MB/s and errors.
type progress struct {
	stop chan struct{}
	done chan struct{}
}

// startProgress starts the line; nil w draws nothing. messages is the
// count the line tracks (sent or acked).
func startProgress(w io.Writer, label string, total int64, c *counters, messages func() int64) *progress {
	p := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	if w == nil {
		close(p.done)
		return p
	}
	max := total
	if max <= 0 {
		max = -1 // a spinner: the run ends on time, not on a count
	}
	bar := progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(20),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		last, lastBytes, lastAt := int64(0), int64(0), time.Now()
		for {
			select {
			case <-p.stop:
				_ = bar.Finish()
				_ = bar.Clear()
				return
			case now := <-tick.C:
				n, b := messages(), c.bytes.Load()
				secs := now.Sub(lastAt).Seconds()
				bar.Describe(fmt.Sprintf("%s %8.0f msg/s %7.1f MB/s errors %d", label,
					float64(n-last)/secs, float64(b-lastBytes)/secs/(1<<20), c.errors.Load()))
				_ = bar.Set64(n)
				last, lastBytes, lastAt = n, b, now
			}
		}
	}()
	return p
}

// end stops the line and waits until it is cleared.
func (p *progress) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}
