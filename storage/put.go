package storage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
)

// RetryTopicPrefix starts every retry topic (%RETRY%<group>).
const RetryTopicPrefix = "%RETRY%"

// putEncoder adapts a Message to commitlog.Encoder. Encode runs under the
// CommitLog's append lock, which is what makes the queue-offset assignment
// and the store timestamp monotonic per queue (RocketMQ assigns both inside
// CommitLog.putMessage's lock too).
type putEncoder struct {
	store *Store
	msg   *message.Message
	size  int
}

func (e *putEncoder) Len() int { return e.size }

func (e *putEncoder) Encode(dst []byte, offset int64) {
	s, m := e.store, e.msg
	key := queueKey{m.Topic, m.QueueID}
	m.QueueOffset = s.queueOffsets[key]
	s.queueOffsets[key] = m.QueueOffset + 1
	m.PhysicalOffset = offset
	m.StoreTimestamp = s.opts.Clock.Now().UnixMilli()
	m.StoreHost = s.StoreID()
	m.EncodePayload(dst)
}

// MaxQueueID is the highest queue id the store accepts.
const MaxQueueID = 1<<16 - 1

// checkTopic reports whether topic can name a ConsumeQueue directory:
// 1 to message.MaxTopicLen bytes of A-Z a-z 0-9 _ - %.
func checkTopic(topic string) error {
	if topic == "" || len(topic) > message.MaxTopicLen {
		return fmt.Errorf("%w: topic is %d bytes; 1 to %d are allowed", ErrInvalidMessage, len(topic), message.MaxTopicLen)
	}
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '%':
		default:
			return fmt.Errorf("%w: topic byte %d is %q; only A-Z a-z 0-9 _ - %% are allowed", ErrInvalidMessage, i, c)
		}
	}
	return nil
}

// prepare validates m against everything a reader of the record checks —
// the payload format's limits (message.Validate) and the store's own rules
// for topics and queue ids — so that no record is ever appended that the
// dispatcher or a reader would refuse; then it fills what the store
// computes before the append.
func (s *Store) prepare(m *message.Message) (int, error) {
	if err := checkTopic(m.Topic); err != nil {
		return 0, err
	}
	if m.QueueID < 0 || m.QueueID > MaxQueueID {
		return 0, fmt.Errorf("%w: queue id %d outside 0..%d", ErrInvalidMessage, m.QueueID, MaxQueueID)
	}
	if err := m.Validate(); err != nil {
		if errors.Is(err, message.ErrTooLarge) {
			return 0, fmt.Errorf("%w: %w", ErrMessageTooLarge, err)
		}
		return 0, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if m.Topic == message.ScheduleTopic {
		due, err := strconv.ParseInt(m.Property(message.PropertyDeliverTimeMs), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: schedule message without %s", ErrInvalidMessage, message.PropertyDeliverTimeMs)
		}
		m.TagsCode = due
	} else if strings.HasPrefix(m.Topic, RetryTopicPrefix) {
		// A retry topic is shared by every topic of its group: index the
		// original topic, so a consumer of one topic skips the others'
		// retries without reading them.
		m.TagsCode = message.TagsCode(m.Property(message.PropertyRetryTopic))
	} else {
		m.TagsCode = message.TagsCode(m.Tag())
	}
	size := m.PayloadSize()
	if size > s.opts.MaxMessageSize {
		return 0, fmt.Errorf("%w: %d bytes > %d", ErrMessageTooLarge, size, s.opts.MaxMessageSize)
	}
	return size, nil
}

// checkWritable refuses an append of class on a closed store or above
// its ceiling, and says how it may use the CommitLog's room.
func (s *Store) checkWritable(class Class) (commitlog.Use, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return s.checkCeiling(class)
}

// Put appends one producer message (ClassSend). The store assigns
// QueueOffset, PhysicalOffset, StoreTimestamp, StoreHost (the store id) and TagsCode
// (written back into m). In sync flush mode it returns only once the
// message is durable.
func (s *Store) Put(m *message.Message) (PutResult, error) { return s.put(ClassSend, m) }

// PutBatch appends producer messages (ClassSend) under one lock
// acquisition and one flush wait. res must have len(ms). A batch is
// refused whole by a ceiling or a full disk (ErrDiskFull: nothing is
// written). On any other error no result is valid (some messages may
// still have been written: the caller must treat the outcome as unknown,
// which is what Idempotency-Key retries are for).
func (s *Store) PutBatch(ms []*message.Message, res []PutResult) error {
	return s.PutClass(ClassSend, ms, res)
}

// PutClass is PutBatch for appends of any class (see Class): the broker's
// own records use ClassSystem, the copies retention needs ClassReclaim.
func (s *Store) PutClass(class Class, ms []*message.Message, res []PutResult) error {
	if len(ms) == 1 {
		if len(res) != 1 {
			return fmt.Errorf("%w: %d results for 1 message", ErrInvalidMessage, len(res))
		}
		r, err := s.put(class, ms[0])
		res[0] = r
		return err
	}
	epoch, err := s.putBatch(class, ms, res, s.commitLog.AppendBatchUse)
	if err != nil || len(res) == 0 {
		return err
	}
	last := res[len(res)-1]
	return s.waitCommit(last.PhysicalOffset+int64(last.Size), epoch)
}

// PutClassNoWait is PutClass that does not wait for the flush in sync mode
// (commitlog.AppendBatchNoWait): the records survive a crash of the
// process once it returns, and a crash of the machine only after the next
// flush, the next waiting append's or at the latest
// commitlog.LazyFlushDelay later. Only for records whose loss repeats work and
// never loses a message: the broker's lease records.
//
// On a replicated store it does not wait for the commit point either
// (WaitCommitted does).
func (s *Store) PutClassNoWait(class Class, ms []*message.Message, res []PutResult) error {
	_, err := s.putBatch(class, ms, res, s.commitLog.AppendBatchNoWaitUse)
	return err
}

// PutClassStaged is PutClass in two steps (commitlog.AppendBatchStagedUse):
// the messages are appended when it returns, in the log's order, and wait
// returns once they are flushed (sync mode) — what PutClass returns after.
// The broker appends records under the lock that orders the change they
// record, and waits after releasing it.
func (s *Store) PutClassStaged(class Class, ms []*message.Message, res []PutResult) (wait func() error, err error) {
	end := int64(-1)
	epoch, err := s.putBatch(class, ms, res, func(u commitlog.Use, es []commitlog.Encoder, ar []commitlog.AppendResult) error {
		var aerr error
		end, aerr = s.commitLog.AppendBatchStagedUse(u, es, ar)
		return aerr
	})
	if err != nil {
		return nil, err
	}
	return func() error {
		if end < 0 {
			return nil
		}
		if err := s.WaitFlushed(end); err != nil {
			return err
		}
		return s.waitCommit(end, epoch)
	}, nil
}

// putBatch appends ms with appendBatch and says the epoch of a
// replicated store's append (replicate.go).
func (s *Store) putBatch(class Class, ms []*message.Message, res []PutResult, appendBatch func(commitlog.Use, []commitlog.Encoder, []commitlog.AppendResult) error) (uint64, error) {
	if len(res) != len(ms) {
		return 0, fmt.Errorf("%w: %d results for %d messages", ErrInvalidMessage, len(res), len(ms))
	}
	use, err := s.checkWritable(class)
	if err != nil {
		return 0, err
	}
	encs := make([]commitlog.Encoder, len(ms))
	for i, m := range ms {
		size, err := s.prepare(m)
		if err != nil {
			return 0, fmt.Errorf("message %d: %w", i, err)
		}
		encs[i] = &putEncoder{store: s, msg: m, size: size}
	}
	epoch, release, err := s.appendEpoch()
	if err != nil {
		return 0, err
	}
	appended := make([]commitlog.AppendResult, len(ms))
	err = appendBatch(use, encs, appended)
	release()
	if err != nil {
		return 0, s.mapAppendErr(err)
	}
	for i, m := range ms {
		res[i] = s.result(m, appended[i])
	}
	return epoch, nil
}

func (s *Store) put(class Class, m *message.Message) (PutResult, error) {
	use, err := s.checkWritable(class)
	if err != nil {
		return PutResult{}, err
	}
	size, err := s.prepare(m)
	if err != nil {
		return PutResult{}, err
	}
	epoch, release, err := s.appendEpoch()
	if err != nil {
		return PutResult{}, err
	}
	enc := s.encoders.Get().(*putEncoder)
	enc.msg, enc.size = m, size
	res, err := s.commitLog.AppendUse(use, enc)
	release()
	enc.msg = nil
	s.encoders.Put(enc)
	if err != nil {
		return PutResult{}, s.mapAppendErr(err)
	}
	return s.result(m, res), s.waitCommit(res.Offset+int64(res.Size), epoch)
}

func (s *Store) result(m *message.Message, r commitlog.AppendResult) PutResult {
	return PutResult{
		ID:             message.NewID(m.StoreHost, r.Offset),
		PhysicalOffset: r.Offset,
		Size:           r.Size,
		QueueID:        m.QueueID,
		QueueOffset:    m.QueueOffset,
		StoreTimestamp: m.StoreTimestamp,
	}
}

func (s *Store) mapAppendErr(err error) error {
	switch {
	case errors.Is(err, commitlog.ErrNoSpace):
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	case errors.Is(err, commitlog.ErrReadOnly):
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	case errors.Is(err, commitlog.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, commitlog.ErrRecordTooLarge):
		return fmt.Errorf("%w: %w", ErrMessageTooLarge, err)
	}
	return err
}
