package push

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

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
