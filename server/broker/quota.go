package broker

import (
	"fmt"
)

// Quotas bound what the API can make the broker create, so that no client
// (an account, or everyone when authentication is off) can exhaust the
// machine: every topic queue is a file and a memory map, every group a
// registry entry and push endpoints a dispatcher with connections of its
// own, every pending timer an index entry. They count what exists on the
// whole broker; a request that would pass one is refused with
// ErrQuotaExceeded (a *QuotaError naming the quota and its limit) and
// changes nothing. Zero fields are unlimited. Growing past a quota
// lowered at a restart is refused; what already exists stays.
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
	// MaxPendingTimers bounds the timers waiting to fire (deliverAt or
	// delayMs beyond the delay levels), checked against the timer index,
	// which follows the CommitLog within a dispatcher pass.
	MaxPendingTimers int
	// MaxTransactionsPerProducerGroup bounds one producer group's
	// unresolved transactions, MaxPendingTransactions all of them (each
	// is held in memory until it ends: package txn's State).
	MaxTransactionsPerProducerGroup int
	MaxPendingTransactions          int
	// MaxInstancesPerGroup bounds the consumer instances (client ids) a
	// broadcasting group knows at once (broadcast.go); an idle one is
	// forgotten after the group's InstanceIdle.
	MaxInstancesPerGroup int
}

// QuotaError is ErrQuotaExceeded with the quota and its limit.
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

// over returns a *QuotaError when want passes limit (0: unlimited).
func over(quota, unit, flag string, limit, have, want int) error {
	if limit <= 0 || want <= limit || want <= have {
		return nil
	}
	return &QuotaError{Quota: quota, Limit: limit, Unit: unit, Flag: flag, Have: have, Want: want}
}

// checkTopicLocked checks putting t in place of old (exists: false for a
// new topic) against the quotas; the caller holds r.mu.
func (r *registrar) checkTopicLocked(old TopicConfig, exists bool, t TopicConfig) error {
	q, topics := r.quotas, r.state.Topics()
	if !exists {
		if err := over("topics", "topics", "--max-topics", q.MaxTopics, len(topics), len(topics)+1); err != nil {
			return err
		}
	}
	if t.Queues <= old.Queues {
		return nil
	}
	if err := over("queuesPerTopic", "queues", "--max-queues-per-topic", q.MaxQueuesPerTopic, old.Queues, t.Queues); err != nil {
		return err
	}
	total := 0
	for _, each := range topics {
		total += each.Queues
	}
	return over("queues", "queues", "--max-queues", q.MaxQueues, total, total-old.Queues+t.Queues)
}

// checkGroupLocked checks putting g in place of old (exists: false for a
// new group) against the quotas; the caller holds r.mu.
func (r *registrar) checkGroupLocked(old GroupConfig, exists bool, g GroupConfig) error {
	q, groups := r.quotas, r.state.Groups()
	if !exists {
		if err := over("groups", "groups", "--max-groups", q.MaxGroups, len(groups), len(groups)+1); err != nil {
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
	return over("pushEndpoints", "push endpoints", "--max-push-endpoints", q.MaxPushEndpoints, endpoints, endpoints+1)
}

// checkTimers checks n more pending timers against the quota.
func (b *Broker) checkTimers(n int) error {
	limit := b.opts.Quotas.MaxPendingTimers
	have, ok := b.timers.Pending()
	if n == 0 || limit <= 0 || !ok {
		return nil
	}
	return over("pendingTimers", "pending timers", "--max-pending-timers", limit, have, have+n)
}
