package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// groupCmd is mqadmin's consumer-group commands: updateSubGroup,
// deleteSubGroup, consumerProgress, resetOffsetByTime,
// skipAccumulatedMessage.
type groupCmd struct {
	adminFlags `embed:""`

	List        groupListCmd        `cmd:"" help:"List the consumer groups."`
	Get         groupGetCmd         `cmd:"" help:"Show one group."`
	Put         groupPutCmd         `cmd:"" help:"Create a group, or replace it (fields left out take their defaults)."`
	Patch       groupPatchCmd       `cmd:"" help:"Change the given fields of a group (JSON merge patch)."`
	Delete      groupDeleteCmd      `cmd:"" help:"Delete a group and its progress."`
	Progress    groupProgressCmd    `cmd:"" help:"Per queue: broker offset, consumer offset, lag and leases in flight (mqadmin consumerProgress)."`
	ResetOffset groupResetOffsetCmd `cmd:"" name:"reset-offset" help:"Move the group to the first message stored at or after --timestamp (mqadmin resetOffsetByTime)."`
	SkipBacklog groupSkipBacklogCmd `cmd:"" name:"skip-backlog" help:"Move the group to the end of its queues: what is stored now is skipped (mqadmin skipAccumulatedMessage)."`
}

// groupArg is the group a subcommand acts on.
type groupArg struct {
	Group string `arg:"" help:"Consumer group name." predictor:"group"`
}

type groupListCmd struct{}

func (groupListCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.ListGroupsWithResponse(ctx))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) {
		groupHeader(t)
		for _, g := range res.JSON200.Groups {
			groupRow(t, g)
		}
	})
}

func groupHeader(t *table) {
	t.row("NAME", "MODE", "SUBSCRIPTIONS", "CONSUME-FROM", "RETRY-MAX-TIMES", "RETRY-POLICY", "ORDERLY", "INVISIBLE", "PUSH")
}

func groupRow(t *table, g mqgate.Group) {
	subs := make([]string, len(g.Subscriptions))
	for i, s := range g.Subscriptions {
		subs[i] = s.Topic
		if s.TagExpression != nil && *s.TagExpression != "" && *s.TagExpression != "*" {
			subs[i] += ":" + *s.TagExpression
		}
		if s.Sql != nil && *s.Sql != "" {
			subs[i] += " [sql]"
		}
	}
	push := "-"
	if g.Push != nil {
		push = g.Push.Url
		if g.Push.Disabled {
			push += " (disabled)"
		}
	}
	t.row(g.Name, string(g.ConsumeMode), cell(subs), g.ConsumeFrom, cell(g.RetryMaxTimes), string(g.RetryPolicy.Backoff), cell(g.Orderly), ms(g.InvisibleMs), push)
}

func (a *admin) printGroup(raw []byte, g *mqgate.Group) error {
	return a.out.print(raw, func(t *table) {
		groupHeader(t)
		groupRow(t, *g)
	})
}

type groupGetCmd struct{ groupArg }

func (c *groupGetCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetGroupWithResponse(ctx, c.Group))
	if err != nil {
		return err
	}
	return a.printGroup(res.Body, res.JSON200)
}

// groupFields are a group's fields as flags, each optional; --file gives
// the whole JSON body instead (GroupRequest or GroupPatch), the flags
// then change it.
type groupFields struct {
	File          string   `help:"The request body as JSON (@file, @- for standard input, or the JSON itself); the flags below change it." placeholder:"JSON|@FILE"`
	Subscription  []string `sep:"none" help:"A subscription (repeat it): TOPIC or TOPIC:TAG-EXPRESSION ('orders:created || paid'). Replaces the group's whole list." placeholder:"TOPIC[:TAGS]"`
	SQL           []string `name:"sql" sep:"none" help:"The SQL92 property filter of a subscription: TOPIC:EXPRESSION (adds the subscription when --subscription does not list it)." placeholder:"TOPIC:SQL"`
	ConsumeFrom   *string  `help:"Where the group starts in a topic it subscribes to: first, last or an RFC 3339 time."`
	ConsumeMode   *string  `help:"clustering (pop, the default) or broadcasting (offset API)." enum:"clustering,broadcasting,"`
	InvisibleMs   *int64   `help:"Default lease of a pulled message (ms)."`
	Orderly       *bool    `help:"One message in flight per sharding key." negatable:""`
	RetryMaxTimes *int     `help:"Retries before the dead-letter queue."`
	PushURL       *string  `name:"push-url" help:"Push endpoint (webhook): the group's messages are POSTed to it."`
}

// body builds the JSON object of the fields given, over --file's.
func (f *groupFields) body() (map[string]any, error) {
	out := map[string]any{}
	if f.File != "" {
		raw, err := readArg(f.File)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
	}
	if len(f.Subscription) > 0 || len(f.SQL) > 0 {
		var subs []map[string]any
		index := map[string]int{}
		add := func(topic string) map[string]any {
			if i, ok := index[topic]; ok {
				return subs[i]
			}
			index[topic] = len(subs)
			subs = append(subs, map[string]any{"topic": topic})
			return subs[len(subs)-1]
		}
		for _, s := range f.Subscription {
			topic, tags, _ := strings.Cut(s, ":")
			sub := add(topic)
			if tags != "" {
				sub["tagExpression"] = tags
			}
		}
		for _, s := range f.SQL {
			topic, sql, ok := strings.Cut(s, ":")
			if !ok || sql == "" {
				return nil, fmt.Errorf("--sql %q: want TOPIC:EXPRESSION", s)
			}
			add(topic)["sql"] = sql
		}
		out["subscriptions"] = subs
	}
	set := func(name string, v any) { out[name] = v }
	if f.ConsumeFrom != nil {
		set("consumeFrom", *f.ConsumeFrom)
	}
	if f.ConsumeMode != nil {
		set("consumeMode", *f.ConsumeMode)
	}
	if f.InvisibleMs != nil {
		set("invisibleMs", *f.InvisibleMs)
	}
	if f.Orderly != nil {
		set("orderly", *f.Orderly)
	}
	if f.RetryMaxTimes != nil {
		set("retryMaxTimes", *f.RetryMaxTimes)
	}
	if f.PushURL != nil {
		push, _ := out["push"].(map[string]any)
		if push == nil {
			push = map[string]any{}
		}
		push["url"] = *f.PushURL
		set("push", push)
	}
	return out, nil
}

type groupPutCmd struct {
	groupArg
	groupFields
}

func (c *groupPutCmd) Run(ctx context.Context, a *admin) error {
	body, err := c.body()
	if err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.PutGroupWithBodyWithResponse(ctx, c.Group, "application/json", bytes.NewReader(b)))
	if err != nil {
		return err
	}
	g := res.JSON200
	if g == nil {
		g = res.JSON201
	}
	return a.printGroup(res.Body, g)
}

type groupPatchCmd struct {
	groupArg
	groupFields
}

func (c *groupPatchCmd) Run(ctx context.Context, a *admin) error {
	body, err := c.body()
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return errors.New("nothing to change: give a field's flag or --file")
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.PatchGroupWithBodyWithResponse(ctx, c.Group, "application/merge-patch+json", bytes.NewReader(b)))
	if err != nil {
		return err
	}
	return a.printGroup(res.Body, res.JSON200)
}

type groupDeleteCmd struct{ groupArg }

func (c *groupDeleteCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	if _, err := apiCall(a.c.DeleteGroupWithResponse(ctx, c.Group)); err != nil {
		return err
	}
	return a.out.done("deleted group %s", c.Group)
}

type groupProgressCmd struct{ groupArg }

func (c *groupProgressCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetProgressWithResponse(ctx, c.Group))
	if err != nil {
		return err
	}
	return a.printProgress(res.Body, res.JSON200)
}

// printProgress prints a group's progress: its queues, then what waits
// for it in the delay ladder, then the total.
func (a *admin) printProgress(raw []byte, p *mqgate.Progress) error {
	return a.out.print(raw, func(t *table) {
		t.row("TOPIC", "QUEUE", "BROKER-OFFSET", "CONSUMER-OFFSET", "LAG", "IN-FLIGHT", "LAST-STORED")
		for _, q := range p.Queues {
			queue := cell(q.QueueId)
			if q.QueueId == -1 {
				queue = "retry"
			}
			lag := cell(q.Lag)
			if q.LagIsLowerBound != nil && *q.LagIsLowerBound {
				lag = "≥" + lag
			}
			t.row(q.Topic, queue, cell(q.BrokerOffset), cell(q.ConsumerOffset), lag, cell(q.InFlight), cell(q.LastStoredAt))
		}
		total := cell(p.TotalLag)
		if p.TotalLagIsLowerBound != nil && *p.TotalLagIsLowerBound {
			total = "≥" + total
		}
		t.row("retries waiting", "", "", "", cell(p.Retry.Total), "", "")
		t.row("delayed", "", "", "", cell(p.Delayed.Total), "", "")
		t.row("total lag", "", "", "", total, "", "")
		for _, n := range p.Notes {
			t.row("note: " + n)
		}
	})
}

type groupResetOffsetCmd struct {
	groupArg
	Topic     string    `help:"Only this topic (default: every topic of the group)." predictor:"topic"`
	Timestamp time.Time `required:"" help:"RFC 3339 time: the group goes to the first message stored at or after it." format:"2006-01-02T15:04:05Z07:00"`
}

func (c *groupResetOffsetCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	req := mqgate.ResetOffsetRequest{Timestamp: c.Timestamp}
	if c.Topic != "" {
		req.Topic = &c.Topic
	}
	res, err := apiCall(a.c.ResetOffsetsWithResponse(ctx, c.Group, nil, req))
	if err != nil {
		return err
	}
	return a.printProgress(res.Body, res.JSON200)
}

type groupSkipBacklogCmd struct {
	groupArg
	Topic string `help:"Only this topic (default: every topic of the group)." predictor:"topic"`
}

// Run commits each queue's broker offset as the group's (the retry view
// is left alone: retries already due are still delivered).
func (c *groupSkipBacklogCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	prog, err := apiCall(a.c.GetProgressWithResponse(ctx, c.Group))
	if err != nil {
		return err
	}
	var commits []mqgate.QueueOffset
	for _, q := range prog.JSON200.Queues {
		if q.QueueId >= 0 && (c.Topic == "" || q.Topic == c.Topic) && q.ConsumerOffset < q.BrokerOffset {
			commits = append(commits, mqgate.QueueOffset{Topic: q.Topic, QueueId: q.QueueId, Offset: q.BrokerOffset})
		}
	}
	if len(commits) > 0 {
		if _, err := apiCall(a.c.CommitOffsetsWithResponse(ctx, c.Group, nil, mqgate.Offsets{Offsets: commits})); err != nil {
			return err
		}
	}
	res, err := apiCall(a.c.GetProgressWithResponse(ctx, c.Group))
	if err != nil {
		return err
	}
	return a.printProgress(res.Body, res.JSON200)
}
