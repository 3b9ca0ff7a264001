package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// timerCmd is the pending delayMs/deliverAt timers: list, read, cancel,
// reschedule (RocketMQ 5's timer messages have no mqadmin equivalent).
type timerCmd struct {
	adminFlags `embed:""`

	List       timerListCmd       `cmd:"" help:"List pending timers, soonest first."`
	Get        timerGetCmd        `cmd:"" help:"Show one pending timer."`
	Cancel     timerCancelCmd     `cmd:"" help:"Cancel pending timers: their messages are never delivered."`
	Reschedule timerRescheduleCmd `cmd:"" help:"Move a pending timer (--delay-ms from now, or --deliver-at)."`
}

// timerArg is the timer a subcommand acts on.
type timerArg struct {
	ID string `arg:"" name:"id" help:"Timer id: the messageId its send answered."`
}

func timerHeader(t *table) {
	t.row("ID", "TOPIC", "QUEUE", "DELIVER-AT", "SCHEDULED-AT", "TAG", "KEYS")
}

func timerRow(t *table, tm mqgate.Timer) {
	t.row(tm.Id, tm.Topic, cell(tm.QueueId), cell(tm.DeliverAt), cell(tm.ScheduledAt), cell(tm.Tag), cell(tm.Keys))
}

type timerListCmd struct {
	Topic  string `help:"Only timers of this topic (%RETRY%<group> for a group's timed retries)." predictor:"topic"`
	Limit  int    `help:"Page size (1-500)." default:"100"`
	Cursor string `help:"The next cursor of the previous page."`
	All    bool   `help:"Follow the cursors to the last page."`
}

func (c *timerListCmd) Run(ctx context.Context, a *admin) error {
	p := mqgate.ListTimersParams{Limit: &c.Limit}
	if c.Topic != "" {
		p.Topic = &c.Topic
	}
	if c.Cursor != "" {
		p.Cursor = &c.Cursor
	}
	var items []mqgate.Timer
	var raw []byte
	var next *string
	for {
		rctx, cancel := a.ctx(ctx, 0)
		res, err := apiCall(a.c.ListTimersWithResponse(rctx, &p))
		cancel()
		if err != nil {
			return err
		}
		items, raw, next = append(items, res.JSON200.Items...), res.Body, res.JSON200.Next
		if !c.All || next == nil || *next == "" {
			break
		}
		p.Cursor = next
	}
	if c.All {
		var err error
		if raw, err = json.Marshal(mqgate.TimerList{Items: items}); err != nil {
			return err
		}
	}
	return a.out.print(raw, func(t *table) {
		timerHeader(t)
		for _, tm := range items {
			timerRow(t, tm)
		}
		if next != nil && *next != "" {
			t.row("next: " + *next)
		}
	})
}

type timerGetCmd struct{ timerArg }

func (c *timerGetCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetTimerWithResponse(ctx, c.ID))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) {
		timerHeader(t)
		timerRow(t, *res.JSON200)
	})
}

type timerCancelCmd struct {
	IDs []string `arg:"" name:"id" help:"Timer ids."`
}

func (c *timerCancelCmd) Run(ctx context.Context, a *admin) error {
	for _, id := range c.IDs {
		rctx, cancel := a.ctx(ctx, 0)
		_, err := apiCall(a.c.CancelTimerWithResponse(rctx, id))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if err := a.out.done("cancelled timer %s", id); err != nil {
			return err
		}
	}
	return nil
}

type timerRescheduleCmd struct {
	timerArg
	DelayMs   *int64    `help:"Deliver this many milliseconds from now."`
	DeliverAt time.Time `help:"Deliver at this RFC 3339 time." format:"2006-01-02T15:04:05Z07:00"`
}

func (c *timerRescheduleCmd) Run(ctx context.Context, a *admin) error {
	var req mqgate.RescheduleRequest
	switch {
	case c.DelayMs != nil && !c.DeliverAt.IsZero():
		return errors.New("give --delay-ms or --deliver-at, not both")
	case c.DelayMs != nil:
		req.DelayMs = c.DelayMs
	case !c.DeliverAt.IsZero():
		req.DeliverAt = &c.DeliverAt
	default:
		return errors.New("give --delay-ms or --deliver-at")
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.RescheduleTimerWithResponse(ctx, c.ID, req))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) {
		timerHeader(t)
		timerRow(t, *res.JSON200)
	})
}

// brokerCmd is mqadmin's brokerStatus.
type brokerCmd struct {
	adminFlags `embed:""`

	Status brokerStatusCmd `cmd:"" help:"The broker's state: store, dispatcher, scheduler, timers, disk, quarantine, transactions."`
}

type brokerStatusCmd struct{}

func (brokerStatusCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetBrokerStatusWithResponse(ctx))
	if err != nil {
		return err
	}
	s := res.JSON200
	return a.out.print(res.Body, func(t *table) {
		t.kv("flushMode", string(s.FlushMode))
		t.kv("uptime", (time.Duration(s.UptimeMs) * time.Millisecond).Round(time.Second).String())
		t.kv("storeBytes", s.StoreBytes)
		t.kv("commitLog", fmt.Sprintf("%d..%d", s.CommitLogMinOffset, s.CommitLogMaxOffset))
		t.kv("dispatch", fmt.Sprintf("offset %d, lag %d bytes, %s behind", s.Dispatch.DispatchedOffset, s.Dispatch.LagBytes, ms(s.Dispatch.DelayMs)))
		if s.Dispatch.Error != nil {
			t.kv("dispatchError", s.Dispatch.Error)
		}
		t.kv("scheduledTotal", s.ScheduledTotal)
		t.kv("schedulerLateness", fmt.Sprintf("p50 %gms, p99 %gms, max %gms", s.SchedulerLatenessP50Ms, s.SchedulerLatenessP99Ms, s.SchedulerLatenessMaxMs))
		for _, l := range s.DelayLevels {
			if l.Backlog > 0 {
				t.kv(fmt.Sprintf("delayLevel %d (%s)", l.Level, ms(l.DelayMs)), fmt.Sprintf("backlog %d, next due %s", l.Backlog, cell(l.NextDueAt)))
			}
		}
		t.kv("timersPending", s.TimersPending)
		t.kv("nextTimerAt", s.NextTimerAt)
		t.kv("transactionsPending", s.Transactions.Pending)
		t.kv("disk", fmt.Sprintf("used %.1f%%, sends refused %s", s.Disk.UsedRatio*100, cell(s.Disk.SendsRefused)))
		t.kv("scrub", fmt.Sprintf("%d passes, %d bad frames", s.Scrub.Passes, s.Scrub.BadFrames))
		t.kv("quarantined", s.Quarantine.Count)
	})
}
