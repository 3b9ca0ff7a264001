package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker"
)

// The queues' attributes and tags that have no place in the topic's or
// the group's configuration are kept by the endpoint itself, through the
// facade: every change appends the whole table, as one JSON message, to
// queue 0 of the one-queue topic metaTopic, and the table in force is
// the newest message there (read at the first request after a start).
// The topic keeps its messages for metaRetentionHours, so retention never
// takes the newest one. A topic without an entry (a queue made through
// the native API as a topic "sqs_<name>") has the default attributes.

// metaRetentionHours is the meta topic's retention (ten years).
const metaRetentionHours = 10 * 365 * 24

// queueMeta is what the endpoint keeps of one queue.
type queueMeta struct {
	// Attrs are the settable attributes, in their canonical text.
	Attrs map[string]string `json:"attrs,omitempty"`
	// Tags are the queue's tags.
	Tags map[string]string `json:"tags,omitempty"`
	// Created and Modified are Unix seconds.
	Created  int64 `json:"created"`
	Modified int64 `json:"modified"`
	// DLQCursor and DLQMoved are the redrive mover's position in the
	// queue's dead letters (redrive.go): the cursor of ListDeadLetters
	// and the ids it copied at or past it.
	DLQCursor string   `json:"dlqCursor,omitempty"`
	DLQMoved  []string `json:"dlqMoved,omitempty"`
	// Moves are the queue's last message move tasks as a source, oldest
	// first (movetasks.go).
	Moves []moveRecord `json:"moves,omitempty"`
}

func (m *queueMeta) clone() *queueMeta {
	c := *m
	c.Attrs = maps.Clone(m.Attrs)
	c.Tags = maps.Clone(m.Tags)
	c.DLQMoved = slices.Clone(m.DLQMoved)
	c.Moves = slices.Clone(m.Moves)
	return &c
}

// metaSnapshot is the body of a meta message.
type metaSnapshot struct {
	Version int                   `json:"v"`
	Queues  map[string]*queueMeta `json:"queues"`
}

// metaStore is the table of queueMeta.
type metaStore struct {
	b   Broker
	now func() time.Time
	log zerolog.Logger

	mu     sync.Mutex
	loaded bool
	queues map[queueName]*queueMeta
}

// loadLocked reads the newest table once (m.mu held).
func (m *metaStore) loadLocked(ctx context.Context) error {
	if m.loaded {
		return nil
	}
	queues := map[queueName]*queueMeta{}
	status, err := m.b.TopicStatus(ctx, metaTopic)
	switch {
	case errors.Is(err, broker.ErrTopicNotFound):
	case err != nil:
		return fmt.Errorf("read the SQS queue table: %w", err)
	case len(status) > 0 && status[0].MaxOffset > status[0].MinOffset:
		snap, err := m.newestSnapshot(ctx, status[0].MinOffset, status[0].MaxOffset)
		if err != nil {
			return err
		}
		for name, qm := range snap.Queues {
			if q, err := parseQueueName(name); err == nil && qm != nil {
				queues[q] = qm
			}
		}
	}
	m.queues, m.loaded = queues, true
	return nil
}

// maxMetaScan bounds how many messages of the meta topic, newest first,
// loadLocked reads to find a table.
const maxMetaScan = 1024

// newestSnapshot is the newest message of the meta topic (queue offsets
// min to max, exclusive) that is a table. Anything else there — a message
// sent to the topic through the REST API — is skipped with a warning, so
// that it cannot take the endpoint down; a table it cannot find in the
// newest maxMetaScan messages is an error (answered 500 until the topic
// holds one again), never an empty table that the next change would
// write over the lost one.
func (m *metaStore) newestSnapshot(ctx context.Context, min, max int64) (metaSnapshot, error) {
	for off := max - 1; off >= min && off >= max-maxMetaScan; off-- {
		msgs, _, err := m.b.ReadQueue(ctx, metaTopic, 0, off, 1)
		if err != nil {
			return metaSnapshot{}, fmt.Errorf("read the SQS queue table: %w", err)
		}
		if len(msgs) != 1 || msgs[0].QueueOffset != off {
			continue // expired or quarantined: look further back
		}
		var snap metaSnapshot
		if err := json.Unmarshal(msgs[0].Body, &snap); err != nil || snap.Version != 1 || snap.Queues == nil {
			m.log.Warn().Int64("offset", off).Str("topic", metaTopic).
				Msg("a message of the SQS queue table's topic is no table (sent through the REST API?): skipped; only the SQS endpoint writes this topic")
			continue
		}
		return snap, nil
	}
	return metaSnapshot{}, fmt.Errorf("%w: none of the newest %d messages of topic %s is an SQS queue table", errNoTable, maxMetaScan, metaTopic)
}

// errNoTable: the meta topic holds messages but no table among the newest.
var errNoTable = errors.New("sqs: the queue table is missing")

// get returns a copy of q's entry (nil without one).
func (m *metaStore) get(ctx context.Context, q queueName) (*queueMeta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(ctx); err != nil {
		return nil, err
	}
	if qm := m.queues[q]; qm != nil {
		return qm.clone(), nil
	}
	return nil, nil
}

// all returns a copy of every entry.
func (m *metaStore) all(ctx context.Context) (map[queueName]*queueMeta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(ctx); err != nil {
		return nil, err
	}
	out := make(map[queueName]*queueMeta, len(m.queues))
	for q, qm := range m.queues {
		out[q] = qm.clone()
	}
	return out, nil
}

// update replaces q's entry with what fn makes of a copy of it (nil: a
// fresh one; fn returning nil removes it) and persists the table before
// it is in force.
func (m *metaStore) update(ctx context.Context, q queueName, fn func(cur *queueMeta) (*queueMeta, error)) (*queueMeta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(ctx); err != nil {
		return nil, err
	}
	var cur *queueMeta
	if qm := m.queues[q]; qm != nil {
		cur = qm.clone()
	}
	next, err := fn(cur)
	if err != nil {
		return nil, err
	}
	queues := maps.Clone(m.queues)
	if next == nil {
		if cur == nil {
			return nil, nil
		}
		delete(queues, q)
	} else {
		queues[q] = next
	}
	if err := m.persist(ctx, queues); err != nil {
		return nil, err
	}
	m.queues = queues
	if next == nil {
		return nil, nil
	}
	return next.clone(), nil
}

// persist appends the table queues to the meta topic (creating it first).
func (m *metaStore) persist(ctx context.Context, queues map[queueName]*queueMeta) error {
	if _, err := m.b.GetTopic(ctx, metaTopic); errors.Is(err, broker.ErrTopicNotFound) {
		if _, _, err := m.b.PutTopic(ctx, broker.TopicConfig{Name: metaTopic, Queues: 1, RetentionHours: metaRetentionHours}); err != nil {
			return fmt.Errorf("create the SQS queue table's topic %s: %w", metaTopic, err)
		}
	} else if err != nil {
		return err
	}
	snap := metaSnapshot{Version: 1, Queues: make(map[string]*queueMeta, len(queues))}
	for q, qm := range queues {
		snap.Queues[string(q)] = qm
	}
	body, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	if _, err := m.b.Send(ctx, metaTopic, []broker.SendMessage{{Body: body}}); err != nil {
		return fmt.Errorf("write the SQS queue table: %w", err)
	}
	return nil
}

// sources are the queues whose RedrivePolicy names target (every queue
// with a RedrivePolicy when target is "").
func (m *metaStore) sources(ctx context.Context, target queueName) ([]queueName, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(ctx); err != nil {
		return nil, err
	}
	var out []queueName
	for q, qm := range m.queues {
		p, _, err := parseRedrivePolicy(qm.Attrs[attrRedrivePolicy])
		if err != nil || p.MaxReceiveCount == 0 || (target != "" && p.target() != target) {
			continue
		}
		out = append(out, q)
	}
	slices.Sort(out)
	return out, nil
}
