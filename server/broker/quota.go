package broker

import (
	"github.com/mqgate/mqgate/server/broker/registry"
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

// QuotaError is ErrQuotaExceeded with the quota and its limit (package
// registry's, where the registry's quotas are checked).
type QuotaError = registry.QuotaError

// over returns a *QuotaError when want passes limit (0: unlimited).
func over(quota, unit, flag string, limit, have, want int) error {
	return registry.Over(quota, unit, flag, limit, have, want)
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
