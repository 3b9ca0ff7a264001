package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/storage"
)

// Browsing a topic by store time (RocketMQ Dashboard's "query by topic and
// time range") and moving a group to the end of its queues (mqadmin
// skipAccumulatedMessage).
//
// A search walks the queues in order, queue 0 first, and each queue from
// the first message stored at or after From (the store's binary search by
// time, as reset-offset uses) until the first one stored at or after To:
// the store times of one queue grow with its offsets. One call does
// bounded work whatever the topic holds: it returns at most Limit
// messages, reads at most SearchMaxScan queue entries and starts at most
// SearchMaxQueues queues (one binary search each), and hands back the
// position to go on from.

// Bounds of one search call.
const (
	// SearchMaxLimit is the most messages one search returns.
	SearchMaxLimit = 100
	// SearchMaxScan is the most queue entries one search reads.
	SearchMaxScan = 1024
	// SearchMaxQueues is the most queues one search starts (each costs a
	// binary search over the queue's store times).
	SearchMaxQueues = 64
)

// SearchPosition is where a search goes on: a queue, and the offset in it
// (-1: the first message stored at or after From, looked up by time).
type SearchPosition struct {
	QueueID int32
	Offset  int64
}

// TimeSearch asks for the messages of Topic stored in [From, To).
type TimeSearch struct {
	Topic    string
	From, To time.Time
	// QueueID limits the search to one queue; -1 searches every queue.
	QueueID int32
	// Limit is the most messages to return (1..SearchMaxLimit).
	Limit int
	// After, when not nil, is the Next of the call before.
	After *SearchPosition
}

// TimeSearchResult is one page of a search.
type TimeSearchResult struct {
	// Messages are in queue order, then offset order.
	Messages []ReceivedMessage
	// Next is where the following page starts; nil when the search is
	// done.
	Next *SearchPosition
	// Scanned counts the queue entries read.
	Scanned int
}

// SearchByTime returns one page of the messages of a topic stored in
// [From, To) (see the comment at the top of this file).
func (b *Broker) SearchByTime(ctx context.Context, s TimeSearch) (TimeSearchResult, error) {
	var res TimeSearchResult
	cfg, err := b.GetTopic(ctx, s.Topic)
	if err != nil {
		return res, err
	}
	if s.Limit < 1 || s.Limit > SearchMaxLimit {
		return res, fmt.Errorf("%w: limit must be 1..%d", ErrInvalidArgument, SearchMaxLimit)
	}
	if !s.To.After(s.From) {
		return res, fmt.Errorf("%w: to must be after from", ErrInvalidArgument)
	}
	queues := int32(cfg.Queues)
	if s.QueueID >= queues || s.QueueID < -1 {
		return res, fmt.Errorf("%w: queue %d does not exist (topic %s has %d)", ErrInvalidArgument, s.QueueID, s.Topic, queues)
	}
	pos := SearchPosition{QueueID: 0, Offset: -1}
	last := queues - 1
	if s.QueueID >= 0 {
		pos.QueueID, last = s.QueueID, s.QueueID
	}
	if s.After != nil {
		if s.After.QueueID < pos.QueueID || s.After.QueueID > last || s.After.Offset < -1 {
			return res, fmt.Errorf("%w: the cursor does not belong to this search", ErrInvalidArgument)
		}
		pos = *s.After
	}
	if err := b.awaitDispatch(ctx); err != nil {
		return res, err
	}
	from, to := s.From.UnixMilli(), s.To.UnixMilli()
	started := 0
	for pos.QueueID <= last {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if len(res.Messages) >= s.Limit || res.Scanned >= SearchMaxScan {
			res.Next = &pos
			return res, nil
		}
		if pos.Offset < 0 {
			if started == SearchMaxQueues {
				res.Next = &pos
				return res, nil
			}
			started++
			off, err := b.store.SearchOffsetByTime(s.Topic, pos.QueueID, from)
			if err != nil {
				return res, mapStoreErr(err)
			}
			pos.Offset = off
		}
		done, err := b.searchQueue(s.Topic, &pos, from, to, s.Limit, &res)
		if err != nil {
			return res, err
		}
		if done {
			pos = SearchPosition{QueueID: pos.QueueID + 1, Offset: -1}
		}
	}
	return res, nil
}

// searchQueue reads one queue from pos.Offset, adding the messages stored
// in [from, to) to res until the page is full or the scan bound is
// reached; pos moves past what was read. done reports that the queue has
// nothing more for this search.
func (b *Broker) searchQueue(topic string, pos *SearchPosition, from, to int64, limit int, res *TimeSearchResult) (done bool, err error) {
	for len(res.Messages) < limit && res.Scanned < SearchMaxScan {
		if min := b.store.MinOffset(topic, pos.QueueID); pos.Offset < min {
			pos.Offset = min // retention went past the position meanwhile
		}
		if pos.Offset >= b.store.MaxOffset(topic, pos.QueueID) {
			return true, nil
		}
		batch := min(limit-len(res.Messages), SearchMaxScan-res.Scanned, 32)
		rd, err := b.store.ReadQueue(topic, pos.QueueID, pos.Offset, batch, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			continue // retention: the next round starts at the new minimum
		}
		if err != nil {
			return false, mapStoreErr(err)
		}
		if rd.Next <= pos.Offset {
			return true, nil // nothing readable beyond (a damaged queue being rebuilt)
		}
		res.Scanned += int(rd.Next - pos.Offset)
		for _, m := range rd.Messages {
			if m.StoreTimestamp >= to {
				return true, nil
			}
			if m.StoreTimestamp >= from && !b.deletedMessage(m) {
				res.Messages = append(res.Messages, toReceived(m))
			}
		}
		pos.Offset = rd.Next
	}
	return false, nil
}

// SkipBacklog moves the group's offsets of topic ("" every topic it reads)
// to the end of each queue: what is stored now is never delivered to it
// (mqadmin skipAccumulatedMessage). Retries already waiting in the group's
// retry topic and leases out stay. It returns the group's progress of
// those topics afterwards.
func (b *Broker) SkipBacklog(ctx context.Context, group, topic string) ([]QueueProgress, error) {
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	topics := []string{topic}
	if topic == "" {
		topics = b.groupTopics(g)
	}
	if err := b.awaitDispatch(ctx); err != nil {
		return nil, err
	}
	var commits []OffsetCommit
	for _, name := range topics {
		cfg, err := b.GetTopic(ctx, name)
		if err != nil {
			if topic == "" && errors.Is(err, ErrTopicNotFound) {
				continue // a deleted topic the group once consumed
			}
			return nil, err
		}
		for q := int32(0); q < int32(cfg.Queues); q++ {
			commits = append(commits, OffsetCommit{Topic: name, QueueID: q, Offset: b.store.MaxOffset(name, q)})
		}
	}
	if len(commits) > 0 {
		if err := b.resetCommits(ctx, g, commits); err != nil {
			return nil, err
		}
	}
	all, err := b.Progress(ctx, group)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, p := range all {
		if topic == "" || p.Topic == topic {
			out = append(out, p)
		}
	}
	return out, nil
}
