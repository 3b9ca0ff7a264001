package retention

import (
	"fmt"
	"sort"
	"time"

	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
)

// Queue names one ConsumeQueue of the store.
type Queue struct {
	Topic string
	Queue int32
}

// Position is one group's position in one stored queue.
type Position struct {
	// View is the group's view of the queue (Config.View).
	View progress.View
	// Committed is the group's committed offset, at least the queue's
	// minimum and the view's Start.
	Committed int64
}

// Positions lists the queues whose messages groups consume — every queue
// of every topic (with no position when no group consumes it) and the
// retry topic of every group with its retry views — with the groups'
// positions in them, lowest committed offset first.
func (s *Service) Positions() map[Queue][]Position {
	out := map[Queue][]Position{}
	topics := map[string]registry.TopicConfig{}
	for _, t := range s.cfg.Topics() {
		topics[t.Name] = t
		for _, q := range s.storedQueues(t) {
			out[Queue{t.Name, q}] = nil
		}
	}
	add := func(v progress.View) {
		sq := Queue{v.StoreTopic, v.StoreQueue}
		committed := max(s.cfg.Committed(v.Key), s.cfg.Store.MinOffset(sq.Topic, sq.Queue), v.Start)
		out[sq] = append(out[sq], Position{View: v, Committed: committed})
	}
	groups := s.cfg.Groups()
	consumed := s.topicsByGroup(groups)
	own := map[string]bool{} // groups with progress of their own (not only their instances')
	for _, k := range s.cfg.ProgressKeys() {
		own[k.Group] = true
	}
	for _, g := range groups {
		hasRetries := s.cfg.Store.MaxOffset(s.cfg.RetryPrefix+g.Name, 0) > 0
		// A broadcasting group's consumer instances each have a position;
		// the group's own counts when it has offsets of its own or no
		// instances.
		clients := []string{""}
		if g.ConsumeMode == instance.Broadcasting {
			if cs := s.cfg.Instances(g.Name); len(cs) > 0 {
				clients = cs
				if own[g.Name] {
					clients = append(clients, "")
				}
			}
		}
		for topic := range consumed[g.Name] {
			t, ok := topics[topic]
			if !ok {
				continue
			}
			for _, c := range clients {
				for _, q := range s.storedQueues(t) {
					add(s.cfg.View(g, topic, q, c))
				}
				if hasRetries {
					add(s.cfg.View(g, topic, progress.RetryQueueID, c))
				}
			}
		}
	}
	for _, positions := range out {
		sort.Slice(positions, func(i, j int) bool { return positions[i].Committed < positions[j].Committed })
	}
	return out
}

// topicsByGroup lists the topics each group consumes: those it subscribes
// to, those it has progress on and those it has pop states of (an
// instance's are its group's).
func (s *Service) topicsByGroup(groups []registry.GroupConfig) map[string]map[string]struct{} {
	out := make(map[string]map[string]struct{}, len(groups))
	for _, g := range groups {
		out[g.Name] = map[string]struct{}{}
		for _, sub := range g.Subscriptions {
			out[g.Name][sub.Topic] = struct{}{}
		}
	}
	add := func(group, topic string) {
		if set, ok := out[instance.Base(group)]; ok {
			set[topic] = struct{}{}
		}
	}
	for _, k := range s.cfg.ProgressKeys() {
		add(k.Group, k.Topic)
	}
	s.cfg.PopStates(add)
	return out
}

// storedQueues lists the queue ids of topic t: its configured queues and
// any others the store holds (a topic whose queue count was lowered).
func (s *Service) storedQueues(t registry.TopicConfig) []int32 {
	ids := make([]int32, 0, t.Queues)
	for q := 0; q < t.Queues; q++ {
		ids = append(ids, int32(q))
	}
	for _, q := range s.cfg.Store.QueueIDs(t.Name) {
		if int(q) >= t.Queues {
			ids = append(ids, q)
		}
	}
	return ids
}

// expireShortTopics raises the minimum of every queue of a topic whose
// retention is shorter than the store's past its messages older than it,
// counting what the groups lose.
func (s *Service) expireShortTopics(now time.Time) error {
	reserved := s.cfg.Store.FileReservedTime()
	var positions map[Queue][]Position
	for _, t := range s.cfg.Topics() {
		keep := time.Duration(t.RetentionHours) * time.Hour
		if keep <= 0 || keep >= reserved {
			continue
		}
		for _, q := range s.storedQueues(t) {
			upTo, err := s.cfg.Store.SearchOffsetByTime(t.Name, q, now.Add(-keep).UnixMilli())
			if err != nil {
				return err
			}
			if upTo <= s.cfg.Store.MinOffset(t.Name, q) {
				continue
			}
			if positions == nil {
				positions = s.Positions()
			}
			s.countDropped(positions[Queue{t.Name, q}], upTo, "topic-retention")
			if _, err := s.cfg.Store.TrimQueue(t.Name, q, upTo); err != nil {
				return fmt.Errorf("expire %s/%d below %d (retentionHours %d): %w", t.Name, q, upTo, t.RetentionHours, err)
			}
		}
	}
	return nil
}

// countDropped counts, for each group position, the messages below queue
// offset upTo that the group has not consumed and is about to lose.
func (s *Service) countDropped(positions []Position, upTo int64, reason string) {
	for _, pos := range positions {
		if pos.Committed >= upTo {
			continue
		}
		v := pos.View
		n := upTo - pos.Committed
		if v.StoreQueue != v.Key.QueueID || v.StoreTopic != v.Key.Topic {
			// A retry view counts its own topic's retries only.
			matching, _, err := s.cfg.Store.CountQueue(v.StoreTopic, v.StoreQueue, pos.Committed, upTo, v.Match, progress.MaxLagScan)
			if err != nil {
				s.cfg.Log.Error().Err(err).Str("group", v.Key.Group).Msg("counting retries lost to retention failed")
				continue
			}
			n = matching
		}
		for _, off := range s.cfg.AckedAbove(v.Key) {
			if off >= pos.Committed && off < upTo {
				n--
			}
		}
		if n <= 0 {
			continue
		}
		s.dropped.add(v.Key, n)
		s.cfg.CountDropped(instance.Base(v.Key.Group), int(n))
		s.cfg.Log.Warn().Str("group", v.Key.Group).Str("topic", v.Key.Topic).Int32("queue", v.Key.QueueID).
			Int64("messages", n).Int64("from", pos.Committed).Int64("to", upTo).Str("reason", reason).
			Msg("retention removes messages the group has not consumed")
	}
}
