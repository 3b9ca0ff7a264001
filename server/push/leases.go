package push

import (
	"context"

	"github.com/mqgate/mqgate/server/broker"
)

// track registers a delivery for lease extension.
func (d *Dispatcher) track(group, receipt string) *inflight {
	f := &inflight{group: group, receipt: receipt, deadline: d.cfg.Clock.Now().Add(d.cfg.Lease)}
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
		now := d.cfg.Clock.Now()
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
