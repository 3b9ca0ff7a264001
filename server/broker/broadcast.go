package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/storage/message"
)

// Broadcasting per consumer instance (RocketMQ's MessageModel.BROADCASTING)
// lives in package instance (server/broker/instance/doc.go): the naming
// rules, the set of known instances behind the instances lock, an
// instance's registration with its start offsets, the sweep of idle
// instances (a leader service, leader.go runs it), the snapshot file, the
// queries and a reset's fan-out. What stays here is the facade below and
// ReadQueueFor's filters and read; an instance's view of the queues is
// package consume's (View.ForInstance), and so are the pulls and the
// settlements that name an instance; the commits (admin.go) call the
// facade.

// ConsumeBroadcasting is the consume mode in which every consumer
// instance gets every message.
const ConsumeBroadcasting = instance.Broadcasting

// Bounds of a group's InstanceIdle (package instance's).
const (
	// DefaultInstanceIdle is how long a consumer instance of a
	// broadcasting group may stay idle before it is forgotten, when the
	// group does not say.
	DefaultInstanceIdle = instance.DefaultIdle
	// MinInstanceIdle and MaxInstanceIdle bound a group's InstanceIdle.
	MinInstanceIdle = instance.MinIdle
	MaxInstanceIdle = instance.MaxIdle
)

// instanceSweepInterval is how often idle instances are looked for.
const instanceSweepInterval = instance.SweepInterval

// propInstance names, on a broadcasting group's dead letter (and its
// resend), the consumer instance it belongs to.
const propInstance = instance.Prop

// instancesSnapshot is the file of the instances' last-seen times.
const instancesSnapshot = instance.SnapshotFile

// instanceKey is the progress group of client's instance of group.
func instanceKey(group, client string) string { return instance.Key(group, client) }

// splitInstance splits a progress group into the group and the client id
// of an instance ("" for a group's own keys).
func splitInstance(name string) (group, client string) { return instance.Split(name) }

// baseGroup is the group a progress group belongs to.
func baseGroup(name string) string { return instance.Base(name) }

// instanceIdle is g's idle time before an instance is forgotten.
func instanceIdle(g GroupConfig) time.Duration { return instance.Idle(g.InstanceIdle) }

// checkInstanceIdle validates a group's InstanceIdle (0: the default).
func checkInstanceIdle(d time.Duration) error {
	if err := instance.CheckIdle(d); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return nil
}

// newInstances is the consumer-instance service, wired to the broker
// (after the progress ledger: it writes through it).
func (b *Broker) newInstances() *instance.Service {
	return instance.NewService(instance.Config{
		Store:            b.store,
		Ledger:           b.ledger,
		Now:              b.clock.Now,
		Log:              b.log,
		StoreErr:         mapStoreErr,
		InvalidArgument:  ErrInvalidArgument,
		ClientIDRequired: ErrClientIDRequired,
		CheckClientID:    CheckClientID,
		MaxPerGroup:      b.opts.Quotas.MaxInstancesPerGroup,
		Quota: func(limit, have int) error {
			return &QuotaError{Quota: "instancesPerGroup", Unit: "consumer instances", Flag: "--max-instances-per-group", Limit: limit, Have: have, Want: have + 1}
		},
		MaxBatch:   MaxBatchItems,
		RetryTopic: RetryTopic,
		Broker:     instanceBroker{b},
	})
}

// enterInstance registers client as an instance of g when it is new and
// writes its start offsets in the topics it meets first; the request is
// under way until leave (package instance: Service.Enter).
func (b *Broker) enterInstance(g GroupConfig, client string, topics ...TopicConfig) (leave func(), err error) {
	return b.instances.Enter(g, client, topics...)
}

// instanceKnown reports whether a progress group is a group's own or a
// known instance's: a forgotten instance's late settlements are dropped.
func (b *Broker) instanceKnown(name string) bool { return b.instances.Known(name) }

// instanceClients lists the client ids of group's known instances, sorted.
func (b *Broker) instanceClients(group string) []string { return b.instances.Clients(group) }

// forgetIdleInstances is the instance sweep's pass (package instance:
// Service.Sweep).
func (b *Broker) forgetIdleInstances(now time.Time) { b.instances.Sweep(now) }

// openInstances rebuilds the known instances from the progress keys and
// the snapshot (package instance: Service.Open).
func (b *Broker) openInstances() { b.instances.Open() }

// snapshotInstances writes the instances' last-seen times when they
// changed since the last snapshot.
func (b *Broker) snapshotInstances() error { return b.instances.WriteSnapshot() }

// dropGroupInstances forgets a deleted group's instances in memory.
func (b *Broker) dropGroupInstances(group string) { b.instances.DropGroup(group) }

// hasOwnOffsets reports whether group has progress of its own (not only
// its instances').
func (b *Broker) hasOwnOffsets(group string) bool { return b.instances.HasOwnOffsets(group) }

// Instances reports the consumer instances of a broadcasting group with
// their progress per queue, in client id order (package instance:
// Service.Instances).
func (b *Broker) Instances(ctx context.Context, group string) ([]InstanceProgress, error) {
	return b.instances.Instances(ctx, group)
}

// countInstanceRetries counts the messages of an instance's retry view v
// in [from, to) (package instance: Service.CountRetries).
func (b *Broker) countInstanceRetries(v consume.View, from, to int64) (n int64, complete bool, err error) {
	return b.instances.CountRetries(instance.RetryView{StoreTopic: v.StoreTopic, StoreQueue: v.StoreQueue, Match: v.Match, Accept: v.Accept}, from, to)
}

// instanceOffsets is the progress of one instance (package instance:
// Service.Offsets).
func (b *Broker) instanceOffsets(ctx context.Context, group, client string) ([]QueueProgress, error) {
	return b.instances.Offsets(ctx, group, client)
}

// resetCommits applies a reset's commits (ResetOffset, SkipBacklog): to
// the group, or for a broadcasting group to the instance ctx names, else
// to its instances and own offsets (package instance:
// Service.ResetCommits).
func (b *Broker) resetCommits(ctx context.Context, g GroupConfig, commits []OffsetCommit) error {
	return b.instances.ResetCommits(g, clientOf(ctx), func(client string) error {
		if client == "" {
			return b.CommitOffsets(ctx, g.Name, commits)
		}
		return b.CommitOffsets(WithClient(ctx, client), g.Name, commits)
	})
}

// ReadQueueFor reads messages of one queue by offset for a group
// (offset-mode consumers): the tag and SQL filters of the group's
// subscription of the topic apply — what they refuse is left out, the
// next offset moves past it — and from < 0 starts at the group's committed
// offset. For a broadcasting group a client id in ctx reads as that
// consumer instance: registered by its first read (its start by the
// group's ConsumeFrom), its committed offset the instance's (package
// instance: Service.ReadStart). Nothing is leased or committed: PUT
// offsets (with the same client id) does that.
func (b *Broker) ReadQueueFor(ctx context.Context, group, topic string, queueID int32, from int64, limit int) ([]QueueMessage, int64, error) {
	t, err := b.checkReadQueue(ctx, topic, queueID, limit)
	if err != nil {
		return nil, from, err
	}
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return nil, from, err
	}
	var expr, sqlText, field string
	for i, s := range g.Subscriptions {
		if s.Topic == topic {
			expr, sqlText, field = s.TagExpression, s.SQL, fmt.Sprintf("subscriptions[%d].sql", i)
		}
	}
	match, err := tagMatcher(expr)
	if err != nil {
		return nil, from, err
	}
	sql, err := compileSQL(field, sqlText)
	if err != nil {
		return nil, from, err
	}
	from, leave, err := b.instances.ReadStart(ctx, g, clientOf(ctx), t, queueID, from)
	if err != nil {
		return nil, from, err
	}
	defer leave()
	var accept func(*message.Message) bool
	if sql != nil {
		accept = func(m *message.Message) bool { return sql.Match(m.Properties) }
	}
	return b.readQueue(ctx, topic, queueID, from, limit, match, accept)
}

// instanceBroker is what package instance needs of the broker.
type instanceBroker struct{ b *Broker }

func (i instanceBroker) Group(name string) (GroupConfig, bool) { return i.b.registry.Group(name) }
func (i instanceBroker) Lookup(ctx context.Context, name string) (GroupConfig, error) {
	return i.b.GetGroup(ctx, name)
}
func (i instanceBroker) Topic(name string) (TopicConfig, bool)   { return i.b.registry.Topic(name) }
func (i instanceBroker) AwaitDispatch(ctx context.Context) error { return i.b.awaitDispatch(ctx) }
func (i instanceBroker) CatchUp(ctx context.Context) error       { return i.b.consume.CatchUp(ctx) }
func (i instanceBroker) ForgetDropped(progressGroup string)      { i.b.retention.Forget(progressGroup) }

// DropPopStates drops a progress group's pop states: out of the map
// (package consume's), then each one's cursors and lease notes under its
// own lock.
func (i instanceBroker) DropPopStates(progressGroup string) {
	states := i.b.consume.DropWhere(func(k consume.Key) bool { return k.Group == progressGroup })
	for _, ps := range states {
		ps.Lock()
		ps.Drop()
		ps.Unlock()
	}
}
