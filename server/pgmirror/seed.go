package pgmirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// Seeder is what SeedOffsets needs from the broker. *broker.Broker
// satisfies it.
type Seeder interface {
	GetGroup(ctx context.Context, name string) (broker.GroupConfig, error)
	PutGroup(ctx context.Context, g broker.GroupConfig) (broker.GroupConfig, bool, error)
	GetTopic(ctx context.Context, name string) (broker.TopicConfig, error)
	PutTopic(ctx context.Context, t broker.TopicConfig) (broker.TopicConfig, bool, error)
	Progress(ctx context.Context, group string) ([]broker.QueueProgress, error)
	CommitOffsets(ctx context.Context, group string, commits []broker.OffsetCommit) error
}

// SeedResult reports a SeedOffsets run, in queues.
type SeedResult struct {
	// Committed queues got the mirrored offset.
	Committed int
	// Clamped queues got the end of the queue instead: the log holds
	// fewer messages than the mirror had seen consumed (a restored backup).
	Clamped int
	// UpToDate queues were already at or past the mirrored offset
	// (seeding only moves offsets forward).
	UpToDate int
	// Skipped queues could not be seeded (a topic with fewer queues, or an
	// offset the broker refused); each is logged.
	Skipped int
}

// commitChunk stays under the broker's batch limit.
const commitChunk = 500

// SeedOffsets is the recovery aid for a fresh or restored data dir: it
// commits the mirrored consumer offsets (queue ids >= 0) into b, creating
// missing groups and topics, moving offsets forward only and never past
// the end of a queue, and then resets the offsets projection so that the
// mirror follows the new log from its start (dead letters are kept; their
// upserts are idempotent). Call it before Start, once; it is harmless on
// an intact data dir (every queue is up to date).
func (m *Mirror) SeedOffsets(ctx context.Context, b Seeder) (SeedResult, error) {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	var res SeedResult
	if !m.migrated {
		if _, err := migratePool(ctx, m.pool, "up"); err != nil {
			return res, err
		}
		m.migrated = true
	}
	type row struct {
		group, client, topic string
		queue                int32
		committed            int64
	}
	rows, err := m.pool.Query(ctx, `SELECT group_name, client_id, topic, queue_id, committed_offset FROM consumer_offsets
WHERE queue_id >= 0 ORDER BY group_name, client_id, topic, queue_id`)
	if err != nil {
		return res, fmt.Errorf("seed: read mirrored offsets: %w", err)
	}
	var r row
	type owner struct{ group, client string } // a group's own rows (client ""), or a consumer instance's
	byOwner := map[owner][]row{}
	var owners []owner
	if _, err := pgx.ForEachRow(rows, []any{&r.group, &r.client, &r.topic, &r.queue, &r.committed}, func() error {
		o := owner{r.group, r.client}
		if _, ok := byOwner[o]; !ok {
			owners = append(owners, o)
		}
		byOwner[o] = append(byOwner[o], r)
		return nil
	}); err != nil {
		return res, fmt.Errorf("seed: read mirrored offsets: %w", err)
	}

	for _, o := range owners {
		g, rs := o.group, byOwner[o]
		// A consumer instance's offsets go to that instance (registered
		// by the commit) of its broadcasting group, which must exist as
		// one: the mirror does not know a missing group's mode.
		ctx := broker.WithClient(ctx, o.client)
		if o.client != "" {
			if cfg, err := b.GetGroup(ctx, g); err != nil || cfg.ConsumeMode != broker.ConsumeBroadcasting {
				m.log.Warn().Str("group", g).Str("client", o.client).Msg("seed: the consumer instance's group is missing or not broadcasting; its offsets are skipped")
				res.Skipped += len(rs)
				continue
			}
		}
		queues := map[string]int{}
		var topics []string
		for _, r := range rs {
			if _, ok := queues[r.topic]; !ok {
				topics = append(topics, r.topic)
			}
			queues[r.topic] = max(queues[r.topic], int(r.queue)+1)
		}
		for _, t := range topics {
			if err := ensureTopic(ctx, b, t, queues[t]); err != nil {
				return res, err
			}
		}
		if err := ensureGroup(ctx, b, g, topics); err != nil {
			return res, err
		}
		live, err := b.Progress(ctx, g)
		if err != nil {
			return res, fmt.Errorf("seed: progress of %s: %w", g, err)
		}
		type qk struct {
			topic string
			queue int32
		}
		known := map[qk]broker.QueueProgress{}
		for _, p := range live {
			known[qk{p.Topic, p.QueueID}] = p
		}
		var commits []broker.OffsetCommit
		for _, r := range rs {
			p, ok := known[qk{r.topic, r.queue}]
			if !ok {
				m.log.Warn().Str("group", g).Str("topic", r.topic).Int32("queue", r.queue).Msg("seed: queue not in the broker's progress; skipped")
				res.Skipped++
				continue
			}
			target := min(r.committed, p.BrokerOffset)
			switch {
			case target <= p.ConsumerOffset:
				res.UpToDate++
				continue
			case target < r.committed:
				res.Clamped++
			default:
				res.Committed++
			}
			commits = append(commits, broker.OffsetCommit{Topic: r.topic, QueueID: r.queue, Offset: target})
		}
		for len(commits) > 0 {
			n := min(len(commits), commitChunk)
			if err := b.CommitOffsets(ctx, g, commits[:n]); err != nil {
				return res, fmt.Errorf("seed: commit offsets of %s%s: %w", g, instanceSuffix(o.client), err)
			}
			commits = commits[n:]
		}
	}

	// The projection now describes the old log: start it over on this one.
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("seed: reset mirror: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `DELETE FROM consumer_offsets`); err != nil {
		return res, fmt.Errorf("seed: reset mirror: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM mirror_cursors`); err != nil {
		return res, fmt.Errorf("seed: reset mirror: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("seed: reset mirror: %w", err)
	}
	m.st = nil
	m.offsetCursor.Store(-1)
	m.log.Info().Int("committed", res.Committed).Int("clamped", res.Clamped).Int("up_to_date", res.UpToDate).
		Int("skipped", res.Skipped).Msg("consumer offsets seeded from PostgreSQL")
	return res, nil
}

func ensureTopic(ctx context.Context, b Seeder, name string, queues int) error {
	_, err := b.GetTopic(ctx, name)
	if errors.Is(err, broker.ErrTopicNotFound) {
		_, _, err = b.PutTopic(ctx, broker.TopicConfig{Name: name, Queues: queues})
	}
	if err != nil {
		return fmt.Errorf("seed: topic %s: %w", name, err)
	}
	return nil
}

// ensureGroup creates a missing group subscribed to topics (so that its
// progress lists their queues).
func ensureGroup(ctx context.Context, b Seeder, name string, topics []string) error {
	_, err := b.GetGroup(ctx, name)
	if errors.Is(err, broker.ErrGroupNotFound) {
		g := broker.GroupConfig{Name: name}
		for _, t := range topics {
			g.Subscriptions = append(g.Subscriptions, broker.Subscription{Topic: t})
		}
		_, _, err = b.PutGroup(ctx, g)
	}
	if err != nil {
		return fmt.Errorf("seed: group %s: %w", name, err)
	}
	return nil
}

// instanceSuffix names a consumer instance in messages ("" for a group's own).
func instanceSuffix(client string) string {
	if client == "" {
		return ""
	}
	return " (consumer instance " + client + ")"
}
