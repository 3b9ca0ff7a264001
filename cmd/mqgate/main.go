// Command mqgate is the mqgate process: an HTTP/REST message gateway over a
// RocketMQ-style store. `mqgate` (or `mqgate serve`) serves; `mqgate
// healthcheck` probes a running server (the Docker HEALTHCHECK); `mqgate
// version` prints the build; `mqgate topic|group|msg|dlq|timer|broker|cluster …`
// administer a running server over its HTTP API, through the generated Go
// client (admin*.go), and `mqgate completion bash|zsh|fish` prints the
// shell completion script. Every flag has an MQGATE_* environment twin.
//
// Exit codes: 0 success, 1 runtime failure (or unhealthy), 80 usage error.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/mqgate/mqgate/server"
)

// version and commit may be set at build time:
// -ldflags "-X main.version=1.2.3 -X main.commit=abc123"; left unset, the
// module version and the git commit `go build` stamps are used (version.go).
var (
	version = "dev"
	commit  = "unknown"
)

// cli is the command line: subcommands with their flags.
type cli struct {
	VersionFlag kong.VersionFlag `name:"version" help:"Print the version and the commit built from, and exit."`

	Serve       serveCmd       `cmd:"" default:"withargs" help:"Run the gateway (the default command)."`
	Healthcheck healthcheckCmd `cmd:"" help:"Exit 0 when the server on --listen answers GET /livez with 200, else 1."`
	Version     versionCmd     `cmd:"" help:"Print the version and exit."`
	Bench       benchCmd       `cmd:"" help:"Load-test a running gateway: produce (default), consume, e2e; optional net/http baseline."`
	Migrate     migrateCmd     `cmd:"" help:"Run the PostgreSQL mirror's migrations: up, down (one step) or version."`
	HashSecret  hashSecretCmd  `cmd:"" name:"hash-secret" help:"Print the argon2id hash (secretKeyHash of the ACL file) of a secret read from standard input."`
	Repair      repairCmd      `cmd:"" help:"Survey a data dir whose CommitLog lost durable data: what a repair keeps and loses; --apply repairs it."`

	Topic      topicCmd      `cmd:"" group:"admin" help:"Topics: list, get, put, patch, delete, status."`
	Group      groupCmd      `cmd:"" group:"admin" help:"Consumer groups: list, get, put, patch, delete, progress, reset-offset, skip-backlog."`
	Msg        msgCmd        `cmd:"" group:"admin" help:"Messages: get, find (by key or time), send, pull, ack, nack."`
	DLQ        dlqCmd        `cmd:"" name:"dlq" group:"admin" help:"A group's dead letters: list, get, resend, discard, export (NDJSON)."`
	Timer      timerCmd      `cmd:"" group:"admin" help:"Pending timers: list, get, cancel, reschedule."`
	Broker     brokerCmd     `cmd:"" group:"admin" help:"The broker: status."`
	Cluster    clusterCmd    `cmd:"" group:"admin" help:"The cluster as the node of --server sees it: status; add-learner, promote, remove."`
	Replica    replicaCmd    `cmd:"" group:"admin" help:"This replica, stopped, against another node of its cluster (--server): rebuild."`
	Completion completionCmd `cmd:"" help:"Print the shell completion script: source <(mqgate completion bash)."`
}

// serveCmd runs the server until SIGINT or SIGTERM.
type serveCmd struct {
	server.Config `embed:""`
}

// Help is the detail of `mqgate serve --help`: what the flags leave out.
func (c *serveCmd) Help() string {
	return fmt.Sprintf("Leases: a pulled message stays invisible to the rest of its group for the pull's invisibleMs, "+
		"else the group's invisibleMs, else the default lease of %v (at most %dh). Each pulled message's leaseUntil says when "+
		"its lease runs out; ack, nack or extend it (POST /v1/groups/{group}/leases) before then.",
		server.DefaultLease, int(server.MaxLease/time.Hour))
}

// Run serves until ctx ends, then shuts down gracefully.
func (c *serveCmd) Run(ctx context.Context) error {
	b := thisBuild()
	c.Version, c.Commit = b.Version, b.Commit
	tuneGC()
	return server.Run(ctx, c.Config, nil)
}

// defaultGCPercent is the garbage collector's target when GOGC is not set.
// mqgate's heap is small (messages live in the mmap'd CommitLog, which the
// collector never scans) while every request allocates a few KiB, so at
// Go's default of 100 the collector runs many times a second for little
// gain; 400 cut the CPU per single send by about a seventh in the peer
// benchmark (BENCHMARKS.md) while the heap stays a few tens of MiB.
const defaultGCPercent = 400

// tuneGC applies defaultGCPercent unless the operator set GOGC.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// healthcheckCmd probes a running server.
type healthcheckCmd struct {
	Listen      string        `help:"Listen address of the server to probe." env:"MQGATE_LISTEN" default:"${listen}"`
	TLSCertFile string        `name:"tls-cert-file" help:"The server's --tls-cert-file: probe with https, accepting exactly that certificate." env:"MQGATE_TLS_CERT_FILE"`
	Timeout     time.Duration `help:"Give up after this long." default:"3s"`
}

// Run performs one probe.
func (c *healthcheckCmd) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return server.HealthCheckTLS(ctx, c.Listen, c.TLSCertFile)
}

// versionCmd prints the build.
type versionCmd struct{}

// Run prints the version and the commit built from.
func (versionCmd) Run() error {
	fmt.Println(thisBuild())
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var args cli
	parser, err := kong.New(&args,
		kong.Name("mqgate"),
		kong.Description("HTTP/REST message gateway over a RocketMQ-style store."),
		kong.UsageOnError(),
		kong.Vars(server.DefaultConfig().FlagDefaults()),
		kong.Vars{"version": thisBuild().String()},
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.ExplicitGroups([]kong.Group{{Key: "admin", Title: "Administration (over the HTTP API of --server):"}}),
	)
	if err != nil {
		panic(err) // the command line's own definition is wrong
	}
	completeRequest(parser)
	kctx, err := parser.Parse(os.Args[1:])
	parser.FatalIfErrorf(err)
	if err := kctx.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "mqgate:", err)
		stop()
		os.Exit(1)
	}
}
