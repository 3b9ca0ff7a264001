package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// topicCmd is mqadmin's topicList, topicRoute/updateTopic, deleteTopic
// and topicStatus.
type topicCmd struct {
	adminFlags `embed:""`

	List   topicListCmd   `cmd:"" help:"List the topics."`
	Get    topicGetCmd    `cmd:"" help:"Show one topic."`
	Put    topicPutCmd    `cmd:"" help:"Create a topic, or replace its settings (fields left out take their defaults)."`
	Patch  topicPatchCmd  `cmd:"" help:"Change the given settings of a topic (JSON merge patch)."`
	Delete topicDeleteCmd `cmd:"" help:"Delete a topic and its messages."`
	Status topicStatusCmd `cmd:"" help:"Per queue: the first retained offset, the next offset and the newest message's store time (mqadmin topicStatus)."`
}

// topicArg is the topic a subcommand acts on.
type topicArg struct {
	Topic string `arg:"" help:"Topic name." predictor:"topic"`
}

type topicListCmd struct{}

func (topicListCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.ListTopicsWithResponse(ctx))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) {
		topicHeader(t)
		for _, tp := range res.JSON200.Topics {
			topicRow(t, tp)
		}
	})
}

func topicHeader(t *table) { t.row("NAME", "QUEUES", "PERM", "RETENTION-HOURS", "CREATED") }

func topicRow(t *table, tp mqgate.Topic) {
	t.row(tp.Name, cell(tp.Queues), string(tp.Perm), cell(tp.RetentionHours), cell(tp.CreatedAt))
}

// printTopic prints one topic answer.
func (a *admin) printTopic(raw []byte, tp *mqgate.Topic) error {
	return a.out.print(raw, func(t *table) {
		topicHeader(t)
		topicRow(t, *tp)
	})
}

type topicGetCmd struct{ topicArg }

func (c *topicGetCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetTopicWithResponse(ctx, c.Topic))
	if err != nil {
		return err
	}
	return a.printTopic(res.Body, res.JSON200)
}

// topicFields are the settings of a topic, each optional.
type topicFields struct {
	Queues         *int    `help:"Number of queues (1-1024; never fewer than before)."`
	RetentionHours *int    `help:"Hours messages are kept (0: the store default)."`
	Perm           *string `help:"rw, r (no sends) or w (no consumption)." enum:"rw,r,w,"`
}

type topicPutCmd struct {
	topicArg
	topicFields
}

func (c *topicPutCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	req := mqgate.TopicRequest{Queues: c.Queues, RetentionHours: c.RetentionHours}
	if c.Perm != nil {
		req.Perm = mqgate.Ptr(mqgate.TopicRequestPerm(*c.Perm))
	}
	res, err := apiCall(a.c.PutTopicWithResponse(ctx, c.Topic, req))
	if err != nil {
		return err
	}
	tp := res.JSON200
	if tp == nil {
		tp = res.JSON201
	}
	return a.printTopic(res.Body, tp)
}

type topicPatchCmd struct {
	topicArg
	topicFields
}

func (c *topicPatchCmd) Run(ctx context.Context, a *admin) error {
	patch := map[string]any{}
	if c.Queues != nil {
		patch["queues"] = *c.Queues
	}
	if c.RetentionHours != nil {
		patch["retentionHours"] = *c.RetentionHours
	}
	if c.Perm != nil {
		patch["perm"] = *c.Perm
	}
	if len(patch) == 0 {
		return fmt.Errorf("nothing to change: give --queues, --retention-hours or --perm")
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.PatchTopicWithBodyWithResponse(ctx, c.Topic, "application/merge-patch+json", bytes.NewReader(b)))
	if err != nil {
		return err
	}
	return a.printTopic(res.Body, res.JSON200)
}

type topicDeleteCmd struct{ topicArg }

func (c *topicDeleteCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	if _, err := apiCall(a.c.DeleteTopicWithResponse(ctx, c.Topic)); err != nil {
		return err
	}
	return a.out.done("deleted topic %s", c.Topic)
}

type topicStatusCmd struct{ topicArg }

func (c *topicStatusCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetTopicStatusWithResponse(ctx, c.Topic))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) {
		t.row("QUEUE", "MIN-OFFSET", "MAX-OFFSET", "MESSAGES", "LAST-STORED")
		for _, q := range res.JSON200.Queues {
			t.row(cell(q.QueueId), cell(q.MinOffset), cell(q.MaxOffset), cell(q.MaxOffset-q.MinOffset), cell(q.LastStoredAt))
		}
		t.row("total", "", "", cell(res.JSON200.Messages), "")
	})
}
