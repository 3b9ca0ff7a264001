package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/mqgate/mqgate/internal/loadgen"
	"github.com/mqgate/mqgate/server"
)

// benchCmd is mqgate's own load generator against a running gateway:
// produce (the default, so `mqgate bench --batch 100` still sends),
// consume, and e2e. Every run can measure a bare net/http handler on
// loopback first (--baseline).
type benchCmd struct {
	Produce benchProduceCmd `cmd:"" default:"withargs" help:"Send messages (the default): closed loop, or --rate msgs/s on a timer."`
	Consume benchConsumeCmd `cmd:"" help:"Pull (long poll) and ack messages of a topic for a group."`
	E2E     benchE2ECmd     `cmd:"" name:"e2e" help:"Produce and consume at once; latency from each message's born time to its delivery."`
}

// benchTarget is the gateway, the credentials and the output: the flags
// every bench subcommand takes.
type benchTarget struct {
	URL                string          `help:"Base URL of the gateway." env:"MQGATE_URL" default:"http://127.0.0.1:8080"`
	User               string          `help:"HTTP Basic user (the ACL file's accessKey)." env:"MQGATE_USER"`
	Password           string          `help:"HTTP Basic password (the secretKey); prefer the environment to the command line." env:"MQGATE_PASSWORD"`
	Token              string          `help:"Bearer token (a JWT the server's --jwt-secret or --jwt-jwks-url verifies)." env:"MQGATE_TOKEN"`
	CAFile             string          `name:"ca-file" help:"PEM bundle of the CA that signed the server's certificate (https)." env:"MQGATE_CA_FILE"`
	InsecureSkipVerify bool            `help:"Do not verify the server's TLS certificate." env:"MQGATE_INSECURE_SKIP_VERIFY"`
	Topic              string          `help:"Topic (created with --queues queues when missing)." default:"bench"`
	Queues             int             `help:"Queues of the topic when the bench creates it (0: do not create)." default:"8"`
	BodySize           server.ByteSize `help:"Bytes per message body (e.g. 1024, 4KiB)." default:"1024"`
	Duration           time.Duration   `help:"Length of each run (default 10s, or until --count)."`
	Count              int64           `help:"Messages to send (produce, e2e) or to ack (consume); with --duration, whichever comes first."`
	Baseline           bool            `help:"Measure a bare net/http handler on loopback first, with the same requests."`
	Output             string          `short:"o" help:"Output: table, or json on stdout." enum:"table,json" default:"table"`
	Progress           bool            `help:"Draw the live progress line on stderr even when it is not a terminal."`
}

// benchSend are the producer flags.
type benchSend struct {
	Batch       []int   `help:"Messages per send request (1-256); several values run one after the other." default:"1"`
	Concurrency int     `short:"c" aliases:"conns,connections" help:"Concurrent producer connections." default:"32"`
	Rate        float64 `help:"Open model: send this many messages per second on a timer; latency counts from each send's scheduled time (0: closed loop)."`
	Binary      bool    `help:"Send binary batches (Content-Type application/vnd.mqgate.batch) instead of JSON."`
}

// benchPull are the consumer flags.
type benchPull struct {
	Consumers     int           `help:"Concurrent consumers (each pulls, then acks what it got)." default:"16"`
	PullBatch     int           `help:"maxMessages per pull (1-32)." default:"32"`
	InvisibleTime time.Duration `aliases:"lease" help:"Lease (invisibleMs) of each pulled message." default:"30s"`
	Wait          time.Duration `help:"Long-poll wait of each pull (waitMs, up to 30s)." default:"1s"`
	BinaryPull    bool          `help:"Pull binary batches (Accept: application/vnd.mqgate.batch) instead of JSON."`
}

type benchProduceCmd struct {
	benchTarget `embed:""`
	benchSend   `embed:""`
}

type benchConsumeCmd struct {
	benchTarget `embed:""`
	benchPull   `embed:""`
	Group       string        `help:"Consumer group (a new one starts at the oldest message)." default:"bench"`
	Idle        time.Duration `help:"Stop once no message arrived for this long (0: never); the run's time ends at the last ack."`
}

type benchE2ECmd struct {
	benchTarget `embed:""`
	benchSend   `embed:""`
	benchPull   `embed:""`
	Group       string        `help:"Consumer group; moved to the end of the topic first when the account may (admin)." default:"bench-e2e"`
	Drain       time.Duration `help:"How long the consumers may take, after the producers stop, to receive what was sent." default:"30s"`
}

// config is the engine's configuration of t.
func (t *benchTarget) config() loadgen.Config {
	cfg := loadgen.Config{
		URL: t.URL, Topic: t.Topic, Queues: t.Queues, BodySize: int(t.BodySize), Duration: t.Duration, Count: t.Count,
		Baseline: t.Baseline, User: t.User, Password: t.Password, Token: t.Token, CAFile: t.CAFile, Insecure: t.InsecureSkipVerify,
	}
	if cfg.Queues == 0 {
		cfg.Queues = -1 // do not create
	}
	if t.Progress || term.IsTerminal(int(os.Stderr.Fd())) {
		cfg.Progress = os.Stderr
	}
	return cfg
}

func (p benchPull) apply(cfg *loadgen.Config) {
	cfg.Consumers, cfg.PullBatch, cfg.Invisible, cfg.Wait, cfg.BinaryPull = p.Consumers, p.PullBatch, p.InvisibleTime, p.Wait, p.BinaryPull
}

// Run sends, once per --batch value.
func (c *benchProduceCmd) Run(ctx context.Context) error {
	return c.runBatches(ctx, c.Batch, func(ctx context.Context, batch int, first bool) ([]loadgen.Result, error) {
		cfg := c.config()
		cfg.Batch, cfg.Concurrency, cfg.Rate, cfg.Baseline = batch, c.Concurrency, c.Rate, cfg.Baseline && first
		cfg.Binary = c.Binary
		return loadgen.Produce(ctx, cfg)
	})
}

// Run consumes.
func (c *benchConsumeCmd) Run(ctx context.Context) error {
	cfg := c.config()
	c.apply(&cfg)
	cfg.Group, cfg.Idle = c.Group, c.Idle
	res, err := loadgen.Consume(ctx, cfg)
	return c.report(os.Stdout, res, err)
}

// Run produces and consumes, once per --batch value.
func (c *benchE2ECmd) Run(ctx context.Context) error {
	return c.runBatches(ctx, c.Batch, func(ctx context.Context, batch int, first bool) ([]loadgen.Result, error) {
		cfg := c.config()
		c.apply(&cfg)
		cfg.Batch, cfg.Concurrency, cfg.Rate, cfg.Baseline = batch, c.Concurrency, c.Rate, cfg.Baseline && first
		cfg.Binary = c.Binary
		cfg.Group, cfg.Drain = c.Group, c.Drain
		return loadgen.E2E(ctx, cfg)
	})
}

// runBatches runs one measurement per batch size, then reports them all.
func (t *benchTarget) runBatches(ctx context.Context, batches []int, run func(context.Context, int, bool) ([]loadgen.Result, error)) error {
	var all []loadgen.Result
	for i, b := range batches {
		res, err := run(ctx, b, i == 0)
		all = append(all, res...)
		if err != nil || ctx.Err() != nil {
			return t.report(os.Stdout, all, err)
		}
	}
	return t.report(os.Stdout, all, nil)
}

// report prints the results (also those before a failure), then returns
// the failure.
func (t *benchTarget) report(w io.Writer, res []loadgen.Result, err error) error {
	if len(res) > 0 || t.Output == "json" {
		var werr error
		if t.Output == "json" {
			werr = loadgen.WriteJSON(w, res)
		} else {
			werr = loadgen.WriteTable(w, res)
		}
		if err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
