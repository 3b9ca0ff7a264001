package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/server/broker/send"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Send stores msgs on topic in order, as one CommitLog batch (one flush).
// It keeps no reference to the messages' bodies once it returns (they are
// copied into the CommitLog), so the caller may reuse their buffers.
// Messages with a DedupID already seen within the dedup window are not
// stored again: their earlier result comes back with Duplicate set.
func (b *Broker) Send(ctx context.Context, topic string, msgs []SendMessage) ([]SendResult, error) {
	if b.closed.Load() {
		return nil, ErrShuttingDown
	}
	if err := ValidateTopicName(topic); err != nil {
		return nil, err
	}
	if len(msgs) == 0 || len(msgs) > MaxSendBatch {
		return nil, fmt.Errorf("%w: a send carries 1 to %d messages, got %d", ErrInvalidArgument, MaxSendBatch, len(msgs))
	}
	for i := range msgs {
		if msgs[i].Transactional && len(msgs) > 1 {
			return nil, fmt.Errorf("%w: a transactional send carries one message (messages[%d] is transactional; as in RocketMQ, batches are not)", ErrInvalidArgument, i)
		}
	}
	// A deletion of the topic happens wholly before or after this send
	// (topicdelete.go): a message is never stored into a topic between
	// the deletion's floor and its purge.
	b.topicGate.RLock()
	defer b.topicGate.RUnlock()
	cfg, err := b.topicForSend(topic)
	if err != nil {
		return nil, err
	}
	now := b.clock.Now()
	stored := make([]*message.Message, len(msgs))
	for i := range msgs {
		if stored[i], err = b.buildMessage(cfg, &msgs[i], now); err != nil {
			if len(msgs) > 1 {
				return nil, send.PrefixField(err, fmt.Sprintf("messages[%d].", i))
			}
			return nil, err
		}
	}

	timers := 0
	for _, m := range stored {
		if m.Topic == timerTopic {
			timers++
		}
	}
	if err := b.checkTimers(timers); err != nil {
		return nil, err
	}
	results := make([]SendResult, len(msgs))
	claims, err := b.claimDedup(topic, msgs, results, now)
	if err != nil {
		return nil, err
	}
	var txnStored bool
	var txnPhys int64
	if stored[0].Topic == txnHalfTopic && !results[0].Duplicate {
		// Counted against the quotas before the write, until the state
		// counts the transaction.
		release, err := b.reserveTxn(msgs[0].ProducerGroup)
		if err != nil {
			b.settleDedup(claims, results, err)
			return nil, err
		}
		defer func() { release(txnStored, txnPhys) }()
	}
	var fresh []*message.Message
	var freshIdx []int
	for i, m := range stored {
		if !results[i].Duplicate {
			fresh = append(fresh, m)
			freshIdx = append(freshIdx, i)
		}
	}
	var putErr error
	if len(fresh) > 0 {
		put := make([]storage.PutResult, len(fresh))
		if len(fresh) == 1 {
			put[0], putErr = b.store.Put(fresh[0])
		} else {
			putErr = b.store.PutBatch(fresh, put)
		}
		if putErr == nil {
			for j, i := range freshIdx {
				results[i] = SendResult{MessageID: put[j].ID.String(), QueueID: put[j].QueueID, QueueOffset: put[j].QueueOffset}
				switch m := fresh[j]; m.Topic {
				case timerTopic:
					// A timer: the id names it until it fires (list, cancel,
					// reschedule); the queue is its destination queue.
					results[i].QueueID, results[i].QueueOffset = b.registerTimer(m, put[j])
				case txnHalfTopic:
					// A half message: the id names the transaction; the queue
					// is its destination, the offset known once committed.
					qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
					results[i].QueueID, results[i].QueueOffset = int32(qid), -1
					results[i].TransactionID = results[i].MessageID
					txnStored, txnPhys = true, put[j].PhysicalOffset
				case message.ScheduleTopic:
					// Delayed by level: the destination queue; the queue
					// offset is only known once it is delivered.
					qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
					results[i].QueueID, results[i].QueueOffset = int32(qid), -1
				}
			}
		}
	}
	b.settleDedup(claims, results, putErr)
	if putErr != nil {
		return nil, mapStoreErr(putErr)
	}
	b.metrics.addTopic(b.metrics.sent, topic, len(fresh))
	bytes := 0
	for _, m := range fresh {
		bytes += len(m.Body)
	}
	b.metrics.addTopic(b.metrics.sentBytes, topic, bytes)
	return results, nil
}

func (b *Broker) topicForSend(topic string) (TopicConfig, error) {
	cfg, ok := b.registry.topic(topic)
	if !ok {
		if !b.opts.AutoCreate {
			return cfg, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
		}
		var err error
		if cfg, _, err = b.registry.putTopic(TopicConfig{Name: topic, Queues: b.opts.DefaultQueues, Perm: "rw"}, true); err != nil {
			return cfg, err
		}
	}
	if cfg.Perm == "r" {
		return cfg, fmt.Errorf("%w: topic %s is read-only", ErrInvalidArgument, topic)
	}
	return cfg, nil
}

// buildMessage checks one message of a send against the limits
// (limits.go) and builds what the store appends.
func (b *Broker) buildMessage(cfg TopicConfig, in *SendMessage, now time.Time) (*message.Message, error) {
	if err := b.validateSend(in); err != nil {
		return nil, err
	}
	if err := b.checkTxnSend(in); err != nil {
		return nil, err
	}
	due, err := b.timerDue(in, now)
	if err != nil {
		return nil, err
	}
	m := &message.Message{Topic: cfg.Name, Body: in.Body, BornTimestamp: now.UnixMilli()}
	if len(in.Properties) > 0 {
		m.Properties = make(map[string]string, len(in.Properties)+2)
		for k, v := range in.Properties {
			m.Properties[k] = v
		}
	}
	if in.Tag != "" {
		m.SetTag(in.Tag)
	}
	if len(in.Keys) > 0 {
		m.SetKeys(in.Keys)
	}
	if in.DedupID != "" {
		m.SetProperty(message.PropertyDedupID, in.DedupID)
	}
	if in.ShardingKey != "" {
		m.QueueID = send.ShardQueue(in.ShardingKey, cfg.Queues)
		m.SetProperty(message.PropertyShardingKey, in.ShardingKey)
	} else {
		m.QueueID = send.RoundRobin(b.rr.Add(1), cfg.Queues)
	}
	if in.Transactional {
		asHalf(m, in)
		return m, nil
	}
	if in.DelayLevel != 0 {
		return b.delayed(m, in.DelayLevel, now)
	}
	if !due.IsZero() {
		timer.Wrap(m, due)
	}
	return m, nil
}

// claimDedup resolves every DedupID of the request (the table of package
// send, and the store for keys it no longer holds): duplicates fill their
// result (Duplicate set); new keys are claimed as pending.
func (b *Broker) claimDedup(topic string, msgs []SendMessage, results []SendResult, now time.Time) ([]send.Claim[SendResult], error) {
	var claims []send.Claim[SendResult]
	d := &b.dedup
	since := now.Add(-b.opts.DedupWindow)
	d.Lock()
	defer d.Unlock()
	for i := range msgs {
		id := msgs[i].DedupID
		if id == "" {
			continue
		}
		key := send.Key{Topic: topic, ID: id}
		verdict, result := d.Lookup(key, msgs[i].Body, since)
		if verdict == send.Unknown {
			// Not in memory: the key may predate a restart.
			m, err := b.findDedup(topic, id, since.UnixMilli())
			if err == nil {
				verdict, result = d.Found(key, msgs[i].Body, m.Body, time.UnixMilli(m.StoreTimestamp), dedupResult(m))
			} else if !errors.Is(err, storage.ErrNotFound) {
				d.Release(claims)
				return nil, mapStoreErr(err)
			}
		}
		switch verdict {
		case send.Unknown:
			claims = append(claims, d.Claim(key, msgs[i].Body, now, i))
		case send.InFlight:
			d.Release(claims)
			return nil, fmt.Errorf("%w: %s", ErrIdempotencyInFlight, id)
		case send.Reused:
			d.Release(claims)
			return nil, fmt.Errorf("%w: %s", ErrIdempotencyKeyReused, id)
		default:
			results[i] = result
			results[i].Duplicate = true
		}
	}
	return claims, nil
}

// settleDedup records the outcome of claimed keys: on success they answer
// later duplicates; on failure they are released so a retry can store.
func (b *Broker) settleDedup(claims []send.Claim[SendResult], results []SendResult, err error) {
	b.dedup.Settle(claims, func(i int) SendResult { return results[i] }, err)
}
