package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/server/broker/trace"
	"github.com/mqgate/mqgate/storage/message"
)

// The message trace (RocketMQ's message trace, as a query) is package
// trace's: the query, the follower that writes rmq_sys_TRACE, the push
// outcomes and retention's carry of traces (server/broker/trace/doc.go).
// What stays here is the facade: the public names, the trace's start at
// open and at Promote, and what the trace needs of the broker
// (traceBroker).

// traceTopic carries trace records (package trace), RocketMQ's
// RMQ_SYS_TRACE_TOPIC.
const traceTopic = trace.Topic

// Bounds of a trace (package trace).
const (
	// MaxTraceEvents is the most events one trace lists.
	MaxTraceEvents = trace.MaxEvents
	// MaxTraceReasonBytes is the longest reason or result a trace event
	// shows (longer ones are cut, with a marker saying how long they were).
	MaxTraceReasonBytes = trace.MaxReasonBytes
)

// Trace event types (TraceEvent.Type), one per kind (package trace).
const (
	TraceStored       = trace.TypeStored
	TraceDelivered    = trace.TypeDelivered
	TraceReleased     = trace.TypeReleased
	TraceAcked        = trace.TypeAcked
	TraceNacked       = trace.TypeNacked
	TraceLeaseExpired = trace.TypeLeaseExpired
	TraceRetried      = trace.TypeRetried
	TraceDeadLettered = trace.TypeDeadLettered
	TraceResent       = trace.TypeResent
	TraceDiscarded    = trace.TypeDiscarded
	TraceCommitted    = trace.TypeCommitted
	TraceRolledBack   = trace.TypeRolledBack
	TracePushed       = trace.TypePushed
	TraceDropped      = trace.TypeDropped
)

// MessageTrace is the life of one message (Trace; package trace).
type MessageTrace = trace.MessageTrace

// TraceEvent is one event of a message's life (package trace).
type TraceEvent = trace.Event

// TraceStats describes message tracing (package trace).
type TraceStats = trace.Stats

// Trace returns the life of the message id names — its own id, or the id
// of any copy of it (a retry, a dead letter, a resend, a delayed send's
// delivery, a transaction). An id that is no message is ErrMessageNotFound.
func (b *Broker) Trace(ctx context.Context, id string) (MessageTrace, error) {
	if b.closed.Load() {
		return MessageTrace{}, ErrShuttingDown
	}
	mid, err := message.ParseID(id)
	if err != nil {
		return MessageTrace{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	tr, err := b.trace.Query(ctx, mid)
	if errors.Is(err, trace.ErrNoMessage) {
		return MessageTrace{}, fmt.Errorf("%w: %s", ErrMessageNotFound, mid)
	}
	return tr, err
}

// TraceStats reports the trace follower's counters.
func (b *Broker) TraceStats() TraceStats { return b.trace.Stats() }

// TracePushed notes the outcome of one webhook delivery (package
// server/push): the lease of receipt, the endpoint's HTTP status (0
// without an answer) and the result. It never blocks; when the buffer is
// full the outcome is dropped and counted.
func (b *Broker) TracePushed(group, receipt string, status int, result string) {
	b.trace.Pushed(group, receipt, status, result)
}

// openTrace readies the message trace at open; resumeTrace, when the
// broker takes over (follow.go), finds where its follower resumes.
func (b *Broker) openTrace() {
	b.trace = trace.New(trace.Config{
		Store:      b.store,
		Broker:     traceBroker{b},
		Names:      trace.Names{RetryPrefix: retryPrefix, Attempts: propAttempts, OffsetTopic: offsetTopic},
		Clock:      b.clock,
		Logger:     b.log,
		Off:        b.opts.NoMessageTrace,
		Closing:    b.closing,
		ClosingCtx: b.closingCtx,
	})
}

func (b *Broker) resumeTrace() error { return b.trace.Resume() }

// Retention's carry of traces (retention.go; package trace's carry.go):
// noteCarried is told of a copy retention carries (dlq.go,
// package timer's carry through its Config.Carried), noteLivesBelow and
// carryTraces run before a cut.
func (b *Broker) noteCarried(m *message.Message) { b.trace.NoteCarried(m) }
func (b *Broker) noteLivesBelow(cut int64) error { return b.trace.NoteLivesBelow(cut) }
func (b *Broker) carryTraces(cut int64) error    { return b.trace.Carry(cut) }

// traceBroker is what package trace needs of the broker (trace.Broker).
type traceBroker struct{ b *Broker }

func (t traceBroker) Hidden(m *message.Message) bool {
	return bookkeeping(m.Topic) || t.b.deletedMessage(m)
}
func (traceBroker) MessageID(m *message.Message) string { return messageID(m) }
func (traceBroker) ScheduleEntry(uniqKey string) (int, int64, bool) {
	return retry.ScheduleEntry(uniqKey)
}
func (t traceBroker) DeadLetterStatus(group, id string) (dlq.StatusRecord, bool) {
	return t.b.deadLetters.Table().Get(group, id)
}
func (t traceBroker) Receipt(text string) (receipt.Receipt, error) {
	return t.b.receipts().Decode(text)
}
func (t traceBroker) AwaitDispatch(ctx context.Context) error { return t.b.awaitDispatch(ctx) }
func (traceBroker) StoreErr(err error) error                  { return mapStoreErr(err) }
