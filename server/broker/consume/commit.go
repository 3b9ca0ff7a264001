package consume

import (
	"context"
	"fmt"
	"slices"

	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage/offset"
)

// OffsetCommit sets a group's consumer offset of one queue (the broker's
// OffsetCommit is an alias).
type OffsetCommit struct {
	// Topic is the topic of the queue.
	Topic string
	// QueueID is the queue.
	QueueID int32
	// Offset is the next offset to consume.
	Offset int64
}

// CommitOffsets sets committed offsets (offset-mode consumers, resets).
// A commit also resets the group's pop cursor and drops its leases on that
// queue, under its pop state's lock, so pop consumers continue from the
// committed offset. For a broadcasting group, the client the request names
// (Config.Client) commits that consumer instance's offsets, registering it
// first; without one the group's own. A missing group is created when
// groups are auto-created, as by a pull.
func (s *Service) CommitOffsets(ctx context.Context, group string, commits []OffsetCommit) error {
	if s.cfg.Closed() {
		return s.cfg.Errors.ShuttingDown
	}
	g, err := s.GroupForPull(group, true)
	if err != nil {
		return err
	}
	if len(commits) == 0 || len(commits) > s.cfg.MaxBatch {
		return fmt.Errorf("%w: 1 to %d commits", s.cfg.Errors.InvalidArgument, s.cfg.MaxBatch)
	}
	var topics []registry.TopicConfig
	for i, c := range commits {
		t, err := s.cfg.Broker.Registry().GetTopic(c.Topic)
		if err != nil {
			return fmt.Errorf("commit %d: %w", i, err)
		}
		if c.QueueID < 0 || int(c.QueueID) >= t.Queues {
			return fmt.Errorf("%w: commit %d: queue %d does not exist", s.cfg.Errors.InvalidArgument, i, c.QueueID)
		}
		if low, top := s.cfg.Store.MinOffset(c.Topic, c.QueueID), s.cfg.Store.MaxOffset(c.Topic, c.QueueID); c.Offset < low || c.Offset > top {
			return fmt.Errorf("%w: commit %d: offset %d outside [%d, %d]", s.cfg.Errors.OffsetOutOfRange, i, c.Offset, low, top)
		}
		if !slices.ContainsFunc(topics, func(have registry.TopicConfig) bool { return have.Name == t.Name }) {
			topics = append(topics, t)
		}
	}
	keyGroup := group
	if client := s.cfg.Client(ctx); client != "" && g.ConsumeMode == instance.Broadcasting {
		leave, err := s.cfg.Broker.Instances().Enter(g, client, topics...)
		if err != nil {
			return err
		}
		defer leave()
		keyGroup = instance.Key(group, client)
	}
	for _, c := range commits {
		ps := s.PopState(keyGroup, c.Topic)
		ps.Lock()
		err := s.cfg.Broker.Ledger().Commit(offset.Key{Group: keyGroup, Topic: c.Topic, QueueID: c.QueueID}, c.Offset)
		if cur := ps.Cursor(c.QueueID); cur != nil {
			cur.SetNext(c.Offset)
			cur.Clear()
		}
		ps.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}
