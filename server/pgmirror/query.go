package pgmirror

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// Read models for the admin API. They read what the mirror has committed,
// which may trail the log by the mirror's lag.

// MaxListLimit caps one page of ListDeadLetters (the broker's own limit).
const MaxListLimit = 500

// ListDeadLetters lists a group's dead letters matching f, oldest first
// (by queue offset in %DLQ%<group>), starting at cursor ("" = the
// beginning); next is the cursor of the next page ("" = no more). The
// signature and the cursor (a decimal queue offset) are those of
// (*broker.Broker).ListDeadLetters, so the API can use either. Bodies are
// not mirrored: Body is always nil.
func (m *Mirror) ListDeadLetters(ctx context.Context, group string, f broker.DLQFilter, cursor string, limit int) ([]broker.DeadLetter, string, error) {
	if limit <= 0 || limit > MaxListLimit {
		limit = 100
	}
	var from int64
	if cursor != "" {
		c, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || c < 0 {
			return nil, "", fmt.Errorf("%w: %q", ErrBadCursor, cursor)
		}
		from = c
	}
	var sql strings.Builder
	sql.WriteString(`SELECT message_id, dlq_offset, origin_message_id, original_topic, reconsume_times, last_reason,
       first_failed_at, dead_at, status, status_at, attempts, tag, keys, properties
FROM dead_letters
WHERE group_name = $1 AND dead_at IS NOT NULL AND dlq_offset >= $2`)
	args := []any{group, from}
	arg := func(cond string, v any) {
		args = append(args, v)
		fmt.Fprintf(&sql, " AND "+cond, len(args))
	}
	if f.OriginalTopic != "" {
		arg("original_topic = $%d", f.OriginalTopic)
	}
	if !f.From.IsZero() {
		arg("dead_at >= $%d", f.From)
	}
	if !f.To.IsZero() {
		arg("dead_at <= $%d", f.To)
	}
	if f.ReasonContains != "" {
		arg("strpos(lower(last_reason), lower($%d)) > 0", f.ReasonContains)
	}
	if f.Status != "" {
		arg("status = $%d", f.Status)
	}
	args = append(args, limit+1)
	fmt.Fprintf(&sql, " ORDER BY dlq_offset, message_id LIMIT $%d", len(args))

	rows, err := m.pool.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, "", fmt.Errorf("list dead letters: %w", err)
	}
	var (
		out      []broker.DeadLetter
		offsets  []int64
		d        broker.DeadLetter
		off      int64
		statusAt *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&d.MessageID, &off, &d.OriginMessageID, &d.OriginalTopic, &d.ReconsumeTimes, &d.Reason,
		&d.FirstFailedAt, &d.DeadAt, &d.Status, &statusAt, &d.Attempts, &d.Tag, &d.Keys, &d.Properties}, func() error {
		d.FirstFailedAt, d.DeadAt = d.FirstFailedAt.UTC(), d.DeadAt.UTC()
		if statusAt != nil {
			d.StatusAt = statusAt.UTC()
		}
		out = append(out, d)
		offsets = append(offsets, off)
		d = broker.DeadLetter{}
		statusAt = nil
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list dead letters: %w", err)
	}
	if len(out) > limit {
		return out[:limit], strconv.FormatInt(offsets[limit], 10), nil
	}
	return out, "", nil
}

// Offset is one mirrored consumer offset.
type Offset struct {
	// Topic and QueueID name the queue (QueueID -1: the topic's view of
	// the group's retry topic).
	Topic   string
	QueueID int32
	// Committed is the mirrored committed offset.
	Committed int64
	// Generation is the generation of the last explicit commit.
	Generation uint32
	// AckedAbove counts acknowledged offsets above Committed.
	AckedAbove int
	// Exact is false for a key re-seeded from live progress (see package doc).
	Exact bool
	// UpdatedAt is when the mirror last wrote the row.
	UpdatedAt time.Time
}

// Offsets lists a group's mirrored consumer offsets, by topic and queue,
// for showing next to the live ones (broker Progress): its own, or with a
// client id those of that consumer instance of a broadcasting group.
func (m *Mirror) Offsets(ctx context.Context, group string) ([]Offset, error) {
	return m.InstanceOffsets(ctx, group, "")
}

// InstanceOffsets is Offsets of one consumer instance of a broadcasting
// group (client "": the group's own).
func (m *Mirror) InstanceOffsets(ctx context.Context, group, client string) ([]Offset, error) {
	rows, err := m.pool.Query(ctx, `SELECT topic, queue_id, committed_offset, generation, cardinality(acked_above), exact, updated_at
FROM consumer_offsets WHERE group_name = $1 AND client_id = $2 ORDER BY topic, queue_id`, group, client)
	if err != nil {
		return nil, fmt.Errorf("mirrored offsets: %w", err)
	}
	var (
		out []Offset
		o   Offset
		gen int64
	)
	_, err = pgx.ForEachRow(rows, []any{&o.Topic, &o.QueueID, &o.Committed, &gen, &o.AckedAbove, &o.Exact, &o.UpdatedAt}, func() error {
		o.Generation = uint32(gen)
		o.UpdatedAt = o.UpdatedAt.UTC()
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mirrored offsets: %w", err)
	}
	return out, nil
}

// InstancesOffsets lists the mirrored offsets of every consumer instance
// of a broadcasting group, by client id.
func (m *Mirror) InstancesOffsets(ctx context.Context, group string) (map[string][]Offset, error) {
	rows, err := m.pool.Query(ctx, `SELECT client_id, topic, queue_id, committed_offset, generation, cardinality(acked_above), exact, updated_at
FROM consumer_offsets WHERE group_name = $1 AND client_id <> '' ORDER BY client_id, topic, queue_id`, group)
	if err != nil {
		return nil, fmt.Errorf("mirrored offsets: %w", err)
	}
	var (
		out    = map[string][]Offset{}
		client string
		o      Offset
		gen    int64
	)
	_, err = pgx.ForEachRow(rows, []any{&client, &o.Topic, &o.QueueID, &o.Committed, &gen, &o.AckedAbove, &o.Exact, &o.UpdatedAt}, func() error {
		o.Generation = uint32(gen)
		o.UpdatedAt = o.UpdatedAt.UTC()
		out[client] = append(out[client], o)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mirrored offsets: %w", err)
	}
	return out, nil
}
