package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Dead letters you can work with. A group's dead letters are the messages
// of %DLQ%<group> (queue 0); they are never delivered to pulls. Each can be
// resent — delivered again to that group, through its retry topic, as from
// its original topic — or discarded; those status changes are
// records in the system topic rmq_sys_DLQ, replayed at start-up. Their
// records, properties, status table and listing filter are package dlq's;
// what reads and writes them through the store is here.

// dlqStatusTopic carries dead-letter status changes.
const dlqStatusTopic = dlq.StatusTopic

// Dead-letter statuses.
const (
	DLQDead      = dlq.Dead
	DLQResent    = dlq.Resent
	DLQDiscarded = dlq.Discarded
)

// DeadLetter is one message in a group's dead-letter queue.
type DeadLetter struct {
	MessageID       string
	OriginMessageID string
	OriginalTopic   string
	ReconsumeTimes  int32
	Reason          string
	FirstFailedAt   time.Time
	DeadAt          time.Time
	Status          string
	StatusAt        time.Time
	Attempts        []Attempt
	Tag             string
	Keys            []string
	Properties      map[string]string
	Body            []byte // only filled by GetDeadLetter
}

// DLQFilter selects dead letters; zero fields match everything.
type DLQFilter = dlq.Filter

// replayDLQStatuses rebuilds the status table from rmq_sys_DLQ.
func (b *Broker) replayDLQStatuses(ctx context.Context) (err error) {
	b.follow.dlq, err = b.replayQueue(ctx, dlqStatusTopic, 0, b.applyDLQStatus)
	return err
}

// applyDLQStatus applies one rmq_sys_DLQ record (at open and while
// following).
func (b *Broker) applyDLQStatus(m *message.Message) {
	recs, err := dlq.DecodeStatuses(m.Body)
	if err != nil {
		b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping undecodable dead-letter status")
		return
	}
	b.dlqStatus.Apply(recs...)
}

// Dead letters outlive CommitLog retention: before retention deletes a
// segment, every dead letter still "dead" in it is re-appended to its DLQ
// (carryDeadLetters). The copy keeps the letter's identity (dlq.PropID,
// and for lookups UNIQ_KEY dlq.Key) and its original death time
// (dlq.PropDeadAt), so a dead letter's id, listing and history do not
// change when it moves.

func (b *Broker) deadLetter(group string, m *message.Message, withBody bool) DeadLetter {
	d := DeadLetter{
		MessageID:       dlq.StableID(m),
		OriginMessageID: m.Property(message.PropertyOriginMessageID),
		OriginalTopic:   m.Property(message.PropertyRetryTopic),
		ReconsumeTimes:  m.ReconsumeTimes,
		Reason:          m.Property(dlq.PropReason),
		DeadAt:          dlq.DeadAt(m),
		Status:          DLQDead,
		Attempts:        parseAttempts(m.Property(propAttempts)),
		Tag:             m.Tag(),
		Keys:            m.Keys(),
	}
	if len(d.Attempts) > 0 {
		d.FirstFailedAt = d.Attempts[0].At
	} else {
		d.FirstFailedAt = d.DeadAt
	}
	if r, ok := b.dlqStatus.Get(group, d.MessageID); ok {
		d.Status, d.StatusAt = r.Status, r.At
	}
	d.Properties = toReceived(m).Properties
	for k := range d.Properties {
		if _, broker := systemProperties[k]; broker {
			delete(d.Properties, k)
		}
	}
	if withBody {
		d.Body = m.Body
	}
	return d
}

// ListDeadLetters lists a group's dead letters matching f, oldest first,
// starting at cursor ("" = the beginning); next is the cursor of the next
// page ("" = no more).
func (b *Broker) ListDeadLetters(ctx context.Context, group string, f DLQFilter, cursor string, limit int) ([]DeadLetter, string, error) {
	if _, err := b.GetGroup(ctx, group); err != nil {
		return nil, "", err
	}
	limit = dlq.PageLimit(limit)
	topic := DLQTopic(group)
	from := b.store.MinOffset(topic, 0)
	if cursor != "" {
		c, ok := dlq.ParseCursor(cursor)
		if !ok {
			return nil, "", fmt.Errorf("%w: bad cursor %s", ErrInvalidArgument, QuoteValue(cursor))
		}
		from = max(from, c)
	}
	if err := b.store.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return nil, "", mapStoreErr(err)
	}
	top := b.store.MaxOffset(topic, 0)
	var out []DeadLetter
	for from < top && len(out) < limit {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		res, err := b.store.ReadQueue(topic, 0, from, 256, nil)
		if err != nil {
			return nil, "", mapStoreErr(err)
		}
		if res.Next == from {
			break
		}
		next := res.Next
		for _, m := range res.Messages {
			if m.PhysicalOffset < b.carriedBelow.Load() {
				continue // a copy further on replaces it (retention is about to delete it)
			}
			d := b.deadLetter(group, m, false)
			if !f.Match(d.OriginalTopic, d.DeadAt, d.Reason, d.Status) {
				continue
			}
			out = append(out, d)
			if len(out) == limit {
				next = m.QueueOffset + 1
				break
			}
		}
		from = next
	}
	if from >= top {
		return out, "", nil
	}
	return out, dlq.FormatCursor(from), nil
}

// GetDeadLetter returns one dead letter with its body.
func (b *Broker) GetDeadLetter(ctx context.Context, group, id string) (DeadLetter, error) {
	m, err := b.lookupDeadLetter(ctx, group, id)
	if err != nil {
		return DeadLetter{}, err
	}
	return b.deadLetter(group, m, true), nil
}

func (b *Broker) lookupDeadLetter(ctx context.Context, group, id string) (*message.Message, error) {
	if _, err := b.GetGroup(ctx, group); err != nil {
		return nil, err
	}
	mid, err := message.ParseID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	id = mid.String()
	m, err := b.store.LookupID(mid)
	if err == nil && m.Topic == DLQTopic(group) && dlq.StableID(m) == id && m.PhysicalOffset >= b.carriedBelow.Load() {
		return m, nil
	}
	if err != nil && !errors.Is(err, storage.ErrCorrupt) && !errors.Is(err, storage.ErrOffsetTooSmall) && !errors.Is(err, storage.ErrNotFound) {
		return nil, mapStoreErr(err)
	}
	// Not (or no longer) at its first place: retention carried it forward.
	m, err = b.store.FindByUniqKey(DLQTopic(group), dlq.Key(id))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s is not a dead letter of %s", ErrMessageNotFound, id, group)
	}
	if err != nil {
		return nil, mapStoreErr(err)
	}
	return m, nil
}

// ResendResult reports a resend.
type ResendResult struct {
	Resent  []string // dead-letter ids resent
	Skipped []string // ids already resent or discarded
}

// resendChunk and resendPause bound the resend rate (about 5 000 messages
// per second) so a bulk resend cannot starve live traffic.
const (
	resendChunk   = 256
	resendPause   = 50 * time.Millisecond
	maxResendByID = 10000
)

// ResendDeadLetters delivers dead letters again to the group (through its
// retry topic, original topic restored, a fresh attempt count,
// ORIGIN_MESSAGE_ID kept): the ones named by ids, or, when ids is empty,
// every dead one matching f. Other groups of the original topic do not see
// them again.
func (b *Broker) ResendDeadLetters(ctx context.Context, group string, ids []string, f *DLQFilter) (ResendResult, error) {
	var res ResendResult
	if b.closed.Load() {
		return res, ErrShuttingDown
	}
	if len(ids) > maxResendByID {
		return res, fmt.Errorf("%w: at most %d ids per resend", ErrInvalidArgument, maxResendByID)
	}
	var letters []*message.Message
	if len(ids) > 0 {
		for _, id := range ids {
			m, err := b.lookupDeadLetter(ctx, group, id)
			if err != nil {
				return res, err
			}
			letters = append(letters, m)
		}
	} else {
		if f == nil {
			return res, fmt.Errorf("%w: name messageIds or a filter", ErrInvalidArgument)
		}
		filter := *f
		filter.Status = DLQDead
		cursor := ""
		for len(letters) < maxResendByID {
			page, next, err := b.ListDeadLetters(ctx, group, filter, cursor, dlq.MaxPage)
			if err != nil {
				return res, err
			}
			for _, d := range page {
				m, err := b.lookupDeadLetter(ctx, group, d.MessageID)
				if err != nil {
					return res, err
				}
				letters = append(letters, m)
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	for start := 0; start < len(letters); start += resendChunk {
		if start > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-b.clock.After(resendPause):
			}
		}
		chunk := letters[start:min(start+resendChunk, len(letters))]
		if err := b.resendChunk(ctx, group, chunk, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// resendChunk writes each letter's fresh copy to the group's retry topic
// %RETRY%<group> (queue 0), deliverable at once: only the group whose DLQ
// it is gets it again — every other group of the original topic consumed
// it long ago — through the same path as its retries, with the original
// topic (RETRY_TOPIC, which the store indexes the copy by), ORIGIN_MESSAGE_ID
// and a reconsume count of 0.
func (b *Broker) resendChunk(ctx context.Context, group string, letters []*message.Message, res *ResendResult) error {
	b.topicGate.RLock() // see topicdelete.go
	defer b.topicGate.RUnlock()
	b.dlqStatus.LockChange()
	defer b.dlqStatus.UnlockChange()
	now := b.clock.Now()
	var msgs []*message.Message
	var recs []dlq.StatusRecord
	for _, m := range letters {
		id := dlq.StableID(m)
		if b.dlqStatus.Status(group, id) != DLQDead {
			res.Skipped = append(res.Skipped, id)
			continue
		}
		topic := m.Property(message.PropertyRetryTopic)
		if _, err := b.GetTopic(ctx, topic); err != nil {
			return fmt.Errorf("resend %s: %w", id, err)
		}
		out := copyOf(m, RetryTopic(group), propAttempts, dlq.PropReason, dlq.PropID, dlq.PropDeadAt, message.PropertyUniqKey,
			message.PropertyMaxReconsumeTimes, propOrderSeq)
		out.SetProperty(message.PropertyRetryTopic, topic)
		out.ReconsumeTimes = 0 // a fresh attempt count
		msgs = append(msgs, out)
		recs = append(recs, dlq.StatusRecord{Group: group, MessageID: id, Status: DLQResent, At: now.UTC()})
		res.Resent = append(res.Resent, id)
	}
	if len(recs) == 0 {
		return nil
	}
	return b.appendDLQStatus(recs, msgs)
}

// appendDLQStatus makes status changes durable, in one batch with extra
// messages (the resent copies), then applies them.
func (b *Broker) appendDLQStatus(recs []dlq.StatusRecord, extra []*message.Message) error {
	rec, err := dlq.StatusMessage(recs, b.clock.Now())
	if err != nil {
		return err
	}
	msgs := append(extra, rec)
	// A status alone keeps a promise (system headroom); resent copies are
	// new deliveries, refused at the send ceiling like sends.
	class := storage.ClassSystem
	if len(extra) > 0 {
		class = storage.ClassSend
	}
	if err := b.store.PutClass(class, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return mapStoreErr(err)
	}
	b.dlqStatus.Apply(recs...)
	return nil
}

// DiscardDeadLetter marks a dead letter discarded.
func (b *Broker) DiscardDeadLetter(ctx context.Context, group, id string) error {
	if b.closed.Load() {
		return ErrShuttingDown
	}
	m, err := b.lookupDeadLetter(ctx, group, id)
	if err != nil {
		return err
	}
	id = dlq.StableID(m)
	b.dlqStatus.LockChange()
	defer b.dlqStatus.UnlockChange()
	return b.appendDLQStatus([]dlq.StatusRecord{{Group: group, MessageID: id, Status: DLQDiscarded, At: b.clock.Now().UTC()}}, nil)
}

// carryDeadLetters runs before retention deletes the CommitLog below cut:
// every dead letter still "dead" there is re-appended to its DLQ, keeping
// its identity (DLQ_ID), death time and history.
func (b *Broker) carryDeadLetters(cut int64) error {
	carried := 0
	for _, topic := range b.store.Topics() {
		group, ok := dlq.GroupOf(topic)
		if !ok {
			continue
		}
		var copies []*message.Message
		for from, top := b.store.MinOffset(topic, 0), b.store.MaxOffset(topic, 0); from < top; {
			res, err := b.store.ReadQueue(topic, 0, from, 256, nil)
			if err != nil {
				return err
			}
			done := res.Next == from
			for _, m := range res.Messages {
				if m.PhysicalOffset >= cut {
					done = true
					break
				}
				if b.dlqStatus.Status(group, dlq.StableID(m)) != DLQDead {
					continue
				}
				c := copyOf(m, topic)
				dlq.MarkCarried(c, m)
				copies = append(copies, c)
				b.noteCarried(m)
			}
			if done {
				break
			}
			from = res.Next
		}
		for start := 0; start < len(copies); start += resendChunk {
			chunk := copies[start:min(start+resendChunk, len(copies))]
			if err := b.store.PutClass(storage.ClassReclaim, chunk, make([]storage.PutResult, len(chunk))); err != nil {
				return mapStoreErr(err)
			}
		}
		carried += len(copies)
	}
	if old := b.carriedBelow.Load(); cut > old {
		b.carriedBelow.Store(cut)
	}
	if carried > 0 {
		b.log.Info().Int("deadLetters", carried).Int64("below", cut).Msg("dead letters carried past retention")
	}
	return nil
}
