package loadgen

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms count microseconds from 1 µs to 10 minutes with 3
// significant digits (0.1 % error at any value).
const (
	histMin    = 1
	histMax    = int64(10 * time.Minute / time.Microsecond)
	histDigits = 3
)

// hist is one HDR histogram of latencies. Each worker owns its own; they
// are merged when the run ends, so recording takes no lock.
type hist struct{ h *hdrhistogram.Histogram }

func newHist() hist { return hist{hdrhistogram.New(histMin, histMax, histDigits)} }

// record adds one latency; values out of range are clamped.
func (h hist) record(d time.Duration) {
	v := d.Microseconds()
	if v < histMin {
		v = histMin
	}
	if v > histMax {
		v = histMax
	}
	_ = h.h.RecordValue(v)
}

func (h hist) merge(o hist) { h.h.Merge(o.h) }

// Latency summarizes one histogram, in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
}

func (h hist) summary() Latency {
	if h.h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		Count:  h.h.TotalCount(),
		MeanMs: h.h.Mean() / 1000,
		P50Ms:  ms(h.h.ValueAtQuantile(50)),
		P90Ms:  ms(h.h.ValueAtQuantile(90)),
		P99Ms:  ms(h.h.ValueAtQuantile(99)),
		P999Ms: ms(h.h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.h.Max()),
	}
}

// histSet is a worker's histograms by name ("send", "pull", "ack", "e2e").
type histSet map[string]hist

func (s histSet) get(name string) hist {
	h, ok := s[name]
	if !ok {
		h = newHist()
		s[name] = h
	}
	return h
}

// mergeSets merges the workers' sets into one summary per name.
func mergeSets(sets []histSet) map[string]Latency {
	all := histSet{}
	for _, s := range sets {
		for name, h := range s {
			all.get(name).merge(h)
		}
	}
	out := make(map[string]Latency, len(all))
	for name, h := range all {
		out[name] = h.summary()
	}
	return out
}
