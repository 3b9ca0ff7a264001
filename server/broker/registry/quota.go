package registry

import (
	"errors"
	"fmt"
)

// ErrQuotaExceeded: the request would pass one of the broker's quotas (a
// *QuotaError says which); server/broker's ErrQuotaExceeded is it.
var ErrQuotaExceeded = errors.New("quota exceeded")

// ErrQueueShrink: an update would lower a topic's queue count (it always
// comes with the broker's invalid-argument sentinel); server/broker's
// ErrQueueShrink is it.
var ErrQueueShrink = errors.New("a topic's queue count cannot shrink")

// Quotas are the quotas on what the registry holds (server/broker's
// Quotas has them beside the other families'). Zero fields are
// unlimited. They count what exists on the whole broker; growing past a
// quota lowered at a restart is refused, what already exists stays.
type Quotas struct {
	// MaxTopics bounds the user topics.
	MaxTopics int
	// MaxQueuesPerTopic bounds one topic's queue count.
	MaxQueuesPerTopic int
	// MaxQueues bounds the queues of all user topics together.
	MaxQueues int
	// MaxGroups bounds the consumer groups.
	MaxGroups int
	// MaxPushEndpoints bounds the groups with a push endpoint.
	MaxPushEndpoints int
}

// QuotaError is ErrQuotaExceeded with the quota and its limit (the
// broker's other quotas, on timers, transactions and consumer instances,
// use it too: server/broker's QuotaError is it).
type QuotaError struct {
	// Quota names the quota: topics, queuesPerTopic, queues, groups,
	// pushEndpoints, pendingTimers, transactionsPerProducerGroup,
	// pendingTransactions or instancesPerGroup.
	Quota string
	// Limit is the quota; Unit what it counts; Flag the server flag that
	// sets it.
	Limit      int
	Unit, Flag string
	// Have is how many exist; Want how many the request would make.
	Have, Want int
}

// Error says which quota and by how much.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("%v: %s: the request would make %d %s where the limit is %d (%s; %d exist)",
		ErrQuotaExceeded, e.Quota, e.Want, e.Unit, e.Limit, e.Flag, e.Have)
}

// Unwrap makes errors.Is(err, ErrQuotaExceeded) hold.
func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// Over returns a *QuotaError when want passes limit (0: unlimited), and
// nil when the request makes no more than there are.
func Over(quota, unit, flag string, limit, have, want int) error {
	if limit <= 0 || want <= limit || want <= have {
		return nil
	}
	return &QuotaError{Quota: quota, Limit: limit, Unit: unit, Flag: flag, Have: have, Want: want}
}

// checkTopicLocked checks putting t in place of old (exists: false for a
// new topic) against the quotas; the caller holds s.mu.
func (s *Service) checkTopicLocked(old TopicConfig, exists bool, t TopicConfig) error {
	q, topics := s.cfg.Quotas, s.state.Topics()
	if !exists {
		if err := Over("topics", "topics", "--max-topics", q.MaxTopics, len(topics), len(topics)+1); err != nil {
			return err
		}
	}
	if t.Queues <= old.Queues {
		return nil
	}
	if err := Over("queuesPerTopic", "queues", "--max-queues-per-topic", q.MaxQueuesPerTopic, old.Queues, t.Queues); err != nil {
		return err
	}
	total := 0
	for _, each := range topics {
		total += each.Queues
	}
	return Over("queues", "queues", "--max-queues", q.MaxQueues, total, total-old.Queues+t.Queues)
}

// checkGroupLocked checks putting g in place of old (exists: false for a
// new group) against the quotas; the caller holds s.mu.
func (s *Service) checkGroupLocked(old GroupConfig, exists bool, g GroupConfig) error {
	q, groups := s.cfg.Quotas, s.state.Groups()
	if !exists {
		if err := Over("groups", "groups", "--max-groups", q.MaxGroups, len(groups), len(groups)+1); err != nil {
			return err
		}
	}
	if g.Push == nil || (exists && old.Push != nil) || q.MaxPushEndpoints <= 0 {
		return nil
	}
	endpoints := 0
	for _, each := range groups {
		if each.Push != nil {
			endpoints++
		}
	}
	return Over("pushEndpoints", "push endpoints", "--max-push-endpoints", q.MaxPushEndpoints, endpoints, endpoints+1)
}

// shrinkError refuses to lower a topic's queue count (queue ids are
// spread over by sharding keys and offsets; RocketMQ refuses it too).
type shrinkError struct {
	from, to int
	// defaulted: the count was left out of a full replace and took the
	// default.
	defaulted bool
	// invalid is the broker's invalid-argument sentinel.
	invalid error
}

func (e *shrinkError) Error() string {
	if e.defaulted {
		return fmt.Sprintf("%v: PUT replaces the whole topic: queues defaults to %d when omitted and a topic's queue count cannot shrink (%d -> %d)",
			e.invalid, e.to, e.from, e.to)
	}
	return fmt.Sprintf("%v: a topic's queue count cannot shrink (%d -> %d)", e.invalid, e.from, e.to)
}

// Is classifies the error as the invalid-argument sentinel and
// ErrQueueShrink.
func (e *shrinkError) Is(target error) bool {
	return target == e.invalid || target == ErrQueueShrink
}
