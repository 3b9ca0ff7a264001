package consume

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// What the lease log (package lease) asks of the pop states: the leases
// of the cursors for a leader's snapshot (Live), where a folded lease is
// read and whether it is still owed (OwedPlace), and the install of the
// owed leases into the cursors when the broker takes over (Install).

// Live is every lease in the cursors as one record: a leader's leases
// snapshot when its store is not replicated (lease.Config.Live).
func (s *Service) Live() lease.Record {
	states := s.States()
	var rec lease.Record
	at := s.cfg.Clock.Now().UnixMilli()
	gen := func(key offset.Key) uint32 {
		_, gen, _ := s.progress().Get(key)
		return gen
	}
	for k, ps := range states {
		ps.Lock()
		ps.AppendLive(&rec, k.Group, k.Topic, gen, at)
		ps.Unlock()
	}
	return rec
}

// Install puts every folded lease still owed (package lease's Log.Owed)
// into its cursor, in offset order (an orderly key is held by its first
// restored lease; an orderly lease reads its message's sharding key).
func (s *Service) Install(owed []lease.Owed, now time.Time) (restored, expired int) {
	for _, o := range owed {
		k, p := o.At, o.Place
		key := offset.Key(k.Key)
		ps := s.PopState(key.Group, key.Topic)
		c := s.cursor(ps, key)
		shardingKey := ""
		if p.Orderly {
			res, err := s.cfg.Store.ReadQueue(p.Topic, p.Queue, k.Off, 1, nil)
			if err != nil || len(res.Messages) == 0 || res.Messages[0].QueueOffset != k.Off {
				continue
			}
			if shardingKey = res.Messages[0].Property(message.PropertyShardingKey); shardingKey != "" { // orderKey of an orderly view
				if c.KeyBusy(shardingKey) {
					continue // read again and deferred behind the key's earlier lease
				}
			}
		}
		l := ps.Apply(c, o.Lease.Item, o.Lease.Client, shardingKey)
		restored++
		if !l.Waiting() && !now.Before(l.Deadline()) {
			expired++
		}
	}
	return restored, expired
}

// OwedPlace is where a folded lease's offset is read, and false when the
// lease is owed no more (owedView; lease.Config.Owed).
func (s *Service) OwedPlace(k lease.At, f lease.Folded) (lease.Place, bool) {
	v, ok := s.owedView(k, f)
	return lease.Place{Topic: v.StoreTopic, Queue: v.StoreQueue, Orderly: v.Orderly}, ok
}

// owedView is the view a folded lease's offset is read through, and false
// when the lease is owed no more: its group or topic is gone (or it is a
// deleted namesake's), it is done for its group (acked, failed, skipped),
// before a reset, or retention deleted its message.
func (s *Service) owedView(k lease.At, f lease.Folded) (View, bool) {
	key := offset.Key(k.Key)
	group, client := instance.Split(key.Group) // a broadcasting group's instance
	g, ok := s.cfg.Broker.Registry().Group(group)
	if !ok || f.At < g.CreatedAt.UnixMilli() {
		return View{}, false // the group is gone (or this is a deleted namesake's lease)
	}
	if t, ok := s.cfg.Broker.Registry().Topic(key.Topic); !ok || f.At < t.CreatedAt.UnixMilli() {
		return View{}, false
	}
	if _, gen, _ := s.progress().Get(key); gen != f.Gen || s.progress().IsAcked(key, k.Off) {
		return View{}, false // done (acked, failed, skipped), or before a reset
	}
	v := s.ViewOf(g, key.Topic, key.QueueID, nil, s.cfg.RetryFloor(key.Topic)).ForInstance(client)
	if k.Off < s.cfg.Store.MinOffset(v.StoreTopic, v.StoreQueue) {
		return View{}, false // deleted by retention
	}
	return v, true
}
