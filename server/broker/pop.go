package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker/filter"
	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Pop consumption (RocketMQ 5 POP, SQS, Pub/Sub pull). Per (group, topic)
// a popState (package lease's PopState) holds, for each queue, a cursor
// (the next offset never handed out) and the in-flight leases. What was
// acknowledged lives in the durable progress table (package offset);
// every lease change is also a lease record (lease_log.go), so leases
// survive a restart: a leased message is not delivered to anyone else
// before its lease ends, and its receipt still settles it. The broker
// keeps the map of pop states (b.pops under b.popsMu, which is never
// held while a pop state's lock is taken) and the pull.

// maxPullWait is the longest long poll (RocketMQ's broker suspend limit).
const maxPullWait = 30 * time.Second

type popKey struct{ group, topic string }

// The pop states, their cursors and leases are package lease's
// (server/broker/lease/doc.go); what the broker does with them stays here:
// the pulls, and through them the reads, filters and grants.
type (
	popState    = leaselog.PopState
	cursor      = leaselog.Cursor
	lease       = leaselog.Lease
	settleState = leaselog.Settle
)

func (b *Broker) popState(group, topic string) *popState {
	b.popsMu.Lock()
	defer b.popsMu.Unlock()
	key := popKey{group, topic}
	ps := b.pops[key]
	if ps == nil {
		_, instance := splitInstance(group)
		ps = leaselog.NewPopState(instance)
		b.pops[key] = ps
	}
	return ps
}

// popStates is a copy of the map of pop states, taken under popsMu, for
// a walk that locks each pop state in turn (popsMu is never held while a
// pop state's lock is taken).
func (b *Broker) popStates() map[popKey]*popState {
	b.popsMu.Lock()
	defer b.popsMu.Unlock()
	return maps.Clone(b.pops)
}

func (b *Broker) existingPopState(group, topic string) *popState {
	b.popsMu.Lock()
	defer b.popsMu.Unlock()
	return b.pops[popKey{group, topic}]
}

// tagMatcher compiles a tag expression ("", "*", "a", "a || b") into a
// tagsCode filter; nil accepts everything.
func tagMatcher(expr string) (func(int64) bool, error) {
	if len(expr) > MaxTagExpressionBytes {
		return nil, limitErr(ErrValueTooLong, "tagExpression", len(expr), MaxTagExpressionBytes)
	}
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return nil, nil
	}
	codes := map[int64]struct{}{}
	for _, part := range strings.Split(expr, "||") {
		tag := strings.TrimSpace(part)
		if tag == "" || strings.ContainsAny(tag, " \t") {
			return nil, fmt.Errorf("%w: tag expression %s: tags are separated by '||' and contain no white space", ErrInvalidArgument, QuoteValue(expr))
		}
		if tag == "*" {
			return nil, nil
		}
		codes[message.TagsCode(tag)] = struct{}{}
	}
	return func(code int64) bool { _, ok := codes[code]; return ok }, nil
}

// Pull leases up to req.MaxMessages messages of req.Topic to req.Group,
// long-polling up to req.Wait for the first one. Its steps: planPull
// checks the request and resolves what it asks against the topic and the
// group, catchUp makes what was sent before visible, and awaitPop pops
// until it has messages or the wait is over.
func (b *Broker) Pull(ctx context.Context, req PullRequest) ([]ReceivedMessage, error) {
	plan, err := b.planPull(req)
	if err != nil {
		return nil, err
	}
	deadline := b.clock.Now().Add(plan.wait)
	if err := b.catchUp(ctx); err != nil {
		return nil, err
	}
	if plan.group.ConsumeMode == ConsumeBroadcasting {
		// Each consumer instance its own (broadcast.go).
		client := clientOf(ctx)
		leave, err := b.enterInstance(plan.group, client, plan.topic)
		if err != nil {
			return nil, err
		}
		defer leave()
		plan.state = b.popState(instanceKey(plan.group.Name, client), plan.topic.Name)
	}
	msgs, err := b.awaitPop(ctx, plan, deadline)
	if err != nil || len(msgs) > 0 {
		b.metrics.addGroup(b.metrics.delivered, plan.group.Name, len(msgs))
		bytes := 0
		for _, m := range msgs {
			bytes += len(m.Body)
		}
		b.metrics.addGroup(b.metrics.outBytes, plan.group.Name, bytes)
	}
	return msgs, err
}

// pullPlan is a checked pull: the topic and group it reads, how many
// messages, the lease, the tag and property filters and the wait.
type pullPlan struct {
	topic     TopicConfig
	group     GroupConfig
	max       int
	invisible time.Duration
	match     func(int64) bool
	sql       *filter.Expr
	wait      time.Duration
	state     *popState
}

// planPull validates req and resolves its defaults: maxMessages
// (DefaultPullMessages), the lease (the request's, else the group's, else
// the broker's default), the tag expression and the SQL filter (each the
// request's, else the group's subscription of the topic). The pop state
// of a broadcasting group is its instance's, which Pull picks.
func (b *Broker) planPull(req PullRequest) (pullPlan, error) {
	if b.closed.Load() {
		return pullPlan{}, ErrShuttingDown
	}
	if err := ValidateGroupName(req.Group); err != nil {
		return pullPlan{}, err
	}
	if err := ValidateTopicName(req.Topic); err != nil {
		return pullPlan{}, err
	}
	if req.MaxMessages == 0 {
		req.MaxMessages = DefaultPullMessages
	}
	if req.MaxMessages < 0 || req.MaxMessages > MaxPullMessages {
		return pullPlan{}, fmt.Errorf("%w: maxMessages must be 1..%d", ErrInvalidArgument, MaxPullMessages)
	}
	if req.Wait < 0 || req.Wait > maxPullWait {
		return pullPlan{}, fmt.Errorf("%w: wait must be 0..%v", ErrInvalidArgument, maxPullWait)
	}
	if req.Invisible < 0 || req.Invisible > b.opts.MaxInvisible {
		return pullPlan{}, fmt.Errorf("%w: invisibility must be 0..%v", ErrInvalidArgument, b.opts.MaxInvisible)
	}
	sql, err := compileSQL("sql", req.SQL)
	if err != nil {
		return pullPlan{}, err
	}
	topic, ok := b.registry.Topic(req.Topic)
	if !ok {
		return pullPlan{}, fmt.Errorf("%w: %s", ErrTopicNotFound, req.Topic)
	}
	if topic.Perm == "w" {
		return pullPlan{}, fmt.Errorf("%w: topic %s is write-only (perm w)", ErrInvalidArgument, req.Topic)
	}
	group, err := b.groupForPull(req.Group, !req.NoAutoCreate)
	if err != nil {
		return pullPlan{}, err
	}
	invisible := req.Invisible
	if invisible == 0 {
		invisible = group.Invisible
	}
	if invisible == 0 {
		invisible = b.opts.DefaultInvisible
	}
	expr := req.TagExpression
	if expr == "" {
		for _, s := range group.Subscriptions {
			if s.Topic == req.Topic {
				expr = s.TagExpression
			}
		}
	}
	match, err := tagMatcher(expr)
	if err != nil {
		return pullPlan{}, err
	}
	if req.SQL == "" {
		for i, s := range group.Subscriptions {
			if s.Topic == req.Topic {
				if sql, err = compileSQL(fmt.Sprintf("subscriptions[%d].sql", i), s.SQL); err != nil {
					return pullPlan{}, err
				}
			}
		}
	}
	plan := pullPlan{topic: topic, group: group, max: req.MaxMessages, invisible: invisible, match: match, sql: sql, wait: req.Wait}
	if group.ConsumeMode != ConsumeBroadcasting {
		plan.state = b.popState(req.Group, req.Topic)
	}
	return plan, nil
}

// catchUp waits (up to a second) until the dispatcher has indexed what
// was stored before the pull: read-your-writes. The dispatcher is almost
// always caught up, so that path takes no timer.
func (b *Broker) catchUp(ctx context.Context) error {
	if b.store.CaughtUp() {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	err := b.store.AwaitDispatch(wait)
	cancel()
	if errors.Is(err, storage.ErrClosed) {
		return ErrShuttingDown
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
func (b *Broker) awaitPop(ctx context.Context, p pullPlan, deadline time.Time) ([]ReceivedMessage, error) {
	client := clientOf(ctx)
	scanUntil := b.clock.Now().Add(filterScanTime)
	if deadline.After(scanUntil) {
		scanUntil = deadline
	}
	for {
		signal := b.store.NewDataSignal(p.topic.Name)
		retrySignal := b.store.NewDataSignal(RetryTopic(p.group.Name))
		p.state.Lock()
		freed := p.state.WakeChan()
		p.state.Unlock()
		msgs, nextExpiry, more, err := b.popOnce(p.state, p.group, p.topic, p.max, p.invisible, p.match, p.sql, client)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		if more && b.clock.Now().Before(scanUntil) && ctx.Err() == nil && !b.closed.Load() {
			continue // the filters passed over what was read; more backlog waits
		}
		wait := b.clock.Until(deadline)
		if wait <= 0 {
			return []ReceivedMessage{}, nil
		}
		if !nextExpiry.IsZero() {
			if d := b.clock.Until(nextExpiry); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		timer := b.clock.NewTimer(wait)
		select {
		case <-signal:
		case <-retrySignal:
		case <-freed:
		case <-timer.Chan():
		case <-ctx.Done():
			timer.Stop()
			return []ReceivedMessage{}, nil
		case <-b.closing:
			timer.Stop()
			return []ReceivedMessage{}, nil
		}
		timer.Stop()
	}
}

// groupForPull is the group a pull or an offset commit names, created
// first when the broker auto-creates groups and create allows it.
func (b *Broker) groupForPull(name string, create bool) (GroupConfig, error) {
	g, ok := b.registry.Group(name)
	if ok {
		return g, nil
	}
	if !create || !b.opts.AutoCreate || b.opts.NoAutoCreateGroups {
		return g, fmt.Errorf("%w: %s", ErrGroupNotFound, name)
	}
	g, _, err := b.registry.SetGroup(GroupConfig{Name: name, ConsumeMode: "clustering", RetryMaxTimes: 16}, true)
	return g, err
}

// retryQueueID is the queue id under which a (group, topic) keeps its
// view of the group's retry topic %RETRY%<group> (queue 0): the store
// indexes retry messages by their original topic, so each topic's view
// skips the others' retries without reading them.
const retryQueueID = -1

// queueView is one queue a (group, topic) pops from: a queue of the topic
// itself or the topic's view of the group's retry queue.
type queueView struct {
	key        offset.Key // progress key (QueueID retryQueueID for the retry view)
	storeTopic string
	storeQueue int32
	match      func(int64) bool            // store-level filter on tagsCode
	accept     func(*message.Message) bool // in-memory filter; nil accepts all
	orderly    bool                        // per-sharding-key FIFO (orderly.go)
	inPlace    bool                        // a failed delivery is retried in place, not through %RETRY% (a broadcasting group's instance)
	maxRetry   int                         // the group's retryMaxTimes
	policy     *RetryPolicy                // the group's retry policy (nil: the ladder)
}

func (b *Broker) view(group, topic string, qid int32, match func(int64) bool) queueView {
	group, client := splitInstance(group) // a broadcasting group's instance: its own view (broadcast.go)
	g, _ := b.registry.Group(group)
	g.Name = group // an unknown (deleted) group still has its name
	return viewOf(g, topic, qid, match, b.retryFloor(topic)).forInstance(client)
}

// viewOf is view for a group whose configuration the caller already holds
// (a pull: no registry lookup per queue). Retries stored below floor (the
// topic's retryFloor) belong to a deleted incarnation of the topic: the
// retry view passes over them.
func viewOf(g GroupConfig, topic string, qid int32, match func(int64) bool, floor int64) queueView {
	group := g.Name
	v := queueView{key: offset.Key{Group: group, Topic: topic, QueueID: qid}, storeTopic: topic, storeQueue: qid, match: match,
		orderly: g.Orderly && qid != retryQueueID, maxRetry: g.RetryMaxTimes, policy: g.RetryPolicy}
	if v.maxRetry == 0 {
		v.maxRetry = 16
	}
	if qid == retryQueueID {
		code := message.TagsCode(topic)
		v.storeTopic, v.storeQueue = RetryTopic(group), 0
		v.match = func(c int64) bool { return c == code }
		if match != nil || floor > 0 {
			v.accept = func(m *message.Message) bool {
				return m.PhysicalOffset >= floor && (match == nil || match(message.TagsCode(m.Tag())))
			}
		}
	}
	return v
}

// sendBack is one leased message that failed (nack or expired lease).
type sendBack struct {
	view    queueView
	offset  int64         // queue offset in view.storeTopic/storeQueue
	level   int           // -1 DLQ, 0 broker-controlled, >0 that level
	delay   time.Duration // > 0: retry on a timer after this long (a nack's delayMs)
	reason  string
	outcome string // "nack" or "expired"
	client  string // who failed it
	// Ordered messages dead after in-place retries (orderly.go) carry their
	// history and failure count here.
	history  []Attempt
	failures int32
	lease    *lease // the failed lease, in flight (sendingBack) until the copy is written
}

// popOnce leases what is available now: due retries first, then the
// topic's queues round-robin. Leases found expired on the way take the
// failure path (send-back). It returns the earliest lease deadline still
// pending, so a long poll can wake for it, and whether a queue has more
// to read than the bounded reads got to (more).
func (b *Broker) popOnce(ps *popState, group GroupConfig, topic TopicConfig, max int, invisible time.Duration, match func(int64) bool, sql *filter.Expr, client string) ([]ReceivedMessage, time.Time, bool, error) {
	ps.Lock()
	now := b.clock.Now()
	out := make([]ReceivedMessage, 0, max) // one allocation: every queue's grants go here
	var nextExpiry time.Time
	var failed []sendBack
	var err error
	more := false
	n := topic.Queues
	start := ps.Round()
	floor := b.retryFloor(topic.Name)
	for i := -1; i < n && len(out) < max; i++ {
		qid := int32(retryQueueID)
		if i >= 0 {
			qid = int32((start + i) % n)
		}
		v := viewOf(group, topic.Name, qid, match, floor).forInstance(ps.Instance()).withSQL(sql)
		before := len(out)
		grown, expiry, expired, qmore, qerr := b.popQueue(ps, v, max, now, invisible, client, out)
		out = grown
		b.noteGrants(ps, v.key, out[before:])
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
	// The grants and skips are recorded under the lock they were made
	// under (one append, without waiting for a flush), so the log holds
	// them in their order.
	notes, skips := ps.TakeNotes(), ps.TakeSkips()
	if lerr := b.leases.WriteGrants(notes, skips); lerr != nil {
		if notes.Empty() {
			b.log.Warn().Err(lerr).Msg("recording the offsets a pull's filters passed over failed; the next pull past them derives them again")
		} else {
			b.grantsFailedLocked(ps, notes)
			out, err = nil, lerr
		}
	}
	ps.Unlock()
	if len(out) > 0 && b.store.Replicated() {
		// A replica's grants are answered once their lease record is
		// committed: that proves this replica still led when it granted
		// them, so a deposed leader never delivers a message the new one
		// has had acknowledged (ARCHITECTURE.md, "Three replicas").
		if werr := b.store.WaitCommitted(b.store.WriteOffset()); werr != nil && err == nil {
			out, err = nil, mapStoreErr(werr)
		}
	}
	if len(failed) > 0 {
		if serr := b.sendBack(group.Name, failed); serr != nil && err == nil {
			err = serr
		}
	}
	return out, nextExpiry, more, err
}

func (b *Broker) cursor(ps *popState, key offset.Key) *cursor {
	return ps.OpenCursor(key.QueueID, func() int64 {
		committed, _, _ := b.progress.Get(key)
		return committed
	})
}

// takeExpired marks c's expired leases as being sent back and returns
// them for send-back (their retry copy takes over; sendBack marks them
// done and takes them out of flight); those of an ordered message (or an
// instance's) are retried in place, keeping their key, or dead. The scan
// is package lease's (PopState.Expire). The caller holds the popState's
// lock.
func (b *Broker) takeExpired(ps *popState, c *cursor, v queueView, now time.Time) (expired []sendBack, nextExpiry time.Time) {
	back, inPlace, nextExpiry := ps.Expire(c, now, func(off int64) bool { return b.progress.IsAcked(v.key, off) }, v.inPlace)
	for _, e := range inPlace {
		off, l := e.Off, e.Lease
		a := newAttempt(now, outcomeExpired, l.Client, "lease expired without ack", 0)
		if b.failInPlace(l, v, 0, 0, now, a) {
			l.SendingBack = true
			ps.Release(c, l.Key, off)
			expired = append(expired, deadInPlace(v, off, l, a.Reason, outcomeExpired, l.Client))
		} else {
			b.noteLease(ps.Notes(), v.key, off, l)
		}
	}
	for _, e := range back {
		expired = append(expired, sendBack{view: v, offset: e.Off, reason: "lease expired without ack", outcome: outcomeExpired, client: e.Lease.Client, lease: e.Lease})
	}
	return expired, nextExpiry
}

// markSkipped applies offsets the filters passed over as consumed and
// notes them in ps's skips, which popOnce appends with the pull's grants
// (leaselog.Log.WriteGrants); the caller holds ps's lock.
func (b *Broker) markSkipped(ps *popState, key offset.Key, offs []int64) {
	_, gen, _ := b.progress.Get(key)
	e := offset.Entry{Kind: offset.KindAck, Key: key, Generation: gen, Offsets: offs}
	b.progress.Apply(offset.Record{Entries: []offset.Entry{e}})
	ps.Skip(e)
}

// popQueue leases up to max messages of one queue under ps.mu: it aligns
// the cursor with the durable progress, takes back expired leases (their
// retry copies are sent after the lock), re-offers due ordered messages,
// then reads fresh ones, appending them to out until it holds max. It
// also returns the next time a lease expires or an ordered message falls
// due, and whether the reads stopped before the queue's end (more).
func (b *Broker) popQueue(ps *popState, v queueView, max int, now time.Time, invisible time.Duration, client string, out []ReceivedMessage) ([]ReceivedMessage, time.Time, []sendBack, bool, error) {
	key := v.key
	c := b.cursor(ps, key)
	if err := b.alignCursor(c, key, v); err != nil {
		return out, time.Time{}, nil, false, err
	}
	expired, nextExpiry := b.takeExpired(ps, c, v, now)
	before := len(out)
	if v.orderly || v.inPlace {
		got, due, err := b.offerOrdered(ps, c, v, max-len(out), now, invisible, client)
		if err != nil {
			return out, nextExpiry, expired, false, err
		}
		out = append(out, got...)
		if !due.IsZero() && (nextExpiry.IsZero() || due.Before(nextExpiry)) {
			nextExpiry = due
		}
	}
	out, more, err := b.readFresh(ps, c, key, v, max, now, invisible, client, out)
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
func (b *Broker) alignCursor(c *cursor, key offset.Key, v queueView) error {
	committed, _, _ := b.progress.Get(key)
	if low := b.store.MinOffset(v.storeTopic, v.storeQueue); committed < low {
		// Retention deleted messages this group never consumed (counted
		// and logged when they went, retention.go): move up.
		if err := b.advance(key, low); err != nil {
			return err
		}
		b.log.Info().Str("group", key.Group).Str("topic", v.storeTopic).Int32("queue", v.storeQueue).
			Int64("from", committed).Int64("to", low).Msg("consumer offset below the retained minimum; skipped ahead")
		committed = low
	}
	if top := b.store.MaxOffset(v.storeTopic, v.storeQueue); committed > top {
		// The group consumed beyond what the store holds (the CommitLog
		// lost its tail: async flush and a crash). Never a silent
		// out-of-range loop: lower the offset to the maximum, visibly, so
		// the messages stored from now on are delivered.
		if err := b.commit(key, top); err != nil {
			return err
		}
		b.metrics.clampedOffset()
		b.log.Warn().Str("group", key.Group).Str("topic", v.storeTopic).Int32("queue", v.storeQueue).
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
func (b *Broker) readFresh(ps *popState, c *cursor, key offset.Key, v queueView, max int, now time.Time, invisible time.Duration, client string, out []ReceivedMessage) ([]ReceivedMessage, bool, error) {
	// Fresh messages from the cursor (a bounded number of reads, so a
	// selective filter over a long backlog cannot hold the lock long).
	for reads := 0; len(out) < max; reads++ {
		if reads == freshReads {
			return out, true, nil
		}
		from := c.Next()
		want := max - len(out)
		if v.accept != nil && reads > 0 {
			want = acceptReadBatch // the filter passed over some: read ahead
		}
		res, err := b.store.ReadQueue(v.storeTopic, v.storeQueue, from, want, v.match)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			c.SetNext(b.store.MinOffset(v.storeTopic, v.storeQueue))
			continue
		}
		if err != nil {
			return out, false, mapStoreErr(err)
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
			if v.accept != nil && !v.accept(m) {
				continue
			}
			leased[m.QueueOffset] = true
			if c.Lease(m.QueueOffset) != nil || b.progress.IsAcked(key, m.QueueOffset) {
				continue
			}
			ok := orderKey(v, m)
			if ok != "" && c.KeyBusy(ok) {
				c.Defer(ok, m.QueueOffset) // after the key's current message
				continue
			}
			l := &lease{Client: client, Key: ok}
			c.Put(m.QueueOffset, l)
			if ok != "" {
				c.Hold(ok, m.QueueOffset)
			}
			out = append(out, b.grant(key, l, m, now, invisible))
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
			b.markSkipped(ps, key, skipped)
		}
		c.SetNext(end)
	}
	return out, false, nil
}

// grant starts a new lease on m and returns it as delivered.
func (b *Broker) grant(key offset.Key, l *lease, m *message.Message, now time.Time, invisible time.Duration) ReceivedMessage {
	l.Epoch = b.epoch.Add(1)
	l.Deadline = now.Add(invisible)
	l.Deliveries++
	rm := toReceived(m)
	rm.ReconsumeTimes = m.ReconsumeTimes + l.Deliveries - 1
	if l.Key != "" || l.Failures > 0 {
		rm.ReconsumeTimes = m.ReconsumeTimes + l.Failures // retried in place: postponements do not count
	}
	rm.Receipt = b.receipts().Encode(receipt.Receipt{Group: key.Group, Topic: key.Topic, QueueID: key.QueueID, Offset: m.QueueOffset, Epoch: l.Epoch})
	rm.LeaseUntil = l.Deadline
	return rm
}
