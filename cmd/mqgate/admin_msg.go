package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// msgCmd is mqadmin's queryMsgById, queryMsgByKey and printMsg, and the
// producer's and consumer's calls.
type msgCmd struct {
	adminFlags `embed:""`

	Get   msgGetCmd   `cmd:"" help:"Show a message by id."`
	Find  msgFindCmd  `cmd:"" help:"Find a topic's messages by key (--key) or by store time (--from, --to)."`
	Send  msgSendCmd  `cmd:"" help:"Send one message."`
	Pull  msgPullCmd  `cmd:"" help:"Pull (lease) messages of a topic for a group; --ack acks them."`
	Ack   msgAckCmd   `cmd:"" help:"Ack leased messages by receipt."`
	Nack  msgNackCmd  `cmd:"" help:"Nack leased messages: retry later (--delay-level, --delay-ms) or dead-letter them (--delay-level=-1)."`
	Trace msgTraceCmd `cmd:"" help:"Show the life of a message across its copies (stored, delivered, nacked, retried, dead-lettered, ...)."`
}

func messageHeader(t *table) {
	t.row("MESSAGE-ID", "TOPIC", "QUEUE", "OFFSET", "RECONSUME", "TAG", "KEYS", "STORED", "BODY")
}

func messageRow(t *table, m mqgate.Message) {
	t.row(m.MessageId, m.Topic, cell(m.QueueId), cell(m.QueueOffset), cell(m.ReconsumeTimes), cell(m.Tag), cell(m.Keys), cell(m.StoredAt), body(m.Body, string(m.BodyEncoding)))
}

type msgTraceCmd struct {
	MessageID string `arg:"" name:"message-id" help:"Any id of the message: its own, a retry's, a dead letter's."`
}

func (c *msgTraceCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetMessageTraceWithResponse(ctx, c.MessageID))
	if err != nil {
		return err
	}
	tr := res.JSON200
	return a.out.print(res.Body, func(t *table) {
		t.row("AT", "TYPE", "GROUP", "CLIENT", "TOPIC", "QUEUE", "OFFSET", "MESSAGE-ID", "DETAIL")
		for _, e := range tr.Events {
			detail := ""
			switch {
			case e.Reason != nil:
				detail = *e.Reason
			case e.HttpStatus != nil:
				detail = "HTTP " + cell(e.HttpStatus)
			case e.RetryMessageId != nil:
				detail = "as " + *e.RetryMessageId
			case e.Count != nil:
				detail = cell(e.Count) + " events left out"
			}
			id := e.MessageId
			if id == nil {
				id = e.DeadLetterId
			}
			t.row(cell(e.At), string(e.Type), cell(e.Group), cell(e.ClientId), cell(e.Topic), cell(e.QueueId), cell(e.QueueOffset), cell(id), detail)
		}
	})
}

type msgGetCmd struct {
	MessageID string `arg:"" name:"message-id" help:"Message id (as a send answered it)."`
}

func (c *msgGetCmd) Run(ctx context.Context, a *admin) error {
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.GetMessageWithResponse(ctx, c.MessageID))
	if err != nil {
		return err
	}
	m := res.JSON200
	return a.out.print(res.Body, func(t *table) {
		t.kv("messageId", m.MessageId)
		t.kv("topic", m.Topic)
		t.kv("queueId", m.QueueId)
		t.kv("queueOffset", m.QueueOffset)
		t.kv("tag", m.Tag)
		t.kv("keys", m.Keys)
		t.kv("properties", m.Properties)
		t.kv("reconsumeTimes", m.ReconsumeTimes)
		t.kv("originMessageId", m.OriginMessageId)
		t.kv("bornAt", m.BornAt)
		t.kv("storedAt", m.StoredAt)
		t.kv("bodyEncoding", string(m.BodyEncoding))
		t.kv("body", body(m.Body, string(m.BodyEncoding)))
	})
}

type msgFindCmd struct {
	Topic string    `required:"" help:"Topic to search." predictor:"topic"`
	Key   string    `help:"Business key (newest first)."`
	From  time.Time `help:"Stored at or after this RFC 3339 time." format:"2006-01-02T15:04:05Z07:00"`
	To    time.Time `help:"Stored at or before this RFC 3339 time." format:"2006-01-02T15:04:05Z07:00"`
	Max   int       `help:"Most messages to show." default:"32"`
}

func (c *msgFindCmd) Run(ctx context.Context, a *admin) error {
	if c.Max < 1 {
		return errors.New("--max must be at least 1")
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	if c.Key != "" {
		if !c.From.IsZero() || !c.To.IsZero() {
			return errors.New("give --key or --from/--to, not both")
		}
		res, err := apiCall(a.c.FindMessagesByKeyWithResponse(ctx, &mqgate.FindMessagesByKeyParams{Topic: c.Topic, Key: c.Key, Max: mqgate.Ptr(min(c.Max, 32))}))
		if err != nil {
			return err
		}
		return a.printMessages(res.Body, res.JSON200.Messages)
	}
	if c.From.IsZero() && c.To.IsZero() {
		return errors.New("give --key, or --from and/or --to")
	}
	msgs, err := a.findByTime(ctx, c.Topic, c.From, c.To, c.Max)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(mqgate.MessageList{Messages: msgs})
	if err != nil {
		return err
	}
	return a.printMessages(raw, msgs)
}

func (a *admin) printMessages(raw []byte, msgs []mqgate.Message) error {
	return a.out.print(raw, func(t *table) {
		messageHeader(t)
		for _, m := range msgs {
			messageRow(t, m)
		}
	})
}

// findByTime reads, in each queue of topic, the messages stored between
// from and to (either may be zero: open), oldest first, at most max: a
// binary search by store time (monotonic in a queue) over the queue's
// offsets, then reads forward.
func (a *admin) findByTime(ctx context.Context, topic string, from, to time.Time, max int) ([]mqgate.Message, error) {
	status, err := apiCall(a.c.GetTopicStatusWithResponse(ctx, topic))
	if err != nil {
		return nil, err
	}
	read := func(q int32, off int64, n int) ([]mqgate.Message, int64, error) {
		res, err := apiCall(a.c.ReadQueueWithResponse(ctx, topic, q, &mqgate.ReadQueueParams{Offset: &off, Max: &n}))
		if err != nil {
			return nil, 0, err
		}
		return res.JSON200.Messages, res.JSON200.NextOffset, nil
	}
	var out []mqgate.Message
	for _, q := range status.JSON200.Queues {
		lo, hi := q.MinOffset, q.MaxOffset
		for !from.IsZero() && lo < hi {
			mid := lo + (hi-lo)/2
			msgs, _, err := read(q.QueueId, mid, 1)
			if err != nil {
				return nil, err
			}
			if len(msgs) == 0 || msgs[0].StoredAt == nil || !msgs[0].StoredAt.Before(from) {
				hi = mid
			} else {
				lo = msgs[0].QueueOffset + 1
			}
		}
		for n := 0; lo < q.MaxOffset && n < max; {
			msgs, next, err := read(q.QueueId, lo, min(32, max-n))
			if err != nil {
				return nil, err
			}
			if len(msgs) == 0 || next <= lo {
				break
			}
			done := false
			for _, m := range msgs {
				if !to.IsZero() && m.StoredAt != nil && m.StoredAt.After(to) {
					done = true
					break
				}
				out = append(out, m)
				n++
			}
			if done {
				break
			}
			lo = next
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].StoredAt == nil || out[j].StoredAt == nil {
			return false
		}
		return out[i].StoredAt.Before(*out[j].StoredAt)
	})
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

type msgSendCmd struct {
	Topic          string            `arg:"" help:"Topic to send to." predictor:"topic"`
	Body           string            `required:"" help:"Message body: the text, or @file (@- for standard input); bytes that are not UTF-8 go as base64." placeholder:"TEXT|@FILE"`
	Tag            string            `help:"Tag (what a group's tag filter selects)."`
	Key            []string          `help:"Business key (repeat it for more)."`
	Property       map[string]string `help:"A user property (repeat it): NAME=VALUE." mapsep:"none"`
	ShardingKey    string            `help:"Messages of one sharding key go to one queue, in order."`
	DelayLevel     int               `help:"Deliver after this delay level (1-18: 1s 5s 10s 30s 1m …)."`
	DelayMs        int64             `help:"Deliver after this many milliseconds (up to a year)."`
	DeliverAt      time.Time         `help:"Deliver at this RFC 3339 time." format:"2006-01-02T15:04:05Z07:00"`
	IdempotencyKey string            `help:"Idempotency-Key: a retried send with the same key answers the first result."`
}

func (c *msgSendCmd) Run(ctx context.Context, a *admin) error {
	b, err := readArg(c.Body)
	if err != nil {
		return err
	}
	req := mqgate.SendRequest{Keys: c.Key, Properties: c.Property}
	if utf8.Valid(b) {
		req.Body = mqgate.Ptr(string(b))
	} else {
		req.Body = mqgate.Ptr(base64.StdEncoding.EncodeToString(b))
		req.BodyEncoding = mqgate.Ptr(mqgate.SendRequestBodyEncodingBase64)
	}
	if c.Tag != "" {
		req.Tag = &c.Tag
	}
	if c.ShardingKey != "" {
		req.ShardingKey = &c.ShardingKey
	}
	if c.DelayLevel != 0 {
		req.DelayLevel = &c.DelayLevel
	}
	if c.DelayMs != 0 {
		req.DelayMs = &c.DelayMs
	}
	if !c.DeliverAt.IsZero() {
		req.DeliverAt = &c.DeliverAt
	}
	var params *mqgate.SendMessagesParams
	if c.IdempotencyKey != "" {
		params = &mqgate.SendMessagesParams{IdempotencyKey: &c.IdempotencyKey}
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.SendMessagesWithResponse(ctx, c.Topic, params, req))
	if err != nil {
		return err
	}
	return a.out.print(res.Body, func(t *table) {
		t.row("MESSAGE-ID", "QUEUE", "OFFSET", "DUPLICATE")
		for _, r := range res.JSON200.Results {
			t.row(r.MessageId, cell(r.QueueId), cell(r.QueueOffset), cell(r.Duplicate != nil && *r.Duplicate))
		}
	})
}

type msgPullCmd struct {
	Group         string `arg:"" help:"Consumer group." predictor:"group"`
	Topic         string `arg:"" help:"Topic." predictor:"topic"`
	MaxMessages   int    `help:"Most messages to lease (1-32)." default:"16"`
	WaitMs        int64  `help:"Long poll: wait up to this long for a first message (0-30000)." default:"0"`
	InvisibleMs   int64  `help:"Lease of each message (0: the group's)."`
	TagExpression string `help:"Tag filter of this pull (created || paid)."`
	SQL           string `name:"sql" help:"SQL92 property filter of this pull."`
	ClientID      string `name:"client-id" help:"X-Mqgate-Client-Id: names this consumer in failure histories."`
	Ack           bool   `help:"Ack the messages once they are printed."`
}

func (c *msgPullCmd) Run(ctx context.Context, a *admin) error {
	req := mqgate.PullRequest{MaxMessages: &c.MaxMessages, WaitMs: &c.WaitMs}
	if c.InvisibleMs != 0 {
		req.InvisibleMs = &c.InvisibleMs
	}
	if c.TagExpression != "" {
		req.TagExpression = &c.TagExpression
	}
	if c.SQL != "" {
		req.Sql = &c.SQL
	}
	var params *mqgate.PullMessagesParams
	if c.ClientID != "" {
		params = &mqgate.PullMessagesParams{XMqgateClientId: &c.ClientID}
	}
	pctx, cancel := a.ctx(ctx, time.Duration(c.WaitMs)*time.Millisecond)
	defer cancel()
	res, err := apiCall(a.c.PullMessagesWithResponse(pctx, c.Group, c.Topic, params, req))
	if err != nil {
		return err
	}
	msgs := res.JSON200.Messages
	if err := a.out.print(res.Body, func(t *table) {
		t.row("MESSAGE-ID", "QUEUE", "OFFSET", "RECONSUME", "TAG", "KEYS", "BODY", "RECEIPT")
		for _, m := range msgs {
			t.row(m.MessageId, cell(m.QueueId), cell(m.QueueOffset), cell(m.ReconsumeTimes), cell(m.Tag), cell(m.Keys), body(m.Body, string(m.BodyEncoding)), cell(m.Receipt))
		}
	}); err != nil {
		return err
	}
	if !c.Ack || len(msgs) == 0 {
		return nil
	}
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.Receipt
	}
	actx, cancel2 := a.ctx(ctx, 0)
	defer cancel2()
	ack, err := apiCall(a.c.AckMessagesWithResponse(actx, c.Group, (*mqgate.AckMessagesParams)(params), mqgate.AckRequest{Receipts: receipts}))
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return receiptFailures("acked", ack.JSON200.Results)
}

// receiptFailures is the error of the receipts not settled ("" when all
// were).
func receiptFailures(what string, results []mqgate.ReceiptResult) error {
	var bad []string
	for _, r := range results {
		if r.Status != mqgate.ReceiptResultStatusOk {
			bad = append(bad, fmt.Sprintf("%s (%s)", short(r.Receipt), r.Status))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d receipts not %s: %s", len(bad), len(results), what, strings.Join(bad, ", "))
}

// short cuts a receipt for a message.
func short(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}

// printReceipts prints the results of an ack, nack or lease change.
func (a *admin) printReceipts(raw []byte, results []mqgate.ReceiptResult) error {
	return a.out.print(raw, func(t *table) {
		t.row("RECEIPT", "STATUS", "NEW-RECEIPT", "ERROR")
		for _, r := range results {
			t.row(r.Receipt, string(r.Status), cell(r.NewReceipt), cell(r.Error))
		}
	})
}

type msgAckCmd struct {
	Group    string   `arg:"" help:"Consumer group." predictor:"group"`
	Receipts []string `arg:"" name:"receipt" help:"Receipts of the leased messages."`
	ClientID string   `name:"client-id" help:"X-Mqgate-Client-Id of this consumer."`
}

func (c *msgAckCmd) Run(ctx context.Context, a *admin) error {
	var params *mqgate.AckMessagesParams
	if c.ClientID != "" {
		params = &mqgate.AckMessagesParams{XMqgateClientId: &c.ClientID}
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.AckMessagesWithResponse(ctx, c.Group, params, mqgate.AckRequest{Receipts: c.Receipts}))
	if err != nil {
		return err
	}
	if err := a.printReceipts(res.Body, res.JSON200.Results); err != nil {
		return err
	}
	return receiptFailures("acked", res.JSON200.Results)
}

type msgNackCmd struct {
	Group      string   `arg:"" help:"Consumer group." predictor:"group"`
	Receipts   []string `arg:"" name:"receipt" help:"Receipts of the leased messages."`
	DelayLevel *int     `help:"Retry after this delay level (1-18), or --delay-level=-1: to the dead-letter queue now (default: the group's retry policy)."`
	DelayMs    *int64   `help:"Retry after this many milliseconds (up to 2 h)."`
	Reason     string   `help:"Why (kept in the attempt history)."`
	ClientID   string   `name:"client-id" help:"X-Mqgate-Client-Id of this consumer."`
}

func (c *msgNackCmd) Run(ctx context.Context, a *admin) error {
	items := make([]mqgate.NackItem, len(c.Receipts))
	for i, r := range c.Receipts {
		items[i] = mqgate.NackItem{Receipt: r, DelayLevel: c.DelayLevel, DelayMs: c.DelayMs}
		if c.Reason != "" {
			items[i].Reason = &c.Reason
		}
	}
	var params *mqgate.NackMessagesParams
	if c.ClientID != "" {
		params = &mqgate.NackMessagesParams{XMqgateClientId: &c.ClientID}
	}
	ctx, cancel := a.ctx(ctx, 0)
	defer cancel()
	res, err := apiCall(a.c.NackMessagesWithResponse(ctx, c.Group, params, mqgate.NackRequest{Items: items}))
	if err != nil {
		return err
	}
	if err := a.printReceipts(res.Body, res.JSON200.Results); err != nil {
		return err
	}
	return receiptFailures("nacked", res.JSON200.Results)
}
