package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDispatchDelay(t *testing.T) {
	t.Parallel()
	var h dispatchHealth
	t0 := time.Unix(1000, 0)
	require.Zero(t, h.delay(0, t0), "no samples")
	for i := 0; i < 10; i++ {
		h.samples[h.next] = lagSample{at: t0.Add(time.Duration(i) * time.Second), limit: int64(i * 100)}
		h.next++
	}
	now := t0.Add(10 * time.Second)
	require.Zero(t, h.delay(900, now), "caught up with every sample")
	require.Equal(t, time.Second, h.delay(850, now), "behind the newest sample only")
	require.Equal(t, 8*time.Second, h.delay(150, now), "behind since the sample at 200")
	require.Equal(t, 10*time.Second, h.delay(-1, now), "behind every sample: as old as the oldest")
	// The ring wraps: the oldest samples are overwritten.
	for i := 10; i < 10+lagSamples; i++ {
		h.samples[h.next] = lagSample{at: t0.Add(time.Duration(i) * time.Second), limit: int64(i * 100)}
		h.next = (h.next + 1) % lagSamples
	}
	now = t0.Add(time.Duration(10+lagSamples) * time.Second)
	require.Equal(t, time.Duration(lagSamples)*time.Second, h.delay(0, now))
}
