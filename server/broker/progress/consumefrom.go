package progress

import (
	"fmt"
	"slices"
	"time"

	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage/offset"
)

// Where a group starts (RocketMQ's ConsumeFromWhere). A group meets a
// topic when it subscribes to it: with the group's creation, or when a
// PUT or PATCH adds the subscription. Then, for every queue of the topic
// the group has no offset for, its committed offset is set by the group's
// ConsumeFrom:
//
//   - "" (first, the default): nothing is written; the group starts at
//     the queue's first retained offset, as every group did before;
//   - "last": the queue's max offset at that moment, so the backlog then
//     stored is skipped and every message stored after is delivered;
//   - an RFC 3339 time: the first message stored at or after it
//     (SearchOffsetByTime, as ResetOffset; a time after the meeting is
//     the same as "last").
//
// The offsets are commit records (rmq_sys_OFFSET), written under the
// registry's lock before the group record that creates the group or adds
// the subscription, so no pull sees the group (or the subscription)
// before its start. A queue the group already has an offset for (it
// consumed there, or subscribed before) keeps it, so changing ConsumeFrom
// moves nothing (ResetOffset does); the new value applies to the
// subscriptions added from then on. A queue that appears after the group
// met the topic (the topic's queue count grew), a topic created after the
// subscription, and a topic the group pops without subscribing to it
// start at their first offset: what they hold was stored after the
// group met them, or the group never asked for a start. Auto-created
// groups start at the first offset.

// ConsumeFromLast is the ConsumeFrom that skips the backlog.
const ConsumeFromLast = "last"

// NormalizeConsumeFrom validates a ConsumeFrom: "first" becomes "" and a
// time is kept in UTC (RFC 3339 with the fraction it had). Its error is
// the text of an invalid argument (the broker wraps it in its
// ErrInvalidArgument).
func NormalizeConsumeFrom(v string) (string, error) {
	switch v {
	case "", "first":
		return "", nil
	case ConsumeFromLast:
		return v, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return "", fmt.Errorf(`consumeFrom %s must be "first", "last" or an RFC 3339 time`, quote.Value(v))
	}
	return t.UTC().Format(time.RFC3339Nano), nil
}

// MeetTopics writes the start offsets of the topics g subscribes to and
// old did not (all of them when the group is new), per g.ConsumeFrom; the
// caller holds the registry's lock and passes its topics. undo forgets
// them again when the group record that follows could not be written.
//
// A broadcasting group gets none: its progress is its instances' (each
// starts by the ConsumeFrom when it registers: package instance), and a
// position of its own that nobody advances would hold retention back.
func (l *Ledger) MeetTopics(old registry.GroupConfig, exists bool, g registry.GroupConfig, topics map[string]registry.TopicConfig) (undo func(), err error) {
	if g.ConsumeFrom == "" || g.ConsumeMode == registry.Broadcasting {
		return nil, nil
	}
	var at time.Time
	if g.ConsumeFrom != ConsumeFromLast {
		at, err = time.Parse(time.RFC3339Nano, g.ConsumeFrom)
		if err != nil {
			return nil, fmt.Errorf("%w: consumeFrom: %w", l.cfg.InvalidArgument, err)
		}
	}
	var met []string
	for _, s := range g.Subscriptions {
		had := exists && slices.ContainsFunc(old.Subscriptions, func(o registry.Subscription) bool { return o.Topic == s.Topic })
		if !had && !slices.Contains(met, s.Topic) {
			met = append(met, s.Topic)
		}
	}
	var entries []offset.Entry
	for _, name := range met {
		t, ok := topics[name]
		if !ok {
			continue // created later: its queues start empty
		}
		for q := int32(0); q < int32(t.Queues); q++ {
			key := offset.Key{Group: g.Name, Topic: name, QueueID: q}
			if _, _, known := l.table.Get(key); known {
				continue
			}
			start := l.cfg.Store.MaxOffset(name, q)
			if !at.IsZero() {
				if start, err = l.cfg.Store.SearchOffsetByTime(name, q, at.UnixMilli()); err != nil {
					return nil, l.cfg.StoreErr(err)
				}
			}
			entries = append(entries, offset.Entry{Kind: offset.KindCommit, Key: key, Generation: 1, Offset: start})
		}
	}
	if !exists {
		undo = func() { l.table.Forget(g.Name) }
	}
	for len(entries) > 0 {
		n := min(len(entries), l.cfg.MaxBatch)
		if err := l.Persist(offset.Record{Entries: entries[:n]}, nil); err != nil {
			if undo != nil {
				undo()
			}
			return nil, err
		}
		entries = entries[n:]
	}
	return undo, nil
}
