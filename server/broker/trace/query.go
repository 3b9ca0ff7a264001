package trace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/schedule"
)

// Message trace (RocketMQ's message trace, as a query): Query lists the
// life of a message across its copies — stored, delivered, acked, nacked,
// lease-expired, released, retried, dead-lettered, resent, discarded,
// transaction-committed or -rolled-back, pushed — in time order.
//
// Nothing is written for it on the send, pull or ack paths. The events
// come from records the broker writes anyway:
//
//   - the message itself (stored), the half message and its op record in
//     rmq_sys_TRANS_OP (transactions), the parked record of a delayed
//     send (its due time) and its delivery;
//   - its copies, found by their ORIGIN_MESSAGE_ID (the store indexes it,
//     storage FindByOrigin): a retry parked on the ladder or a timer
//     (retried, its due time, and the copy consumers get), a dead letter
//     (dead-lettered), a resend (resent); the attempt history every copy
//     carries (ATTEMPTS) gives the failed deliveries (nacked with reason,
//     level or delayMs; lease-expired), each with its client; the
//     dead-letter status table gives discarded;
//   - deliveries, releases and in-place retries of ordered messages from
//     the lease records (rmq_sys_LEASE), acks from the progress records
//     (rmq_sys_OFFSET). These are not indexed by message, so a follower
//     (follow.go) reads them after the fact, off the hot path, and
//     appends their events to rmq_sys_TRACE keyed by the copy they are
//     about (the copy's CommitLog offset), where a lookup finds them. The
//     follower also appends the webhook push outcomes (pushed), which no
//     other record holds, from a bounded buffer (Pushed).
//
// Trace records are written after the records they derive from, so they
// live at least as long in the CommitLog. Dead letters and retries on a
// timer that retention carries forward outlive their segment: before the
// deletion, the events of their life are appended once more under the
// life's key (Carry), so the trace of a carried message stays whole;
// when retention deletes those carried events while a copy of the life
// lives on past them (a dead letter resent, a timer fired after the
// carry), they are carried again (NoteLivesBelow).
// A trace is bounded: MaxEvents events (the oldest half and the
// newest half, with an events-dropped marker between them) and reasons
// cut to MaxReasonBytes.

// Bounds of a trace.
const (
	// MaxEvents is the most events one trace lists.
	MaxEvents = 128
	// MaxReasonBytes is the longest reason or result a trace event
	// shows (longer ones are cut, with a marker saying how long they were).
	MaxReasonBytes = 256
	// traceRecordsPerKey is the most trace records read per copy.
	traceRecordsPerKey = 2 * MaxEvents
	// traceMaxCopies is the most copies of one message a trace looks at.
	traceMaxCopies = 4 * MaxEvents
	// traceAwait is how long a trace waits for the follower to catch up
	// with the lease and progress records written before it.
	traceAwait = 2 * time.Second
)

// MessageTrace is the life of one message (Query; the broker's
// MessageTrace).
type MessageTrace struct {
	// MessageID is the id asked for (canonical form).
	MessageID string
	// OriginMessageID is the id of the life: the one every copy carries as
	// ORIGIN_MESSAGE_ID (the message's own, a transaction's, or the
	// delivered copy of a delayed send).
	OriginMessageID string
	// Events in time order, at most MaxEvents.
	Events []Event
	// DroppedEvents counts the events the bound left out (an
	// events-dropped event stands where they were); at least that many
	// when Truncated.
	DroppedEvents int
	// Truncated: more events may exist than were looked at (a message
	// with very many copies or trace records); DroppedEvents is a lower
	// bound.
	Truncated bool
	// Partial: events from lease and progress records may be missing —
	// tracing is off (--message-trace=false), or the follower had not
	// caught up within a short wait.
	Partial bool
}

// Event is one event of a message's life (the broker's TraceEvent).
type Event struct {
	// Type is one of the Type* constants.
	Type string
	// At is when it happened (millisecond precision).
	At time.Time
	// MessageID is the copy the event is about: the stored record, the
	// delivered copy, the copy that failed.
	MessageID string
	// Topic, QueueID and QueueOffset: where a message was stored
	// (HasPosition; QueueOffset -1 when not yet known: a delayed send).
	Topic       string
	QueueID     int32
	QueueOffset int64
	HasPosition bool
	// Group and ClientID: the consumer group and client (X-Mqgate-Client-Id).
	Group    string
	ClientID string
	// Epoch is a delivery's lease epoch (its receipt's); Attempt numbers
	// the deliveries of the life from 1.
	Epoch   uint64
	Attempt int
	// LeaseUntil is when a delivery's lease ends.
	LeaseUntil time.Time
	// Reason: a nack's or a dead letter's reason, a rollback's reason.
	Reason string
	// DelayLevel (HasDelayLevel) and DelayMs: what a nack asked for, or
	// what a retry waits.
	DelayLevel    int
	HasDelayLevel bool
	DelayMs       int64
	// DueAt is when a retry or a delayed send falls due.
	DueAt time.Time
	// ReconsumeTimes is a retry's or dead letter's reconsume count.
	ReconsumeTimes int32
	// RetryMessageID is the copy a retry is delivered as; DeadLetterID the
	// dead letter's id; TransactionID the transaction's.
	RetryMessageID, DeadLetterID, TransactionID string
	// HTTPStatus and Result are a push's answer (0 without one) and
	// outcome (ok, 4xx, 5xx, timeout, network, …).
	HTTPStatus int
	Result     string
	// InPlace: an ordered message retried in place (retried).
	InPlace bool
	// Count is how many events an events-dropped event stands for.
	Count int
}

// traceRank orders events of the same millisecond.
var traceRank = [...]int{
	Stored: 0, Committed: 1, RolledBack: 1, Delivered: 2, Pushed: 3, Released: 4,
	Nacked: 5, Expired: 5, Acked: 6, Retried: 7, DeadLettered: 8, Resent: 9, Discarded: 10,
	Dropped: 11,
}

// Query returns the life of the message mid names — its own id, or the
// id of any copy of it (a retry, a dead letter, a resend, a delayed
// send's delivery, a transaction). An id that is no message is
// ErrNoMessage; the store's errors are the broker's (Broker.StoreErr).
func (t *Tracer) Query(ctx context.Context, mid message.ID) (MessageTrace, error) {
	id := mid.String()
	if err := t.store.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return MessageTrace{}, t.broker.StoreErr(err)
	}
	caughtUp := t.await(ctx)
	m, err := t.target(mid)
	if err != nil {
		return MessageTrace{}, err
	}
	life, err := t.life(m)
	if err != nil {
		return MessageTrace{}, err
	}
	items, truncated, err := t.lifeItems(life)
	if err != nil {
		return MessageTrace{}, err
	}
	out := MessageTrace{MessageID: id, OriginMessageID: life.origin, Truncated: truncated, Partial: !caughtUp}
	out.Events, out.DroppedEvents = boundTrace(items)
	return out, nil
}

// lookupGone reports a lookup error that means the record is not there (any
// more): deleted by retention or with its topic, never written, damaged.
func lookupGone(err error) bool {
	return errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrOffsetTooSmall) ||
		errors.Is(err, storage.ErrOffsetOutOfRange) || errors.Is(err, storage.ErrCorrupt)
}

// target is the message an id names: the record at its offset, a
// dead letter, timer or half message that retention carried forward under
// the id, or, once the first copy is gone, a copy that names it as its
// origin.
func (t *Tracer) target(mid message.ID) (*message.Message, error) {
	id := mid.String()
	m, err := t.store.LookupID(mid)
	if err == nil && m.Topic != Topic && !t.broker.Hidden(m) {
		return m, nil
	}
	if err != nil && !lookupGone(err) {
		return nil, t.broker.StoreErr(err)
	}
	var keys [][2]string
	for _, topic := range t.store.Topics() {
		if strings.HasPrefix(topic, dlq.TopicPrefix) {
			keys = append(keys, [2]string{topic, dlq.Key(id)})
		}
	}
	keys = append(keys, [2]string{timer.Topic, timer.Key(id)}, [2]string{txn.HalfTopic, txn.Key(id)})
	for _, k := range keys {
		c, err := t.store.FindByUniqKey(k[0], k[1])
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return nil, t.broker.StoreErr(err)
		}
	}
	// The first copy is gone, not its life: a copy of it still names it.
	copies, _, err := t.store.FindByOrigin(id, 1)
	if err != nil {
		return nil, t.broker.StoreErr(err)
	}
	if len(copies) > 0 {
		return copies[0], nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoMessage, id)
}

// traceLife is what a trace is made of.
type traceLife struct {
	origin string           // the life's id (ORIGIN_MESSAGE_ID of its copies)
	parked *message.Message // a delayed send's parked record, or a transaction's half message
	first  *message.Message // the message on its topic (nil: not yet, or gone)
	txnID  string
	copies []*message.Message // by ORIGIN_MESSAGE_ID, in CommitLog order
	more   bool               // copies were left out
}

// life resolves the life of m, a record of it.
func (t *Tracer) life(m *message.Message) (traceLife, error) {
	var life traceLife
	if origin := m.Property(message.PropertyOriginMessageID); origin != "" {
		life.origin = origin
		if oid, err := message.ParseID(origin); err == nil {
			o, err := t.store.LookupID(oid)
			switch {
			case err == nil:
				if err := t.lifeFromRoot(&life, o); err != nil {
					return life, err
				}
				life.origin = origin // whatever the root says, the copies name this one
			case !lookupGone(err):
				return life, t.broker.StoreErr(err)
			}
		}
	} else if err := t.lifeFromRoot(&life, m); err != nil {
		return life, err
	}
	copies, more, err := t.store.FindByOrigin(life.origin, traceMaxCopies)
	if err != nil {
		return life, t.broker.StoreErr(err)
	}
	life.copies, life.more = copies, more
	return life, nil
}

// outlives reports whether a record of the life lies at or past cut (or
// may: its copies were not all listed).
func (life traceLife) outlives(cut int64) bool {
	if life.more || (life.first != nil && life.first.PhysicalOffset >= cut) || (life.parked != nil && life.parked.PhysicalOffset >= cut) {
		return true
	}
	for _, c := range life.copies {
		if c.PhysicalOffset >= cut {
			return true
		}
	}
	return false
}

// findUniq is FindByUniqKey with ErrNotFound as nil.
func (t *Tracer) findUniq(topic, key string) (*message.Message, error) {
	m, err := t.store.FindByUniqKey(topic, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return m, t.broker.StoreErr(err)
}

// lifeFromRoot fills life from r, a record of the first incarnation (no
// ORIGIN_MESSAGE_ID): a message on its topic, the parked record of a
// delayed send, a half message, or what came of them.
func (t *Tracer) lifeFromRoot(life *traceLife, r *message.Message) error {
	var err error
	uniq := r.Property(message.PropertyUniqKey)
	switch {
	case r.Topic == txn.HalfTopic:
		life.txnID = txn.IDOf(r)
		life.parked, life.origin = r, life.txnID
		life.first, err = t.findUniq(r.Property(message.PropertyRealTopic), txn.Key(life.txnID))
	case r.Property(txn.PropID) != "":
		life.txnID = r.Property(txn.PropID)
		life.first, life.origin = r, life.txnID
		life.parked, err = t.findUniq(txn.HalfTopic, txn.Key(life.txnID))
		if err == nil && life.parked == nil {
			if tid, perr := message.ParseID(life.txnID); perr == nil {
				if h, lerr := t.store.LookupID(tid); lerr == nil && h.Topic == txn.HalfTopic {
					life.parked = h
				}
			}
		}
	case r.Topic == message.ScheduleTopic || r.Topic == timer.Topic:
		life.parked = r
		key, own := schedule.UniqKey(r), t.broker.MessageID(r)
		if r.Topic == timer.Topic {
			key, own = timer.Key(timer.ID(r)), timer.ID(r)
		}
		life.first, err = t.findUniq(r.Property(message.PropertyRealTopic), key)
		life.origin = own
		if life.first != nil {
			life.origin = t.broker.MessageID(life.first)
		}
	case strings.HasPrefix(uniq, "timer:"):
		life.first, life.origin = r, t.broker.MessageID(r)
		tid := strings.TrimPrefix(uniq, "timer:")
		if id, perr := message.ParseID(tid); perr == nil {
			if p, lerr := t.store.LookupID(id); lerr == nil && p.Topic == timer.Topic {
				life.parked = p
			}
		}
		if life.parked == nil {
			life.parked, err = t.findUniq(timer.Topic, uniq)
		}
	case strings.HasPrefix(uniq, "sched:"):
		life.first, life.origin = r, t.broker.MessageID(r)
		if level, off, ok := t.broker.ScheduleEntry(uniq); ok {
			res, rerr := t.store.ReadQueue(message.ScheduleTopic, int32(level-1), off, 1, nil)
			if rerr == nil && len(res.Messages) == 1 && res.Messages[0].QueueOffset == off {
				life.parked = res.Messages[0]
			}
		}
	default:
		life.first, life.origin = r, t.broker.MessageID(r)
	}
	return err
}

// lifeItems gathers the events of a life, deduplicated, in time order,
// attempts numbered; truncated reports that some may have been left out.
func (t *Tracer) lifeItems(life traceLife) ([]Item, bool, error) {
	var items []Item
	truncated := life.more
	// The copies consumers are given, by CommitLog offset (events of the
	// trace records name them so), and in order (a failure is about the
	// last one given before it).
	type given struct {
		phys   int64
		id     string
		stored int64
	}
	var deliverable []given
	give := func(m *message.Message) {
		deliverable = append(deliverable, given{m.PhysicalOffset, t.broker.MessageID(m), m.StoreTimestamp})
	}
	failedCopy := func(at int64) string {
		id := ""
		for _, g := range deliverable {
			if g.stored <= at {
				id = g.id
			}
		}
		if id == "" && len(deliverable) > 0 {
			id = deliverable[0].id
		}
		return id
	}

	if p := life.parked; p != nil {
		it := Item{Kind: Stored, At: p.StoreTimestamp, Copy: -1, MessageID: t.broker.MessageID(p),
			Topic: p.Property(message.PropertyRealTopic), HasPosition: true, QueueOffset: -1}
		if qid, err := strconv.ParseInt(p.Property(message.PropertyRealQueueID), 10, 32); err == nil {
			it.QueueID = int32(qid)
		}
		switch p.Topic {
		case txn.HalfTopic:
			it.MessageID, it.RelatedID = life.txnID, life.txnID
			if p.Property(txn.PropID) != "" {
				it.At = p.BornTimestamp // a copy retention carried: its first store time is gone
			}
		case timer.Topic:
			it.MessageID, it.Until = timer.ID(p), timer.DueMs(p)
			if p.Property(timer.PropID) != "" {
				it.At = p.BornTimestamp
			}
		default:
			it.Until = timer.DueMs(p)
			if lv, err := strconv.Atoi(p.Property(message.PropertyDelayLevel)); err == nil {
				it.Level, it.HasLevel = lv, true
			}
		}
		items = append(items, it)
	}
	if f := life.first; f != nil {
		give(f)
		if life.txnID == "" {
			items = append(items, Item{Kind: Stored, At: f.StoreTimestamp, Copy: -1, MessageID: t.broker.MessageID(f),
				Topic: f.Topic, QueueID: f.QueueID, QueueOffset: f.QueueOffset, HasPosition: true, Pos: f.PhysicalOffset})
		}
	}
	if life.txnID != "" {
		op, err := t.findUniq(txn.OpTopic, txn.Key(life.txnID))
		if err != nil {
			return nil, false, err
		}
		if op != nil {
			if rec, derr := txn.DecodeOp(op.Body); derr == nil && rec.State != txn.Checked {
				it := Item{Kind: Committed, At: rec.At.UnixMilli(), Copy: -1, MessageID: life.txnID, RelatedID: life.txnID}
				if rec.State == txn.RolledBack {
					it.Kind, it.Text = RolledBack, rec.Reason
				} else if f := life.first; f != nil {
					it.Topic, it.QueueID, it.QueueOffset, it.HasPosition = f.Topic, f.QueueID, f.QueueOffset, true
				}
				items = append(items, it)
			}
		}
	}

	// The copies: retries parked on the ladder or a timer, their
	// deliveries to the retry topic, resends, dead letters.
	retryOf := map[string]*message.Message{} // the delivered copy of a parked retry, by its UNIQ_KEY
	for _, c := range life.copies {
		if u := c.Property(message.PropertyUniqKey); strings.HasPrefix(c.Topic, t.names.RetryPrefix) &&
			(strings.HasPrefix(u, "sched:") || strings.HasPrefix(u, "timer:")) {
			retryOf[u] = c
		}
	}
	type attemptKey struct {
		at      int64
		outcome string
		client  string
	}
	attempts := map[attemptKey]bool{}
	addAttempts := func(c *message.Message, group string) {
		for _, a := range retry.ParseAttempts(c.Property(t.names.Attempts)) {
			k := attemptKey{a.At.UnixNano(), a.Outcome, a.Client}
			if a.Outcome == "omitted" || attempts[k] {
				continue
			}
			attempts[k] = true
			it := Item{Kind: Nacked, At: a.At.UnixMilli(), Copy: -1, Group: group, Client: a.Client,
				MessageID: failedCopy(a.At.UnixMilli())}
			if a.Outcome == retry.OutcomeExpired {
				it.Kind = Expired
			} else {
				it.Text, it.Level, it.HasLevel, it.DelayMs = a.Reason, a.Level, true, a.DelayMs
			}
			items = append(items, it)
		}
	}
	timers, letters := map[string]bool{}, map[string]bool{}
	lastLetter := ""
	for _, c := range life.copies {
		switch {
		case c.Topic == message.ScheduleTopic || c.Topic == timer.Topic:
			group, _ := strings.CutPrefix(c.Property(message.PropertyRealTopic), t.names.RetryPrefix)
			key, parkedID := schedule.UniqKey(c), t.broker.MessageID(c)
			if c.Topic == timer.Topic {
				parkedID = timer.ID(c)
				key = timer.Key(parkedID)
				if timers[parkedID] {
					continue // a copy of the same timer (carried, rescheduled)
				}
				timers[parkedID] = true
			}
			addAttempts(c, group)
			it := Item{Kind: Retried, At: c.StoreTimestamp, Copy: -1, Group: group, MessageID: failedCopy(c.StoreTimestamp),
				RelatedID: parkedID, Until: timer.DueMs(c), Reconsume: c.ReconsumeTimes, Pos: c.PhysicalOffset}
			if c.Property(timer.PropID) != "" {
				it.At, it.Pos = c.BornTimestamp, 0
				it.MessageID = failedCopy(it.At)
			}
			if r := retryOf[key]; r != nil {
				it.RelatedID = t.broker.MessageID(r)
			}
			if lv, err := strconv.Atoi(c.Property(message.PropertyDelayLevel)); err == nil && c.Topic == message.ScheduleTopic {
				it.Level, it.HasLevel = lv, true
			} else if h := retry.ParseAttempts(c.Property(t.names.Attempts)); len(h) > 0 {
				it.DelayMs = h[len(h)-1].DelayMs
			}
			items = append(items, it)
		case strings.HasPrefix(c.Topic, t.names.RetryPrefix):
			u := c.Property(message.PropertyUniqKey)
			if !strings.HasPrefix(u, "sched:") && !strings.HasPrefix(u, "timer:") {
				group := strings.TrimPrefix(c.Topic, t.names.RetryPrefix)
				items = append(items, Item{Kind: Resent, At: c.StoreTimestamp, Copy: -1, Group: group,
					MessageID: t.broker.MessageID(c), RelatedID: lastLetter, Pos: c.PhysicalOffset})
			}
			give(c)
		case strings.HasPrefix(c.Topic, dlq.TopicPrefix):
			group := strings.TrimPrefix(c.Topic, dlq.TopicPrefix)
			did := dlq.StableID(c)
			if letters[did] {
				continue // carried forward: the same letter
			}
			letters[did] = true
			addAttempts(c, group)
			at, pos := c.StoreTimestamp, c.PhysicalOffset
			if ms, err := strconv.ParseInt(c.Property(dlq.PropDeadAt), 10, 64); err == nil && ms != at {
				at, pos = ms, 0 // a letter retention carried: its own record is gone
			}
			items = append(items, Item{Kind: DeadLettered, At: at, Copy: -1, Group: group, MessageID: failedCopy(at),
				RelatedID: did, Text: c.Property(dlq.PropReason), Reconsume: c.ReconsumeTimes, Pos: pos})
			lastLetter = did
			if st, ok := t.broker.DeadLetterStatus(group, did); ok && st.Status == dlq.Discarded {
				items = append(items, Item{Kind: Discarded, At: st.At.UnixMilli(), Copy: -1, Group: group, MessageID: did, RelatedID: did})
			}
		}
	}

	// The follower's events about the copies given to consumers, and the
	// events carried for the life past retention.
	ids := make(map[int64]string, len(deliverable))
	keys := []string{LifeKey(life.origin)}
	for _, g := range deliverable {
		ids[g.phys] = g.id
		keys = append(keys, CopyKey(g.phys))
	}
	seen := map[int64]bool{}
	for i, key := range keys {
		recs, err := t.store.QueryByKey(Topic, key, 0, 0, traceRecordsPerKey)
		if err != nil {
			return nil, false, t.broker.StoreErr(err)
		}
		truncated = truncated || len(recs) == traceRecordsPerKey
		for _, r := range recs {
			if seen[r.PhysicalOffset] {
				continue
			}
			seen[r.PhysicalOffset] = true
			rec, err := Decode(r.Body)
			if err != nil {
				t.log.Error().Err(err).Int64("offset", r.PhysicalOffset).Msg("skipping undecodable trace record")
				continue
			}
			for _, it := range rec.Items {
				if i == 0 {
					items = append(items, it) // a carried life: every item is its own
					continue
				}
				id, ok := ids[it.Copy]
				if !ok {
					continue
				}
				if it.MessageID == "" {
					it.MessageID = id
				}
				items = append(items, it)
			}
		}
	}
	return dedupeTrace(items), truncated, nil
}

// dedupeTrace drops repeated events (a record the follower wrote twice
// after a crash, events carried past retention that are also still
// derived from a carried copy, a lease extended: one delivery per epoch,
// the first) and sorts the rest by time (traceLess). Of two copies of one
// event the one that names the message copy wins: a copy carried past
// retention no longer knows which copy failed before it.
func dedupeTrace(items []Item) []Item {
	sort.SliceStable(items, func(i, j int) bool { return traceLess(items[i], items[j]) })
	type identity struct {
		kind           Kind
		at             int64
		group, id, rel string
		client, text   string
		epoch          uint64
		status         int
		n              int64
	}
	seen := map[identity]int{}
	out := items[:0]
	for _, it := range items {
		k := identity{kind: it.Kind, at: it.At, group: it.Group}
		switch it.Kind {
		case Delivered:
			k = identity{kind: it.Kind, group: it.Group, id: it.MessageID, epoch: it.Epoch}
		case Stored, Acked, Released, Resent:
			k.id, k.epoch = it.MessageID, it.Epoch
		case Pushed:
			k.id, k.epoch, k.status, k.text = it.MessageID, it.Epoch, it.Status, it.Text
		case Nacked, Expired:
			k.client = it.Client
		case Retried:
			k.n, k.epoch = int64(it.Reconsume)+it.Count<<32, it.Epoch
			if it.InPlace {
				k.id = it.MessageID // a copy retried in place stays itself
			}
		case DeadLettered, Discarded:
			k.rel = it.RelatedID
		default:
			k.rel = it.RelatedID
		}
		if i, dup := seen[k]; dup {
			if out[i].MessageID == "" && it.MessageID != "" {
				out[i] = it
			}
			continue
		}
		seen[k] = len(out)
		out = append(out, it)
	}
	return out
}

// traceLess orders events: by time; within a millisecond by the log
// position of the records they were read from when both say it (the
// order they happened in: a resend, its delivery and its ack can share a
// millisecond), and otherwise by what
// comes first in a life; deliveries, their pushes and releases (which
// hold a contiguous range of ranks) by their lease epoch, which grows with
// every delivery.
func traceLess(a, c Item) bool {
	if a.At != c.At {
		return a.At < c.At
	}
	if a.Pos > 0 && c.Pos > 0 && a.Pos != c.Pos {
		return a.Pos < c.Pos
	}
	if leaseEvent(a.Kind) && leaseEvent(c.Kind) && a.Epoch != c.Epoch {
		return a.Epoch < c.Epoch
	}
	return traceRank[a.Kind] < traceRank[c.Kind]
}

func leaseEvent(k Kind) bool {
	return k == Delivered || k == Pushed || k == Released
}

// traceText cuts a reason or result to MaxReasonBytes; a text an
// earlier cut marked (the attempt history's) keeps that marker, which
// says how long the text first was.
func traceText(s string) string {
	if len(s) <= MaxReasonBytes {
		return s
	}
	if i := strings.LastIndex(s, "… [truncated: "); i > 0 && strings.HasSuffix(s, " bytes]") {
		marker := s[i:]
		if len(marker) < MaxReasonBytes {
			return quote.CutUTF8(s[:i], MaxReasonBytes-len(marker)) + marker
		}
	}
	return retry.TruncateText(s, MaxReasonBytes)
}

// boundTrace numbers the deliveries and renders at most MaxEvents
// events: the oldest and the newest half, with an events-dropped event
// between them standing for the rest.
func boundTrace(items []Item) ([]Event, int) {
	events := make([]Event, 0, min(len(items), MaxEvents))
	attempt := 0
	all := make([]Event, len(items))
	for i, it := range items {
		all[i] = traceEvent(it)
		if it.Kind == Delivered {
			attempt++
			all[i].Attempt = attempt
		}
	}
	if len(all) <= MaxEvents {
		return append(events, all...), 0
	}
	head := MaxEvents / 2
	tail := MaxEvents - head - 1
	dropped := len(all) - head - tail
	events = append(events, all[:head]...)
	events = append(events, Event{Type: TypeDropped, At: all[head].At, Count: dropped})
	events = append(events, all[len(all)-tail:]...)
	return events, dropped
}

// traceEvent renders an item.
func traceEvent(it Item) Event {
	e := Event{Type: it.Kind.String(), At: time.UnixMilli(it.At).UTC(), MessageID: it.MessageID,
		Group: it.Group, ClientID: it.Client, Epoch: it.Epoch, ReconsumeTimes: it.Reconsume, HTTPStatus: it.Status,
		InPlace: it.InPlace, DelayMs: it.DelayMs, DelayLevel: it.Level, HasDelayLevel: it.HasLevel}
	if it.HasPosition {
		e.Topic, e.QueueID, e.QueueOffset, e.HasPosition = it.Topic, it.QueueID, it.QueueOffset, true
	}
	var until time.Time
	if it.Until != 0 {
		until = time.UnixMilli(it.Until).UTC()
	}
	text := traceText(it.Text)
	switch it.Kind {
	case Delivered:
		e.LeaseUntil = until
	case Retried:
		e.DueAt, e.RetryMessageID = until, it.RelatedID
		if it.InPlace {
			e.ReconsumeTimes = int32(min(it.Count, 1<<31-1))
		}
	case Stored:
		e.DueAt, e.TransactionID = until, it.RelatedID
	case DeadLettered, Resent, Discarded:
		e.DeadLetterID = it.RelatedID
	case Committed, RolledBack:
		e.TransactionID = it.RelatedID
	}
	if it.Kind == Pushed {
		e.Result = text
	} else {
		e.Reason = text
	}
	return e
}
