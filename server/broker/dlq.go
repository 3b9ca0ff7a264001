package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Dead letters you can work with. A group's dead letters are the messages
// of %DLQ%<group> (queue 0); they are never delivered to pulls. Each can be
// resent — delivered again to that group, through its retry topic, as from
// its original topic — or discarded; those status changes are
// records in the system topic rmq_sys_DLQ, replayed at start-up.

// dlqStatusTopic carries dead-letter status changes.
const dlqStatusTopic = systemPrefix + "DLQ"

// Dead-letter statuses.
const (
	DLQDead      = "dead"
	DLQResent    = "resent"
	DLQDiscarded = "discarded"
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
type DLQFilter struct {
	OriginalTopic  string
	From, To       time.Time // DeadAt range, inclusive
	ReasonContains string
	Status         string // "" = any
}

func (f DLQFilter) match(d DeadLetter) bool {
	switch {
	case f.OriginalTopic != "" && d.OriginalTopic != f.OriginalTopic:
	case !f.From.IsZero() && d.DeadAt.Before(f.From):
	case !f.To.IsZero() && d.DeadAt.After(f.To):
	case f.ReasonContains != "" && !strings.Contains(strings.ToLower(d.Reason), strings.ToLower(f.ReasonContains)):
	case f.Status != "" && d.Status != f.Status:
	default:
		return true
	}
	return false
}

// dlqStatusRecord is one status change of a dead letter (the body of an
// rmq_sys_DLQ record is a JSON array of them).
type dlqStatusRecord struct {
	Group     string    `json:"group"`
	MessageID string    `json:"messageId"`
	Status    string    `json:"status"`
	At        time.Time `json:"at"`
}

type dlqStatuses struct {
	// change orders status changes: a resend or discard holds it from
	// reading a letter's status to applying the record it wrote, so two
	// racing requests never both decide on the same old status, and the
	// records reach the log in the order they are applied (the order a
	// follower applies them in). Lock order: topicGate, change, mu.
	change sync.Mutex
	mu     sync.RWMutex
	m      map[string]dlqStatusRecord // group + "/" + messageId
}

func (s *dlqStatuses) get(group, id string) (dlqStatusRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.m[group+"/"+id]
	return r, ok
}

func (s *dlqStatuses) set(r dlqStatusRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]dlqStatusRecord)
	}
	s.m[r.Group+"/"+r.MessageID] = r
}

// replayDLQStatuses rebuilds the status table from rmq_sys_DLQ.
func (b *Broker) replayDLQStatuses(ctx context.Context) (err error) {
	b.follow.dlq, err = b.replayQueue(ctx, dlqStatusTopic, 0, b.applyDLQStatus)
	return err
}

// applyDLQStatus applies one rmq_sys_DLQ record (at open and while
// following).
func (b *Broker) applyDLQStatus(m *message.Message) {
	var recs []dlqStatusRecord
	if err := json.Unmarshal(m.Body, &recs); err != nil {
		b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping undecodable dead-letter status")
		return
	}
	for _, r := range recs {
		b.dlqStatus.set(r)
	}
}

// Dead letters outlive CommitLog retention: before retention deletes a
// segment, every dead letter still "dead" in it is re-appended to its DLQ
// (carryDeadLetters). The copy keeps the letter's identity in DLQ_ID (and,
// for lookups, UNIQ_KEY "dlq:<id>") and its original death time, so a
// dead letter's id, listing and history do not change when it moves.
const (
	propDLQID     = "DLQ_ID"
	propDLQDeadAt = "DLQ_DEAD_AT"
)

// stableID is the id a dead letter is known by: the id of its first copy.
func stableID(m *message.Message) string {
	if id := m.Property(propDLQID); id != "" {
		return id
	}
	return message.NewID(m.StoreHost, m.PhysicalOffset).String()
}

func (b *Broker) deadLetter(group string, m *message.Message, withBody bool) DeadLetter {
	d := DeadLetter{
		MessageID:       stableID(m),
		OriginMessageID: m.Property(message.PropertyOriginMessageID),
		OriginalTopic:   m.Property(message.PropertyRetryTopic),
		ReconsumeTimes:  m.ReconsumeTimes,
		Reason:          m.Property(propDLQReason),
		DeadAt:          time.UnixMilli(m.StoreTimestamp).UTC(),
		Status:          DLQDead,
		Attempts:        parseAttempts(m.Property(propAttempts)),
		Tag:             m.Tag(),
		Keys:            m.Keys(),
	}
	if ms, err := strconv.ParseInt(m.Property(propDLQDeadAt), 10, 64); err == nil {
		d.DeadAt = time.UnixMilli(ms).UTC()
	}
	if len(d.Attempts) > 0 {
		d.FirstFailedAt = d.Attempts[0].At
	} else {
		d.FirstFailedAt = d.DeadAt
	}
	if r, ok := b.dlqStatus.get(group, d.MessageID); ok {
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

const maxDLQPage = 500

// ListDeadLetters lists a group's dead letters matching f, oldest first,
// starting at cursor ("" = the beginning); next is the cursor of the next
// page ("" = no more).
func (b *Broker) ListDeadLetters(ctx context.Context, group string, f DLQFilter, cursor string, limit int) ([]DeadLetter, string, error) {
	if _, err := b.GetGroup(ctx, group); err != nil {
		return nil, "", err
	}
	if limit <= 0 || limit > maxDLQPage {
		limit = 100
	}
	topic := DLQTopic(group)
	from := b.store.MinOffset(topic, 0)
	if cursor != "" {
		c, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || c < 0 {
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
			if !f.match(d) {
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
	return out, strconv.FormatInt(from, 10), nil
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
	if err == nil && m.Topic == DLQTopic(group) && stableID(m) == id && m.PhysicalOffset >= b.carriedBelow.Load() {
		return m, nil
	}
	if err != nil && !errors.Is(err, storage.ErrCorrupt) && !errors.Is(err, storage.ErrOffsetTooSmall) && !errors.Is(err, storage.ErrNotFound) {
		return nil, mapStoreErr(err)
	}
	// Not (or no longer) at its first place: retention carried it forward.
	m, err = b.store.FindByUniqKey(DLQTopic(group), "dlq:"+id)
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
			page, next, err := b.ListDeadLetters(ctx, group, filter, cursor, maxDLQPage)
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
	b.dlqStatus.change.Lock()
	defer b.dlqStatus.change.Unlock()
	now := b.clock.Now()
	var msgs []*message.Message
	var recs []dlqStatusRecord
	for _, m := range letters {
		id := stableID(m)
		if st, ok := b.dlqStatus.get(group, id); ok && st.Status != DLQDead {
			res.Skipped = append(res.Skipped, id)
			continue
		}
		topic := m.Property(message.PropertyRetryTopic)
		if _, err := b.GetTopic(ctx, topic); err != nil {
			return fmt.Errorf("resend %s: %w", id, err)
		}
		out := copyOf(m, RetryTopic(group), propAttempts, propDLQReason, propDLQID, propDLQDeadAt, message.PropertyUniqKey,
			message.PropertyMaxReconsumeTimes, propOrderSeq)
		out.SetProperty(message.PropertyRetryTopic, topic)
		out.ReconsumeTimes = 0 // a fresh attempt count
		msgs = append(msgs, out)
		recs = append(recs, dlqStatusRecord{Group: group, MessageID: id, Status: DLQResent, At: now.UTC()})
		res.Resent = append(res.Resent, id)
	}
	if len(recs) == 0 {
		return nil
	}
	return b.appendDLQStatus(recs, msgs)
}

// appendDLQStatus makes status changes durable, in one batch with extra
// messages (the resent copies), then applies them.
func (b *Broker) appendDLQStatus(recs []dlqStatusRecord, extra []*message.Message) error {
	body, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	msgs := append(extra, &message.Message{Topic: dlqStatusTopic, Body: body, BornTimestamp: b.clock.Now().UnixMilli()})
	// A status alone keeps a promise (system headroom); resent copies are
	// new deliveries, refused at the send ceiling like sends.
	class := storage.ClassSystem
	if len(extra) > 0 {
		class = storage.ClassSend
	}
	if err := b.store.PutClass(class, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return mapStoreErr(err)
	}
	for _, r := range recs {
		b.dlqStatus.set(r)
	}
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
	id = stableID(m)
	b.dlqStatus.change.Lock()
	defer b.dlqStatus.change.Unlock()
	return b.appendDLQStatus([]dlqStatusRecord{{Group: group, MessageID: id, Status: DLQDiscarded, At: b.clock.Now().UTC()}}, nil)
}

// carryDeadLetters runs before retention deletes the CommitLog below cut:
// every dead letter still "dead" there is re-appended to its DLQ, keeping
// its identity (DLQ_ID), death time and history.
func (b *Broker) carryDeadLetters(cut int64) error {
	carried := 0
	for _, topic := range b.store.Topics() {
		group, ok := strings.CutPrefix(topic, dlqPrefix)
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
				id := stableID(m)
				if st, ok := b.dlqStatus.get(group, id); ok && st.Status != DLQDead {
					continue
				}
				c := copyOf(m, topic)
				c.SetProperty(propDLQID, id)
				if c.Property(propDLQDeadAt) == "" {
					c.SetProperty(propDLQDeadAt, strconv.FormatInt(m.StoreTimestamp, 10))
				}
				c.SetProperty(message.PropertyUniqKey, "dlq:"+id)
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
