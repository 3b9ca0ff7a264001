package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// The progress family (consumer groups' offsets and acks, rmq_sys_OFFSET)
// lives in package progress (server/broker/progress/doc.go): writing its
// records, the consume-from rules and the queries. What stays here is the
// facade below; what needs the pop states' locks (the receipt loop, Ack,
// ChangeLease, Nack) is package consume's.

// maxLagScan bounds the ConsumeQueue entries one retry view's lag count
// examines (package progress).
const maxLagScan = progress.MaxLagScan

// retryQueueID (package consume's) is package progress's RetryQueueID: this does
// not compile otherwise.
var _ [0]struct{} = [retryQueueID - progress.RetryQueueID]struct{}{}

// openLedger recovers the progress table (package progress: Open, with
// the code Follow applies records with) and returns its ledger, wired to
// the broker.
func (b *Broker) openLedger(ctx context.Context) (*progress.Ledger, error) {
	return progress.Open(ctx, progress.Config{
		Store:           b.store,
		Topic:           offsetTopic,
		Now:             b.clock.Now,
		StoreErr:        mapStoreErr,
		InvalidArgument: ErrInvalidArgument,
		MaxBatch:        MaxBatchItems,
		Broker:          progressBroker{b},
		Log:             b.log,
		Gone: func(progressGroup string) bool {
			_, ok := b.registry.Group(baseGroup(progressGroup))
			return !ok // a deleted group's (and its instances')
		},
		Following: b.follow.on.Load,
		// Deposed, or not yet serving: its memory may lack a committed change.
		Deposed: func() bool { return b.store.Replicated() && !b.follow.on.Load() && b.store.Fenced() },
	})
}

// ackEntry is the progress entry acknowledging off of key.
func (b *Broker) ackEntry(key offset.Key, off int64) offset.Entry { return b.ledger.AckEntry(key, off) }

// persist appends rec (after extra) and then applies it (package
// progress: Ledger.Persist).
func (b *Broker) persist(rec offset.Record, extra []*message.Message) error {
	return b.ledger.Persist(rec, extra)
}

// commit durably sets key's committed offset (a new generation).
func (b *Broker) commit(key offset.Key, off int64) error { return b.ledger.Commit(key, off) }

// advance durably raises key's committed offset to at least off.
func (b *Broker) advance(key offset.Key, off int64) error { return b.ledger.Advance(key, off) }

// AwaitApplied returns once every progress record appended before the
// call is applied to the progress table (package progress:
// Ledger.AwaitApplied, which says when a caller needs it).
func (b *Broker) AwaitApplied() { b.ledger.AwaitApplied() }

// normalizeConsumeFrom validates a ConsumeFrom (package progress).
func normalizeConsumeFrom(v string) (string, error) {
	n, err := progress.NormalizeConsumeFrom(v)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return n, nil
}

// meetTopics writes a group's start offsets per its ConsumeFrom (package
// progress: Ledger.MeetTopics).
func (b *Broker) meetTopics(old GroupConfig, exists bool, g GroupConfig, topics map[string]TopicConfig) (undo func(), err error) {
	return b.ledger.MeetTopics(old, exists, g, topics)
}

// awaitDispatch waits (a second at most) until what was stored before the
// call is in the ConsumeQueues: progress is read-your-writes, as pulls are.
func (b *Broker) awaitDispatch(ctx context.Context) error {
	if b.store.CaughtUp() {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := b.store.AwaitDispatch(wait); err != nil && !errors.Is(err, wait.Err()) {
		return mapStoreErr(err)
	}
	return nil
}

// groupTopics lists the topics a group has progress in, subscribes to or
// pops from.
func (b *Broker) groupTopics(g GroupConfig) []string { return b.ledger.GroupTopics(g) }

// Progress reports, per queue, the broker's max offset, the group's
// committed offset, the lag and the leases in flight (mqadmin
// consumerProgress; package progress: Ledger.Progress).
func (b *Broker) Progress(ctx context.Context, group string) ([]QueueProgress, error) {
	return b.ledger.Progress(ctx, group)
}

// GetOffsets reports the group's committed offsets (the progress view).
func (b *Broker) GetOffsets(ctx context.Context, group string) ([]QueueProgress, error) {
	return b.Progress(ctx, group)
}

// Backlog reports what waits for the group besides its queues' lag
// (package progress: Ledger.Backlog).
func (b *Broker) Backlog(ctx context.Context, group string) (GroupBacklog, error) {
	return b.ledger.Backlog(ctx, group)
}

// progressBroker is what package progress's queries need of the broker.
type progressBroker struct{ b *Broker }

func (p progressBroker) Group(ctx context.Context, name string) (GroupConfig, error) {
	return p.b.GetGroup(ctx, name)
}

func (p progressBroker) Topic(name string) (TopicConfig, bool)   { return p.b.registry.Topic(name) }
func (p progressBroker) AwaitDispatch(ctx context.Context) error { return p.b.awaitDispatch(ctx) }
func (p progressBroker) Client(ctx context.Context) string       { return clientOf(ctx) }
func (p progressBroker) Broadcasting(g GroupConfig) bool         { return g.ConsumeMode == ConsumeBroadcasting }
func (p progressBroker) HasInstances(group string) bool          { return len(p.b.instanceClients(group)) > 0 }
func (p progressBroker) HasOwnOffsets(group string) bool         { return p.b.hasOwnOffsets(group) }
func (p progressBroker) Dropped(key offset.Key) int64            { return p.b.retention.Dropped(key) }
func (p progressBroker) DelayLevels() []time.Duration            { return p.b.opts.DelayLevels }
func (p progressBroker) PendingTimers(topic string) int          { return p.b.pendingFor(topic) }
func (p progressBroker) RetryTopic(group string) string          { return RetryTopic(group) }

func (p progressBroker) InstanceOffsets(ctx context.Context, group, client string) ([]QueueProgress, error) {
	return p.b.instanceOffsets(ctx, group, client)
}

func (p progressBroker) PopTopics(group string) []string {
	var out []string
	for k := range p.b.consume.States() {
		if k.Group == group {
			out = append(out, k.Topic)
		}
	}
	return out
}

func (p progressBroker) View(group, topic string, queueID int32) progress.View {
	v := p.b.consume.View(group, topic, queueID, nil)
	pv := p.b.progressView(v)
	if v.InPlace {
		pv.CountRetries = func(from, to int64) (int64, bool, error) { return p.b.countInstanceRetries(v, from, to) }
	}
	return pv
}

func (p progressBroker) InFlight(group, topic string) func(int32) int {
	ps := p.b.consume.Existing(group, topic)
	if ps == nil {
		return nil
	}
	return func(q int32) int {
		ps.Lock()
		defer ps.Unlock()
		if c := ps.Cursor(q); c != nil {
			return c.InFlight()
		}
		return 0
	}
}

func (p progressBroker) LadderCounts(want func(topic, origin string) bool) []progress.LevelCount {
	counts := p.b.retries.Counts(p.b.scheduler.Status, func(d retry.Dest) bool { return want(d.Topic, d.Origin) })
	out := make([]progress.LevelCount, len(counts))
	for i, c := range counts {
		out[i] = progress.LevelCount{Level: c.Level, Count: c.Count, Known: c.Known}
	}
	return out
}

// progressView is consume view v as the progress queries and retention
// read it, with where it starts: a retry view's first retry at or above
// its topic's retry floor.
func (b *Broker) progressView(v consume.View) progress.View {
	pv := progress.View{Key: v.Key, StoreTopic: v.StoreTopic, StoreQueue: v.StoreQueue, Match: v.Match, InPlace: v.InPlace}
	if v.Key.QueueID != retryQueueID {
		return pv
	}
	if floor := b.retryFloor(v.Key.Topic); floor > 0 {
		start, err := b.store.QueueOffsetAt(v.StoreTopic, v.StoreQueue, floor)
		if err != nil {
			// The floor only raises the start; without it the view counts
			// from its committed offset, as a pull would read.
			b.log.Error().Err(err).Str("group", v.Key.Group).Str("topic", v.Key.Topic).Msg("finding where a retry view starts failed")
			return pv
		}
		pv.Start = start
	}
	return pv
}
