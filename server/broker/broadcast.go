package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Broadcasting per consumer instance (RocketMQ's MessageModel.BROADCASTING).
// In a group whose ConsumeMode is "broadcasting" every consumer instance —
// a client id, the transport's X-Mqgate-Client-Id, required there —
// receives every message of the group's topics, with progress of its own:
// pop pulls, acks, nacks and lease changes, and offset reads and commits,
// all act on the instance's keys, the group "<group>@<client id>" of
// package offset (instance.Key). Everything else is the machinery of a
// group: the instance has its own pop states (cursors, leases in flight,
// lease records), its progress records are the group records of
// rmq_sys_OFFSET (durable before the answer, snapshotted, replayed), the
// subscription's tag and SQL filters apply, and a receipt names the
// instance's key as its group, so an ack settles that instance's lease and
// no other's (the receipt is the capability: whoever holds it settles it).
//
// Registration. The first pull, queue read or offset commit of a client id
// the group does not know registers it, after the instance limit
// (Quotas.MaxInstancesPerGroup) is checked and before anything is
// written: for every queue of the topic its start offset by the group's
// ConsumeFrom ("" the queue's first retained offset, "last" its max
// offset, a time the first message stored at or after it) and for the
// topic's view of the group's retry topic its end, as commit records of a
// generation taken from the clock (instance.Generation), so a lease
// record of an earlier instance under the same client id never matches.
// A topic the instance meets later gets its starts the same way; a queue
// added to a topic later starts at its first message.
//
// Retries. RocketMQ's broadcasting consumers do not retry through
// %RETRY%: a failed message is the instance's own business. Here a nack
// or an expired lease of an instance is retried in place, as an ordered
// message is (orderly.go): the lease waits for the nack's delay or the
// group's retry policy (failures so far), keeps the instance's cursor
// below it, is offered to the same instance again when due with
// reconsumeTimes counted up, and is recorded like every lease, so the
// wait and the failure count survive a restart. After retryMaxTimes
// failures (or a nack with delayLevel -1) it goes to the group's
// %DLQ%<group> with its attempt history and the instance in
// BROADCAST_INSTANCE; a resend of that letter is delivered to that
// instance only (the instances' views of %RETRY%<group> take the copies
// naming them). No other instance is affected by any of it.
//
// Forgetting. An instance whose last request (pull, read, commit, or an
// ack, nack or lease change with one of its receipts) is older than the
// group's InstanceIdle (default DefaultInstanceIdle) and that has none in
// flight is forgotten by the sweep (every instanceSweepInterval): its
// leases and pop states are dropped and a forget record of its key
// (offset.KindForget) ends its progress, durably. A client id that comes
// back is a new instance: it registers again and starts by ConsumeFrom.
// The last-seen times are kept in config/instances.snapshot, written with
// the offsets snapshot; without it (lost, damaged) an instance's idle time
// counts from the start of the broker.
//
// The family's pure parts are package instance (server/broker/instance):
// the naming rules, the set of known instances with its last-seen times and
// the decisions over it (which are idle at a given time, the instance
// limit), and the snapshot's codec. This file keeps what needs the broker:
// the start offsets and the forget records, the pop states, the requests,
// the sweep and the snapshot file.

// ConsumeBroadcasting is the consume mode in which every consumer
// instance gets every message.
const ConsumeBroadcasting = "broadcasting"

// Bounds of a group's InstanceIdle (package instance's).
const (
	// DefaultInstanceIdle is how long a consumer instance of a
	// broadcasting group may stay idle before it is forgotten, when the
	// group does not say.
	DefaultInstanceIdle = instance.DefaultIdle
	// MinInstanceIdle and MaxInstanceIdle bound a group's InstanceIdle.
	MinInstanceIdle = instance.MinIdle
	MaxInstanceIdle = instance.MaxIdle
)

// instanceSweepInterval is how often idle instances are looked for.
const instanceSweepInterval = time.Second

// propInstance names, on a broadcasting group's dead letter (and its
// resend), the consumer instance it belongs to.
const propInstance = instance.Prop

// instancesSnapshot is the file of the instances' last-seen times.
const instancesSnapshot = instance.SnapshotFile

// instanceKey is the progress group of client's instance of group.
func instanceKey(group, client string) string { return instance.Key(group, client) }

// splitInstance splits a progress group into the group and the client id
// of an instance ("" for a group's own keys).
func splitInstance(name string) (group, client string) { return instance.Split(name) }

// baseGroup is the group a progress group belongs to.
func baseGroup(name string) string { return instance.Base(name) }

// instanceIdle is g's idle time before an instance is forgotten.
func instanceIdle(g GroupConfig) time.Duration { return instance.Idle(g.InstanceIdle) }

// checkInstanceIdle validates a group's InstanceIdle (0: the default).
func checkInstanceIdle(d time.Duration) error {
	if err := instance.CheckIdle(d); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return nil
}

// instanceSet is the known consumer instances of broadcasting groups.
type instanceSet struct {
	mu  sync.Mutex
	set instance.Set // guarded by mu
}

// enterInstance registers client as an instance of g when it is new (the
// instance limit is checked first, before anything is written) and writes
// its start offsets in the topics it meets for the first time; it counts
// the request as under way until leave. The caller has checked that g is
// broadcasting.
func (b *Broker) enterInstance(g GroupConfig, client string, topics ...TopicConfig) (leave func(), err error) {
	if client == "" {
		return nil, fmt.Errorf("%w: group %s is broadcasting: every consumer instance names itself with X-Mqgate-Client-Id", ErrClientIDRequired, g.Name)
	}
	if err := CheckClientID("X-Mqgate-Client-Id", client); err != nil {
		return nil, err
	}
	s := &b.instances
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.set.Get(g.Name, client)
	fresh := in == nil
	if fresh {
		limit := b.opts.Quotas.MaxInstancesPerGroup
		if have, ok := s.set.Room(g.Name, limit); !ok {
			return nil, &QuotaError{Quota: "instancesPerGroup", Unit: "consumer instances", Flag: "--max-instances-per-group", Limit: limit, Have: have, Want: have + 1}
		}
		in = instance.New(time.Time{})
	}
	var entries []offset.Entry
	var met []string
	for _, t := range topics {
		if in.Met[t.Name] {
			continue
		}
		es, err := b.instanceStarts(g, client, t, fresh)
		if err != nil {
			return nil, err
		}
		entries = append(entries, es...)
		met = append(met, t.Name)
	}
	for len(entries) > 0 {
		n := min(len(entries), MaxBatchItems)
		if err := b.persist(offset.Record{Entries: entries[:n]}, nil); err != nil {
			return nil, err
		}
		entries = entries[n:]
	}
	for _, t := range met {
		in.Met[t] = true
	}
	if fresh {
		s.set.Add(g.Name, client, in)
		b.log.Info().Str("group", g.Name).Str("client", client).Msg("consumer instance registered")
	}
	s.set.Enter(in, b.clock.Now())
	return func() {
		s.mu.Lock()
		s.set.Leave(in, b.clock.Now())
		s.mu.Unlock()
	}, nil
}

// instanceStarts are the commit entries that start client's instance of g
// in topic t: each queue by g's ConsumeFrom, the retry view at the end of
// the group's retry topic. A fresh instance gets them all (whatever keys
// an earlier instance under its client id may have left); a known one
// only for the queues it has no offset for.
func (b *Broker) instanceStarts(g GroupConfig, client string, t TopicConfig, fresh bool) ([]offset.Entry, error) {
	var at time.Time
	if g.ConsumeFrom != "" && g.ConsumeFrom != consumeFromLast {
		var err error
		if at, err = time.Parse(time.RFC3339Nano, g.ConsumeFrom); err != nil {
			return nil, fmt.Errorf("%w: consumeFrom: %w", ErrInvalidArgument, err)
		}
	}
	name := instanceKey(g.Name, client)
	var out []offset.Entry
	for q := int32(retryQueueID); q < int32(t.Queues); q++ {
		key := offset.Key{Group: name, Topic: t.Name, QueueID: q}
		_, gen, known := b.progress.Get(key)
		if known && !fresh {
			continue
		}
		var start int64
		switch {
		case q == retryQueueID:
			start = b.store.MaxOffset(RetryTopic(g.Name), 0)
		case g.ConsumeFrom == "":
			start = b.store.MinOffset(t.Name, q)
		case at.IsZero():
			start = b.store.MaxOffset(t.Name, q)
		default:
			var err error
			if start, err = b.store.SearchOffsetByTime(t.Name, q, at.UnixMilli()); err != nil {
				return nil, mapStoreErr(err)
			}
		}
		out = append(out, offset.Entry{Kind: offset.KindCommit, Key: key, Generation: instance.Generation(b.clock.Now(), gen), Offset: start})
	}
	return out, nil
}

// touchInstances notes a request of the named instances of group (the
// ones receipts name); unknown ones are not registered by it.
func (b *Broker) touchInstances(group string, clients map[string]struct{}) {
	if len(clients) == 0 {
		return
	}
	s := &b.instances
	now := b.clock.Now()
	s.mu.Lock()
	s.set.Touch(group, clients, now)
	s.mu.Unlock()
}

// instanceKnown reports whether a progress group is a group's own or a
// known instance's: a forgotten instance's late settlements are dropped.
func (b *Broker) instanceKnown(name string) bool {
	group, client := splitInstance(name)
	if client == "" {
		return true
	}
	b.instances.mu.Lock()
	defer b.instances.mu.Unlock()
	return b.instances.set.Get(group, client) != nil
}

// instanceClients lists the client ids of group's known instances, sorted.
func (b *Broker) instanceClients(group string) []string {
	b.instances.mu.Lock()
	defer b.instances.mu.Unlock()
	return b.instances.set.Clients(group)
}

// forgetIdleInstances forgets every instance idle longer than its group's
// InstanceIdle with no request under way (the sweep's pass).
func (b *Broker) forgetIdleInstances(now time.Time) {
	s := &b.instances
	s.mu.Lock()
	defer s.mu.Unlock()
	idle := func(group string) time.Duration {
		g, _ := b.registry.group(group)
		return instanceIdle(g)
	}
	for _, r := range s.set.Idle(now, idle) {
		if err := b.forgetInstanceLocked(r.Group, r.Client); err != nil {
			b.log.Error().Err(err).Str("group", r.Group).Str("client", r.Client).Msg("forgetting an idle consumer instance failed; the next sweep tries again")
			continue
		}
		b.log.Info().Str("group", r.Group).Str("client", r.Client).Time("lastSeen", r.LastSeen).Dur("idle", r.Idle).
			Msg("consumer instance forgotten after being idle")
	}
}

// forgetInstanceLocked drops an instance's leases and pop states and ends
// its progress with a forget record; the caller holds instances.mu.
func (b *Broker) forgetInstanceLocked(group, client string) error {
	name := instanceKey(group, client)
	b.popsMu.Lock()
	var states []*popState
	for k, ps := range b.pops {
		if k.group == name {
			states = append(states, ps)
			delete(b.pops, k)
		}
	}
	b.popsMu.Unlock()
	for _, ps := range states {
		ps.mu.Lock()
		ps.queues = make(map[int32]*cursor)
		ps.notes = leaseNotes{}
		ps.mu.Unlock()
	}
	if err := b.persist(offset.Record{Entries: []offset.Entry{{Kind: offset.KindForget, Key: offset.Key{Group: name}}}}, nil); err != nil {
		return err
	}
	b.dropped.forget(name)
	b.instances.set.Remove(group, client)
	return nil
}

// forInstance makes v a view of client's instance (none: v itself): its
// progress key is the instance's, a failed delivery is retried in place,
// and of the group's retry topic it takes only the copies naming the
// instance (resent dead letters).
func (v queueView) forInstance(client string) queueView {
	if client == "" {
		return v
	}
	v.key.Group = instanceKey(v.key.Group, client)
	v.inPlace = true
	if v.key.QueueID == retryQueueID {
		prev := v.accept
		v.accept = func(m *message.Message) bool {
			return m.Property(propInstance) == client && (prev == nil || prev(m))
		}
	}
	return v
}

// openInstances rebuilds the known instances from the progress keys (each
// registered instance has some) and their last-seen times from the
// snapshot; without one an instance counts as seen now.
func (b *Broker) openInstances() {
	var seen map[string]time.Time
	if raw, err := b.store.ReadMeta(instancesSnapshot); err == nil {
		if snap, err := instance.DecodeSnapshot(raw); err != nil {
			b.log.Warn().Err(err).Msg("instances snapshot unreadable; every consumer instance's idle time counts from now")
		} else {
			seen = snap.LastSeen()
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		b.log.Warn().Err(err).Msg("instances snapshot unreadable; every consumer instance's idle time counts from now")
	}
	now := b.clock.Now()
	s := &b.instances
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range b.progress.Keys() {
		s.set.Restore(k.Group, k.Topic, seen, now)
	}
}

// snapshotInstances writes the instances' last-seen times when they
// changed since the last snapshot.
func (b *Broker) snapshotInstances() error {
	s := &b.instances
	s.mu.Lock()
	snap, changed := s.set.Snapshot()
	s.mu.Unlock()
	if !changed {
		return nil
	}
	raw, err := instance.EncodeSnapshot(snap)
	if err == nil {
		err = b.store.WriteMeta(instancesSnapshot, raw)
	}
	if err != nil {
		s.mu.Lock()
		s.set.MarkChanged()
		s.mu.Unlock()
	}
	return err
}

// dropGroupInstances forgets a deleted group's instances in memory (the
// group's forget record ended their progress).
func (b *Broker) dropGroupInstances(group string) {
	s := &b.instances
	s.mu.Lock()
	s.set.DropGroup(group)
	s.mu.Unlock()
}

// hasOwnOffsets reports whether group has progress of its own (not only
// its instances'): a broadcasting group consumed by offset without a
// client id.
func (b *Broker) hasOwnOffsets(group string) bool {
	for _, k := range b.progress.Keys() {
		if k.Group == group {
			return true
		}
	}
	return false
}

// Instances reports the consumer instances of a broadcasting group with
// their progress per queue (Progress's rows, of the instance's keys), in
// client id order.
func (b *Broker) Instances(ctx context.Context, group string) ([]InstanceProgress, error) {
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := b.awaitDispatch(ctx); err != nil {
		return nil, err
	}
	var out []InstanceProgress
	for _, client := range b.instanceClients(group) {
		ip, known, err := b.instanceProgress(g, client)
		if err != nil {
			return nil, err
		}
		if known { // else forgotten meanwhile
			out = append(out, ip)
		}
	}
	return out, nil
}

// instanceProgress is the progress of client's instance of g, in the
// topics it met and the ones g subscribes to. Of an instance g does not
// know (known false) the rows are those it would start with at the
// queues' first offsets; nothing is written.
func (b *Broker) instanceProgress(g GroupConfig, client string) (ip InstanceProgress, known bool, err error) {
	ip = InstanceProgress{ClientID: client, Queues: []QueueProgress{}}
	topics := map[string]struct{}{}
	b.instances.mu.Lock()
	if in := b.instances.set.Get(g.Name, client); in != nil {
		known = true
		ip.LastSeen, ip.Active = in.LastSeen.UTC(), in.Active
		if at := in.ForgetAt(instanceIdle(g)); !at.IsZero() {
			ip.ForgetAt = at.UTC()
		}
		for t := range in.Met {
			topics[t] = struct{}{}
		}
	}
	b.instances.mu.Unlock()
	for _, s := range g.Subscriptions {
		topics[s.Topic] = struct{}{}
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, topic := range names {
		t, ok := b.registry.topic(topic)
		if !ok {
			continue
		}
		rows, err := b.queueRows(instanceKey(g.Name, client), t)
		if err != nil {
			return ip, known, err
		}
		ip.Queues = append(ip.Queues, rows...)
	}
	return ip, known, nil
}

// maxInstanceRetryScan bounds the retry-topic messages one instance's
// retry lag count reads; beyond it the lag shown is a lower bound.
const maxInstanceRetryScan = 4096

// countInstanceRetries counts the messages of an instance's retry view v
// (resent dead letters naming it) in [from, to), reading at most
// maxInstanceRetryScan of the topic's retries.
func (b *Broker) countInstanceRetries(v queueView, from, to int64) (n int64, complete bool, err error) {
	read := 0
	for from < to {
		if read >= maxInstanceRetryScan {
			return n, false, nil
		}
		res, err := b.store.ReadQueue(v.storeTopic, v.storeQueue, from, int(min(to-from, 256)), v.match)
		if err != nil {
			return n, false, mapStoreErr(err)
		}
		for _, m := range res.Messages {
			if m.QueueOffset >= to {
				break
			}
			read++
			if v.accept == nil || v.accept(m) {
				n++
			}
		}
		if res.Next == from {
			break
		}
		from = res.Next
	}
	return n, true, nil
}

// instanceOffsets is the progress of one instance (GetOffsets and
// Progress with a client id, of a broadcasting group); of an instance the
// group does not know, the queues of its subscriptions at their first
// offsets (where a first start would put it; nothing is written).
func (b *Broker) instanceOffsets(ctx context.Context, group, client string) ([]QueueProgress, error) {
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	ip, _, err := b.instanceProgress(g, client)
	return ip.Queues, err
}

// resetCommits applies a reset's commits (ResetOffset): to the group, or,
// for a broadcasting group, to the instance ctx names, else to every known
// instance and to the group's own offsets when it has some (or no
// instances).
func (b *Broker) resetCommits(ctx context.Context, g GroupConfig, commits []OffsetCommit) error {
	if g.ConsumeMode != ConsumeBroadcasting || clientOf(ctx) != "" {
		return b.CommitOffsets(ctx, g.Name, commits)
	}
	clients := b.instanceClients(g.Name)
	if len(clients) == 0 || b.hasOwnOffsets(g.Name) {
		if err := b.CommitOffsets(ctx, g.Name, commits); err != nil {
			return err
		}
	}
	for _, c := range clients {
		if !b.instanceKnown(instanceKey(g.Name, c)) {
			continue // forgotten meanwhile: not registered again by a reset
		}
		if err := b.CommitOffsets(WithClient(ctx, c), g.Name, commits); err != nil {
			return err
		}
	}
	return nil
}

// ReadQueueFor reads messages of one queue by offset for a group
// (offset-mode consumers): the tag and SQL filters of the group's
// subscription of the topic apply — what they refuse is left out, the
// next offset moves past it — and from < 0 starts at the group's committed
// offset. For a broadcasting group a client id in ctx reads as that
// consumer instance: registered by its first read (its start by the
// group's ConsumeFrom), its committed offset the instance's. Nothing is
// leased or committed: PUT offsets (with the same client id) does that.
func (b *Broker) ReadQueueFor(ctx context.Context, group, topic string, queueID int32, from int64, limit int) ([]QueueMessage, int64, error) {
	t, err := b.checkReadQueue(ctx, topic, queueID, limit)
	if err != nil {
		return nil, from, err
	}
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return nil, from, err
	}
	var expr, sqlText, field string
	for i, s := range g.Subscriptions {
		if s.Topic == topic {
			expr, sqlText, field = s.TagExpression, s.SQL, fmt.Sprintf("subscriptions[%d].sql", i)
		}
	}
	match, err := tagMatcher(expr)
	if err != nil {
		return nil, from, err
	}
	sql, err := compileSQL(field, sqlText)
	if err != nil {
		return nil, from, err
	}
	keyGroup := group
	if client := clientOf(ctx); client != "" && g.ConsumeMode == ConsumeBroadcasting {
		if err := b.catchUp(ctx); err != nil { // a start at "last" includes what was sent before
			return nil, from, err
		}
		leave, err := b.enterInstance(g, client, t)
		if err != nil {
			return nil, from, err
		}
		defer leave()
		keyGroup = instanceKey(group, client)
	}
	if from < 0 {
		committed, _, _ := b.progress.Get(offset.Key{Group: keyGroup, Topic: topic, QueueID: queueID})
		from = max(committed, b.store.MinOffset(topic, queueID))
	}
	var accept func(*message.Message) bool
	if sql != nil {
		accept = func(m *message.Message) bool { return sql.Match(m.Properties) }
	}
	return b.readQueue(ctx, topic, queueID, from, limit, match, accept)
}
