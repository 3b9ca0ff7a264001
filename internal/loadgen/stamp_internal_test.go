package loadgen

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTemplateStampsEveryMessage(t *testing.T) {
	born := time.Unix(0, 1_765_432_109_876_543_210)
	for _, n := range []int{1, 3} {
		tmpl := newTemplate(n, 40)
		var req struct {
			Body     string `json:"body"`
			Messages []struct {
				Body string `json:"body"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(tmpl.stamp(born), &req))
		bodies := []string{req.Body}
		if n > 1 {
			bodies = nil
			for _, m := range req.Messages {
				bodies = append(bodies, m.Body)
			}
		}
		require.Len(t, bodies, n)
		for _, b := range bodies {
			require.Len(t, b, 40)
			got, ok := parseStamp(b)
			require.True(t, ok)
			require.True(t, got.Equal(born))
		}
	}
	// Too small for a stamp: plain padding, which parseStamp refuses.
	var req struct{ Body string }
	require.NoError(t, json.Unmarshal(newTemplate(1, 5).stamp(born), &req))
	require.Equal(t, "xxxxx", req.Body)
	_, ok := parseStamp(req.Body)
	require.False(t, ok)
	_, ok = parseStamp("12345678901234567x9 not a stamp")
	require.False(t, ok)
}

func TestPacerSchedulesOnTheRate(t *testing.T) {
	start := time.Now().Add(-time.Hour) // every due time is past: no sleeping
	p := newPacer(Config{Batch: 10, Rate: 100, Count: 35, Duration: 2 * time.Hour}, start)
	var dues []time.Duration
	var sizes []int
	for {
		n, due, ok := p.take(t.Context())
		if !ok {
			break
		}
		sizes = append(sizes, n)
		dues = append(dues, due.Sub(start))
	}
	require.Equal(t, []int{10, 10, 10, 5}, sizes)
	require.Equal(t, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}, dues)
}
