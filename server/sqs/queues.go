package sqs

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

// Account and region in queue URLs and ARNs: queues are one namespace
// shared by every account, so the account shown is a fixed one (as
// ElasticMQ's), and so is the region.
const (
	defaultAccount = "000000000000"
	defaultRegion  = "us-east-1"
)

// queueQueues is the number of broker queues of a queue's topic.
const queueQueues = 4

// retryDelay is how long after a failed delivery (a visibility timeout
// that ran out) the message is visible again: at once, as on SQS, through
// the group's fixed retry policy.
const retryDelay = time.Millisecond

// noRedriveRetries is the group's retry limit of a queue without a
// RedrivePolicy: the broker's highest (SQS has none).
const noRedriveRetries = 64

// queueURL is q's URL on base.
func queueURL(base string, q queueName) string {
	return base + "/" + defaultAccount + "/" + string(q)
}

// queueArn is q's ARN.
func queueArn(q queueName) string {
	return "arn:aws:sqs:" + defaultRegion + ":" + defaultAccount + ":" + string(q)
}

// visibility is a visibility timeout of n seconds as a lease: 0 (visible
// again at once) is the shortest lease the broker grants.
func visibility(n int) time.Duration {
	if n <= 0 {
		return time.Millisecond
	}
	return time.Duration(n) * time.Second
}

// groupConfig is the clustering group that consumes q with attrs.
func groupConfig(q queueName, attrs map[string]string) broker.GroupConfig {
	return broker.GroupConfig{
		Name:          q.topic(),
		ConsumeMode:   "clustering",
		Orderly:       q.fifo(),
		RetryMaxTimes: retryMaxTimes(attrs),
		Invisible:     visibility(attrInt(attrs, attrVisibilityTimeout)),
		Subscriptions: []broker.Subscription{{Topic: q.topic()}},
		RetryPolicy:   &broker.RetryPolicy{Backoff: "fixed", Initial: retryDelay, Max: retryDelay},
	}
}

// retentionHours is MessageRetentionPeriod as the topic's retention.
func retentionHours(attrs map[string]string) int {
	return (attrInt(attrs, attrRetention) + 3599) / 3600
}

// queueState is a resolved queue: its name, topic and attributes.
type queueState struct {
	name  queueName
	topic broker.TopicConfig
	meta  *queueMeta
	attrs map[string]string
}

// resolve finds the queue of a queue URL.
func (h *Handler) resolve(ctx context.Context, rawURL string) (*queueState, error) {
	q, err := queueFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	return h.resolveName(ctx, q)
}

func (h *Handler) resolveName(ctx context.Context, q queueName) (*queueState, error) {
	t, err := h.b.GetTopic(ctx, q.topic())
	if errors.Is(err, broker.ErrTopicNotFound) {
		return nil, errQueueDoesNotExist(q)
	}
	if err != nil {
		return nil, err
	}
	qm, err := h.meta.get(ctx, q)
	if err != nil {
		return nil, err
	}
	if qm == nil {
		qm = &queueMeta{Created: t.CreatedAt.Unix(), Modified: t.CreatedAt.Unix()}
	}
	attrs := h.defaults(q)
	maps.Copy(attrs, qm.Attrs)
	return &queueState{name: q, topic: t, meta: qm, attrs: attrs}, nil
}

// ensureGroup creates the queue's group when it is missing (a topic made
// through the native API, or a group deleted there).
func (h *Handler) ensureGroup(ctx context.Context, qs *queueState) error {
	if _, err := h.b.GetGroup(ctx, qs.name.topic()); !errors.Is(err, broker.ErrGroupNotFound) {
		return err
	}
	_, _, err := h.b.PutGroup(ctx, groupConfig(qs.name, qs.attrs))
	return err
}

type createQueueInput struct {
	QueueName  string
	Attributes map[string]string
	Tags       map[string]string `json:"tags"`
}

type queueURLOutput struct {
	QueueUrl string //nolint:revive // the wire name
}

func (h *Handler) createQueue(ctx context.Context, req *request, in *createQueueInput) (*queueURLOutput, error) {
	if in.QueueName == "" {
		return nil, errMissing("QueueName")
	}
	q, err := parseQueueName(in.QueueName)
	if err != nil {
		return nil, errInvalidParameter("%s", err.Error())
	}
	if !q.fifo() && in.Attributes[attrFifoQueue] == "true" {
		return nil, errInvalidParameter("The name of a FIFO queue must end with the .fifo suffix.")
	}
	attrs, err := h.checkAttributes(q, in.Attributes, true)
	if err != nil {
		return nil, err
	}
	if err := h.checkRedrive(ctx, q, attrs[attrRedrivePolicy]); err != nil {
		return nil, err
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	if existing, err := h.resolveName(ctx, q); err == nil {
		// An existing queue: the same attributes answer its URL, others
		// are an error (as SQS).
		for name, v := range attrs {
			if existing.attrs[name] != v {
				return nil, errQueueNameExists(q)
			}
		}
		return &queueURLOutput{QueueUrl: queueURL(req.base, q)}, nil
	} else if ae := asAPIError(err); ae.shape != "QueueDoesNotExist" {
		return nil, err
	}
	all := h.defaults(q)
	maps.Copy(all, attrs)
	now := h.opts.Now().Unix()
	if _, err := h.meta.update(ctx, q, func(*queueMeta) (*queueMeta, error) {
		return &queueMeta{Attrs: attrs, Tags: in.Tags, Created: now, Modified: now}, nil
	}); err != nil {
		return nil, err
	}
	if _, _, err := h.b.PutTopic(ctx, broker.TopicConfig{Name: q.topic(), Queues: queueQueues, RetentionHours: retentionHours(all)}); err != nil {
		return nil, err
	}
	if _, _, err := h.b.PutGroup(ctx, groupConfig(q, all)); err != nil {
		return nil, err
	}
	return &queueURLOutput{QueueUrl: queueURL(req.base, q)}, nil
}

type getQueueURLInput struct {
	QueueName              string
	QueueOwnerAWSAccountId string //nolint:revive // the wire name
}

func (h *Handler) getQueueURL(ctx context.Context, req *request, in *getQueueURLInput) (*queueURLOutput, error) {
	if in.QueueName == "" {
		return nil, errMissing("QueueName")
	}
	q, err := parseQueueName(in.QueueName)
	if err != nil {
		return nil, errQueueDoesNotExist(queueName(truncate(in.QueueName, 100)))
	}
	if _, err := h.resolveName(ctx, q); err != nil {
		return nil, err
	}
	return &queueURLOutput{QueueUrl: queueURL(req.base, q)}, nil
}

type listQueuesInput struct {
	QueueNamePrefix string
	MaxResults      *int
	NextToken       string
}

type listQueuesOutput struct {
	QueueUrls []string `json:",omitempty"` //nolint:revive // the wire name
	NextToken string   `json:",omitempty"`
}

// maxListQueues is how many queue URLs ListQueues answers without MaxResults.
const maxListQueues = 1000

func (h *Handler) listQueues(ctx context.Context, req *request, in *listQueuesInput) (*listQueuesOutput, error) {
	limit := maxListQueues
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > maxListQueues {
			return nil, errInvalidParameter("Value %d for parameter MaxResults is invalid. Reason: must be between 1 and %d.", *in.MaxResults, maxListQueues)
		}
		limit = *in.MaxResults
	}
	after := ""
	if in.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		if err != nil {
			return nil, errInvalidParameter("Invalid NextToken value.")
		}
		after = string(b)
	}
	topics, err := h.b.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range topics {
		if q, ok := queueOfTopic(t.Name); ok && strings.HasPrefix(string(q), in.QueueNamePrefix) && string(q) > after {
			names = append(names, string(q))
		}
	}
	slices.Sort(names)
	out := &listQueuesOutput{}
	if in.MaxResults != nil && len(names) > limit {
		names = names[:limit]
		out.NextToken = base64.RawURLEncoding.EncodeToString([]byte(names[limit-1]))
	} else if len(names) > limit {
		names = names[:limit]
	}
	for _, n := range names {
		out.QueueUrls = append(out.QueueUrls, queueURL(req.base, queueName(n)))
	}
	return out, nil
}

type queueURLInput struct {
	QueueUrl string //nolint:revive // the wire name
}

type empty struct{}

func (h *Handler) deleteQueue(ctx context.Context, _ *request, in *queueURLInput) (*empty, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := h.b.DeleteGroup(ctx, qs.name.topic()); err != nil && !errors.Is(err, broker.ErrGroupNotFound) {
		return nil, err
	}
	if err := h.b.DeleteTopic(ctx, qs.name.topic()); err != nil && !errors.Is(err, broker.ErrTopicNotFound) {
		return nil, err
	}
	if _, err := h.meta.update(ctx, qs.name, func(*queueMeta) (*queueMeta, error) { return nil, nil }); err != nil {
		return nil, err
	}
	return &empty{}, nil
}

type getQueueAttributesInput struct {
	QueueUrl       string   //nolint:revive // the wire name
	AttributeNames []string //nolint:revive // the wire name
}

type attributesOutput struct {
	Attributes map[string]string `json:",omitempty"`
}

func (h *Handler) getQueueAttributes(ctx context.Context, _ *request, in *getQueueAttributesInput) (*attributesOutput, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range in.AttributeNames {
		if n == "All" {
			for name := range qs.attrs {
				want[name] = true
			}
			for _, name := range readOnly {
				want[name] = true
			}
			continue
		}
		if _, ok := settable[n]; !ok && !slices.Contains(readOnly, n) {
			return nil, errInvalidAttributeName(n)
		}
		want[n] = true
	}
	out := &attributesOutput{Attributes: map[string]string{}}
	counted := false
	var visible, notVisible, delayed int64
	for name := range want {
		switch name {
		case attrQueueArn:
			out.Attributes[name] = queueArn(qs.name)
		case attrCreatedTimestamp:
			out.Attributes[name] = strconv.FormatInt(qs.meta.Created, 10)
		case attrLastModifiedTimestamp:
			out.Attributes[name] = strconv.FormatInt(qs.meta.Modified, 10)
		case attrApproxMessages, attrApproxNotVisible, attrApproxDelayed:
			if !counted {
				if visible, notVisible, delayed, err = h.count(ctx, qs); err != nil {
					return nil, err
				}
				counted = true
			}
			out.Attributes[name] = strconv.FormatInt(map[string]int64{attrApproxMessages: visible, attrApproxNotVisible: notVisible, attrApproxDelayed: delayed}[name], 10)
		default:
			if v, ok := qs.attrs[name]; ok {
				out.Attributes[name] = v
			}
		}
	}
	return out, nil
}

// count is the queue's messages: visible (not consumed, not leased),
// leased, and delayed (timers and delay levels of its topic, retries
// waiting out their delay).
func (h *Handler) count(ctx context.Context, qs *queueState) (visible, notVisible, delayed int64, err error) {
	group := qs.name.topic()
	progress, err := h.b.Progress(ctx, group)
	if errors.Is(err, broker.ErrGroupNotFound) {
		st, err := h.b.TopicStatus(ctx, qs.name.topic())
		if err != nil {
			return 0, 0, 0, err
		}
		for _, s := range st {
			visible += s.MaxOffset - s.MinOffset
		}
		return visible, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, err
	}
	for _, p := range progress {
		if p.Topic != qs.name.topic() && p.QueueID >= 0 {
			continue
		}
		visible += p.Lag - int64(p.InFlight)
		notVisible += int64(p.InFlight)
	}
	backlog, err := h.b.Backlog(ctx, group)
	if err != nil {
		return 0, 0, 0, err
	}
	delayed = backlog.Timers + backlog.RetryTimers
	for _, l := range append(backlog.Delayed, backlog.Retry...) {
		if l.Count != nil {
			delayed += *l.Count
		} else if l.AtLeast != nil {
			delayed += *l.AtLeast
		}
	}
	return max(visible, 0), notVisible, delayed, nil
}

type setQueueAttributesInput struct {
	QueueUrl   string            //nolint:revive // the wire name
	Attributes map[string]string //nolint:revive // the wire name
}

func (h *Handler) setQueueAttributes(ctx context.Context, _ *request, in *setQueueAttributesInput) (*empty, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	attrs, err := h.checkAttributes(qs.name, in.Attributes, false)
	if err != nil {
		return nil, err
	}
	if p, ok := attrs[attrRedrivePolicy]; ok {
		if err := h.checkRedrive(ctx, qs.name, p); err != nil {
			return nil, err
		}
	}
	now := h.opts.Now().Unix()
	if _, err := h.meta.update(ctx, qs.name, func(cur *queueMeta) (*queueMeta, error) {
		if cur == nil {
			cur = qs.meta.clone()
		}
		if cur.Attrs == nil {
			cur.Attrs = map[string]string{}
		}
		maps.Copy(cur.Attrs, attrs)
		for name, v := range attrs {
			if v == "" {
				delete(cur.Attrs, name) // a policy removed
			}
		}
		cur.Modified = now
		return cur, nil
	}); err != nil {
		return nil, err
	}
	all := maps.Clone(qs.attrs)
	maps.Copy(all, attrs)
	if _, ok := attrs[attrRetention]; ok {
		if _, _, err := h.b.PutTopic(ctx, broker.TopicConfig{Name: qs.topic.Name, Queues: qs.topic.Queues, RetentionHours: retentionHours(all), Perm: qs.topic.Perm}); err != nil {
			return nil, err
		}
	}
	_, vis := attrs[attrVisibilityTimeout]
	_, redrive := attrs[attrRedrivePolicy]
	if vis || redrive {
		if err := h.ensureGroup(ctx, qs); err != nil {
			return nil, err
		}
		if _, err := h.b.PatchGroup(ctx, qs.name.topic(), func(g broker.GroupConfig) (broker.GroupConfig, error) {
			g.Invisible = visibility(attrInt(all, attrVisibilityTimeout))
			g.RetryMaxTimes = retryMaxTimes(all)
			return g, nil
		}); err != nil {
			return nil, err
		}
	}
	return &empty{}, nil
}

func (h *Handler) purgeQueue(ctx context.Context, _ *request, in *queueURLInput) (*empty, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := h.ensureGroup(ctx, qs); err != nil {
		return nil, err
	}
	if _, err := h.b.ResetOffset(ctx, qs.name.topic(), qs.name.topic(), h.opts.Now().Add(time.Millisecond)); err != nil {
		return nil, err
	}
	return &empty{}, nil
}
