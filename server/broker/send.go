package broker

import (
	"context"
	"time"

	"github.com/mqgate/mqgate/server/broker/send"
	"github.com/mqgate/mqgate/storage/message"
)

// Sending: the facade of the send family, server/broker/send, which holds
// the request — its checks (the limits and property rules, the topic,
// the batch), the messages it builds (the queue of a sharding key, a
// delay level's, a timer's and a half message's wrapping), its
// idempotency keys in the dedup table with the store lookup of a key the
// table no longer holds, the write and the results — and the dedup
// window's expiry (server/broker/send/doc.go). What stays here: Send,
// which checks that the broker is open and delegates; the family's
// Config, filled in from the broker (its store, clock, limits and
// sentinels, the topic name rule, the registry's word on a topic and its
// auto-creation, the topic gate, the transaction and timer families' parts
// of a send and the quota on pending timers, the counters); the reserved
// property names (systemProperties, broker.go).

// newSends is the send family over b's store (Open makes it).
func (b *Broker) newSends() *send.Service {
	cfg := send.Config{
		Store:          b.store,
		Clock:          b.clock,
		MaxMessageSize: b.opts.MaxMessageSize,
		DedupWindow:    b.opts.DedupWindow,
		DelayLevels:    b.opts.DelayLevels,
		Errors: send.Errors{
			InvalidArgument: ErrInvalidArgument, TopicNotFound: ErrTopicNotFound,
			EmptyBody: ErrEmptyBody, TooLarge: ErrTooLarge,
			IdempotencyInFlight: ErrIdempotencyInFlight, IdempotencyKeyReused: ErrIdempotencyKeyReused,
		},
		StoreError: mapStoreErr,
		Reserved:   isSystemProperty,
		TopicName:  ValidateTopicName,
		// The registry is opened by the recovery, after the family is made.
		Topic:      func(name string) (TopicConfig, bool) { return b.registry.Topic(name) },
		Gate:       b.topicGate.RLocker(), // see topicdelete.go
		CheckTxn:   b.checkTxnSend,
		ReserveTxn: b.reserveTxn,
		FindDedup:  b.txns.FindDedup,
		TimerDue: func(in *SendMessage, now time.Time) (time.Time, error) {
			return b.timers.SendDue(in.DelayMs, in.DeliverAt, in.DelayLevel, now)
		},
		CheckTimers: b.checkTimers,
		TimerSent:   func(m *message.Message) int32 { return b.timers.Sent(m) },
		Sent: func(topic string, messages, bytes int) {
			b.metrics.addTopic(b.metrics.sent, topic, messages)
			b.metrics.addTopic(b.metrics.sentBytes, topic, bytes)
		},
	}
	if b.opts.AutoCreate {
		cfg.CreateTopic = func(name string) (TopicConfig, error) {
			t, _, err := b.registry.SetTopic(TopicConfig{Name: name, Queues: b.opts.DefaultQueues, Perm: "rw"}, true)
			return t, err
		}
	}
	return send.New(cfg)
}

// Send stores msgs on topic in order, as one CommitLog batch (one flush).
// It keeps no reference to the messages' bodies once it returns (they are
// copied into the CommitLog), so the caller may reuse their buffers.
// Messages with a DedupID already seen within the dedup window are not
// stored again: their earlier result comes back with Duplicate set
// (package send's Service.Send).
func (b *Broker) Send(ctx context.Context, topic string, msgs []SendMessage) ([]SendResult, error) {
	if b.closed.Load() {
		return nil, ErrShuttingDown
	}
	return b.sends.Send(ctx, topic, msgs)
}
