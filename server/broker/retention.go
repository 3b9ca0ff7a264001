package broker

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/retention"
	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Retention, from the broker's side: the facade of the retention family,
// server/broker/retention, which holds the leader's decisions (the
// floors, the logical expiry of the topics with a shorter retention, the
// carries' order before a deletion, the counts of the unconsumed
// messages a deletion takes) and the rmq_sys_CUT record with its apply
// (server/broker/retention/doc.go; the store's rules are in storage's
// doc.go, "Retention and disk pressure"). What stays here: the family's
// Config, filled in from the broker (the records no snapshot covers, the
// registry, the progress table, the pop states, the instances, a group's
// view of a queue, the metric, the other families' carries: dlq.go,
// timer.go, txn.go, meta.go, trace.go), and the store's policy, which
// the broker installs when it takes over (follow.go).

// cutTopic carries retention cuts.
const cutTopic = retention.Topic

// newRetention is the retention family, wired to the broker (its funcs
// read the broker's families when called: Open makes it first).
func (b *Broker) newRetention() *retention.Service {
	return retention.New(retention.Config{
		Store:       b.store,
		Now:         b.clock.Now,
		Log:         b.log,
		StoreError:  mapStoreErr,
		RetryPrefix: retryPrefix,
		Kept: func() []retention.QueueOffset {
			var out []retention.QueueOffset
			for i, st := range b.scheduler.Status() {
				out = append(out, retention.QueueOffset{Topic: message.ScheduleTopic, Queue: int32(i), Offset: st.Offset})
			}
			return append(out,
				retention.QueueOffset{Topic: offsetTopic, Offset: b.ledger.SnapshotAt()},
				retention.QueueOffset{Topic: txnHalfTopic, Offset: b.txns.KeepFrom(txn.HalfQueue)},
				retention.QueueOffset{Topic: txnOpTopic, Offset: b.txns.KeepFrom(txn.OpQueue)},
				retention.QueueOffset{Topic: leaseTopic, Offset: b.leases.KeepFrom()})
		},
		Topics:       func() []TopicConfig { return b.registry.ListTopics() },
		Groups:       func() []GroupConfig { return b.registry.ListGroups() },
		ProgressKeys: func() []offset.Key { return b.progress.Keys() },
		Committed: func(k offset.Key) int64 {
			committed, _, _ := b.progress.Get(k)
			return committed
		},
		AckedAbove: func(k offset.Key) []int64 { return b.progress.AckedAbove(k) },
		PopStates: func(fn func(group, topic string)) {
			for k := range b.consume.States() {
				fn(k.Group, k.Topic)
			}
		},
		Instances: b.instanceClients,
		View: func(g GroupConfig, topic string, queue int32, client string) progress.View {
			v := b.consume.ViewOf(g, topic, queue, nil, 0).ForInstance(client) // retention reads no in-memory filter
			return b.progressView(v)
		},
		CountDropped: func(group string, n int) { b.metrics.addGroup(b.metrics.retentionDropped, group, n) },
		Carry:        []func(int64) error{b.carryDeadLetters, b.carryTimers, b.carryTxns, b.carryMeta, b.noteLivesBelow},
		CarryTraces:  b.carryTraces,
	})
}

// retentionPolicy is the broker's storage.RetentionPolicy, which the
// store holds from the takeover on: the retention family's Service.
type retentionPolicy struct{ b *Broker }

// Floors implements storage.RetentionPolicy.
func (p retentionPolicy) Floors(now time.Time) (storage.RetentionFloors, error) {
	return p.b.retention.Floors(now)
}

// BeforeDelete implements storage.RetentionPolicy.
func (p retentionPolicy) BeforeDelete(cut int64, reason storage.DeleteReason) error {
	return p.b.retention.BeforeDelete(cut, reason)
}
