package instance

import (
	"context"
	"sort"
	"time"

	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Progress is one consumer instance of a broadcasting group and its own
// progress (broker.InstanceProgress is an alias).
type Progress struct {
	// ClientID is the instance's X-Mqgate-Client-Id.
	ClientID string
	// LastSeen is when its last request ended (or started, while one is
	// under way).
	LastSeen time.Time
	// Active counts its requests under way (long polls included).
	Active int
	// ForgetAt is when it is forgotten if it stays idle (zero while a
	// request is under way).
	ForgetAt time.Time
	// Queues is its progress per queue, as Broker.Progress reports a
	// group's.
	Queues []progress.QueueProgress
}

// MaxRetryScan bounds the retry-topic messages one instance's retry lag
// count reads (CountRetries); beyond it the lag shown is a lower bound.
const MaxRetryScan = 4096

// Instances reports the consumer instances of a broadcasting group with
// their progress per queue (Progress's rows, of the instance's keys), in
// client id order.
func (s *Service) Instances(ctx context.Context, group string) ([]Progress, error) {
	g, err := s.cfg.Broker.Lookup(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Broker.AwaitDispatch(ctx); err != nil {
		return nil, err
	}
	var out []Progress
	for _, client := range s.Clients(group) {
		ip, known, err := s.progress(g, client)
		if err != nil {
			return nil, err
		}
		if known { // else forgotten meanwhile
			out = append(out, ip)
		}
	}
	return out, nil
}

// Offsets is the progress of one instance (GetOffsets and Progress with a
// client id, of a broadcasting group); of an instance the group does not
// know, the queues of its subscriptions at their first offsets (where a
// first start would put it; nothing is written).
func (s *Service) Offsets(ctx context.Context, group, client string) ([]progress.QueueProgress, error) {
	g, err := s.cfg.Broker.Lookup(ctx, group)
	if err != nil {
		return nil, err
	}
	ip, _, err := s.progress(g, client)
	return ip.Queues, err
}

// progress is the progress of client's instance of g, in the topics it
// met and the ones g subscribes to. Of an instance g does not know (known
// false) the rows are those it would start with at the queues' first
// offsets; nothing is written.
func (s *Service) progress(g registry.GroupConfig, client string) (ip Progress, known bool, err error) {
	ip = Progress{ClientID: client, Queues: []progress.QueueProgress{}}
	topics := map[string]struct{}{}
	s.mu.Lock()
	if in := s.set.Get(g.Name, client); in != nil {
		known = true
		ip.LastSeen, ip.Active = in.LastSeen.UTC(), in.Active
		if at := in.ForgetAt(Idle(g.InstanceIdle)); !at.IsZero() {
			ip.ForgetAt = at.UTC()
		}
		for t := range in.Met {
			topics[t] = struct{}{}
		}
	}
	s.mu.Unlock()
	for _, sub := range g.Subscriptions {
		topics[sub.Topic] = struct{}{}
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, topic := range names {
		t, ok := s.cfg.Broker.Topic(topic)
		if !ok {
			continue
		}
		rows, err := s.cfg.Ledger.QueueRows(Key(g.Name, client), t)
		if err != nil {
			return ip, known, err
		}
		ip.Queues = append(ip.Queues, rows...)
	}
	return ip, known, nil
}

// RetryView is an instance's view of its group's retry topic, as a retry
// lag count reads it: where the copies are stored, the tag filter, and
// which copies are the instance's (resent dead letters naming it).
type RetryView struct {
	StoreTopic string
	StoreQueue int32
	Match      func(tagsCode int64) bool
	Accept     func(*message.Message) bool
}

// CountRetries counts the messages of an instance's retry view v in
// [from, to), reading at most MaxRetryScan of the topic's retries
// (complete false: n is a lower bound).
func (s *Service) CountRetries(v RetryView, from, to int64) (n int64, complete bool, err error) {
	read := 0
	for from < to {
		if read >= MaxRetryScan {
			return n, false, nil
		}
		res, err := s.cfg.Store.ReadQueue(v.StoreTopic, v.StoreQueue, from, int(min(to-from, 256)), v.Match)
		if err != nil {
			return n, false, s.cfg.StoreErr(err)
		}
		for _, m := range res.Messages {
			if m.QueueOffset >= to {
				break
			}
			read++
			if v.Accept == nil || v.Accept(m) {
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

// ResetCommits applies a reset's commits (ResetOffset, SkipBacklog)
// through commit, which writes them as the request names them (client "")
// or as client's instance: to the group, or, for a broadcasting group, to
// the instance the request names (client), else to every known instance
// and to the group's own offsets when it has some (or no instances). An
// instance forgotten meanwhile is not registered again by the reset.
func (s *Service) ResetCommits(g registry.GroupConfig, client string, commit func(client string) error) error {
	if g.ConsumeMode != Broadcasting || client != "" {
		return commit("")
	}
	clients := s.Clients(g.Name)
	if len(clients) == 0 || s.HasOwnOffsets(g.Name) {
		if err := commit(""); err != nil {
			return err
		}
	}
	for _, c := range clients {
		if !s.Known(Key(g.Name, c)) {
			continue // forgotten meanwhile: not registered again by a reset
		}
		if err := commit(c); err != nil {
			return err
		}
	}
	return nil
}

// ReadStart is where a read of queueID of t by offset (ReadQueueFor) for
// g starts, and as whom: for a broadcasting group with a client id, as
// that instance — registered by its first read (its start by the group's
// ConsumeFrom), under way until leave — else as the group. From < 0
// starts at the reader's committed offset (not below the queue's first);
// otherwise from. Nothing is leased or committed.
func (s *Service) ReadStart(ctx context.Context, g registry.GroupConfig, client string, t registry.TopicConfig, queueID int32, from int64) (start int64, leave func(), err error) {
	keyGroup := g.Name
	leave = func() {}
	if client != "" && g.ConsumeMode == Broadcasting {
		if err := s.cfg.Broker.CatchUp(ctx); err != nil { // a start at "last" includes what was sent before
			return from, nil, err
		}
		if leave, err = s.Enter(g, client, t); err != nil {
			return from, nil, err
		}
		keyGroup = Key(g.Name, client)
	}
	if from < 0 {
		committed, _, _ := s.cfg.Ledger.Table().Get(offset.Key{Group: keyGroup, Topic: t.Name, QueueID: queueID})
		from = max(committed, s.cfg.Store.MinOffset(t.Name, queueID))
	}
	return from, leave, nil
}
