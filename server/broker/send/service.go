package send

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what a send uses of the broker's store (*storage.Store has
// it): one message's append, or a batch's, through the group commit.
type Store interface {
	Put(m *message.Message) (storage.PutResult, error)
	PutBatch(ms []*message.Message, res []storage.PutResult) error
}

// Errors are the broker's sentinels a refused send wraps (its texts follow
// theirs).
type Errors struct {
	InvalidArgument      error
	TopicNotFound        error
	EmptyBody            error
	TooLarge             error
	IdempotencyInFlight  error
	IdempotencyKeyReused error
}

// Config is what a send gets from the broker: its store and clock, its
// limits and sentinels, and, as funcs, what it asks of the broker and of
// the other families — the topic name rule, the registry's word on a
// topic (and its auto-creation), the topic gate, the transaction and
// timer families' parts of a send, the quota on pending timers and the
// counters. server/broker fills it in (send.go there).
type Config struct {
	// Store is the broker's store.
	Store Store
	// Clock is the broker's clock: a send's born time, its delays' start
	// and the dedup window's.
	Clock clockwork.Clock
	// MaxMessageSize bounds a message's body.
	MaxMessageSize int
	// DedupWindow is how long an idempotency key answers repeats.
	DedupWindow time.Duration
	// DelayLevels are the delay levels' durations (level 1 first).
	DelayLevels []time.Duration
	// Errors are the broker's sentinels.
	Errors Errors
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// Reserved reports the property names the broker sets (a client may
	// not): Check's reserved.
	Reserved func(name string) bool
	// TopicName checks a topic's name (the broker's naming rules).
	TopicName func(name string) error
	// Topic is the registry's word on a topic: its configuration, and
	// whether it exists.
	Topic func(name string) (registry.TopicConfig, bool)
	// CreateTopic auto-creates a topic a send names that does not exist;
	// nil when auto-creation is off.
	CreateTopic func(name string) (registry.TopicConfig, error)
	// Gate is the read side of the broker's topic gate: a send holds it
	// from the topic's lookup across its write, so a topic's deletion
	// happens wholly before or after it.
	Gate sync.Locker
	// CheckTxn checks the transaction fields of one message (package
	// txn's CheckSend); ReserveTxn counts a transactional send of a
	// producer group against the quotas until release (package txn's
	// Reserve, with the broker's quotas); FindDedup finds the message a
	// dedup id of a topic names in the store, a half message of a
	// transaction for the topic included (package txn's FindDedup).
	CheckTxn   func(in *Request) error
	ReserveTxn func(group string) (release func(stored bool, phys int64), err error)
	FindDedup  func(topic, id string, since int64) (*message.Message, error)
	// TimerDue parses a message's delayMs / deliverAt into a due time,
	// zero for none (package timer's SendDue); CheckTimers checks n more
	// pending timers against the quota; TimerSent notes a stored timer
	// record and answers its destination queue (package timer's Sent).
	TimerDue    func(in *Request, now time.Time) (time.Time, error)
	CheckTimers func(n int) error
	TimerSent   func(m *message.Message) int32
	// Sent counts a send's stored messages and their body bytes on topic.
	Sent func(topic string, messages, bytes int)
}

// Service is the send request: the checks of a send, the messages it
// builds, its idempotency keys in the dedup Table, the write and the
// results. Safe for concurrent use.
type Service struct {
	cfg   Config
	dedup Table[Result]
	rr    atomic.Uint32 // round-robin queue choice, one counter for all topics
}

// New is the send request over cfg.
func New(cfg Config) *Service {
	s := &Service{cfg: cfg}
	s.dedup.Init()
	return s
}

// Send stores msgs on topic in order, as one CommitLog batch (one flush).
// It keeps no reference to the messages' bodies once it returns (they are
// copied into the CommitLog), so the caller may reuse their buffers.
// Messages with a DedupID already seen within the dedup window are not
// stored again: their earlier result comes back with Duplicate set.
func (s *Service) Send(_ context.Context, topic string, msgs []Request) ([]Result, error) {
	errs := &s.cfg.Errors
	if err := s.cfg.TopicName(topic); err != nil {
		return nil, err
	}
	if len(msgs) == 0 || len(msgs) > MaxBatch {
		return nil, fmt.Errorf("%w: a send carries 1 to %d messages, got %d", errs.InvalidArgument, MaxBatch, len(msgs))
	}
	for i := range msgs {
		if msgs[i].Transactional && len(msgs) > 1 {
			return nil, fmt.Errorf("%w: a transactional send carries one message (messages[%d] is transactional; as in RocketMQ, batches are not)", errs.InvalidArgument, i)
		}
	}
	// A deletion of the topic happens wholly before or after this send:
	// a message is never stored into a topic between the deletion's floor
	// and its purge.
	s.cfg.Gate.Lock()
	defer s.cfg.Gate.Unlock()
	cfg, err := s.topic(topic)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Clock.Now()
	stored := make([]*message.Message, len(msgs))
	for i := range msgs {
		if stored[i], err = s.build(cfg, &msgs[i], now); err != nil {
			if len(msgs) > 1 {
				return nil, PrefixField(err, fmt.Sprintf("messages[%d].", i))
			}
			return nil, err
		}
	}
	timers := 0
	for _, m := range stored {
		if m.Topic == timer.Topic {
			timers++
		}
	}
	if err := s.cfg.CheckTimers(timers); err != nil {
		return nil, err
	}
	results := make([]Result, len(msgs))
	claims, err := s.Claim(topic, msgs, results, now)
	if err != nil {
		return nil, err
	}
	var txnStored bool
	var txnPhys int64
	if stored[0].Topic == txn.HalfTopic && !results[0].Duplicate {
		// Counted against the quotas before the write, until the state
		// counts the transaction.
		release, err := s.cfg.ReserveTxn(msgs[0].ProducerGroup)
		if err != nil {
			s.Settle(claims, results, err)
			return nil, err
		}
		defer func() { release(txnStored, txnPhys) }()
	}
	var fresh []*message.Message
	var freshIdx []int
	for i, m := range stored {
		if !results[i].Duplicate {
			fresh = append(fresh, m)
			freshIdx = append(freshIdx, i)
		}
	}
	var putErr error
	if len(fresh) > 0 {
		put := make([]storage.PutResult, len(fresh))
		if len(fresh) == 1 {
			put[0], putErr = s.cfg.Store.Put(fresh[0])
		} else {
			putErr = s.cfg.Store.PutBatch(fresh, put)
		}
		if putErr == nil {
			for j, i := range freshIdx {
				results[i] = Result{MessageID: put[j].ID.String(), QueueID: put[j].QueueID, QueueOffset: put[j].QueueOffset}
				switch m := fresh[j]; m.Topic {
				case timer.Topic:
					// A timer: the id names it until it fires (list, cancel,
					// reschedule); the queue is its destination queue, the
					// offset not known before delivery.
					results[i].QueueID, results[i].QueueOffset = s.cfg.TimerSent(m), -1
				case txn.HalfTopic:
					// A half message: the id names the transaction; the queue
					// is its destination, the offset known once committed.
					qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
					results[i].QueueID, results[i].QueueOffset = int32(qid), -1
					results[i].TransactionID = results[i].MessageID
					txnStored, txnPhys = true, put[j].PhysicalOffset
				case message.ScheduleTopic:
					// Delayed by level: the destination queue; the queue
					// offset is only known once it is delivered.
					qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
					results[i].QueueID, results[i].QueueOffset = int32(qid), -1
				}
			}
		}
	}
	s.Settle(claims, results, putErr)
	if putErr != nil {
		return nil, s.cfg.StoreError(putErr)
	}
	bytes := 0
	for _, m := range fresh {
		bytes += len(m.Body)
	}
	s.cfg.Sent(topic, len(fresh), bytes)
	return results, nil
}

// topic is the configuration of the topic a send writes to, auto-created
// when it does not exist and CreateTopic is set.
func (s *Service) topic(topic string) (registry.TopicConfig, error) {
	cfg, ok := s.cfg.Topic(topic)
	if !ok {
		if s.cfg.CreateTopic == nil {
			return cfg, fmt.Errorf("%w: %s", s.cfg.Errors.TopicNotFound, topic)
		}
		var err error
		if cfg, err = s.cfg.CreateTopic(topic); err != nil {
			return cfg, err
		}
	}
	if cfg.Perm == "r" {
		return cfg, fmt.Errorf("%w: topic %s is read-only", s.cfg.Errors.InvalidArgument, topic)
	}
	return cfg, nil
}

// build checks one message of a send against the limits and builds what
// the store appends.
func (s *Service) build(cfg registry.TopicConfig, in *Request, now time.Time) (*message.Message, error) {
	if err := s.validate(in); err != nil {
		return nil, err
	}
	if err := s.cfg.CheckTxn(in); err != nil {
		return nil, err
	}
	due, err := s.cfg.TimerDue(in, now)
	if err != nil {
		return nil, err
	}
	m := &message.Message{Topic: cfg.Name, Body: in.Body, BornTimestamp: now.UnixMilli()}
	if len(in.Properties) > 0 {
		m.Properties = make(map[string]string, len(in.Properties)+2)
		for k, v := range in.Properties {
			m.Properties[k] = v
		}
	}
	if in.Tag != "" {
		m.SetTag(in.Tag)
	}
	if len(in.Keys) > 0 {
		m.SetKeys(in.Keys)
	}
	if in.DedupID != "" {
		m.SetProperty(message.PropertyDedupID, in.DedupID)
	}
	if in.ShardingKey != "" {
		m.QueueID = ShardQueue(in.ShardingKey, cfg.Queues)
		m.SetProperty(message.PropertyShardingKey, in.ShardingKey)
	} else {
		m.QueueID = RoundRobin(s.rr.Add(1), cfg.Queues)
	}
	if in.Transactional {
		txn.AsHalf(m, in.ProducerGroup, in.CheckAfterMs)
		return m, nil
	}
	if in.DelayLevel != 0 {
		return s.delayed(m, in.DelayLevel, now)
	}
	if !due.IsZero() {
		timer.Wrap(m, due)
	}
	return m, nil
}

// validate checks one message of a send against the limits (the body
// here, the rest in Check, whose invalid arguments it wraps in the
// broker's InvalidArgument); field names are relative to the message
// ("tag", "keys[1]").
func (s *Service) validate(in *Request) error {
	switch {
	case len(in.Body) == 0:
		return s.cfg.Errors.EmptyBody
	case len(in.Body) > s.cfg.MaxMessageSize:
		return &LimitError{Field: "body", Size: len(in.Body), Limit: s.cfg.MaxMessageSize, Kind: s.cfg.Errors.TooLarge}
	}
	err := Check(Message{Tag: in.Tag, Keys: in.Keys, ShardingKey: in.ShardingKey, DedupID: in.DedupID,
		Properties: in.Properties}, s.cfg.Reserved)
	var le *LimitError
	if err == nil || errors.As(err, &le) {
		return err
	}
	return fmt.Errorf("%w: %v", s.cfg.Errors.InvalidArgument, err)
}

// delayed wraps a producer's message for the delay scheduler (a send with
// a delay level): the scheduler's topic, the level's queue, its
// destination and due time in its properties.
func (s *Service) delayed(m *message.Message, level int, now time.Time) (*message.Message, error) {
	levels := s.cfg.DelayLevels
	if level < 1 || level > len(levels) {
		return nil, fmt.Errorf("%w: delayLevel must be 1..%d", s.cfg.Errors.InvalidArgument, len(levels))
	}
	m.SetProperty(message.PropertyRealTopic, m.Topic)
	m.SetProperty(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.SetProperty(message.PropertyDelayLevel, strconv.Itoa(level))
	m.SetProperty(message.PropertyDeliverTimeMs, timer.FormatDue(now.Add(levels[level-1])))
	m.Topic = message.ScheduleTopic
	m.QueueID = int32(level - 1)
	return m, nil
}

// Claim resolves every DedupID of a send of msgs to topic at now (the
// Table, and the store for keys it no longer holds): duplicates fill
// their result (Duplicate set); new keys are claimed as pending until
// Settle. Send's step, exported for tests of a claim in flight.
func (s *Service) Claim(topic string, msgs []Request, results []Result, now time.Time) ([]Claim[Result], error) {
	var claims []Claim[Result]
	d := &s.dedup
	since := now.Add(-s.cfg.DedupWindow)
	d.Lock()
	defer d.Unlock()
	for i := range msgs {
		id := msgs[i].DedupID
		if id == "" {
			continue
		}
		key := Key{Topic: topic, ID: id}
		verdict, result := d.Lookup(key, msgs[i].Body, since)
		if verdict == Unknown {
			// Not in memory: the key may predate a restart.
			m, err := s.cfg.FindDedup(topic, id, since.UnixMilli())
			if err == nil {
				verdict, result = d.Found(key, msgs[i].Body, m.Body, time.UnixMilli(m.StoreTimestamp), DedupResult(m))
			} else if !errors.Is(err, storage.ErrNotFound) {
				d.Release(claims)
				return nil, s.cfg.StoreError(err)
			}
		}
		switch verdict {
		case Unknown:
			claims = append(claims, d.Claim(key, msgs[i].Body, now, i))
		case InFlight:
			d.Release(claims)
			return nil, fmt.Errorf("%w: %s", s.cfg.Errors.IdempotencyInFlight, id)
		case Reused:
			d.Release(claims)
			return nil, fmt.Errorf("%w: %s", s.cfg.Errors.IdempotencyKeyReused, id)
		default:
			results[i] = result
			results[i].Duplicate = true
		}
	}
	return claims, nil
}

// Settle records the outcome of claimed keys: on success (err nil) they
// answer later duplicates with their results; on failure they are
// released so a retry can store.
func (s *Service) Settle(claims []Claim[Result], results []Result, err error) {
	s.dedup.Settle(claims, func(i int) Result { return results[i] }, err)
}

// DedupResult is the result a stored message answers a duplicate send
// with: its own, a half message's by its transaction (the destination
// queue, offset -1), a committed message's with the transaction's id.
func DedupResult(m *message.Message) Result {
	r := Result{MessageID: message.NewID(m.StoreHost, m.PhysicalOffset).String(), QueueID: m.QueueID, QueueOffset: m.QueueOffset}
	switch {
	case m.Topic == txn.HalfTopic:
		qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
		r = Result{MessageID: txn.IDOf(m), QueueID: int32(qid), QueueOffset: -1}
		r.TransactionID = r.MessageID
	case m.Property(txn.PropID) != "":
		r.MessageID = m.Property(txn.PropID)
		r.TransactionID = r.MessageID
	}
	return r
}

// Expire is the dedup window's expiry, a leader's periodic pass: settled
// keys stored before the window that ends at now are let go (the store
// answers for them while they are within it).
func (s *Service) Expire(now time.Time) { s.dedup.Expire(now.Add(-s.cfg.DedupWindow)) }

// DropTopic forgets a deleted topic's keys (its deletion holds the topic
// gate).
func (s *Service) DropTopic(topic string) { s.dedup.DropTopic(topic) }
