package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one measurement.
type Result struct {
	// Name says what was measured, e.g. "produce batch=100 conns=16".
	Name string `json:"name"`
	// Mode is produce, consume, e2e or baseline.
	Mode   string `json:"mode"`
	Target string `json:"target"`
	Topic  string `json:"topic,omitempty"`
	Group  string `json:"group,omitempty"`

	BodySize    int     `json:"bodySize"`
	Batch       int     `json:"batch,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Consumers   int     `json:"consumers,omitempty"`
	PullBatch   int     `json:"pullBatch,omitempty"`
	Rate        float64 `json:"rate,omitempty"`

	Requests int64 `json:"requests"`
	// Sent counts messages stored (a 200 to their send).
	Sent int64 `json:"sent"`
	// Acked counts messages acked with status ok.
	Acked int64 `json:"acked"`
	// Stale counts acked messages born before this run (e2e; a backlog
	// left by an earlier run), which the e2e latency leaves out.
	Stale int64 `json:"stale,omitempty"`
	// Undelivered counts messages an e2e run sent but did not see acked
	// within the drain time.
	Undelivered int64 `json:"undelivered,omitempty"`
	Bytes       int64 `json:"bytes"`
	Errors      int64 `json:"errors"`
	// ErrorSamples are the first distinct errors.
	ErrorSamples []string `json:"errorSamples,omitempty"`

	ElapsedSec float64 `json:"elapsedSec"`
	// MsgPerSec is messages sent per second (produce, baseline) or acked
	// per second (consume, e2e).
	MsgPerSec float64 `json:"msgPerSec"`
	MBPerSec  float64 `json:"mbPerSec"`
	ReqPerSec float64 `json:"reqPerSec"`

	// Latency by kind: "send" (one send request; in rate mode from its
	// scheduled time), "pull" (pulls that returned messages), "ack",
	// "e2e" (born time to delivery at the consumer).
	Latency map[string]Latency `json:"latency"`
}

// finish fills the totals and rates from c over elapsed.
func (r *Result) finish(c *counters, elapsed time.Duration, lat map[string]Latency) {
	r.Requests, r.Sent, r.Acked, r.Stale = c.requests.Load(), c.sent.Load(), c.acked.Load(), c.stale.Load()
	r.Bytes, r.Errors, r.ErrorSamples = c.bytes.Load(), c.errors.Load(), c.errorSamples()
	r.ElapsedSec = elapsed.Seconds()
	r.Latency = lat
	if r.ElapsedSec <= 0 {
		return
	}
	msgs := r.Sent
	if r.Mode == "consume" || r.Mode == "e2e" {
		msgs = r.Acked
	}
	r.MsgPerSec = float64(msgs) / r.ElapsedSec
	r.MBPerSec = float64(r.Bytes) / r.ElapsedSec / (1 << 20)
	r.ReqPerSec = float64(r.Requests) / r.ElapsedSec
}

// latencyOrder is the order of the latency rows in the table.
var latencyOrder = []string{"send", "pull", "ack", "e2e"}

// WriteTable prints results as a readable table: throughput, then the
// latency percentiles.
func WriteTable(w io.Writer, results []Result) error {
	width := len("run")
	for _, r := range results {
		width = max(width, len(r.Name))
	}
	name := func(s string) string { return fmt.Sprintf("%-*s", width, s) } // left-aligned in right-aligned columns
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tmsgs\tmsg/s\tMB/s\treq/s\terrors\telapsed\t\n", name("run"))
	for _, r := range results {
		msgs := r.Sent
		if r.Mode == "consume" || r.Mode == "e2e" {
			msgs = r.Acked
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.0f\t%d\t%.2fs\t\n", name(r.Name), msgs, r.MsgPerSec, r.MBPerSec, r.ReqPerSec, r.Errors, r.ElapsedSec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tlatency\tcount\tp50\tp90\tp99\tp99.9\tmax\t\n", name("run"))
	for _, r := range results {
		for _, kind := range latencyOrder {
			l, ok := r.Latency[kind]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", name(r.Name), kind, l.Count,
				ms(l.P50Ms), ms(l.P90Ms), ms(l.P99Ms), ms(l.P999Ms), ms(l.MaxMs))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Stale > 0 {
			fmt.Fprintf(w, "%s: %d acked messages were born before the run (a backlog); e2e latency leaves them out\n", r.Name, r.Stale)
		}
		if r.Undelivered > 0 {
			fmt.Fprintf(w, "%s: %d messages sent were not acked within the drain time\n", r.Name, r.Undelivered)
		}
		if len(r.ErrorSamples) > 0 {
			fmt.Fprintf(w, "%s: errors: %s\n", r.Name, strings.Join(r.ErrorSamples, "; "))
		}
	}
	return nil
}

// ms shows milliseconds with three significant digits.
func ms(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fms", v)
	}
}

// Report is the -o json document.
type Report struct {
	Results []Result `json:"results"`
}

// WriteJSON prints results as one JSON document.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if results == nil {
		results = []Result{}
	}
	return enc.Encode(Report{Results: results})
}
