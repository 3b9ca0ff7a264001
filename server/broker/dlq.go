package broker

import (
	"context"

	"github.com/mqgate/mqgate/server/broker/dlq"
)

// Dead letters you can work with: the facade of the dead-letter family,
// server/broker/dlq, which holds the status records' codec, the status
// table and its apply, following rmq_sys_DLQ into it, the DeadLetter view,
// the requests (list, get, resend with its pacer, discard), retention's
// carry of dead letters and the projection feed
// (server/broker/dlq/doc.go). What stays here: the exported requests,
// which check that the broker is open and delegate; the family's Config,
// filled in from the broker (its store, clock and log, the registry's word
// on a group and a topic, the topic gate, copyOf, the broker's own
// properties, the trace's note of a carried letter, the sentinels); and
// the entry points the broker's other files call. The failure path that
// writes a dead letter is the retry family's (retry.go), fed by package consume's send-back.

// dlqStatusTopic carries dead-letter status changes.
const dlqStatusTopic = dlq.StatusTopic

// Dead-letter statuses.
const (
	DLQDead      = dlq.Dead
	DLQResent    = dlq.Resent
	DLQDiscarded = dlq.Discarded
)

// DeadLetter is one message in a group's dead-letter queue (package dlq).
type DeadLetter = dlq.Letter

// DLQFilter selects dead letters; zero fields match everything.
type DLQFilter = dlq.Filter

// ResendResult reports a resend (package dlq).
type ResendResult = dlq.ResendResult

// newDeadLetters is the dead-letter family over b's store (Open makes it
// before the recovery, which follows rmq_sys_DLQ: replayDLQStatuses).
func (b *Broker) newDeadLetters() *dlq.Service {
	return dlq.New(dlq.Config{
		Store:           b.store,
		Clock:           b.clock,
		Log:             b.log,
		Names:           dlq.Names{RetryPrefix: retryPrefix, Attempts: propAttempts, OrderSeq: propOrderSeq},
		InvalidArgument: ErrInvalidArgument,
		MessageNotFound: ErrMessageNotFound,
		StoreError:      mapStoreErr,
		Group: func(ctx context.Context, name string) error {
			_, err := b.GetGroup(ctx, name)
			return err
		},
		Topic: func(ctx context.Context, name string) error {
			_, err := b.GetTopic(ctx, name)
			return err
		},
		Gate:        b.topicGate.RLocker(), // see topicdelete.go
		Copy:        copyOf,
		Reserved:    isSystemProperty,
		NoteCarried: b.noteCarried,
	})
}

// replayDLQStatuses rebuilds the status table from rmq_sys_DLQ at open;
// the follower goes on from there (follow.go).
func (b *Broker) replayDLQStatuses(ctx context.Context) error { return b.deadLetters.Follow(ctx) }

// ListDeadLetters lists a group's dead letters matching f, oldest first,
// starting at cursor ("" = the beginning); next is the cursor of the next
// page ("" = no more).
func (b *Broker) ListDeadLetters(ctx context.Context, group string, f DLQFilter, cursor string, limit int) ([]DeadLetter, string, error) {
	return b.deadLetters.List(ctx, group, f, cursor, limit)
}

// GetDeadLetter returns one dead letter with its body.
func (b *Broker) GetDeadLetter(ctx context.Context, group, id string) (DeadLetter, error) {
	return b.deadLetters.Get(ctx, group, id)
}

// ResendDeadLetters delivers dead letters again to the group (through its
// retry topic, original topic restored, a fresh attempt count,
// ORIGIN_MESSAGE_ID kept): the ones named by ids, or, when ids is empty,
// every dead one matching f. Other groups of the original topic do not see
// them again. It is paced (package dlq's Resend).
func (b *Broker) ResendDeadLetters(ctx context.Context, group string, ids []string, f *DLQFilter) (ResendResult, error) {
	if b.closed.Load() {
		return ResendResult{}, ErrShuttingDown
	}
	return b.deadLetters.Resend(ctx, group, ids, f)
}

// DiscardDeadLetter marks a dead letter discarded.
func (b *Broker) DiscardDeadLetter(ctx context.Context, group, id string) error {
	if b.closed.Load() {
		return ErrShuttingDown
	}
	return b.deadLetters.Discard(ctx, group, id)
}

// carryDeadLetters runs before retention deletes the CommitLog below cut
// (retention.go): every dead letter still "dead" there is re-appended to
// its DLQ, keeping its identity (DLQ_ID), death time and history (package
// dlq's Carry).
func (b *Broker) carryDeadLetters(cut int64) error { return b.deadLetters.Carry(cut) }
