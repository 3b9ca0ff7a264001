package main

import (
	"context"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/internal/loadgen"
)

// benchCmd is mqgate's own load generator: closed-loop HTTP senders
// against a running gateway, with an optional bare net/http baseline
// measured in the same run.
type benchCmd struct {
	URL         string        `help:"Base URL of the gateway." default:"http://127.0.0.1:8080"`
	Topic       string        `help:"Topic to send to (created if missing)." default:"bench"`
	Queues      int           `help:"Queue count of the topic." default:"8"`
	Concurrency int           `help:"Concurrent clients." default:"32"`
	Duration    time.Duration `help:"Length of each measurement." default:"10s"`
	Batch       []int         `help:"Messages per request; several values run one after the other." default:"1"`
	BodySize    int           `help:"Bytes per message body." default:"1024"`
	Baseline    bool          `help:"Measure a bare net/http handler on loopback first, for comparison."`
}

// Run measures and prints one line per measurement.
func (c *benchCmd) Run(ctx context.Context) error {
	for i, batch := range c.Batch {
		res, err := loadgen.Run(ctx, loadgen.Options{
			URL: c.URL, Topic: c.Topic, Queues: c.Queues, Concurrency: c.Concurrency,
			Duration: c.Duration, Batch: batch, BodySize: c.BodySize, Baseline: c.Baseline && i == 0,
		})
		for _, r := range res {
			fmt.Println(r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
