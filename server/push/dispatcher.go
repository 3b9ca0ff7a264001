package push

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

// Dispatcher delivers the messages of every group with an enabled push
// endpoint: per (group, subscribed topic) a puller long-polls the broker,
// and each pulled message is POSTed by its own delivery goroutine, at most
// the endpoint's MaxConcurrency at a time per group. The outcome settles
// the lease: 2xx acks, anything else nacks (410 also disables the
// endpoint). Start runs it; Stop ends and waits for every goroutine.
type Dispatcher struct {
	// TestSignals are no-ops until a test calls Init.
	TestSignals TestSignals

	cfg    Config
	broker Broker
	log    zerolog.Logger
	guard  *guard
	client *http.Client

	// ctx ends the run loop and the pullers (Stop); reqCtx ends requests
	// in flight (Stop, after DrainTimeout).
	ctx, reqCtx         context.Context
	cancel, cancelReqs  context.CancelFunc
	wg                  sync.WaitGroup
	startOnce, stopOnce sync.Once

	// runMu serialises runOnce; it guards stopped, groups and invalid.
	runMu   sync.Mutex
	stopped bool
	groups  map[string]*groupState
	invalid map[string]string // group -> config problem already logged

	mu       sync.Mutex
	inflight map[*inflight]struct{}
}

// groupState is one group whose endpoint is being served.
type groupState struct {
	name string
	// fingerprint is what, when changed, restarts the group's pullers
	// (concurrency and subscriptions); other changes apply to the next
	// delivery through cfg.
	fingerprint string
	cfg         atomic.Pointer[broker.GroupConfig]
	// slots is the group's concurrency semaphore: a puller takes a slot per
	// message it asks for, a delivery gives it back when done.
	slots  chan struct{}
	topics []string
	cancel context.CancelFunc // ends the pullers

	mu          sync.Mutex
	disabled    bool // a 410 disabled the endpoint
	disabledURL string
	reason      string
	persisted   time.Time // when the disable reached the group config (zero: not yet)
}

func (st *groupState) isDisabled() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.disabled
}

// inflight is one delivery whose lease the run loop keeps alive.
type inflight struct {
	group    string
	mu       sync.Mutex
	receipt  string
	deadline time.Time
	done     bool
}

// RunResult is what one runOnce did.
type RunResult struct {
	// PushGroups counts groups with a push endpoint; Active the groups
	// being served after the run.
	PushGroups, Active int
	// Started and Stopped count groups whose pullers were started or
	// stopped (a changed group counts in both).
	Started, Stopped int
	// Extended counts leases of slow deliveries extended.
	Extended int
}

func (r RunResult) changed() bool { return r.Started > 0 || r.Stopped > 0 || r.Extended > 0 }

// New returns a dispatcher over b; Start runs it.
func New(b Broker, cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg:      cfg,
		broker:   b,
		log:      cfg.Logger.With().Str("component", "push").Logger(),
		guard:    newGuard(cfg),
		groups:   make(map[string]*groupState),
		invalid:  make(map[string]string),
		inflight: make(map[*inflight]struct{}),
	}
	d.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // never an environment proxy: the guard must see the real destination
			DialContext:           d.guard.dialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   broker.MaxPushConcurrency,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		// 3xx is a failed delivery: never follow a redirect (it could
		// also lead past the guard's idea of the endpoint).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.reqCtx, d.cancelReqs = context.WithCancel(context.Background())
	return d, nil
}

// Start runs the dispatcher until ctx ends or Stop is called: a loop that
// calls runOnce every RefreshInterval, and the pullers and deliveries it
// starts.
func (d *Dispatcher) Start(ctx context.Context) {
	d.startOnce.Do(func() {
		stop := context.AfterFunc(ctx, d.cancel)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer stop()
			d.loop()
		}()
	})
}

func (d *Dispatcher) loop() {
	ticker := time.NewTicker(d.cfg.RefreshInterval)
	defer ticker.Stop()
	var lastErr string
	for {
		res, err := d.runOnce(d.ctx)
		switch {
		case err != nil && d.ctx.Err() == nil && err.Error() != lastErr:
			d.log.Warn().Err(err).Msg("push: reading the groups failed")
			lastErr = err.Error()
		case err == nil:
			lastErr = ""
		}
		if res.changed() {
			d.log.Debug().Int("push_groups", res.PushGroups).Int("active", res.Active).Int("started", res.Started).
				Int("stopped", res.Stopped).Int("extended", res.Extended).Msg("push: run")
		}
		d.TestSignals.Ran.signal(res)
		select {
		case <-d.ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Stop ends the pullers, lets deliveries in flight finish for up to
// DrainTimeout, cancels the rest (giving their leases back) and waits for
// every goroutine. It is idempotent.
func (d *Dispatcher) Stop() {
	d.stopOnce.Do(func() {
		d.cancel()
		// After this no runOnce starts pullers, so nothing adds to wg from
		// zero while Stop waits.
		d.runMu.Lock()
		d.stopped = true
		d.runMu.Unlock()
		done := make(chan struct{})
		go func() {
			d.wg.Wait()
			close(done)
		}()
		timer := time.NewTimer(d.cfg.DrainTimeout)
		select {
		case <-done:
		case <-timer.C:
			d.cancelReqs()
			<-done
		}
		timer.Stop()
		d.cancelReqs()
		d.client.CloseIdleConnections()
	})
}

// runOnce reconciles the served groups with the group configs — starting
// pullers for new or re-enabled endpoints, restarting changed ones,
// stopping removed and disabled ones — and extends the leases of slow
// deliveries.
func (d *Dispatcher) runOnce(ctx context.Context) (RunResult, error) {
	d.runMu.Lock()
	defer d.runMu.Unlock()
	var res RunResult
	if d.stopped || d.ctx.Err() != nil {
		return res, nil
	}
	res.Extended = d.extendLeases(ctx)
	listedAt := time.Now()
	groups, err := d.broker.ListGroups(ctx)
	if err != nil {
		res.Active = len(d.groups)
		return res, fmt.Errorf("list groups: %w", err)
	}
	want := make(map[string]bool)    // groups to serve
	enabled := make(map[string]bool) // groups with an enabled endpoint
	exists := make(map[string]bool, len(groups))
	for _, g := range groups {
		exists[g.Name] = true
	}
	d.cfg.Metrics.retain(exists) // deleted groups' series go to _other
	for _, g := range groups {
		if g.Push == nil {
			continue
		}
		res.PushGroups++
		if g.Push.Disabled {
			continue
		}
		enabled[g.Name] = true
		if problem := servable(g); problem != "" {
			if d.invalid[g.Name] != problem {
				d.log.Warn().Str("group", g.Name).Str("problem", problem).Msg("push: endpoint not served")
				d.invalid[g.Name] = problem
			}
			continue
		}
		delete(d.invalid, g.Name)
		want[g.Name] = true
		fp := fingerprint(g)
		if st := d.groups[g.Name]; st != nil {
			st.mu.Lock()
			disabled, persisted := st.disabled, st.persisted
			st.mu.Unlock()
			switch {
			case disabled && persisted.IsZero():
				d.persistDisable(st) // the 410's group update failed: try again
				continue
			case disabled && listedAt.Before(persisted):
				continue // a listing older than the disable: wait for the next
			case !disabled && st.fingerprint == fp:
				st.cfg.Store(&g)
				continue
			}
			// changed, or enabled again after a 410: restart
			st.cancel()
			delete(d.groups, g.Name)
			res.Stopped++
		}
		d.groups[g.Name] = d.startGroup(g, fp)
		res.Started++
	}
	for name, st := range d.groups {
		if !want[name] {
			st.cancel()
			delete(d.groups, name)
			res.Stopped++
		}
	}
	for name := range d.invalid {
		if !enabled[name] {
			delete(d.invalid, name) // gone or disabled: log again if it comes back broken
		}
	}
	res.Active = len(d.groups)
	return res, nil
}

// servable returns why an enabled endpoint cannot be served ("" if it can).
func servable(g broker.GroupConfig) string {
	switch {
	case g.ConsumeMode == "broadcasting":
		return "a broadcasting group cannot have a push endpoint"
	case len(g.Subscriptions) == 0:
		return "the group subscribes to no topic"
	case g.Push.URL == "":
		return "no url"
	}
	if _, err := NewSigner(g.Push.Secret); err != nil {
		return err.Error()
	}
	return ""
}

// fingerprint is what restarts a group's pullers when it changes.
func fingerprint(g broker.GroupConfig) string {
	subs := make([]string, 0, len(g.Subscriptions))
	for _, s := range g.Subscriptions {
		subs = append(subs, s.Topic+"\x00"+s.TagExpression)
	}
	sort.Strings(subs)
	return fmt.Sprintf("%d|%s", g.Push.MaxConcurrency, strings.Join(subs, "|"))
}

// startGroup starts one puller per subscribed topic of g.
func (d *Dispatcher) startGroup(g broker.GroupConfig, fp string) *groupState {
	ctx, cancel := context.WithCancel(d.ctx)
	concurrency := g.Push.MaxConcurrency
	if concurrency <= 0 {
		concurrency = broker.DefaultPushConcurrency
	}
	st := &groupState{name: g.Name, fingerprint: fp, slots: make(chan struct{}, concurrency), cancel: cancel}
	st.cfg.Store(&g)
	seen := make(map[string]bool)
	for _, s := range g.Subscriptions {
		if !seen[s.Topic] {
			seen[s.Topic] = true
			st.topics = append(st.topics, s.Topic)
		}
	}
	for _, topic := range st.topics {
		d.wg.Add(1)
		go d.puller(ctx, st, topic)
	}
	return st
}

// puller long-polls one topic for one group until ctx ends or the
// endpoint is disabled.
func (d *Dispatcher) puller(ctx context.Context, st *groupState, topic string) {
	defer d.wg.Done()
	var lastErr string
	for ctx.Err() == nil && !st.isDisabled() {
		started := time.Now()
		n, wait, err := d.pollOnce(ctx, st, topic)
		switch {
		case errors.Is(err, broker.ErrShuttingDown), errors.Is(err, broker.ErrGroupNotFound):
			return // closing, or the group was deleted (runOnce forgets it)
		case err != nil:
			if err.Error() != lastErr {
				d.log.Warn().Err(err).Str("group", st.name).Str("topic", topic).Msg("push: pull failed; retrying")
				lastErr = err.Error()
			}
			sleep(ctx, d.cfg.ErrorBackoff)
		case n == 0 && ctx.Err() == nil && time.Since(started) < wait/2:
			// An empty answer long before the wait ran out: the broker is
			// closing or something is off. Do not spin.
			sleep(ctx, d.cfg.ErrorBackoff)
		default:
			lastErr = ""
		}
	}
}

// pollOnce takes at least one of the group's free slots (waiting for
// one), pulls as many messages, gives back the slots it did not use and
// starts a delivery per message. It returns the number of messages and
// the wait it asked for.
func (d *Dispatcher) pollOnce(ctx context.Context, st *groupState, topic string) (int, time.Duration, error) {
	// A pull of a deleted group would create it again (auto-create).
	if _, err := d.broker.GetGroup(ctx, st.name); errors.Is(err, broker.ErrGroupNotFound) {
		return 0, 0, err
	}
	select {
	case st.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, 0, nil
	}
	n := 1
take:
	for n < maxPull {
		select {
		case st.slots <- struct{}{}:
			n++
		default:
			break take
		}
	}
	wait := d.cfg.PollWait
	if cap(st.slots) < len(st.topics) {
		// Fewer slots than topics: a long poll would hold a slot another
		// topic's messages need.
		wait = min(wait, time.Second)
	}
	msgs, err := d.broker.Pull(broker.WithClient(ctx, d.cfg.ClientID), broker.PullRequest{
		Group:       st.name,
		Topic:       topic,
		MaxMessages: n,
		Wait:        wait,
		Invisible:   d.cfg.Lease,
	})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	for i := len(msgs); i < n; i++ {
		<-st.slots
	}
	for _, m := range msgs {
		d.wg.Add(1)
		go d.deliver(st, m)
	}
	return len(msgs), wait, err
}

// deliver POSTs one message, settles its lease by the outcome and gives
// its slot back.
func (d *Dispatcher) deliver(st *groupState, m broker.ReceivedMessage) {
	defer d.wg.Done()
	defer func() { <-st.slots }()
	f := d.track(st.name, m.Receipt)
	g := *st.cfg.Load()
	label := d.cfg.Metrics.begin(st.name)
	start := time.Now()
	var a attempt
	if st.isDisabled() {
		a = attempt{result: ResultReleased, reason: "push: the endpoint is disabled"}
	} else {
		a = d.request(d.reqCtx, g, m)
	}
	took := time.Since(start)
	if a.result == ResultGone {
		d.disable(st, g.Push.URL, a.reason)
	}
	out := Delivery{
		Group:          st.name,
		Topic:          m.Topic,
		MessageID:      m.MessageID,
		WebhookID:      webhookID(m),
		ReconsumeTimes: m.ReconsumeTimes,
		Result:         a.result,
		Status:         a.status,
		DelayLevel:     a.level,
		Reason:         a.reason,
		Took:           took,
	}
	out.Settled = d.settle(f, a)
	d.cfg.Metrics.end(label, a.result, took, a.sent)
	ev := d.log.Debug()
	if a.result != ResultOK {
		ev = d.log.Info()
	}
	ev.Str("group", st.name).Str("topic", m.Topic).Str("message_id", m.MessageID).Int32("reconsume_times", m.ReconsumeTimes).
		Str("result", a.result).Int("status", a.status).Int("delay_level", a.level).Str("reason", a.reason).
		Str("settled", string(out.Settled)).Dur("took", took).Msg("push: delivered")
	d.TestSignals.Delivered.signal(out)
}

// settle acks, nacks or releases the delivery's lease.
func (d *Dispatcher) settle(f *inflight, a attempt) broker.ReceiptStatus {
	ctx, cancel := context.WithTimeout(broker.WithClient(context.Background(), d.cfg.ClientID), d.cfg.SettleTimeout)
	defer cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	d.untrack(f)
	var res []broker.ReceiptResult
	var err error
	switch a.result {
	case ResultOK:
		res, err = d.broker.Ack(ctx, f.group, []string{f.receipt})
	case ResultReleased, ResultAbandoned:
		// Not the endpoint's failure: visible again without an attempt.
		res, err = d.broker.ChangeLease(ctx, f.group, []broker.LeaseItem{{Receipt: f.receipt}})
	default:
		res, err = d.broker.Nack(ctx, f.group, []broker.NackItem{{Receipt: f.receipt, DelayLevel: a.level, Reason: a.reason}})
	}
	if err != nil {
		d.log.Warn().Err(err).Str("group", f.group).Str("result", a.result).Msg("push: settling the lease failed; it runs out and the message comes again")
		return ""
	}
	if len(res) != 1 {
		return ""
	}
	if res[0].Status != broker.ReceiptOK {
		d.log.Warn().Str("group", f.group).Str("result", a.result).Str("status", string(res[0].Status)).Str("error", res[0].Error).
			Msg("push: the lease was lost before it was settled; the message comes again")
	}
	return res[0].Status
}

// track registers a delivery for lease extension.
func (d *Dispatcher) track(group, receipt string) *inflight {
	f := &inflight{group: group, receipt: receipt, deadline: time.Now().Add(d.cfg.Lease)}
	d.mu.Lock()
	d.inflight[f] = struct{}{}
	d.mu.Unlock()
	return f
}

func (d *Dispatcher) untrack(f *inflight) {
	d.mu.Lock()
	delete(d.inflight, f)
	d.mu.Unlock()
}

// extendLeases extends the lease of every delivery with less than half a
// lease left and returns how many it extended.
func (d *Dispatcher) extendLeases(ctx context.Context) int {
	d.mu.Lock()
	all := make([]*inflight, 0, len(d.inflight))
	for f := range d.inflight {
		all = append(all, f)
	}
	d.mu.Unlock()
	ctx = broker.WithClient(ctx, d.cfg.ClientID)
	extended := 0
	for _, f := range all {
		f.mu.Lock()
		now := time.Now()
		if f.done || f.deadline.Sub(now) >= d.cfg.Lease/2 {
			f.mu.Unlock()
			continue
		}
		res, err := d.broker.ChangeLease(ctx, f.group, []broker.LeaseItem{{Receipt: f.receipt, Invisible: d.cfg.Lease}})
		switch {
		case err != nil:
			d.log.Warn().Err(err).Str("group", f.group).Msg("push: extending a slow delivery's lease failed")
		case len(res) == 1 && res[0].Status == broker.ReceiptOK:
			f.deadline = now.Add(d.cfg.Lease)
			if res[0].NewReceipt != "" {
				f.receipt = res[0].NewReceipt
			}
			extended++
		case len(res) == 1:
			d.log.Warn().Str("group", f.group).Str("status", string(res[0].Status)).Str("error", res[0].Error).
				Msg("push: a slow delivery's lease could not be extended")
		}
		f.mu.Unlock()
	}
	return extended
}

// disable stops a group's pullers after its endpoint answered 410 Gone
// and records Disabled in the group config (retried by runOnce when that
// fails). Only the first 410 of a run of deliveries does anything.
func (d *Dispatcher) disable(st *groupState, url, reason string) {
	st.mu.Lock()
	if st.disabled {
		st.mu.Unlock()
		return
	}
	st.disabled, st.disabledURL, st.reason = true, url, reason
	st.mu.Unlock()
	st.cancel()
	d.persistDisable(st)
}

// persistDisable writes Disabled into the group config, unless the
// endpoint changed or went away meanwhile.
func (d *Dispatcher) persistDisable(st *groupState) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.SettleTimeout)
	defer cancel()
	st.mu.Lock()
	url, reason := st.disabledURL, st.reason
	st.mu.Unlock()
	err := func() error {
		g, err := d.broker.GetGroup(ctx, st.name)
		if errors.Is(err, broker.ErrGroupNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if g.Push == nil || g.Push.URL != url || g.Push.Disabled {
			return nil // changed meanwhile: nothing to disable
		}
		p := *g.Push // the registry's value is shared: copy, never modify
		p.Disabled, p.DisabledReason = true, fmt.Sprintf("%s (at %s)", reason, time.Now().UTC().Format(time.RFC3339))
		g.Push = &p
		_, _, err = d.broker.PutGroup(ctx, g)
		return err
	}()
	if err != nil {
		d.log.Error().Err(err).Str("group", st.name).Msg("push: disabling the endpoint in the group config failed; retrying")
		return
	}
	st.mu.Lock()
	st.persisted = time.Now()
	st.mu.Unlock()
	d.log.Warn().Str("group", st.name).Str("url", url).Msg("push: the endpoint answered 410 Gone; disabled until a PUT of the group enables it")
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
