package push

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker"
)

// Broker is what the dispatcher needs from the messaging layer, all of it
// public broker methods; *broker.Broker satisfies it.
type Broker interface {
	// Pull leases messages of one topic (and the group's retries of it).
	Pull(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error)
	// Ack settles delivered messages.
	Ack(ctx context.Context, group string, receipts []string) ([]broker.ReceiptResult, error)
	// Nack sends failed messages to the retry ladder (or the DLQ).
	Nack(ctx context.Context, group string, items []broker.NackItem) ([]broker.ReceiptResult, error)
	// ChangeLease extends a slow delivery's lease, or gives it back (0).
	ChangeLease(ctx context.Context, group string, items []broker.LeaseItem) ([]broker.ReceiptResult, error)
	// GetGroup reads one group (before disabling its endpoint).
	GetGroup(ctx context.Context, name string) (broker.GroupConfig, error)
	// ListGroups lists the groups (to find push endpoints).
	ListGroups(ctx context.Context) ([]broker.GroupConfig, error)
	// PutGroup stores a group (to disable an endpoint that answered 410).
	PutGroup(ctx context.Context, cfg broker.GroupConfig) (broker.GroupConfig, bool, error)
}

// Config configures a Dispatcher. Zero values take the defaults.
type Config struct {
	// DelayLevels are the broker's delay levels, level 1 first (default
	// broker.DefaultDelayLevels); Retry-After answers map onto them.
	DelayLevels []time.Duration
	// DenyCIDRs are ranges push may never reach, on top of the
	// always-forbidden link-local, metadata, unspecified and multicast ones.
	DenyCIDRs []netip.Prefix
	// DenyPrivate refuses loopback, private, shared (carrier-grade NAT) and
	// unique-local addresses of both families as well (guard.go).
	DenyPrivate bool
	// Self are the gateway's own listening sockets, which push never
	// dials: a push to its own send endpoint would store every message
	// again. A listener on an unspecified address (":8080") stands for its
	// port on loopback and on every local interface address.
	Self []netip.AddrPort
	// LocalAddrs lists this host's interface addresses, for Self
	// listeners on an unspecified address (default: net.InterfaceAddrs).
	LocalAddrs func() ([]netip.Addr, error)
	// PollWait is the long-poll wait of the dispatcher's pulls (default
	// 20 s, at most 30 s).
	PollWait time.Duration
	// Lease is the invisibility of a pulled message (default 30 s); while a
	// delivery runs its lease is extended by as much whenever less than
	// half of it is left.
	Lease time.Duration
	// RefreshInterval is how often the groups are re-read (new, changed,
	// removed and re-enabled endpoints) and slow deliveries' leases
	// extended (default 1 s; at most Lease/4).
	RefreshInterval time.Duration
	// ErrorBackoff is how long a group's puller pauses after a failed pull
	// (default 1 s).
	ErrorBackoff time.Duration
	// SettleTimeout bounds one ack, nack, lease change or group update
	// (default 10 s).
	SettleTimeout time.Duration
	// DrainTimeout is how long Stop lets requests in flight finish before
	// it cancels them (default 5 s); a cancelled delivery's lease is given
	// back without counting an attempt.
	DrainTimeout time.Duration
	// ClientID names the dispatcher in attempt histories (default
	// "mqgate-push").
	ClientID string
	// Lookup resolves endpoint host names (default: the system resolver).
	Lookup LookupFunc
	// Metrics records deliveries (nil: none).
	Metrics *Metrics
	// Logger receives the dispatcher's logs (default: none); it gets a
	// component=push field.
	Logger zerolog.Logger
	// Clock times the leases of deliveries in flight (default the wall
	// clock); it must be the broker's (broker.Options.Clock), which holds
	// the leases.
	Clock clockwork.Clock
}

// maxPollWait is the broker's long-poll limit.
const maxPollWait = 30 * time.Second

// maxPull is the most messages one pull asks for.
const maxPull = 32

// withDefaults returns c with zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	if len(c.DelayLevels) == 0 {
		c.DelayLevels = broker.DefaultDelayLevels
	}
	if c.PollWait == 0 {
		c.PollWait = 20 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = min(time.Second, c.Lease/4)
	}
	if c.ErrorBackoff == 0 {
		c.ErrorBackoff = time.Second
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = 10 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 5 * time.Second
	}
	if c.ClientID == "" {
		c.ClientID = "mqgate-push"
	}
	return c
}

// Validate reports what is wrong with c (after defaults).
func (c Config) Validate() error {
	var errs []error
	for i, d := range c.DelayLevels {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%w: delay level %d is %v", ErrInvalidConfig, i+1, d))
		}
	}
	if c.PollWait < 0 || c.PollWait > maxPollWait {
		errs = append(errs, fmt.Errorf("%w: poll wait %v must be 0..%v", ErrInvalidConfig, c.PollWait, maxPollWait))
	}
	if c.Lease <= 0 || c.RefreshInterval <= 0 || c.RefreshInterval > c.Lease/4 {
		errs = append(errs, fmt.Errorf("%w: lease %v and refresh interval %v must be positive, the interval at most a quarter of the lease", ErrInvalidConfig, c.Lease, c.RefreshInterval))
	}
	if c.ErrorBackoff <= 0 || c.SettleTimeout <= 0 || c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: error backoff and settle timeout must be positive, drain timeout not negative", ErrInvalidConfig))
	}
	for _, p := range c.DenyCIDRs {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("%w: deny range %v", ErrInvalidConfig, p))
		}
	}
	for _, ap := range c.Self {
		if !ap.IsValid() {
			errs = append(errs, fmt.Errorf("%w: own listener %v", ErrInvalidConfig, ap))
		}
	}
	return errors.Join(errs...)
}
