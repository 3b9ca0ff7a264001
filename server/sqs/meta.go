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
// facade: every change appends the whole table, as one JSON message with
// a sequence number one higher than the last, to queue 0 of a one-queue
// meta topic, and the table in force is the newest message there (read
// at the first request after a start). A topic without an entry (a queue
// made through the native API as a topic "sqs_<name>") has the default
// attributes.
//
// The meta topics keep their messages for metaRetentionHours, so that
// retention never takes the table in force however long the server was
// down. But a topic's longer retention keeps every CommitLog segment from
// its oldest message on, whatever else they hold; so the table alternates
// between two topics (metaTopics): at least every metaRotateInterval the
// leader writes the table to the other one and then deletes the one in
// use (rotateIfDue), so that the segments the table holds back are those
// of the last interval only. A crash between the two steps leaves both
// topics; the table with the higher sequence number is the one in force.

// metaRetentionHours is the meta topics' retention (ten years).
const metaRetentionHours = 10 * 365 * 24

// metaRotateInterval is how often the table moves to the other meta
// topic (and the first time soon after a start).
const metaRotateInterval = time.Hour

// metaTopics are the two topics the table alternates between; a data dir
// of an older version has metaTopic only.
var metaTopics = [2]string{metaTopic, metaTopicAlt}

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
	Version int `json:"v"`
	// Seq numbers the tables (0 in those of older versions).
	Seq    int64                 `json:"seq,omitempty"`
	Queues map[string]*queueMeta `json:"queues"`
}

// metaStore is the table of queueMeta.
type metaStore struct {
	b   Broker
	now func() time.Time
	log zerolog.Logger

	mu     sync.Mutex
	loaded bool
	queues map[queueName]*queueMeta
	// current indexes metaTopics: the topic of the table in force (-1:
	// none yet); seq is that table's sequence number; rotatedAt when it
	// was last moved (zero after a start).
	current   int
	seq       int64
	rotatedAt time.Time
}

// loadLocked reads the newest table once (m.mu held): of the two meta
// topics, the table with the higher sequence number.
func (m *metaStore) loadLocked(ctx context.Context) error {
	if m.loaded {
		return nil
	}
	current, best := -1, metaSnapshot{}
	var errs []error
	for i, topic := range metaTopics {
		snap, found, err := m.newestSnapshot(ctx, topic)
		switch {
		case err != nil:
			errs = append(errs, err)
		case found && (current < 0 || snap.Seq > best.Seq):
			current, best = i, snap
		}
	}
	if len(errs) > 0 && (current < 0 || len(errs) == len(metaTopics)) {
		return errors.Join(errs...)
	}
	for _, err := range errs {
		m.log.Warn().Err(err).Msg("one of the SQS queue table's topics holds no table: the other one's is in force")
	}
	queues := map[queueName]*queueMeta{}
	for name, qm := range best.Queues {
		if q, err := parseQueueName(name); err == nil && qm != nil {
			queues[q] = qm
		}
	}
	m.queues, m.current, m.seq, m.loaded = queues, current, best.Seq, true
	return nil
}

// maxMetaScan bounds how many messages of a meta topic, newest first,
// loadLocked reads to find a table.
const maxMetaScan = 1024

// newestSnapshot is the newest message of the meta topic that is a table
// (found false: the topic is missing or empty). Anything else there — a
// message sent to the topic through the REST API — is skipped with a
// warning, so that it cannot take the endpoint down; a table it cannot
// find in the newest maxMetaScan messages is an error (answered 500 until
// the topic holds one again), never an empty table that the next change
// would write over the lost one.
func (m *metaStore) newestSnapshot(ctx context.Context, topic string) (snap metaSnapshot, found bool, err error) {
	status, err := m.b.TopicStatus(ctx, topic)
	if errors.Is(err, broker.ErrTopicNotFound) || (err == nil && (len(status) == 0 || status[0].MaxOffset <= status[0].MinOffset)) {
		return snap, false, nil
	}
	if err != nil {
		return snap, false, fmt.Errorf("read the SQS queue table: %w", err)
	}
	low, high := status[0].MinOffset, status[0].MaxOffset
	for off := high - 1; off >= low && off >= high-maxMetaScan; off-- {
		msgs, _, err := m.b.ReadQueue(ctx, topic, 0, off, 1)
		if err != nil {
			return snap, false, fmt.Errorf("read the SQS queue table: %w", err)
		}
		if len(msgs) != 1 || msgs[0].QueueOffset != off {
			continue // expired or quarantined: look further back
		}
		if err := json.Unmarshal(msgs[0].Body, &snap); err != nil || snap.Version != 1 || snap.Queues == nil {
			m.log.Warn().Int64("offset", off).Str("topic", topic).
				Msg("a message of the SQS queue table's topic is no table (sent through the REST API?): skipped; only the SQS endpoint writes this topic")
			snap = metaSnapshot{}
			continue
		}
		return snap, true, nil
	}
	return snap, false, fmt.Errorf("%w: none of the newest %d messages of topic %s is an SQS queue table", errNoTable, maxMetaScan, topic)
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

// persist appends the table queues to the meta topic in use (creating it
// first).
func (m *metaStore) persist(ctx context.Context, queues map[queueName]*queueMeta) error {
	current := max(m.current, 0)
	if err := m.write(ctx, metaTopics[current], queues, m.seq+1); err != nil {
		return err
	}
	m.current, m.seq = current, m.seq+1
	return nil
}

// write appends the table queues numbered seq to topic (creating it first).
func (m *metaStore) write(ctx context.Context, topic string, queues map[queueName]*queueMeta, seq int64) error {
	if _, err := m.b.GetTopic(ctx, topic); errors.Is(err, broker.ErrTopicNotFound) {
		if _, _, err := m.b.PutTopic(ctx, broker.TopicConfig{Name: topic, Queues: 1, RetentionHours: metaRetentionHours}); err != nil {
			return fmt.Errorf("create the SQS queue table's topic %s: %w", topic, err)
		}
	} else if err != nil {
		return err
	}
	snap := metaSnapshot{Version: 1, Seq: seq, Queues: make(map[string]*queueMeta, len(queues))}
	for q, qm := range queues {
		snap.Queues[string(q)] = qm
	}
	body, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	if _, err := m.b.Send(ctx, topic, []broker.SendMessage{{Body: body}}); err != nil {
		return fmt.Errorf("write the SQS queue table: %w", err)
	}
	return nil
}

// rotateIfDue moves the table to the other meta topic when the one in use
// has held it for metaRotateInterval (or since a start): it writes the
// table there, then deletes the topic in use, whose messages no longer
// hold CommitLog segments back. It reports whether it moved the table.
func (m *metaStore) rotateIfDue(ctx context.Context) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.loadLocked(ctx); err != nil {
		return false, err
	}
	now := m.now()
	if m.current < 0 || (!m.rotatedAt.IsZero() && now.Sub(m.rotatedAt) < metaRotateInterval) {
		return false, nil
	}
	next := 1 - m.current
	if err := m.write(ctx, metaTopics[next], m.queues, m.seq+1); err != nil {
		return false, err
	}
	old := metaTopics[m.current]
	m.current, m.seq, m.rotatedAt = next, m.seq+1, now
	if err := m.b.DeleteTopic(ctx, old); err != nil && !errors.Is(err, broker.ErrTopicNotFound) {
		// The table is in force on the new topic (the higher sequence
		// number); the old one goes at the next rotation.
		return true, fmt.Errorf("delete the SQS queue table's old topic %s: %w", old, err)
	}
	return true, nil
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
