package push

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/server/broker"
)

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
	wg                  sync.WaitGroup   // pullers and deliveries
	refresher           *worker.Periodic // calls runOnce every RefreshInterval
	startOnce, stopOnce sync.Once
	unhookCtx           func() bool // undoes Start's context.AfterFunc (guarded by runMu)
	lastErr             string      // the refresher's last logged error

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
	d.refresher = worker.Every(cfg.RefreshInterval, func(context.Context, time.Time) { d.refresh() })
	return d, nil
}

// Start runs the dispatcher until ctx ends or Stop is called: a loop that
// calls runOnce every RefreshInterval, and the pullers and deliveries it
// starts.
func (d *Dispatcher) Start(ctx context.Context) {
	d.startOnce.Do(func() {
		d.runMu.Lock()
		defer d.runMu.Unlock()
		if d.stopped {
			return
		}
		d.unhookCtx = context.AfterFunc(ctx, d.cancel)
		d.refresher.Kick() // the first run at once
		d.refresher.Start(d.ctx)
	})
}

// refresh is one pass of the Start loop: runOnce, its log lines and its
// test signal.
func (d *Dispatcher) refresh() {
	res, err := d.runOnce(d.ctx)
	switch {
	case err != nil && d.ctx.Err() == nil && err.Error() != d.lastErr:
		d.log.Warn().Err(err).Msg("push: reading the groups failed")
		d.lastErr = err.Error()
	case err == nil:
		d.lastErr = ""
	}
	if res.changed() {
		d.log.Debug().Int("push_groups", res.PushGroups).Int("active", res.Active).Int("started", res.Started).
			Int("stopped", res.Stopped).Int("extended", res.Extended).Msg("push: run")
	}
	d.TestSignals.Ran.signal(res)
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
		unhook := d.unhookCtx
		d.runMu.Unlock()
		done := make(chan struct{})
		go func() {
			d.refresher.Stop()
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
		if unhook != nil {
			unhook()
		}
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
		subs = append(subs, s.Topic+"\x00"+s.TagExpression+"\x00"+s.SQL)
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

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
