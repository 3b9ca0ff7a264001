package broker

import (
	"context"
	"errors"
	"time"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/storage/offset"
)

// Projection feeds: read-only access to the system streams that durable
// projections (the PostgreSQL mirror) follow. Each stream is a queue in
// the CommitLog with dense offsets, so a projection keeps one cursor per
// stream, stores it in the same transaction as what it derived, and after
// any crash of either side resumes from it: exactly-once. Nothing here is
// fed by in-memory callbacks.

// OffsetRecords reads the progress records (acks and commits; see package
// offset) of queue offsets [from, from+max). Apply them, in order, to an
// offset.Table to follow every group's committed offset. next is the
// cursor after the last record read.
func (b *Broker) OffsetRecords(ctx context.Context, from int64, max int) (recs []offset.Record, next int64, err error) {
	if err := b.store.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return nil, from, mapStoreErr(err)
	}
	res, err := b.store.ReadQueue(offsetTopic, 0, from, max, nil)
	if err != nil {
		return nil, from, mapStoreErr(err)
	}
	for _, m := range res.Messages {
		rec, err := offset.DecodeRecord(m.Body)
		if err != nil {
			b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("projection: skipping undecodable offset record")
			continue
		}
		recs = append(recs, rec)
	}
	return recs, res.Next, nil
}

// OffsetRecordsMin is the oldest readable offset of the progress stream
// (retention deletes older records; a projection that fell below it must
// re-seed from Progress).
func (b *Broker) OffsetRecordsMin() int64 { return b.store.MinOffset(offsetTopic, 0) }

// DeadLetterArrivals reads a group's dead letters by DLQ queue offset
// [from, from+max), without bodies (package dlq's Arrivals).
func (b *Broker) DeadLetterArrivals(ctx context.Context, group string, from int64, max int) ([]DeadLetter, int64, error) {
	return b.deadLetters.Arrivals(ctx, group, from, max)
}

// DLQStatusChange is one dead letter resent or discarded.
type DLQStatusChange = dlq.StatusRecord

// DeadLetterStatusChanges reads dead-letter status changes by stream
// offset [from, from+max), in order (package dlq's StatusChanges).
func (b *Broker) DeadLetterStatusChanges(ctx context.Context, from int64, max int) ([]DLQStatusChange, int64, error) {
	return b.deadLetters.StatusChanges(ctx, from, max)
}

// ProjectionSignals returns two channels, for a projection to wait on
// instead of polling: progress is closed when the progress stream grows
// (acks, commits, and the failed deliveries that go with every new dead
// letter), deadLetters when a dead-letter status changes (resend,
// discard), which writes no progress record. Take them before reading, so
// that no growth is missed.
func (b *Broker) ProjectionSignals() (progress, deadLetters <-chan struct{}) {
	return b.store.NewDataSignal(offsetTopic), b.store.NewDataSignal(dlqStatusTopic)
}

// OffsetRecordsMax is the end of the progress stream (the next offset),
// including every record appended before the call.
func (b *Broker) OffsetRecordsMax() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = b.store.AwaitDispatch(ctx) // on timeout: a slightly stale end, which only delays the lag figure
	return b.store.MaxOffset(offsetTopic, 0)
}
