package consume

import (
	"github.com/mqgate/mqgate/server/broker/filter"
	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// RetryQueueID is the queue id under which a (group, topic) keeps its
// view of the group's retry topic %RETRY%<group> (queue 0): the store
// indexes retry messages by their original topic, so each topic's view
// skips the others' retries without reading them. The lease records name
// the retry view by it too.
const RetryQueueID = lease.RetryQueueID

// View is one queue a (group, topic) pops from: a queue of the topic
// itself or the topic's view of the group's retry queue.
type View struct {
	Key        offset.Key // progress key (QueueID RetryQueueID for the retry view)
	StoreTopic string
	StoreQueue int32
	Match      func(int64) bool            // store-level filter on tagsCode
	Accept     func(*message.Message) bool // in-memory filter; nil accepts all
	Orderly    bool                        // per-sharding-key FIFO (orderly.go)
	InPlace    bool                        // a failed delivery is retried in place, not through %RETRY% (a broadcasting group's instance)
	MaxRetry   int                         // the group's retryMaxTimes
	Policy     *retry.Policy               // the group's retry policy (nil: the ladder)
}

// View is the view of queue qid of topic for a progress group (a
// broadcasting group's instance's: its own view), filtered by match.
func (s *Service) View(group, topic string, qid int32, match func(int64) bool) View {
	group, client := instance.Split(group)
	g, _ := s.cfg.Broker.Registry().Group(group)
	g.Name = group // an unknown (deleted) group still has its name
	return s.ViewOf(g, topic, qid, match, s.cfg.RetryFloor(topic)).ForInstance(client)
}

// ViewOf is View for a group whose configuration the caller already holds
// (a pull: no registry lookup per queue). Retries stored below floor (the
// topic's retry floor) belong to a deleted incarnation of the topic: the
// retry view passes over them.
func (s *Service) ViewOf(g registry.GroupConfig, topic string, qid int32, match func(int64) bool, floor int64) View {
	group := g.Name
	v := View{Key: offset.Key{Group: group, Topic: topic, QueueID: qid}, StoreTopic: topic, StoreQueue: qid, Match: match,
		Orderly: g.Orderly && qid != RetryQueueID, MaxRetry: g.RetryMaxTimes, Policy: g.RetryPolicy}
	if v.MaxRetry == 0 {
		v.MaxRetry = 16
	}
	if qid == RetryQueueID {
		code := message.TagsCode(topic)
		v.StoreTopic, v.StoreQueue = s.cfg.Retries.RetryTopic(group), 0
		v.Match = func(c int64) bool { return c == code }
		if match != nil || floor > 0 {
			v.Accept = func(m *message.Message) bool {
				return m.PhysicalOffset >= floor && (match == nil || match(message.TagsCode(m.Tag())))
			}
		}
	}
	return v
}

// ForInstance makes v a view of client's instance (none: v itself): its
// progress key is the instance's, a failed delivery is retried in place,
// and of the group's retry topic it takes only the copies naming the
// instance (resent dead letters).
func (v View) ForInstance(client string) View {
	if client == "" {
		return v
	}
	v.Key.Group = instance.Key(v.Key.Group, client)
	v.InPlace = true
	if v.Key.QueueID == RetryQueueID {
		prev := v.Accept
		v.Accept = func(m *message.Message) bool {
			return m.Property(instance.Prop) == client && (prev == nil || prev(m))
		}
	}
	return v
}

// WithSQL adds the property filter sql (nil: none) to v's in-memory
// filter.
func (v View) WithSQL(sql *filter.Expr) View {
	if sql == nil {
		return v
	}
	prev := v.Accept
	if prev == nil {
		v.Accept = func(m *message.Message) bool { return sql.Match(m.Properties) }
	} else {
		v.Accept = func(m *message.Message) bool { return prev(m) && sql.Match(m.Properties) }
	}
	return v
}
