package sqs

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
)

// QueueInfo is one queue as the REST API lists it for the console
// (GET /v1/sqs/queues): its SQS name, the topic and group that hold it,
// and its attributes and tags.
type QueueInfo struct {
	// Name is the SQS queue name ("orders", "jobs.fifo").
	Name string
	// FIFO reports a FIFO queue.
	FIFO bool
	// Topic and Group are the topic and the clustering group that hold
	// the queue (the same name: sqs_<name> or sqsfifo_<base>).
	Topic, Group string
	// URL is the queue URL on the base given to Queues; ARN its ARN.
	URL, ARN string
	// DeadLetterQueue is the queue its RedrivePolicy names ("" without
	// one), MaxReceiveCount the policy's count.
	DeadLetterQueue string
	MaxReceiveCount int
	// DeadLetterSources are the queues whose RedrivePolicy names this
	// one, sorted.
	DeadLetterSources []string
	// Attributes are the settable attributes in force (defaults
	// included), as GetQueueAttributes reports them.
	Attributes map[string]string
	// Tags are the queue's tags.
	Tags map[string]string
	// Created and Modified are CreatedTimestamp and LastModifiedTimestamp.
	Created, Modified time.Time
}

// Queues lists the queues whose names start with prefix, by name; base
// ("http://host:port") is what their URLs are built on.
func (h *Handler) Queues(ctx context.Context, prefix, base string) ([]QueueInfo, error) {
	topics, err := h.b.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	table, err := h.meta.all(ctx)
	if err != nil {
		return nil, err
	}
	sources := map[queueName][]string{}
	for q, qm := range table {
		if p, _, err := parseRedrivePolicy(qm.Attrs[attrRedrivePolicy]); err == nil && p.MaxReceiveCount > 0 {
			sources[p.target()] = append(sources[p.target()], string(q))
		}
	}
	out := []QueueInfo{}
	for _, t := range topics {
		q, ok := queueOfTopic(t.Name)
		if !ok || !strings.HasPrefix(string(q), prefix) {
			continue
		}
		qm := table[q]
		if qm == nil {
			qm = &queueMeta{Created: t.CreatedAt.Unix(), Modified: t.CreatedAt.Unix()}
		}
		attrs := h.defaults(q)
		maps.Copy(attrs, qm.Attrs)
		info := QueueInfo{
			Name: string(q), FIFO: q.fifo(), Topic: q.topic(), Group: q.topic(),
			URL: queueURL(base, q), ARN: queueArn(q),
			DeadLetterSources: slices.Sorted(slices.Values(sources[q])),
			Attributes:        attrs, Tags: maps.Clone(qm.Tags),
			Created: time.Unix(qm.Created, 0).UTC(), Modified: time.Unix(qm.Modified, 0).UTC(),
		}
		if info.DeadLetterSources == nil {
			info.DeadLetterSources = []string{}
		}
		if info.Tags == nil {
			info.Tags = map[string]string{}
		}
		if p, _, err := parseRedrivePolicy(attrs[attrRedrivePolicy]); err == nil && p.MaxReceiveCount > 0 {
			info.DeadLetterQueue, info.MaxReceiveCount = string(p.target()), p.MaxReceiveCount
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
