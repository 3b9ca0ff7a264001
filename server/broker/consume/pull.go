package consume

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/filter"
	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Bounds of a pull (package api exports the same values through the
// broker's MaxPullMessages and DefaultPullMessages).
const (
	// MaxMessages is the most messages one pull returns.
	MaxMessages = 32
	// DefaultMessages is a pull's maxMessages when it gives none.
	DefaultMessages = 16
	// MaxWait is the longest long poll (RocketMQ's broker suspend limit).
	MaxWait = 30 * time.Second
)

// Pull leases up to req.MaxMessages messages of req.Topic to req.Group,
// long-polling up to req.Wait for the first one. Its steps: planPull
// checks the request and resolves what it asks against the topic and the
// group, CatchUp makes what was sent before visible, and awaitPop pops
// until it has messages or the wait is over.
func (s *Service) Pull(ctx context.Context, req PullRequest) ([]Message, error) {
	plan, err := s.planPull(req)
	if err != nil {
		return nil, err
	}
	deadline := s.cfg.Clock.Now().Add(plan.wait)
	if err := s.CatchUp(ctx); err != nil {
		return nil, err
	}
	if plan.group.ConsumeMode == instance.Broadcasting {
		// Each consumer instance its own (package instance).
		client := s.cfg.Client(ctx)
		leave, err := s.cfg.Broker.Instances().Enter(plan.group, client, plan.topic)
		if err != nil {
			return nil, err
		}
		defer leave()
		plan.state = s.PopState(instance.Key(plan.group.Name, client), plan.topic.Name)
	}
	msgs, err := s.awaitPop(ctx, plan, deadline)
	if err != nil || len(msgs) > 0 {
		bytes := 0
		for _, m := range msgs {
			bytes += len(m.Body)
		}
		s.cfg.Delivered(plan.group.Name, len(msgs), bytes)
	}
	return msgs, err
}

// pullPlan is a checked pull: the topic and group it reads, how many
// messages, the lease, the tag and property filters and the wait.
type pullPlan struct {
	topic     registry.TopicConfig
	group     registry.GroupConfig
	max       int
	invisible time.Duration
	match     func(int64) bool
	sql       *filter.Expr
	wait      time.Duration
	state     *lease.PopState
}

// planPull validates req and resolves its defaults: maxMessages
// (DefaultMessages), the lease (the request's, else the group's, else
// the broker's default), the tag expression and the SQL filter (each the
// request's, else the group's subscription of the topic). The pop state
// of a broadcasting group is its instance's, which Pull picks.
func (s *Service) planPull(req PullRequest) (pullPlan, error) {
	if s.cfg.Closed() {
		return pullPlan{}, s.cfg.Errors.ShuttingDown
	}
	if err := registry.ValidateGroupName(req.Group); err != nil {
		return pullPlan{}, err
	}
	if err := registry.ValidateTopicName(req.Topic); err != nil {
		return pullPlan{}, err
	}
	if req.MaxMessages == 0 {
		req.MaxMessages = DefaultMessages
	}
	if req.MaxMessages < 0 || req.MaxMessages > MaxMessages {
		return pullPlan{}, fmt.Errorf("%w: maxMessages must be 1..%d", s.cfg.Errors.InvalidArgument, MaxMessages)
	}
	if req.Wait < 0 || req.Wait > MaxWait {
		return pullPlan{}, fmt.Errorf("%w: wait must be 0..%v", s.cfg.Errors.InvalidArgument, MaxWait)
	}
	if req.Invisible < 0 || req.Invisible > s.cfg.MaxInvisible {
		return pullPlan{}, fmt.Errorf("%w: invisibility must be 0..%v", s.cfg.Errors.InvalidArgument, s.cfg.MaxInvisible)
	}
	sql, err := s.cfg.CompileSQL("sql", req.SQL)
	if err != nil {
		return pullPlan{}, err
	}
	topic, ok := s.cfg.Broker.Registry().Topic(req.Topic)
	if !ok {
		return pullPlan{}, fmt.Errorf("%w: %s", s.cfg.Errors.TopicNotFound, req.Topic)
	}
	if topic.Perm == "w" {
		return pullPlan{}, fmt.Errorf("%w: topic %s is write-only (perm w)", s.cfg.Errors.InvalidArgument, req.Topic)
	}
	group, err := s.GroupForPull(req.Group, !req.NoAutoCreate)
	if err != nil {
		return pullPlan{}, err
	}
	invisible := req.Invisible
	if invisible == 0 {
		invisible = group.Invisible
	}
	if invisible == 0 {
		invisible = s.cfg.DefaultInvisible
	}
	expr := req.TagExpression
	if expr == "" {
		for _, sub := range group.Subscriptions {
			if sub.Topic == req.Topic {
				expr = sub.TagExpression
			}
		}
	}
	match, err := s.cfg.TagMatcher(expr)
	if err != nil {
		return pullPlan{}, err
	}
	if req.SQL == "" {
		for i, sub := range group.Subscriptions {
			if sub.Topic == req.Topic {
				if sql, err = s.cfg.CompileSQL(fmt.Sprintf("subscriptions[%d].sql", i), sub.SQL); err != nil {
					return pullPlan{}, err
				}
			}
		}
	}
	plan := pullPlan{topic: topic, group: group, max: req.MaxMessages, invisible: invisible, match: match, sql: sql, wait: req.Wait}
	if group.ConsumeMode != instance.Broadcasting {
		plan.state = s.PopState(req.Group, req.Topic)
	}
	return plan, nil
}

// CatchUp waits (up to a second) until the dispatcher has indexed what
// was stored before the pull: read-your-writes. The dispatcher is almost
// always caught up, so that path takes no timer.
func (s *Service) CatchUp(ctx context.Context) error {
	if s.cfg.Store.CaughtUp() {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	err := s.cfg.Store.AwaitDispatch(wait)
	cancel()
	if errors.Is(err, storage.ErrClosed) {
		return s.cfg.Errors.ShuttingDown
	}
	return nil
}

// filterScanTime is how long a pull whose filters passed over everything
// it read goes on reading the backlog at once: for its whole wait, and at
// least this long (a pull that waits for nothing too).
const filterScanTime = 100 * time.Millisecond

// awaitPop pops until it has messages or an error, or until deadline:
// while the filters pass over a backlog it pops again at once (up to
// filterScanTime past a shorter deadline); otherwise, between attempts, it
// sleeps until new data in the topic or the group's retry topic, a freed
// ordered message, the next lease expiry, or the end of the wait.
func (s *Service) awaitPop(ctx context.Context, p pullPlan, deadline time.Time) ([]Message, error) {
	client := s.cfg.Client(ctx)
	scanUntil := s.cfg.Clock.Now().Add(filterScanTime)
	if deadline.After(scanUntil) {
		scanUntil = deadline
	}
	for {
		signal := s.cfg.Store.NewDataSignal(p.topic.Name)
		retrySignal := s.cfg.Store.NewDataSignal(s.cfg.Retries.RetryTopic(p.group.Name))
		p.state.Lock()
		freed := p.state.WakeChan()
		p.state.Unlock()
		msgs, nextExpiry, more, err := s.popOnce(p.state, p.group, p.topic, p.max, p.invisible, p.match, p.sql, client)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		if more && s.cfg.Clock.Now().Before(scanUntil) && ctx.Err() == nil && !s.cfg.Closed() {
			continue // the filters passed over what was read; more backlog waits
		}
		wait := s.cfg.Clock.Until(deadline)
		if wait <= 0 {
			return []Message{}, nil
		}
		if !nextExpiry.IsZero() {
			if d := s.cfg.Clock.Until(nextExpiry); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		timer := s.cfg.Clock.NewTimer(wait)
		select {
		case <-signal:
		case <-retrySignal:
		case <-freed:
		case <-timer.Chan():
		case <-ctx.Done():
			timer.Stop()
			return []Message{}, nil
		case <-s.cfg.Closing:
			timer.Stop()
			return []Message{}, nil
		}
		timer.Stop()
	}
}

// GroupForPull is the group a pull or an offset commit names, created
// first when the broker auto-creates groups and create allows it.
func (s *Service) GroupForPull(name string, create bool) (registry.GroupConfig, error) {
	g, ok := s.cfg.Broker.Registry().Group(name)
	if ok {
		return g, nil
	}
	if !create || !s.cfg.AutoCreateGroups {
		return g, fmt.Errorf("%w: %s", s.cfg.Errors.GroupNotFound, name)
	}
	g, _, err := s.cfg.Broker.Registry().SetGroup(registry.GroupConfig{Name: name, ConsumeMode: "clustering", RetryMaxTimes: 16}, true)
	return g, err
}

// popOnce leases what is available now: due retries first, then the
// topic's queues round-robin. Leases found expired on the way take the
// failure path (send-back). It returns the earliest lease deadline still
// pending, so a long poll can wake for it, and whether a queue has more
// to read than the bounded reads got to (more).
func (s *Service) popOnce(ps *lease.PopState, group registry.GroupConfig, topic registry.TopicConfig, max int, invisible time.Duration, match func(int64) bool, sql *filter.Expr, client string) ([]Message, time.Time, bool, error) {
	ps.Lock()
	now := s.cfg.Clock.Now()
	out := make([]Message, 0, max) // one allocation: every queue's grants go here
	var nextExpiry time.Time
	var failed []sendBack
	var err error
	more := false
	n := topic.Queues
	start := ps.Round()
	floor := s.cfg.RetryFloor(topic.Name)
	g := changesPool.Get().(*changes)
	defer g.release()
	for i := -1; i < n && len(out) < max; i++ {
		qid := int32(RetryQueueID)
		if i >= 0 {
			qid = int32((start + i) % n)
		}
		v := s.ViewOf(group, topic.Name, qid, match, floor).ForInstance(ps.Instance()).WithSQL(sql)
		grown, expiry, expired, qmore, qerr := s.popQueue(ps, g, v, max, now, invisible, client, out)
		out = grown
		more = more || qmore
		failed = append(failed, expired...)
		if !expiry.IsZero() && (nextExpiry.IsZero() || expiry.Before(nextExpiry)) {
			nextExpiry = expiry
		}
		if qerr != nil {
			err = qerr
			break
		}
	}
	// The lease changes (grants, ordered messages failed in place) and
	// the skips are recorded under the lock they were decided under (one
	// append, without waiting for a flush), so the log holds them in
	// their order, and then applied: the skips to the progress table (by
	// the append, as every progress record is), the lease changes to the
	// cursors (PopState.Apply, the code that installs the folded leases
	// at a takeover). A write refused applies neither, and moves the
	// cursors back to where this pull started, so the next pull decides
	// again over the same offsets.
	notes, skips := ps.TakeNotes(), ps.TakeSkips()
	if lerr := s.writeGrants(notes, skips); lerr != nil {
		g.undo()
		if notes.Empty() {
			s.cfg.Log.Warn().Err(lerr).Msg("recording the offsets a pull's filters passed over failed; the next pull past them derives them again")
		} else {
			out, err = nil, lerr
		}
	} else {
		g.apply(ps)
	}
	ps.Unlock()
	if len(out) > 0 && s.cfg.Store.Replicated() {
		// A replica's grants are answered once their lease record is
		// committed: that proves this replica still led when it granted
		// them, so a deposed leader never delivers a message the new one
		// has had acknowledged (ARCHITECTURE.md, "Three replicas").
		if werr := s.cfg.Store.WaitCommitted(s.cfg.Store.WriteOffset()); werr != nil && err == nil {
			out, err = nil, s.cfg.StoreError(werr)
		}
	}
	if len(failed) > 0 {
		if serr := s.sendBack(group.Name, failed); serr != nil && err == nil {
			err = serr
		}
	}
	return out, nextExpiry, more, err
}

// takeExpired marks c's expired leases as being sent back and returns
// them for send-back (their retry copy takes over; sendBack marks them
// done and takes them out of flight); those of an ordered message (or an
// instance's) are retried in place, keeping their key — a change decided
// into ch, applied once its record is appended — or dead. The scan is
// package lease's (PopState.Expire). The caller holds the pop state's
// lock.
func (s *Service) takeExpired(ps *lease.PopState, ch *changes, c *lease.Cursor, v View, now time.Time) (expired []sendBack, nextExpiry time.Time) {
	back, inPlace, nextExpiry := ps.Expire(c, now, func(off int64) bool { return s.progress().IsAcked(v.Key, off) }, v.InPlace)
	for _, e := range inPlace {
		off, l := e.Off, e.Lease
		a := retry.NewAttempt(now, retry.OutcomeExpired, l.Client(), "lease expired without ack", 0, s.cfg.MaxClientBytes)
		it, history, dead := s.failInPlace(l, off, v, 0, 0, now, a)
		if dead {
			expired = append(expired, deadInPlace(ps, c, v, off, l, history, a.Reason, retry.OutcomeExpired, l.Client()))
		} else {
			s.decide(ps, ch, v.Key, c, it, l.Client(), l.Key(), history, true)
		}
	}
	for _, e := range back {
		expired = append(expired, sendBack{view: v, offset: e.Off, reason: "lease expired without ack", outcome: retry.OutcomeExpired, client: e.Lease.Client(), lease: e.Lease})
	}
	return expired, nextExpiry
}

// markSkipped notes the offsets the filters passed over, as consumed, in
// ps's skips, which popOnce writes and applies with the pull's grants
// (writeGrants); the caller holds ps's lock. A pull reads each queue
// once, so none of its reads needs them applied before.
func (s *Service) markSkipped(ps *lease.PopState, key offset.Key, offs []int64) {
	_, gen, _ := s.progress().Get(key)
	ps.Skip(offset.Entry{Kind: offset.KindAck, Key: key, Generation: gen, Offsets: offs})
}

// writeGrants appends a pull's lease changes (notes: its grants and the
// ordered messages it found run out and failed in place; one
// rmq_sys_LEASE record) and the offsets its filters passed over (skips: one rmq_sys_OFFSET
// record) in one batch, the grants first, without waiting for the flush,
// and then applies the skips to the progress table (package progress's
// Ledger.PersistNoWait, which says what a crash can cost).
func (s *Service) writeGrants(notes *lease.Notes, skips offset.Record) error {
	m, err := s.cfg.Leases.GrantsMessage(notes)
	if err != nil {
		return err
	}
	var extra []*message.Message
	if m != nil {
		extra = append(extra, m)
	}
	return s.cfg.Broker.Ledger().PersistNoWait(skips, extra)
}

// popQueue leases up to max messages of one queue under ps's lock: it aligns
// the cursor with the durable progress, takes back expired leases (their
// retry copies are sent after the lock), re-offers due ordered messages,
// then reads fresh ones, appending them to out until it holds max. It
// also returns the next time a lease expires or an ordered message falls
// due, and whether the reads stopped before the queue's end (more).
func (s *Service) popQueue(ps *lease.PopState, g *changes, v View, max int, now time.Time, invisible time.Duration, client string, out []Message) ([]Message, time.Time, []sendBack, bool, error) {
	key := v.Key
	c := s.cursor(ps, key)
	if err := s.alignCursor(c, key, v); err != nil {
		return out, time.Time{}, nil, false, err
	}
	g.touch(c)
	expired, nextExpiry := s.takeExpired(ps, g, c, v, now)
	before := len(out)
	if v.Orderly || v.InPlace {
		got, due, err := s.offerOrdered(ps, g, c, v, max-len(out), now, invisible, client)
		if err != nil {
			return out, nextExpiry, expired, false, err
		}
		out = append(out, got...)
		if !due.IsZero() && (nextExpiry.IsZero() || due.Before(nextExpiry)) {
			nextExpiry = due
		}
	}
	out, more, err := s.readFresh(ps, g, c, key, v, max, now, invisible, client, out)
	if err != nil {
		return out, nextExpiry, expired, false, err
	}
	// takeExpired found the soonest deadline of the leases it left; the
	// leases granted since (fresh, or ordered ones offered again) all end
	// at now+invisible. No second pass over every lease of the queue.
	if len(out) > before {
		if due := now.Add(invisible); nextExpiry.IsZero() || due.Before(nextExpiry) {
			nextExpiry = due
		}
	}
	return out, nextExpiry, expired, more, nil
}

// alignCursor brings the cursor of key in line with the durable
// progress before a pop: above what retention deleted, never above what
// the store holds, never below the committed offset.
func (s *Service) alignCursor(c *lease.Cursor, key offset.Key, v View) error {
	committed, _, _ := s.progress().Get(key)
	if low := s.cfg.Store.MinOffset(v.StoreTopic, v.StoreQueue); committed < low {
		// Retention deleted messages this group never consumed (counted
		// and logged when they went, retention.go): move up.
		if err := s.ledger().Advance(key, low); err != nil {
			return err
		}
		s.cfg.Log.Info().Str("group", key.Group).Str("topic", v.StoreTopic).Int32("queue", v.StoreQueue).
			Int64("from", committed).Int64("to", low).Msg("consumer offset below the retained minimum; skipped ahead")
		committed = low
	}
	if top := s.cfg.Store.MaxOffset(v.StoreTopic, v.StoreQueue); committed > top {
		// The group consumed beyond what the store holds (the CommitLog
		// lost its tail: async flush and a crash). Never a silent
		// out-of-range loop: lower the offset to the maximum, visibly, so
		// the messages stored from now on are delivered.
		if err := s.ledger().Commit(key, top); err != nil {
			return err
		}
		s.cfg.ClampedOffset()
		s.cfg.Log.Warn().Str("group", key.Group).Str("topic", v.StoreTopic).Int32("queue", v.StoreQueue).
			Int64("from", committed).Int64("to", top).Msg("consumer offset above the queue's maximum; lowered to it")
		committed = top
		c.SetNext(top)
		c.Clear()
	} else if c.Next() > top {
		c.SetNext(top)
	}
	if c.Next() < committed {
		c.SetNext(committed)
	}
	return nil
}

// Bounds of readFresh: at most freshReads reads per pop of a queue, each
// of what is still wanted, or, after the first, of acceptReadBatch
// messages when an in-memory filter (SQL, a retry view's) may pass over
// some.
const (
	freshReads      = 8
	acceptReadBatch = 64
)

// readFresh leases up to max messages from the cursor on, after the ones
// already in out. more reports that it stopped at its bound of reads
// before the queue's end.
func (s *Service) readFresh(ps *lease.PopState, g *changes, c *lease.Cursor, key offset.Key, v View, max int, now time.Time, invisible time.Duration, client string, out []Message) ([]Message, bool, error) {
	// Fresh messages from the cursor (a bounded number of reads, so a
	// selective filter over a long backlog cannot hold the lock long).
	for reads := 0; len(out) < max; reads++ {
		if reads == freshReads {
			return out, true, nil
		}
		from := c.Next()
		want := max - len(out)
		if v.Accept != nil && reads > 0 {
			want = acceptReadBatch // the filter passed over some: read ahead
		}
		res, err := s.cfg.Store.ReadQueue(v.StoreTopic, v.StoreQueue, from, want, v.Match)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			c.SetNext(s.cfg.Store.MinOffset(v.StoreTopic, v.StoreQueue))
			continue
		}
		if err != nil {
			return out, false, s.cfg.StoreError(err)
		}
		if res.Next == from {
			break
		}
		// end: the first offset not dealt with (a read of more messages
		// than wanted stops at the one after the last it leases).
		end := res.Next
		leased := make(map[int64]bool, len(res.Messages))
		for _, m := range res.Messages {
			if len(out) == max {
				end = m.QueueOffset
				break
			}
			if v.Accept != nil && !v.Accept(m) {
				continue
			}
			leased[m.QueueOffset] = true
			if c.Lease(m.QueueOffset) != nil || s.progress().IsAcked(key, m.QueueOffset) {
				continue
			}
			ok := orderKey(v, m)
			if ok != "" && (c.KeyBusy(ok) || g.holds(c, ok)) {
				c.Defer(ok, m.QueueOffset) // after the key's current message
				continue
			}
			out = append(out, s.grant(ps, g, c, key, nil, ok, m, now, invisible, client))
		}
		// Entries the filters skipped (or retention removed) are done for
		// this group: mark them so the committed offset moves on.
		var skipped []int64
		for off := from; off < end; off++ {
			if !leased[off] {
				skipped = append(skipped, off)
			}
		}
		if len(skipped) > 0 {
			s.markSkipped(ps, key, skipped)
		}
		c.SetNext(end)
	}
	return out, false, nil
}

// grant decides a lease on m, the message at its queue offset of c:
// the lease l already in flight there (an ordered message waiting in
// place, offered again) or a new one holding the sharding key key, to
// client until now+invisible (cut to the millisecond, as the answer
// gives it, so that its record holds it exactly) under a new epoch. It
// notes the decision and adds it to g, which the pull applies once its
// record is appended, and returns m as delivered under it.
func (s *Service) grant(ps *lease.PopState, g *changes, c *lease.Cursor, key offset.Key, l *lease.Lease, shardingKey string, m *message.Message, now time.Time, invisible time.Duration, client string) Message {
	deliveries, failures := int32(1), int32(0)
	if l != nil {
		deliveries, failures, shardingKey = l.Deliveries()+1, l.Failures(), l.Key()
	}
	it := lease.HeldItem(m.QueueOffset, s.cfg.Epoch.Add(1), now.Add(invisible).Truncate(time.Millisecond), failures)
	s.decide(ps, g, key, c, it, client, shardingKey, nil, l != nil)
	rm := s.cfg.Received(m)
	rm.ReconsumeTimes = m.ReconsumeTimes + deliveries - 1
	if shardingKey != "" || failures > 0 {
		rm.ReconsumeTimes = m.ReconsumeTimes + failures // retried in place: postponements do not count
	}
	rm.Receipt = s.cfg.Broker.Registry().Ring().Encode(receipt.Receipt{Group: key.Group, Topic: key.Topic, QueueID: key.QueueID, Offset: m.QueueOffset, Epoch: it.Epoch})
	rm.LeaseUntil = time.UnixMilli(it.Deadline)
	return rm
}
