package sqs

import (
	"fmt"
	"net/url"
	"strings"
)

// Queue names and what they map to (README "SQS API"). An SQS name is 1
// to 80 characters of [A-Za-z0-9_-], a FIFO queue's ending in ".fifo"
// (counted). The queue's topic and its clustering group carry the same
// name, built so that no two queue names share one and none is an
// ordinary name the broker reserves:
//
//	standard queue  orders       → topic and group "sqs_orders"
//	FIFO queue      orders.fifo  → topic and group "sqsfifo_orders"
//
// The prefixes differ at their fourth character ('_' and 'f'), so a
// standard queue named "fifo_x" ("sqs_fifo_x") never meets the FIFO queue
// "x.fifo" ("sqsfifo_x"). The adapter's own topics, metaTopic and
// metaTopicAlt, start "sqs-" and so are no queue's either.
const (
	maxQueueName   = 80
	fifoSuffix     = ".fifo"
	standardPrefix = "sqs_"
	fifoPrefix     = "sqsfifo_"
	// metaTopic and metaTopicAlt hold the queues' attributes, in turn
	// (meta.go).
	metaTopic    = "sqs-meta"
	metaTopicAlt = "sqs-meta-b"
)

// queueName is a checked SQS queue name.
type queueName string

// parseQueueName checks s against SQS's naming rules.
func parseQueueName(s string) (queueName, error) {
	base := strings.TrimSuffix(s, fifoSuffix)
	if s == "" || len(s) > maxQueueName || base == "" {
		return "", fmt.Errorf("queue name must be 1 to %d characters", maxQueueName)
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", fmt.Errorf("queue name can only include alphanumeric characters, hyphens, or underscores (and a .fifo suffix)")
		}
	}
	return queueName(s), nil
}

// fifo reports whether q names a FIFO queue.
func (q queueName) fifo() bool { return strings.HasSuffix(string(q), fifoSuffix) }

// topic is the topic (and the group) that holds q.
func (q queueName) topic() string {
	if q.fifo() {
		return fifoPrefix + strings.TrimSuffix(string(q), fifoSuffix)
	}
	return standardPrefix + string(q)
}

// queueOfTopic is the queue a topic holds, or false for a topic that is
// no queue's.
func queueOfTopic(topic string) (queueName, bool) {
	var s string
	switch {
	case strings.HasPrefix(topic, fifoPrefix):
		s = strings.TrimPrefix(topic, fifoPrefix) + fifoSuffix
	case strings.HasPrefix(topic, standardPrefix):
		s = strings.TrimPrefix(topic, standardPrefix)
	default:
		return "", false
	}
	q, err := parseQueueName(s)
	return q, err == nil
}

// queueFromURL takes the queue name out of a queue URL
// (http://host:port/<account>/<queue>); the host and the account are not
// checked: queues are one namespace shared by every account, as topics are.
// A bare queue name is accepted too, as ElasticMQ does.
func queueFromURL(raw string) (queueName, error) {
	if raw == "" {
		return "", errMissing("QueueUrl")
	}
	path := raw
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", errInvalidAddress(raw)
		}
		path = u.Path
	}
	path = strings.Trim(path, "/")
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		path = path[i+1:]
	}
	q, err := parseQueueName(path)
	if err != nil {
		return "", errInvalidAddress(raw)
	}
	return q, nil
}
