package progress

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage/offset"
)

// Consumer progress (mqadmin consumerProgress): per queue what the group
// has not consumed yet (Progress), and what waits for it outside its
// queues — retries in the delay ladder and delayed messages of its topics
// (Backlog). Together they are the group's whole lag.

// MaxLagScan bounds the ConsumeQueue entries one retry view's lag count
// examines (20 bytes each); beyond it the lag shown is a lower bound.
const MaxLagScan = 1 << 20

// RetryQueueID is the queue id of a (group, topic)'s view of the group's
// retry topic %RETRY%<group> (the progress key of its retries).
const RetryQueueID = -1

// QueueProgress is a group's position in one queue.
type QueueProgress struct {
	// Topic is the topic of the queue.
	Topic string
	// QueueID is the queue.
	QueueID int32
	// BrokerOffset is the queue's max offset (next offset to be written).
	BrokerOffset int64
	// ConsumerOffset is the group's committed offset.
	ConsumerOffset int64
	// Lag is BrokerOffset - ConsumerOffset; for the retry view (QueueID
	// -1) the number of this topic's retries from ConsumerOffset on.
	Lag int64
	// LagIsLowerBound: Lag could not be counted completely (a retry view
	// too long to scan); the true lag is higher.
	LagIsLowerBound bool
	// InFlight counts messages leased and not yet acked.
	InFlight int
	// LastStoredAt is the store time of the newest message in the queue.
	LastStoredAt time.Time
	// DroppedUnconsumed counts the messages of the queue retention removed
	// before the group consumed them (expired, a shorter topic retention,
	// or --disk-pressure-delete), since the broker started.
	DroppedUnconsumed int64
	// MirroredOffset is the committed offset as mirrored in PostgreSQL;
	// nil in embedded mode or when the queue is not mirrored (yet).
	MirroredOffset *int64
}

// GroupBacklog is what waits for a group besides the lag of its queues.
type GroupBacklog struct {
	// Retry lists, per delay level, the group's retries waiting in the
	// delay ladder (levels with none are left out).
	Retry []LevelBacklog
	// RetryTimers counts the group's retries waiting on a timer (a
	// nack's delayMs, an exponential or fixed retry policy), of every
	// topic.
	RetryTimers int64
	// Delayed lists, per delay level, the delayed messages (sent with a
	// delayLevel) of the topics the group consumes.
	Delayed []LevelBacklog
	// Timers counts the pending delayMs/deliverAt timers of those topics.
	Timers int64
	// Notes say what could not be counted and why.
	Notes []string
}

// LevelBacklog is what waits at one delay level.
type LevelBacklog struct {
	// Level is the delay level (1-based).
	Level int
	// Delay is the level's delay.
	Delay time.Duration
	// Count is how many messages wait there; nil when it is not known
	// (GroupBacklog.Notes says why).
	Count *int64
	// AtLeast, when Count is nil, is what was counted so far.
	AtLeast *int64
}

// View is one queue a progress group reads, as the broker's pop states
// see it: a queue of the topic itself, or (QueueID RetryQueueID) the
// topic's view of the group's retry topic.
type View struct {
	// Key is the progress key.
	Key offset.Key
	// StoreTopic and StoreQueue are the queue in the store.
	StoreTopic string
	StoreQueue int32
	// Match is the store-level filter on the tags code (nil: all).
	Match func(tagsCode int64) bool
	// Start is the first offset of the store queue the view reads: a
	// retry view's first retry at or above its topic's retry floor (those
	// below belong to a deleted topic of the name, which its pulls pass
	// over); 0 for any other. The view's position is at least Start.
	Start int64
	// InPlace: a failed delivery is retried in place, not through
	// %RETRY% (a broadcasting group's instance).
	InPlace bool
	// CountRetries counts, for an in-place retry view, the resends in
	// [from, to) naming the instance (complete: all were examined).
	CountRetries func(from, to int64) (n int64, complete bool, err error)
}

// LevelCount is what waits at one delay level of the delay ladder.
type LevelCount struct {
	Level int
	Count int64
	// Known: Count is complete (else what was counted so far).
	Known bool
}

// Broker is what the queries need of the broker: the registry, the
// broadcasting groups' instances, the pop states, retention's counts, the
// delay ladder and the timers.
type Broker interface {
	// Group is the group's configuration (GetGroup: ErrGroupNotFound).
	Group(ctx context.Context, name string) (registry.GroupConfig, error)
	// Topic is the topic's configuration, if it exists.
	Topic(name string) (registry.TopicConfig, bool)
	// AwaitDispatch waits (a second at most) until what was stored before
	// the call is in the ConsumeQueues.
	AwaitDispatch(ctx context.Context) error
	// Client is the calling client's id carried by ctx ("" when none).
	Client(ctx context.Context) string
	// Broadcasting reports whether g is a broadcasting group.
	Broadcasting(g registry.GroupConfig) bool
	// InstanceOffsets is the progress of a broadcasting group's instance.
	InstanceOffsets(ctx context.Context, group, client string) ([]QueueProgress, error)
	// HasInstances reports whether a broadcasting group has known instances.
	HasInstances(group string) bool
	// HasOwnOffsets reports whether group has progress under its own name.
	HasOwnOffsets(group string) bool
	// PopTopics lists the topics group has a pop state of.
	PopTopics(group string) []string
	// View is the view of one queue of (group, topic).
	View(group, topic string, queueID int32) View
	// InFlight counts the leases in flight per queue of (group, topic)'s
	// pop state, each call under its lock; nil when it has none.
	InFlight(group, topic string) func(queueID int32) int
	// Dropped counts what retention took of key's queue unconsumed.
	Dropped(key offset.Key) int64
	// LadderCounts counts, per delay level, the ladder's entries of a
	// destination (topic: REAL_TOPIC; origin: RETRY_TOPIC of a retry, ""
	// for a producer's delayed message) want takes.
	LadderCounts(want func(topic, origin string) bool) []LevelCount
	// DelayLevels are the delay levels' delays.
	DelayLevels() []time.Duration
	// PendingTimers counts the pending timers of a destination topic.
	PendingTimers(topic string) int
	// RetryTopic is the group's retry topic.
	RetryTopic(group string) string
}

// GroupTopics lists the topics a group has progress in, subscribes to or
// pops from.
func (l *Ledger) GroupTopics(g registry.GroupConfig) []string {
	set := map[string]struct{}{}
	for _, s := range g.Subscriptions {
		set[s.Topic] = struct{}{}
	}
	for _, k := range l.table.Keys() {
		if k.Group == g.Name {
			set[k.Topic] = struct{}{}
		}
	}
	for _, t := range l.cfg.Broker.PopTopics(g.Name) {
		set[t] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Progress reports, per queue, the broker's max offset, the group's
// committed offset, the lag and the leases in flight (mqadmin
// consumerProgress). Queue id -1 is the topic's view of the group's retry
// topic %RETRY%<group>; it is listed once retries exist. Its offsets are
// positions in %RETRY%<group>, which all topics of the group share, and its
// lag counts this topic's retries only. A broadcasting group's consumer
// instances have progress of their own (Instances); its own queues are
// listed when it has offsets of its own or no instances.
func (l *Ledger) Progress(ctx context.Context, group string) ([]QueueProgress, error) {
	b := l.cfg.Broker
	g, err := b.Group(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := b.AwaitDispatch(ctx); err != nil {
		return nil, err
	}
	if client := b.Client(ctx); client != "" && b.Broadcasting(g) {
		return b.InstanceOffsets(ctx, group, client)
	}
	var out []QueueProgress
	if b.Broadcasting(g) && b.HasInstances(group) && !b.HasOwnOffsets(group) {
		return out, nil
	}
	for _, topic := range l.GroupTopics(g) {
		t, ok := b.Topic(topic)
		if !ok {
			continue
		}
		rows, err := l.QueueRows(group, t)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// QueueRows is the progress of one topic's queues (and its retry view)
// under a progress group: a group's own, or an instance's.
func (l *Ledger) QueueRows(group string, t registry.TopicConfig) ([]QueueProgress, error) {
	b, store := l.cfg.Broker, l.cfg.Store
	var out []QueueProgress
	topic := t.Name
	inFlight := b.InFlight(group, topic)
	for q := int32(RetryQueueID); q < int32(t.Queues); q++ {
		v := b.View(group, topic, q)
		committed, _, _ := l.table.Get(v.Key)
		qp := QueueProgress{Topic: topic, QueueID: q, BrokerOffset: store.MaxOffset(v.StoreTopic, v.StoreQueue)}
		qp.ConsumerOffset = max(committed, store.MinOffset(v.StoreTopic, v.StoreQueue), v.Start)
		qp.Lag = max(qp.BrokerOffset-qp.ConsumerOffset, 0)
		qp.DroppedUnconsumed = b.Dropped(v.Key)
		if inFlight != nil {
			qp.InFlight = inFlight(q)
		}
		if q == RetryQueueID && qp.Lag > 0 && v.InPlace {
			// An instance's view takes only the resends naming it.
			n, complete, err := v.CountRetries(qp.ConsumerOffset, qp.BrokerOffset)
			if err != nil {
				return nil, err
			}
			qp.Lag, qp.LagIsLowerBound = n, !complete
		}
		if q == RetryQueueID && (qp.BrokerOffset == 0 || v.InPlace && qp.Lag == 0) && qp.InFlight == 0 {
			continue // no retries: keep the view out of the listing
		}
		if q == RetryQueueID && qp.Lag > 0 && !v.InPlace {
			// The retry topic holds every topic's retries: count this one's.
			n, complete, err := store.CountQueue(v.StoreTopic, v.StoreQueue, qp.ConsumerOffset, qp.BrokerOffset, v.Match, MaxLagScan)
			if err != nil {
				return nil, l.cfg.StoreErr(err)
			}
			qp.Lag, qp.LagIsLowerBound = n, !complete
		}
		if qp.BrokerOffset > 0 {
			if res, err := store.ReadQueue(v.StoreTopic, v.StoreQueue, qp.BrokerOffset-1, 1, nil); err == nil && len(res.Messages) == 1 {
				qp.LastStoredAt = time.UnixMilli(res.Messages[0].StoreTimestamp).UTC()
			}
		}
		out = append(out, qp)
	}
	return out, nil
}

// Backlog reports what waits for the group besides its queues' lag: its
// retries still in the delay ladder (entries of SCHEDULE_TOPIC_XXXX for
// %RETRY%<group> the scheduler has not delivered) or on a timer, and the delayed
// messages of the topics it consumes (delay levels and delayMs/deliverAt
// timers). A count that cannot be known is nil, with a note.
func (l *Ledger) Backlog(ctx context.Context, group string) (GroupBacklog, error) {
	b := l.cfg.Broker
	g, err := b.Group(ctx, group)
	if err != nil {
		return GroupBacklog{}, err
	}
	if err := b.AwaitDispatch(ctx); err != nil {
		return GroupBacklog{}, err
	}
	topics := map[string]bool{}
	for _, t := range l.GroupTopics(g) {
		if _, ok := b.Topic(t); ok {
			topics[t] = true
		}
	}
	retry := b.RetryTopic(group)
	levels := b.DelayLevels()
	var out GroupBacklog
	for _, kind := range []struct {
		into *[]LevelBacklog
		want func(topic, origin string) bool
		what string
	}{
		{&out.Retry, func(topic, origin string) bool { return topic == retry && topics[origin] }, "retries"},
		{&out.Delayed, func(topic, origin string) bool { return origin == "" && topics[topic] }, "delayed messages"},
	} {
		var unknown []string
		for _, c := range b.LadderCounts(kind.want) {
			lb := LevelBacklog{Level: c.Level, Delay: levels[c.Level-1]}
			switch {
			case c.Known && c.Count == 0:
				continue
			case c.Known:
				n := c.Count
				lb.Count = &n
			default:
				unknown = append(unknown, fmt.Sprint(c.Level))
				if c.Count > 0 {
					n := c.Count
					lb.AtLeast = &n
				}
			}
			*kind.into = append(*kind.into, lb)
		}
		if len(unknown) > 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("%s waiting at delay level %s: still being counted (a large backlog is read once after a start); ask again",
				kind.what, strings.Join(unknown, ", ")))
		}
	}
	for t := range topics {
		out.Timers += int64(b.PendingTimers(t))
	}
	out.RetryTimers = int64(b.PendingTimers(retry))
	return out, nil
}
