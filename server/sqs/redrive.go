package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

// Redrive (README "SQS API"). A queue's RedrivePolicy maxReceiveCount is
// its group's retry limit (retryMaxTimes = maxReceiveCount − 1): the
// receive after which a message's visibility timeout runs out once more
// sends it to the group's dead-letter queue %DLQ%<group>, where mqgate's
// DLQ API lists, resends and discards it. The endpoint's redrive mover
// then copies each new dead letter to the SQS queue the policy names, so
// that it is received there too; the copy keeps the MessageId (property
// sqs.id) and carries the dead letter's id as its dedup id, so a copy
// made again after a crash is not stored twice within the dedup window.
// The mover's position in each source queue's dead letters is in the
// queue table (DLQCursor, and the ids it copied past it, DLQMoved).

const (
	// propID is the MessageId a redriven copy keeps.
	propID = propPrefix + "id"
	// propSource names the source queue of a redriven copy.
	propSource = propPrefix + "source"
	// maxMaxReceiveCount is the highest maxReceiveCount: the broker's
	// highest retry limit is 64.
	maxMaxReceiveCount = noRedriveRetries + 1
	// redrivePage is how many dead letters one pass of the mover reads
	// from one source queue.
	redrivePage = 100
)

// redrivePolicy is a RedrivePolicy attribute.
type redrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     int    `json:"maxReceiveCount"`
}

// target is the dead-letter queue the policy names.
func (p redrivePolicy) target() queueName {
	i := strings.LastIndexByte(p.DeadLetterTargetArn, ':')
	return queueName(p.DeadLetterTargetArn[i+1:])
}

// parseRedrivePolicy checks a RedrivePolicy value ("" = none) and returns
// it canonical.
func parseRedrivePolicy(v string) (redrivePolicy, string, error) {
	if v == "" {
		return redrivePolicy{}, "", nil
	}
	var raw struct {
		DeadLetterTargetArn *string         `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return redrivePolicy{}, "", fmt.Errorf("not a JSON object: %v", err)
	}
	if raw.DeadLetterTargetArn == nil || len(raw.MaxReceiveCount) == 0 {
		return redrivePolicy{}, "", fmt.Errorf("deadLetterTargetArn and maxReceiveCount are required")
	}
	count := strings.Trim(string(raw.MaxReceiveCount), `"`)
	n, err := strconv.Atoi(count)
	if err != nil || n < 2 || n > maxMaxReceiveCount {
		return redrivePolicy{}, "", fmt.Errorf("maxReceiveCount must be an integer from 2 to %d (mqgate's retry limit)", maxMaxReceiveCount)
	}
	p := redrivePolicy{DeadLetterTargetArn: *raw.DeadLetterTargetArn, MaxReceiveCount: n}
	parts := strings.Split(p.DeadLetterTargetArn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return redrivePolicy{}, "", fmt.Errorf("deadLetterTargetArn %q is not an SQS queue ARN", truncate(p.DeadLetterTargetArn, 100))
	}
	if _, err := parseQueueName(parts[5]); err != nil {
		return redrivePolicy{}, "", fmt.Errorf("deadLetterTargetArn %q: %v", truncate(p.DeadLetterTargetArn, 100), err)
	}
	canon, _ := json.Marshal(p)
	return p, string(canon), nil
}

// redriveAllowPolicy is a RedriveAllowPolicy attribute.
type redriveAllowPolicy struct {
	RedrivePermission string   `json:"redrivePermission"`
	SourceQueueArns   []string `json:"sourceQueueArns,omitempty"`
}

// parseRedriveAllowPolicy checks a RedriveAllowPolicy value and returns
// it canonical.
func parseRedriveAllowPolicy(v string) (redriveAllowPolicy, string, error) {
	var p redriveAllowPolicy
	if v == "" {
		return p, "", nil
	}
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return p, "", fmt.Errorf("not a JSON object: %v", err)
	}
	switch p.RedrivePermission {
	case "allowAll", "denyAll":
		if len(p.SourceQueueArns) > 0 {
			return p, "", fmt.Errorf("sourceQueueArns is only for redrivePermission byQueue")
		}
	case "byQueue":
		if len(p.SourceQueueArns) == 0 || len(p.SourceQueueArns) > 10 {
			return p, "", fmt.Errorf("redrivePermission byQueue needs 1 to 10 sourceQueueArns")
		}
	default:
		return p, "", fmt.Errorf("redrivePermission must be allowAll, denyAll or byQueue")
	}
	canon, _ := json.Marshal(p)
	return p, string(canon), nil
}

// allows reports whether the policy lets source use its queue as a
// dead-letter queue.
func (p redriveAllowPolicy) allows(source queueName) bool {
	switch p.RedrivePermission {
	case "", "allowAll":
		return true
	case "byQueue":
		return slices.Contains(p.SourceQueueArns, queueArn(source))
	}
	return false
}

// checkRedrive checks a queue's new RedrivePolicy against its target: it
// exists, has the queue's type, is not the queue itself and allows it.
func (h *Handler) checkRedrive(ctx context.Context, q queueName, policy string) error {
	p, _, err := parseRedrivePolicy(policy)
	if err != nil || policy == "" {
		return err
	}
	t := p.target()
	if t == q {
		return errInvalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: a queue cannot be its own dead-letter queue.", policy)
	}
	if t.fifo() != q.fifo() {
		return errInvalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: the dead-letter queue of a FIFO queue must be a FIFO queue, and of a standard queue a standard queue.", policy)
	}
	ts, err := h.resolveName(ctx, t)
	if err != nil {
		if asAPIError(err).shape == "QueueDoesNotExist" {
			return errInvalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.", policy)
		}
		return err
	}
	allow, _, _ := parseRedriveAllowPolicy(ts.attrs[attrRedriveAllowPolicy])
	if !allow.allows(q) {
		return errInvalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: the dead-letter queue's RedriveAllowPolicy does not allow this queue.", policy)
	}
	return nil
}

// retryMaxTimes is the group's retry limit for attrs.
func retryMaxTimes(attrs map[string]string) int {
	if p, _, err := parseRedrivePolicy(attrs[attrRedrivePolicy]); err == nil && p.MaxReceiveCount > 0 {
		return p.MaxReceiveCount - 1
	}
	return noRedriveRetries
}

// runRedrive runs the mover every interval until ctx ends; it first
// resumes the message move tasks a restart stopped (retried each interval
// until it succeeds).
func (h *Handler) runRedrive(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	resumed := false
	for {
		if !resumed {
			err := h.resumeMoves(ctx)
			resumed = err == nil
			if err != nil && ctx.Err() == nil {
				h.log.Warn().Err(err).Msg("resuming the SQS message move tasks failed; retrying")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.redrive(ctx, ""); err != nil && ctx.Err() == nil {
				h.log.Warn().Err(err).Msg("SQS redrive pass failed; retrying")
			}
			if _, err := h.meta.rotateIfDue(ctx); err != nil && ctx.Err() == nil {
				h.log.Warn().Err(err).Msg("moving the SQS queue table to its other topic failed; retrying")
			}
		}
	}
}

// redrive copies the new dead letters of every source queue (of target
// only, when target is not "") to its dead-letter queue.
func (h *Handler) redrive(ctx context.Context, target queueName) error {
	h.redriveMu.Lock()
	defer h.redriveMu.Unlock()
	sources, err := h.meta.sources(ctx, target)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sources {
		if err := h.redriveFrom(ctx, s); err != nil && !errors.Is(err, broker.ErrGroupNotFound) && !errors.Is(err, broker.ErrTopicNotFound) {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// redriveFrom copies one page of source's new dead letters.
func (h *Handler) redriveFrom(ctx context.Context, source queueName) error {
	qm, err := h.meta.get(ctx, source)
	if err != nil || qm == nil {
		return err
	}
	p, _, err := parseRedrivePolicy(qm.Attrs[attrRedrivePolicy])
	if err != nil || p.MaxReceiveCount == 0 {
		return err
	}
	letters, next, err := h.b.ListDeadLetters(ctx, source.topic(), broker.DLQFilter{Status: broker.DLQDead}, qm.DLQCursor, redrivePage)
	if err != nil {
		return err
	}
	moved := qm.DLQMoved
	var copied []string
	for _, d := range letters {
		if slices.Contains(moved, d.MessageID) {
			continue
		}
		if err := h.copyDeadLetter(ctx, source, p.target(), d); err != nil {
			if asAPIError(err).shape == "QueueDoesNotExist" {
				return nil // the target is gone: its letters stay in the DLQ
			}
			return err
		}
		copied = append(copied, d.MessageID)
	}
	if len(copied) == 0 && next == "" {
		return nil
	}
	_, err = h.meta.update(ctx, source, func(cur *queueMeta) (*queueMeta, error) {
		if cur == nil {
			return nil, nil
		}
		if next != "" {
			// Everything before next is done.
			cur.DLQCursor, cur.DLQMoved = next, nil
		} else {
			cur.DLQMoved = append(cur.DLQMoved, copied...)
		}
		return cur, nil
	})
	return err
}

// copyDeadLetter sends dead letter d of source to the queue target.
func (h *Handler) copyDeadLetter(ctx context.Context, source, target queueName, d broker.DeadLetter) error {
	if _, err := h.resolveName(ctx, target); err != nil {
		return err
	}
	full, err := h.b.GetDeadLetter(ctx, source.topic(), d.MessageID)
	if err != nil {
		return err
	}
	props := map[string]string{}
	for k, v := range full.Properties {
		props[k] = v
	}
	id := full.OriginMessageID
	if id == "" {
		id = full.MessageID
	}
	if props[propID] == "" {
		props[propID] = id
	}
	props[propSource] = string(source)
	msg := broker.SendMessage{Body: full.Body, Properties: props, DedupID: "sqs-dlq-" + d.MessageID}
	if target.fifo() {
		msg.ShardingKey = props[propGroup]
	}
	_, err = h.b.Send(ctx, target.topic(), []broker.SendMessage{msg})
	if errors.Is(err, broker.ErrIdempotencyKeyReused) {
		return nil
	}
	return err
}

type listDeadLetterSourceQueuesInput struct {
	QueueUrl   string //nolint:revive // the wire name
	MaxResults *int
	NextToken  string
}

type listDeadLetterSourceQueuesOutput struct {
	QueueUrls []string `json:"queueUrls"` //nolint:revive // the wire name
	NextToken string   `json:",omitempty"`
}

func (h *Handler) listDeadLetterSourceQueues(ctx context.Context, req *request, in *listDeadLetterSourceQueuesInput) (*listDeadLetterSourceQueuesOutput, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	sources, err := h.meta.sources(ctx, qs.name)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(sources))
	for _, s := range sources {
		if in.NextToken == "" || string(s) > in.NextToken {
			names = append(names, string(s))
		}
	}
	slices.Sort(names)
	out := &listDeadLetterSourceQueuesOutput{QueueUrls: []string{}}
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > maxListQueues {
			return nil, errInvalidParameter("Value %d for parameter MaxResults is invalid. Reason: must be between 1 and %d.", *in.MaxResults, maxListQueues)
		}
		if len(names) > *in.MaxResults {
			names = names[:*in.MaxResults]
			out.NextToken = names[len(names)-1]
		}
	}
	for _, n := range names {
		out.QueueUrls = append(out.QueueUrls, queueURL(req.base, queueName(n)))
	}
	return out, nil
}
