package push

import (
	"context"
	"errors"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

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
		// A pull of a deleted group must not create it again (auto-create),
		// also when the group is deleted while this pull waits to start.
		NoAutoCreate: true,
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
	d.tracePushed(st.name, m.Receipt, a)
	out.Settled = d.settle(f, a)
	d.cfg.Metrics.end(label, a.result, took, a.sent)
	// A delivery the endpoint failed is a failure (warn); one given back
	// without an attempt (released, abandoned) is not; a success is debug.
	ev, msg := d.log.Warn(), "push: delivery failed"
	switch a.result {
	case ResultOK:
		ev, msg = d.log.Debug(), "push: delivered"
	case ResultReleased, ResultAbandoned:
		ev, msg = d.log.Info(), "push: delivery given back"
	}
	ev.Str("group", st.name).Str("topic", m.Topic).Str("message_id", m.MessageID).Int32("reconsume_times", m.ReconsumeTimes).
		Str("result", a.result).Int("status", a.status).Int("delay_level", a.level).Str("reason", a.reason).
		Str("settled", string(out.Settled)).Dur("took", took).Msg(msg)
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
