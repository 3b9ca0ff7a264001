package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// dlqCmd is the dead-letter queue of a group: list, read, resend, discard,
// export (mqadmin has only queryMsgByQueue on %DLQ% topics).
type dlqCmd struct {
	adminFlags `embed:""`

	List    dlqListCmd    `cmd:"" help:"List a group's dead letters, oldest first."`
	Get     dlqGetCmd     `cmd:"" help:"Show one dead letter with its body and attempt history."`
	Resend  dlqResendCmd  `cmd:"" help:"Deliver dead letters to the group again (by id, or every dead one matching the filter flags)."`
	Discard dlqDiscardCmd `cmd:"" help:"Discard dead letters by id."`
	Export  dlqExportCmd  `cmd:"" help:"Write the dead letters matching the filter, with their bodies, as NDJSON (one JSON object a line) to standard output."`
}

// dlqFilter are the filter flags of a listing (the API's DLQFilter).
type dlqFilter struct {
	OriginalTopic  string    `help:"Only letters of this topic." predictor:"topic"`
	From           time.Time `help:"Dead at or after this RFC 3339 time." format:"2006-01-02T15:04:05Z07:00"`
	To             time.Time `help:"Dead at or before this RFC 3339 time." format:"2006-01-02T15:04:05Z07:00"`
	ReasonContains string    `help:"Case-insensitive text in the last failure's reason."`
}

func (f dlqFilter) params(p *mqgate.ListDeadLettersParams) {
	if f.OriginalTopic != "" {
		p.OriginalTopic = &f.OriginalTopic
	}
	if !f.From.IsZero() {
		p.From = &f.From
	}
	if !f.To.IsZero() {
		p.To = &f.To
	}
	if f.ReasonContains != "" {
		p.ReasonContains = &f.ReasonContains
	}
}

func (f dlqFilter) empty() bool {
	return f.OriginalTopic == "" && f.From.IsZero() && f.To.IsZero() && f.ReasonContains == ""
}

type dlqListCmd struct {
	groupArg
	dlqFilter
	Status string `help:"Only letters in this status." enum:"dead,resent,discarded," default:""`
	Limit  int    `help:"Page size (1-500)." default:"100"`
	Cursor string `help:"The next cursor of the previous page."`
	All    bool   `help:"Follow the cursors to the last page (table output)."`
}

func (c *dlqListCmd) Run(ctx context.Context, a *admin) error {
	p := mqgate.ListDeadLettersParams{Limit: &c.Limit}
	c.params(&p)
	if c.Status != "" {
		p.Status = mqgate.Ptr(mqgate.ListDeadLettersParamsStatus(c.Status))
	}
	if c.Cursor != "" {
		p.Cursor = &c.Cursor
	}
	var items []mqgate.DeadLetter
	var raw []byte
	var next *string
	for {
		rctx, cancel := a.ctx(ctx, 0)
		res, err := apiCall(a.c.ListDeadLettersWithResponse(rctx, c.Group, &p))
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
		if raw, err = json.Marshal(mqgate.DeadLetterList{Items: items}); err != nil {
			return err
		}
	}
	return a.out.print(raw, func(t *table) {
		t.row("MESSAGE-ID", "ORIGIN-MESSAGE-ID", "TOPIC", "RECONSUME", "DEAD-AT", "STATUS", "REASON")
		for _, d := range items {
			t.row(d.MessageId, d.OriginMessageId, d.OriginalTopic, cell(d.ReconsumeTimes), cell(d.DeadAt), string(d.Status), body(d.Reason, ""))
		}
		if next != nil && *next != "" {
			t.row("next: " + *next)
		}
	})
}

type dlqGetCmd struct {
	groupArg
	MessageID string `arg:"" name:"message-id" help:"The dead letter's id."`
}

func (c *dlqGetCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetDeadLetterWithResponse(ctx, c.Group, c.MessageID))
	if err != nil {
		return err
	}
	d := res.JSON200
	return a.out.print(res.Body, func(t *table) {
		t.kv("messageId", d.MessageId)
		t.kv("originMessageId", d.OriginMessageId)
		t.kv("originalTopic", d.OriginalTopic)
		t.kv("status", string(d.Status))
		t.kv("reconsumeTimes", d.ReconsumeTimes)
		t.kv("firstFailedAt", d.FirstFailedAt)
		t.kv("deadAt", d.DeadAt)
		t.kv("reason", d.Reason)
		t.kv("tag", d.Tag)
		t.kv("keys", d.Keys)
		t.kv("properties", d.Properties)
		enc := ""
		if d.BodyEncoding != nil {
			enc = string(*d.BodyEncoding)
		}
		if d.Body != nil {
			t.kv("body", body(*d.Body, enc))
		}
		for i, at := range d.Attempts {
			t.kv("attempt "+cell(i+1), cell(at.At)+" "+string(at.Outcome)+" "+cell(at.Client)+" "+cell(at.Reason))
		}
	})
}

type dlqResendCmd struct {
	groupArg
	MessageIDs []string `arg:"" optional:"" name:"message-id" help:"Dead letters to resend (or give filter flags)."`
	dlqFilter
}

func (c *dlqResendCmd) Run(ctx context.Context, a *admin) error {
	req := mqgate.ResendRequest{MessageIds: c.MessageIDs}
	switch {
	case len(c.MessageIDs) > 0 && !c.empty():
		return errors.New("give message ids or filter flags, not both")
	case len(c.MessageIDs) == 0 && c.empty():
		return errors.New("give message ids or filter flags (--original-topic, --from, --to, --reason-contains)")
	case len(c.MessageIDs) == 0:
		f := mqgate.DLQFilter{}
		if c.OriginalTopic != "" {
			f.OriginalTopic = &c.OriginalTopic
		}
		if !c.From.IsZero() {
			f.From = &c.From
		}
		if !c.To.IsZero() {
			f.To = &c.To
		}
		if c.ReasonContains != "" {
			f.ReasonContains = &c.ReasonContains
		}
		req.Filter = &f
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.ResendDeadLettersWithResponse(ctx, c.Group, req))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) {
		t.row("MESSAGE-ID", "RESULT")
		for _, id := range res.JSON200.Resent {
			t.row(id, "resent")
		}
		for _, id := range res.JSON200.Skipped {
			t.row(id, "skipped")
		}
	})
}

type dlqDiscardCmd struct {
	groupArg
	MessageIDs []string `arg:"" name:"message-id" help:"Dead letters to discard."`
}

func (c *dlqDiscardCmd) Run(ctx context.Context, a *admin) error {
	for _, id := range c.MessageIDs {
		rctx, cancel := a.ctx(ctx, 0)
		_, err := apiCall(a.c.DiscardDeadLetterWithResponse(rctx, c.Group, id))
		cancel()
		if err != nil {
			return err
		}
		if err := a.out.done("discarded %s", id); err != nil {
			return err
		}
	}
	return nil
}

type dlqExportCmd struct {
	groupArg
	dlqFilter
	Status string `help:"Only letters in this status." enum:"dead,resent,discarded," default:""`
}

// Run pages through the listing and reads each letter for its body; each
// line is the API's DeadLetter object.
func (c *dlqExportCmd) Run(ctx context.Context, a *admin) error {
	p := mqgate.ListDeadLettersParams{Limit: mqgate.Ptr(500)}
	c.params(&p)
	if c.Status != "" {
		p.Status = mqgate.Ptr(mqgate.ListDeadLettersParamsStatus(c.Status))
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for {
		rctx, cancel := a.ctx(ctx, 0)
		res, err := apiCall(a.c.ListDeadLettersWithResponse(rctx, c.Group, &p))
		cancel()
		if err != nil {
			return err
		}
		for _, d := range res.JSON200.Items {
			gctx, cancel := a.ctx(ctx, 0)
			one, err := apiCall(a.c.GetDeadLetterWithResponse(gctx, c.Group, d.MessageId))
			cancel()
			if err != nil {
				return err
			}
			var line bytes.Buffer
			if err := json.Compact(&line, one.Body); err != nil {
				return err
			}
			line.WriteByte('\n')
			if _, err := w.Write(line.Bytes()); err != nil {
				return err
			}
		}
		next := res.JSON200.Next
		if next == nil || *next == "" {
			return w.Flush()
		}
		p.Cursor = next
	}
}
