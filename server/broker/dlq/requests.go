package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The requests on a group's dead letters. A group's dead letters are the
// messages of Topic(group) (queue 0); they are never delivered to pulls.
// Each can be resent — delivered again to that group, through its retry
// topic, as from its original topic — or discarded; those status changes
// are records in StatusTopic, which Follow applies at open and on a
// follower.

// ResendChunk and resendPause bound the resend rate (about 5 000 messages
// per second) so a bulk resend cannot starve live traffic: a resend writes
// ResendChunk letters at a time, and pauses between chunks. (The broker's
// deletion of a topic's timers writes batches of the same size.)
const (
	ResendChunk   = 256
	resendPause   = 50 * time.Millisecond
	maxResendByID = 10000
)

// List lists group's dead letters matching f, oldest first, starting at
// cursor ("" = the beginning); next is the cursor of the next page ("" =
// no more).
func (s *Service) List(ctx context.Context, group string, f Filter, cursor string, limit int) ([]Letter, string, error) {
	if err := s.cfg.Group(ctx, group); err != nil {
		return nil, "", err
	}
	limit = PageLimit(limit)
	topic := Topic(group)
	st := s.cfg.Store
	from := st.MinOffset(topic, 0)
	if cursor != "" {
		c, ok := ParseCursor(cursor)
		if !ok {
			return nil, "", fmt.Errorf("%w: bad cursor %s", s.cfg.InvalidArgument, quote.Value(cursor))
		}
		from = max(from, c)
	}
	if err := st.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return nil, "", s.cfg.StoreError(err)
	}
	top := st.MaxOffset(topic, 0)
	var out []Letter
	for from < top && len(out) < limit {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		res, err := st.ReadQueue(topic, 0, from, 256, nil)
		if err != nil {
			return nil, "", s.cfg.StoreError(err)
		}
		if res.Next == from {
			break
		}
		next := res.Next
		for _, m := range res.Messages {
			if m.PhysicalOffset < s.carriedBelow.Load() {
				continue // a copy further on replaces it (retention is about to delete it)
			}
			d := s.View(group, m, false)
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
	return out, FormatCursor(from), nil
}

// Get returns one dead letter with its body.
func (s *Service) Get(ctx context.Context, group, id string) (Letter, error) {
	m, err := s.Lookup(ctx, group, id)
	if err != nil {
		return Letter{}, err
	}
	return s.View(group, m, true), nil
}

// Lookup finds group's dead letter id: at its first place, or, once
// retention carried it forward, its newest carried copy (by Key).
func (s *Service) Lookup(ctx context.Context, group, id string) (*message.Message, error) {
	if err := s.cfg.Group(ctx, group); err != nil {
		return nil, err
	}
	mid, err := message.ParseID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", s.cfg.InvalidArgument, err)
	}
	id = mid.String()
	m, err := s.cfg.Store.LookupID(mid)
	if err == nil && m.Topic == Topic(group) && StableID(m) == id && m.PhysicalOffset >= s.carriedBelow.Load() {
		return m, nil
	}
	if err != nil && !errors.Is(err, storage.ErrCorrupt) && !errors.Is(err, storage.ErrOffsetTooSmall) && !errors.Is(err, storage.ErrNotFound) {
		return nil, s.cfg.StoreError(err)
	}
	// Not (or no longer) at its first place: retention carried it forward.
	m, err = s.cfg.Store.FindByUniqKey(Topic(group), Key(id))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s is not a dead letter of %s", s.cfg.MessageNotFound, id, group)
	}
	if err != nil {
		return nil, s.cfg.StoreError(err)
	}
	return m, nil
}

// ResendResult reports a resend.
type ResendResult struct {
	Resent  []string // dead-letter ids resent
	Skipped []string // ids already resent or discarded
}

// Resend delivers dead letters again to the group (through its retry
// topic, original topic restored, a fresh attempt count,
// ORIGIN_MESSAGE_ID kept): the ones named by ids, or, when ids is empty,
// every dead one matching f. Other groups of the original topic do not
// see them again. It writes ResendChunk letters at a time, pausing
// resendPause on the clock between chunks. An id named more than once is
// resent once; its other mentions are skipped (a chunk reads the
// statuses before it writes, so they would otherwise be resent again).
func (s *Service) Resend(ctx context.Context, group string, ids []string, f *Filter) (ResendResult, error) {
	var res ResendResult
	if len(ids) > maxResendByID {
		return res, fmt.Errorf("%w: at most %d ids per resend", s.cfg.InvalidArgument, maxResendByID)
	}
	var letters []*message.Message
	var again []string // ids named more than once: resent once, then skipped
	if len(ids) > 0 {
		named := make(map[string]bool, len(ids))
		for _, id := range ids {
			if named[id] {
				again = append(again, id)
				continue
			}
			named[id] = true
			m, err := s.Lookup(ctx, group, id)
			if err != nil {
				return res, err
			}
			letters = append(letters, m)
		}
	} else {
		if f == nil {
			return res, fmt.Errorf("%w: name messageIds or a filter", s.cfg.InvalidArgument)
		}
		filter := *f
		filter.Status = Dead
		cursor := ""
		for len(letters) < maxResendByID {
			page, next, err := s.List(ctx, group, filter, cursor, MaxPage)
			if err != nil {
				return res, err
			}
			for _, d := range page {
				m, err := s.Lookup(ctx, group, d.MessageID)
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
	for start := 0; start < len(letters); start += ResendChunk {
		if start > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-s.cfg.Clock.After(resendPause):
			}
		}
		chunk := letters[start:min(start+ResendChunk, len(letters))]
		if err := s.resendChunk(ctx, group, chunk, &res); err != nil {
			return res, err
		}
	}
	res.Skipped = append(res.Skipped, again...)
	return res, nil
}

// resendChunk writes each letter's fresh copy to the group's retry topic
// %RETRY%<group> (queue 0), deliverable at once: only the group whose DLQ
// it is gets it again — every other group of the original topic consumed
// it long ago — through the same path as its retries, with the original
// topic (RETRY_TOPIC, which the store indexes the copy by), ORIGIN_MESSAGE_ID
// and a reconsume count of 0.
func (s *Service) resendChunk(ctx context.Context, group string, letters []*message.Message, res *ResendResult) error {
	s.cfg.Gate.Lock() // the topic gate's read side (server/broker's topicdelete.go)
	defer s.cfg.Gate.Unlock()
	s.table.LockChange()
	defer s.table.UnlockChange()
	now := s.cfg.Clock.Now()
	names := s.cfg.Names
	var msgs []*message.Message
	var recs []StatusRecord
	for _, m := range letters {
		id := StableID(m)
		if s.table.Status(group, id) != Dead {
			res.Skipped = append(res.Skipped, id)
			continue
		}
		topic := m.Property(message.PropertyRetryTopic)
		if err := s.cfg.Topic(ctx, topic); err != nil {
			return fmt.Errorf("resend %s: %w", id, err)
		}
		out := s.cfg.Copy(m, names.RetryPrefix+group, names.Attempts, PropReason, PropID, PropDeadAt, message.PropertyUniqKey,
			message.PropertyMaxReconsumeTimes, names.OrderSeq)
		out.SetProperty(message.PropertyRetryTopic, topic)
		out.ReconsumeTimes = 0 // a fresh attempt count
		msgs = append(msgs, out)
		recs = append(recs, StatusRecord{Group: group, MessageID: id, Status: Resent, At: now.UTC()})
		res.Resent = append(res.Resent, id)
	}
	if len(recs) == 0 {
		return nil
	}
	return s.appendStatus(recs, msgs)
}

// appendStatus makes status changes durable, in one batch with extra
// messages (the resent copies), then applies them; the caller holds the
// change lock.
func (s *Service) appendStatus(recs []StatusRecord, extra []*message.Message) error {
	rec, err := StatusMessage(recs, s.cfg.Clock.Now())
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
	if err := s.cfg.Store.PutClass(class, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return s.cfg.StoreError(err)
	}
	s.table.Apply(recs...)
	return nil
}

// Discard marks a dead letter discarded (whatever its status).
func (s *Service) Discard(ctx context.Context, group, id string) error {
	m, err := s.Lookup(ctx, group, id)
	if err != nil {
		return err
	}
	id = StableID(m)
	s.table.LockChange()
	defer s.table.UnlockChange()
	return s.appendStatus([]StatusRecord{{Group: group, MessageID: id, Status: Discarded, At: s.cfg.Clock.Now().UTC()}}, nil)
}
