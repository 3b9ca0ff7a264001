package retention

import (
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Store is what retention uses of the broker's store (*storage.Store has
// it all): the queues' bounds and the CommitLog positions of their
// entries, a search by time, a count, the logical trim of a queue, the
// store's retention window, the cut record's write and a cut's apply.
type Store interface {
	// ReadQueue, MinOffset and MaxOffset read a queue and bound it.
	storage.QueueBounds
	// QueueIDs lists the queues the store holds of a topic.
	QueueIDs(topic string) []int32
	// PhysicalOffset is the CommitLog offset of a queue's entry (of the
	// queue's end past its last).
	PhysicalOffset(topic string, queueID int32, off int64) (int64, error)
	// QueueOffsetAt is the first queue offset whose entry lies at or above
	// a CommitLog offset.
	QueueOffsetAt(topic string, queueID int32, phys int64) (int64, error)
	// SearchOffsetByTime is the first queue offset stored at or after a
	// time (unix ms).
	SearchOffsetByTime(topic string, queueID int32, ts int64) (int64, error)
	// CountQueue counts a queue's entries in [from, to) a tags-code match
	// passes, examining at most limit.
	CountQueue(topic string, queueID int32, from, to int64, match func(tagsCode int64) bool, limit int64) (int64, bool, error)
	// TrimQueue raises a queue's minimum to below.
	TrimQueue(topic string, queueID int32, below int64) (int64, error)
	// FileReservedTime is the store's retention window.
	FileReservedTime() time.Duration
	// PutClass writes messages in one batch, through the group commit.
	PutClass(class storage.Class, ms []*message.Message, res []storage.PutResult) error
	// ApplyRetentionCut deletes the segments wholly below a cut.
	ApplyRetentionCut(cut int64) (int, error)
}

// QueueOffset is a queue offset of a stored queue: the Keep floor's
// positions (Config.Kept).
type QueueOffset struct {
	Topic  string
	Queue  int32
	Offset int64
}

// Config is what retention gets from the broker: its store, clock and
// log, the broker's names, and, as funcs, what it asks of the other
// families — the positions of the records no snapshot covers, the
// registry's topics and groups, the progress table's committed and acked
// offsets, the pop states' (group, topic) pairs, a broadcasting group's
// instances, a group's view of a queue, the metric, the carries before a
// deletion. server/broker fills it in (retention.go there).
type Config struct {
	// Store is the broker's store.
	Store Store
	// Now is the broker's clock: a cut record's time.
	Now func() time.Time
	// Log is the broker's logger.
	Log zerolog.Logger
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// RetryPrefix names a group's retry topic (RetryPrefix+group).
	RetryPrefix string
	// Kept lists, per system queue, the queue offset from which its
	// records must be kept and cannot be carried forward: every delay
	// level's undelivered entries, the progress, transaction and lease
	// records no snapshot covers.
	Kept func() []QueueOffset
	// Topics and Groups list the registry's topics and groups.
	Topics func() []registry.TopicConfig
	Groups func() []registry.GroupConfig
	// ProgressKeys lists the progress table's keys.
	ProgressKeys func() []offset.Key
	// Committed is a key's committed offset.
	Committed func(offset.Key) int64
	// AckedAbove lists a key's acked offsets above its committed one.
	AckedAbove func(offset.Key) []int64
	// PopStates calls fn with the (group, topic) of every pop state, under
	// the lock of the broker's map of pop states.
	PopStates func(fn func(group, topic string))
	// Instances lists a broadcasting group's known consumer instances.
	Instances func(group string) []string
	// View is group g's view of a queue of topic (progress.RetryQueueID:
	// its retry view) as consumer instance client ("": the group's own);
	// retention reads its Key, StoreTopic, StoreQueue, Match and Start.
	View func(g registry.GroupConfig, topic string, queue int32, client string) progress.View
	// CountDropped adds to the metric of the unconsumed messages retention
	// took from a group.
	CountDropped func(group string, n int)
	// Carry are the other families' carries past a cut, all run before a
	// deletion (their errors joined); CarryTraces runs after them, the
	// traces following the copies they carried.
	Carry       []func(cut int64) error
	CarryTraces func(cut int64) error
}

// Service is retention's decisions at work, the broker's
// storage.RetentionPolicy (Floors, BeforeDelete), with the counts of the
// unconsumed messages it took (Dropped, Forget) and the apply of the cut
// records (Apply). Safe for concurrent use.
type Service struct {
	cfg     Config
	dropped droppedCounts
}

// New is retention over cfg.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Floors implements storage.RetentionPolicy: the Keep floor (Config.Kept),
// the logical expiry of the topics whose retention is shorter than the
// store's, the Retained floor of those whose retention is longer, and the
// Unconsumed floor of the groups' positions.
func (s *Service) Floors(now time.Time) (storage.RetentionFloors, error) {
	f := storage.RetentionFloors{Keep: storage.NoFloor, Unconsumed: storage.NoFloor, Retained: storage.NoFloor}
	low := func(floor *int64, topic string, queue int32, off int64) error {
		phys, err := s.cfg.Store.PhysicalOffset(topic, queue, off)
		if err != nil {
			return err
		}
		*floor = min(*floor, phys)
		return nil
	}
	for _, k := range s.cfg.Kept() {
		if err := low(&f.Keep, k.Topic, k.Queue, k.Offset); err != nil {
			return f, err
		}
	}
	if err := s.expireShortTopics(now); err != nil {
		return f, err
	}
	reserved := s.cfg.Store.FileReservedTime()
	for _, t := range s.cfg.Topics() {
		keep := time.Duration(t.RetentionHours) * time.Hour
		if keep <= reserved {
			continue
		}
		for _, q := range s.storedQueues(t) {
			off, err := s.cfg.Store.SearchOffsetByTime(t.Name, q, now.Add(-keep).UnixMilli())
			if err != nil {
				return f, err
			}
			if err := low(&f.Retained, t.Name, q, off); err != nil {
				return f, err
			}
		}
	}
	for sq, positions := range s.Positions() {
		need := s.cfg.Store.MinOffset(sq.Topic, sq.Queue) // a topic nobody consumes yet: all of it
		if len(positions) > 0 {
			need = positions[0].Committed
			for _, pos := range positions[1:] {
				need = min(need, pos.Committed)
			}
		}
		if err := low(&f.Unconsumed, sq.Topic, sq.Queue, need); err != nil {
			return f, err
		}
	}
	return f, nil
}

// BeforeDelete implements storage.RetentionPolicy: it carries what must
// outlive the cut (Config.Carry, then Config.CarryTraces), writes the cut
// record and counts what the groups lose.
func (s *Service) BeforeDelete(cut int64, reason storage.DeleteReason) error {
	errs := make([]error, len(s.cfg.Carry))
	for i, carry := range s.cfg.Carry {
		errs[i] = carry(cut)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := s.cfg.CarryTraces(cut); err != nil { // after the copies they follow
		return err
	}
	if err := s.recordCut(cut, reason); err != nil { // every replica deletes the same (cut.go)
		return err
	}
	for sq, positions := range s.Positions() {
		if len(positions) == 0 {
			continue
		}
		upTo, err := s.cfg.Store.QueueOffsetAt(sq.Topic, sq.Queue, cut)
		if err != nil {
			return err
		}
		s.countDropped(positions, upTo, string(reason))
	}
	return nil
}

// Dropped is the number of unconsumed messages retention took from key's
// queue since the broker started (the progress field droppedUnconsumed).
func (s *Service) Dropped(key offset.Key) int64 { return s.dropped.get(key) }

// Forget drops a deleted group's counts (with its instances'), or a
// forgotten instance's.
func (s *Service) Forget(group string) { s.dropped.forget(group) }
