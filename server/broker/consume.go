package broker

import (
	"context"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
)

// Pop consumption (RocketMQ 5 POP, SQS, Pub/Sub pull) is package
// consume's (server/broker/consume/doc.go): the map of pop states (package
// lease's PopState, one per (group, topic)), the pull with its reads,
// filters, grants and long poll, an ordered message's failure in place
// and the re-offers, the send-back of failed deliveries and its
// settlement, the lease reaper, and what the lease log asks of the pop
// states (the leases of a leader's snapshot, whether a folded lease is
// still owed, the install of the owed leases at Promote), and the receipt
// loop (Ack, ChangeLease, Nack). This file is its facade: the family's
// Config, filled in from the broker, and the exported requests.

// retryQueueID is the queue id of a (group, topic)'s view of the group's
// retry topic (package consume's RetryQueueID).
const retryQueueID = consume.RetryQueueID

// newConsume is the consumer's requests over b's store (Open makes it
// before the recovery; the registry, the ledger and the instances it asks
// for at each request, through consumeBroker).
func (b *Broker) newConsume() *consume.Service {
	return consume.New(consume.Config{
		Store:            b.store,
		Clock:            b.clock,
		Log:              b.log,
		Broker:           consumeBroker{b},
		Leases:           b.leases,
		Retries:          b.retries,
		Epoch:            &b.epoch,
		Closed:           b.closed.Load,
		Closing:          b.closing,
		MaxInvisible:     b.opts.MaxInvisible,
		DefaultInvisible: b.opts.DefaultInvisible,
		AutoCreateGroups: b.opts.AutoCreate && !b.opts.NoAutoCreateGroups,
		DelayLevels:      b.opts.DelayLevels,
		Errors: consume.Errors{ShuttingDown: ErrShuttingDown, InvalidArgument: ErrInvalidArgument,
			TopicNotFound: ErrTopicNotFound, GroupNotFound: ErrGroupNotFound, OffsetOutOfRange: ErrOffsetOutOfRange},
		StoreError:     mapStoreErr,
		TagMatcher:     tagMatcher,
		CompileSQL:     compileSQL,
		Received:       toReceived,
		Client:         clientOf,
		RetryFloor:     b.retryFloor,
		RetryWait:      b.retryWait,
		MaxClientBytes: MaxClientIDBytes,
		MaxBatch:       MaxBatchItems,
		CheckReason:    checkReason,
		CheckNackDelay: checkNackDelay,
		Delivered: func(group string, messages, bytes int) {
			b.metrics.addGroup(b.metrics.delivered, group, messages)
			b.metrics.addGroup(b.metrics.outBytes, group, bytes)
		},
		Acked:         func(group string, n int) { b.metrics.addGroup(b.metrics.acked, group, n) },
		ClampedOffset: b.metrics.clampedOffset,
	})
}

// consumeBroker is what package consume reads of the broker at the time
// of a request.
type consumeBroker struct{ b *Broker }

func (c consumeBroker) Registry() *registry.Service  { return c.b.registry }
func (c consumeBroker) Ledger() *progress.Ledger     { return c.b.ledger }
func (c consumeBroker) Instances() *instance.Service { return c.b.instances }

// Pull leases up to req.MaxMessages messages of req.Topic to req.Group,
// long-polling up to req.Wait for the first one (package consume's
// Service.Pull).
func (b *Broker) Pull(ctx context.Context, req PullRequest) ([]ReceivedMessage, error) {
	return b.consume.Pull(ctx, req)
}

// Ack acknowledges leased messages. The acknowledgements are durable (in
// sync flush mode) before Ack returns: after any restart an acknowledged
// message is not delivered to the group again (package consume's
// Service.Ack).
func (b *Broker) Ack(ctx context.Context, group string, receipts []string) ([]ReceiptResult, error) {
	return b.consume.Ack(ctx, group, receipts)
}

// ChangeLease extends or shortens leases (changeInvisibleTime). It never
// counts as a failed attempt: a lease shortened to 0 makes the message
// visible again with the same reconsume count (package consume's
// Service.ChangeLease).
func (b *Broker) ChangeLease(ctx context.Context, group string, items []LeaseItem) ([]ReceiptResult, error) {
	return b.consume.ChangeLease(ctx, group, items)
}

// Nack gives leased messages back as failed: each goes to the group's
// retry topic through the delay-level scheduler or a timer (the item's
// level or delay, else the group's retry policy: package retry), or to
// the dead-letter queue when the item says -1 or the message has used up
// the group's retryMaxTimes (package consume's Service.Nack).
func (b *Broker) Nack(ctx context.Context, group string, items []NackItem) ([]ReceiptResult, error) {
	return b.consume.Nack(ctx, group, items)
}
