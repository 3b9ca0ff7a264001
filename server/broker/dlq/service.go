package dlq

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what the family uses of the broker's store (*storage.Store
// has it all): reading the dead-letter queues and rmq_sys_DLQ, finding a
// letter by id or by its carried copy's key, writing status records,
// resent copies and carried copies.
type Store interface {
	// ReadQueue, MinOffset and MaxOffset read a queue and bound it.
	storage.QueueBounds
	// Topics lists the topics with queues (retention's carry looks for
	// the dead-letter topics among them).
	Topics() []string
	// AwaitDispatch waits until what was stored is dispatched.
	AwaitDispatch(ctx context.Context) error
	// LookupID reads the record a message id names.
	LookupID(id message.ID) (*message.Message, error)
	// FindByUniqKey finds the newest record of topic with a UNIQ_KEY.
	FindByUniqKey(topic, key string) (*message.Message, error)
	// PutClass writes messages in one batch, through the group commit.
	PutClass(class storage.Class, ms []*message.Message, res []storage.PutResult) error
}

// Names are the broker's names a dead letter's copies hold beside the
// family's own: the retry topics' prefix (a resend writes to
// RetryPrefix+group) and the properties a resend drops besides the DLQ_
// ones (the attempt history, an orderly message's sequence).
type Names struct {
	RetryPrefix string
	Attempts    string
	OrderSeq    string
}

// Config is what the family gets from the broker: its store, clock and
// log, the broker's names and sentinels, and, as funcs, the few things it
// asks of the broker — the registry's word on a group and a topic, the
// topic gate, the base of every copy the broker writes, which properties
// are the broker's own, the trace's note of a carried letter.
// server/broker fills it in (dlq.go there).
type Config struct {
	// Store is the broker's store.
	Store Store
	// Clock is the broker's clock: a status change's time, the resend
	// pacer's pauses.
	Clock clockwork.Clock
	// Log is the broker's logger.
	Log zerolog.Logger
	// Names are the broker's names (see Names).
	Names Names
	// InvalidArgument and MessageNotFound are the broker's sentinels,
	// which a refused argument and a missing letter wrap.
	InvalidArgument error
	MessageNotFound error
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// Group and Topic are the broker's GetGroup and GetTopic: nil when the
	// group (topic) exists, else the broker's error (a bad name, not
	// found). A request checks its group; a resend its letters' original
	// topics, under Gate and the change lock.
	Group func(ctx context.Context, name string) error
	Topic func(ctx context.Context, name string) error
	// Gate is the read side of the broker's topic gate: a resend writes
	// its copies under it, so a topic's deletion never misses them.
	Gate sync.Locker
	// Copy is the base of every copy the broker writes: a new message on
	// topic with m's body, flag, born time and host, reconsume count and
	// properties less the named ones.
	Copy func(m *message.Message, topic string, drop ...string) *message.Message
	// Reserved reports whether a property is the broker's own: a view's
	// Properties leave them out.
	Reserved func(name string) bool
	// NoteCarried tells the message trace of a letter retention carries
	// (its life's events are carried with it).
	NoteCarried func(m *message.Message)
}

// Service is the dead-letter family at work: the status Table, followed
// from rmq_sys_DLQ through the store, the requests on the groups'
// dead-letter queues (List, Get, Resend with its pacer, Discard), the
// projection feed (Arrivals, StatusChanges) and retention's carry
// (Carry). Safe for concurrent use, but for Follow (see there).
type Service struct {
	cfg   Config
	table Table
	// carriedBelow: dead letters below this CommitLog offset have been
	// carried forward (their originals are about to be deleted).
	carriedBelow atomic.Int64
	// followed is the next rmq_sys_DLQ queue offset to apply (Follow).
	followed int64
}

// New is the family over cfg's store, with an empty Table: Follow
// rebuilds it.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Table is the status table the service applies the records to.
func (s *Service) Table() *Table { return &s.table }

// Follow applies the rmq_sys_DLQ records the store dispatched since the
// last call (the first call, at open, all it holds): at open and on a
// follower. Its callers never overlap: the broker's open, then its
// follower under the follower's lock.
func (s *Service) Follow(ctx context.Context) error {
	from, err := storage.Replay(ctx, s.cfg.Store, StatusTopic, s.followed, s.Apply)
	s.followed = from
	return err
}

// Apply applies one rmq_sys_DLQ record to the Table (Follow's step); one
// that does not decode is logged and skipped.
func (s *Service) Apply(m *message.Message) {
	recs, err := DecodeStatuses(m.Body)
	if err != nil {
		s.cfg.Log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping undecodable dead-letter status")
		return
	}
	s.table.Apply(recs...)
}
