package pgmirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/storage/offset"
)

// Result reports one pass of the writer.
type Result struct {
	// Records is the number of progress records applied.
	Records int
	// Offsets is the number of consumer_offsets rows written: the keys the
	// records changed, coalesced.
	Offsets int
	// DeadLetters is the number of dead-letter arrivals mirrored.
	DeadLetters int
	// StatusChanges is the number of status changes mirrored (coalesced).
	StatusChanges int
	// ForgottenGroups is the number of deleted groups whose offsets were
	// removed.
	ForgottenGroups int
	// Rebased reports a re-seed from live progress (records lost to
	// retention).
	Rebased bool
	// More reports that a stream had more records than BatchSize: run
	// again at once.
	More bool
	// Took is how long the pass took.
	Took time.Duration
}

// Written reports whether the pass wrote anything.
func (r Result) Written() bool {
	return r.Offsets+r.DeadLetters+r.StatusChanges+r.ForgottenGroups > 0
}

// MarshalZerologObject logs a Result.
func (r Result) MarshalZerologObject(e *zerolog.Event) {
	e.Int("records", r.Records).Int("offsets", r.Offsets).Int("dead_letters", r.DeadLetters).
		Int("status_changes", r.StatusChanges).Int("forgotten_groups", r.ForgottenGroups).
		Bool("rebased", r.Rebased).Bool("more", r.More).Dur("took", r.Took)
}

// state is the mirror's copy of what PostgreSQL holds as of the last
// committed pass: cursors and the full offset state.
type state struct {
	cursors map[string]int64 // stream -> position; present = row exists
	queues  progressTable
}

// changes is what one pass writes.
type changes struct {
	cursors  map[string]int64 // streams whose position moved
	touched  map[offset.Key]struct{}
	forgot   map[string]bool // groups (deleted) and instances (idle) a forget record ended in this pass
	forget   []string        // the groups and instances whose rows go: forgot and groups no longer listed
	arrivals []arrival
	statuses map[dlqKey]broker.DLQStatusChange
}

type dlqKey struct{ group, messageID string }

// arrival is a dead letter with its queue offset in %DLQ%<group>.
type arrival struct {
	group  string
	offset int64
	letter broker.DeadLetter
}

// runOnce runs one pass: read a bounded batch of every stream from its
// cursor, fold it into the projection, and write rows and cursors in one
// transaction. Any failure drops the in-memory state so that the next
// pass reloads it from PostgreSQL (the transaction may or may not have
// committed).
func (m *Mirror) runOnce(ctx context.Context) (Result, error) {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	start := time.Now()
	passCtx, cancel := context.WithTimeout(ctx, m.cfg.PassTimeout)
	res, err := m.pass(passCtx)
	cancel()
	res.Took = time.Since(start)
	m.counters.passes.Add(1)
	if err != nil {
		m.counters.failures.Add(1)
		m.st = nil
		m.setHealth(err)
	} else {
		m.setHealth(nil)
		m.counters.records.Add(int64(res.Records))
		m.counters.deadLetters.Add(int64(res.DeadLetters))
		m.counters.statuses.Add(int64(res.StatusChanges))
		m.counters.rows.Add(int64(res.Offsets + res.DeadLetters + res.StatusChanges))
		if !res.More {
			m.caughtUpAt.Store(start.UnixNano())
		}
	}
	lagCtx, cancel := context.WithTimeout(ctx, time.Second)
	m.updateLag(lagCtx)
	cancel()
	return res, err
}

func (m *Mirror) pass(ctx context.Context) (Result, error) {
	var res Result
	if m.st == nil {
		if err := m.load(ctx); err != nil {
			return res, err
		}
	}
	st := m.st
	ch := changes{cursors: map[string]int64{}, touched: map[offset.Key]struct{}{}, statuses: map[dlqKey]broker.DLQStatusChange{}, forgot: map[string]bool{}}
	batch := m.cfg.BatchSize

	// Status changes first: each one's arrival is earlier in the log.
	from := st.cursors[streamDLQStatus]
	next, more, err := readStream(from, batch, func(pos int64, max int) (int64, error) {
		changes, next, err := m.src.DeadLetterStatusChanges(ctx, pos, max)
		for _, s := range changes {
			ch.statuses[dlqKey{s.Group, s.MessageID}] = s // the newest wins
		}
		return next, err
	})
	if err != nil {
		return res, m.readErr(streamDLQStatus, from, err)
	}
	m.move(&ch, &res, streamDLQStatus, from, next, more)

	// Progress records.
	from, known := st.cursors[streamOffsets]
	if oldest := m.src.OffsetRecordsMin(); (!known && oldest > 0) || from < oldest {
		if known {
			m.log.Error().Int64("cursor", from).Int64("oldest", oldest).
				Msg("progress records were deleted by retention before the mirror read them")
		}
		if from, err = m.rebase(ctx, st, ch.touched); err != nil {
			return res, err
		}
		res.Rebased, ch.cursors[streamOffsets] = true, from
	}
	next, more, err = readStream(from, batch, func(pos int64, max int) (int64, error) {
		recs, next, err := m.src.OffsetRecords(ctx, pos, max)
		for _, r := range recs {
			st.queues.apply(r, ch.touched, ch.forgot)
		}
		res.Records += len(recs)
		return next, err
	})
	if err != nil {
		return res, m.readErr(streamOffsets, from, err)
	}
	m.move(&ch, &res, streamOffsets, from, next, more)

	// Groups, listed after the records: a group that acked exists before
	// its record, so a key of an unlisted group means a deleted group.
	groups, err := m.src.ListGroups(ctx)
	if err != nil {
		return res, fmt.Errorf("list groups: %w", err)
	}
	if err := m.reconcileGroups(ctx, st, groups, &ch); err != nil {
		return res, err
	}

	// Dead letters: they arrive with a progress record, so read them when
	// the progress stream moved, while a previous read was cut short, and
	// on a periodic sweep.
	if res.Records > 0 || m.sweepDue || time.Now().After(m.nextSweep) {
		m.sweepDue = false
		for _, g := range groups {
			more, err := m.readArrivals(ctx, st, g.Name, &ch, &res)
			if err != nil {
				return res, err
			}
			m.sweepDue = m.sweepDue || more
		}
		m.nextSweep = time.Now().Add(m.cfg.SweepInterval)
	}

	res.Offsets = len(ch.touched)
	res.DeadLetters = len(ch.arrivals)
	res.StatusChanges = len(ch.statuses)
	res.ForgottenGroups = len(ch.forget)
	if len(ch.cursors) == 0 && !res.Written() {
		// Nothing to write: still check the database, so that Health
		// reports an outage before there is something to mirror.
		if err := m.pool.Ping(ctx); err != nil {
			return res, fmt.Errorf("ping: %w", err)
		}
		return res, nil
	}
	if err := m.write(ctx, st, &ch); err != nil {
		return res, err
	}
	for stream, pos := range ch.cursors {
		st.cursors[stream] = pos
	}
	if pos, ok := st.cursors[streamOffsets]; ok {
		m.offsetCursor.Store(pos)
	}
	return res, nil
}

// move records a stream's new position and whether it has more.
func (m *Mirror) move(ch *changes, res *Result, stream string, from, next int64, more bool) {
	if next != from {
		ch.cursors[stream] = next
	}
	res.More = res.More || more
}

// readStream reads a stream from from in chunks (a read may stop early,
// at a file boundary for one) until limit stream offsets are covered or a
// read finds nothing new. It returns the new position and whether the
// stream may have more.
func readStream(from int64, limit int, read func(pos int64, max int) (next int64, err error)) (int64, bool, error) {
	pos := from
	for pos-from < int64(limit) {
		next, err := read(pos, limit-int(pos-from))
		if err != nil {
			return pos, false, err
		}
		if next <= pos {
			return pos, false, nil
		}
		pos = next
	}
	return pos, true, nil
}

// readErr classifies a failed stream read: a cursor past the end of its
// stream means the log is not the one the mirror followed.
func (m *Mirror) readErr(stream string, from int64, err error) error {
	if stream == streamOffsets && from < m.src.OffsetRecordsMin() {
		return fmt.Errorf("read %s at %d: deleted by retention meanwhile (the next pass re-seeds): %w", stream, from, err)
	}
	if errors.Is(err, broker.ErrOffsetOutOfRange) {
		return fmt.Errorf("%w: stream %s at %d: %w", ErrLogBehind, stream, from, err)
	}
	return fmt.Errorf("read %s at %d: %w", stream, from, err)
}

// reconcileGroups forgets the offsets of deleted groups and lets loose
// (re-seeded) keys follow their live committed offset.
func (m *Mirror) reconcileGroups(ctx context.Context, st *state, groups []broker.GroupConfig, ch *changes) error {
	live := make(map[string]bool, len(groups))
	for _, g := range groups {
		live[g.Name] = true
	}
	loose := map[string]bool{}
	gone := map[string]bool{}
	for k, s := range st.queues {
		switch group, _ := splitKeyGroup(k.Group); {
		case !live[group]:
			gone[group] = true
			delete(st.queues, k)
			delete(ch.touched, k)
		case !s.exact:
			loose[k.Group] = true
		}
	}
	for g := range ch.forgot {
		gone[g] = true // deleted (and maybe created again) since the last pass
	}
	for g := range gone {
		ch.forget = append(ch.forget, g)
	}
	slices.Sort(ch.forget)
	for g := range loose {
		qs, err := m.liveProgress(ctx, g)
		if errors.Is(err, broker.ErrGroupNotFound) {
			continue // deleted since the listing; forgotten next pass
		}
		if err != nil {
			return fmt.Errorf("progress of %s: %w", g, err)
		}
		for _, q := range qs {
			k := offset.Key{Group: g, Topic: q.Topic, QueueID: q.QueueID}
			if s := st.queues[k]; s != nil && s.raise(q.ConsumerOffset) {
				ch.touched[k] = struct{}{}
			}
		}
	}
	return nil
}

// rebase re-seeds the offset state from the broker's live progress when
// the records the cursor points at are gone, and returns the new cursor:
// the end of the progress stream as of just before the live progress was
// read (re-applying the few records in between is harmless).
func (m *Mirror) rebase(ctx context.Context, st *state, touched map[offset.Key]struct{}) (int64, error) {
	head, err := m.offsetHead(ctx, m.src.OffsetRecordsMin())
	if err != nil {
		return 0, err
	}
	groups, err := m.src.ListGroups(ctx)
	if err != nil {
		return 0, fmt.Errorf("rebase: list groups: %w", err)
	}
	for k, s := range st.queues {
		s.exact = false
		touched[k] = struct{}{}
	}
	for _, g := range groups {
		names := []string{g.Name}
		if lister, ok := m.src.(instanceLister); ok && g.ConsumeMode == broker.ConsumeBroadcasting {
			instances, err := lister.Instances(ctx, g.Name)
			if err != nil && !errors.Is(err, broker.ErrGroupNotFound) {
				return 0, fmt.Errorf("rebase: instances of %s: %w", g.Name, err)
			}
			for _, in := range instances {
				names = append(names, g.Name+offset.InstanceSep+in.ClientID)
			}
		}
		for _, name := range names {
			qs, err := m.liveProgress(ctx, name)
			if errors.Is(err, broker.ErrGroupNotFound) {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("rebase: progress of %s: %w", name, err)
			}
			for _, q := range qs {
				k := offset.Key{Group: name, Topic: q.Topic, QueueID: q.QueueID}
				st.queues[k] = &queueState{committed: q.ConsumerOffset}
				touched[k] = struct{}{}
			}
		}
	}
	m.log.Warn().Int64("cursor", head).Int("keys", len(touched)).Msg("offsets re-seeded from live progress (inexact until each key's next commit)")
	return head, nil
}

// readArrivals reads a batch of one group's dead letters with their queue
// offsets, and reports whether the group's DLQ may have more.
func (m *Mirror) readArrivals(ctx context.Context, st *state, group string, ch *changes, res *Result) (bool, error) {
	stream := streamDLQPrefix + group
	from := st.cursors[stream]
	next, more, err := readStream(from, m.cfg.BatchSize, func(pos int64, max int) (int64, error) {
		letters, next, err := m.src.DeadLetterArrivals(ctx, group, pos, max)
		if err != nil {
			return pos, err
		}
		if int64(len(letters)) == next-pos {
			for i, d := range letters {
				ch.arrivals = append(ch.arrivals, arrival{group: group, offset: pos + int64(i), letter: d})
			}
			return next, nil
		}
		// Some entries were skipped (their records are gone): read this
		// range one at a time to learn each letter's offset.
		for p := pos; p < next; {
			one, n, err := m.src.DeadLetterArrivals(ctx, group, p, 1)
			if err != nil {
				return p, err
			}
			if n <= p {
				return p, nil
			}
			if len(one) == 1 {
				ch.arrivals = append(ch.arrivals, arrival{group: group, offset: n - 1, letter: one[0]})
			}
			p = n
		}
		return next, nil
	})
	if err != nil {
		return false, m.readErr(stream, from, err)
	}
	m.move(ch, res, stream, from, next, more)
	return more, nil
}

// offsetHead finds the end of the progress stream (the next offset to be
// written), at or above lo.
func (m *Mirror) offsetHead(ctx context.Context, lo int64) (int64, error) {
	if mx, ok := m.src.(offsetRecordsMaxer); ok {
		return mx.OffsetRecordsMax(), nil
	}
	lo = max(lo, m.src.OffsetRecordsMin())
	exists := func(x int64) (bool, error) {
		_, next, err := m.src.OffsetRecords(ctx, x, 1)
		if errors.Is(err, broker.ErrOffsetOutOfRange) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return next > x, nil
	}
	// Gallop up from lo to a missing offset, then bisect: every offset
	// below lo exists, hi does not.
	hi := lo
	for step := int64(1); ; step *= 2 {
		ok, err := exists(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi+1, hi+step
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// updateLag measures how many progress records are not mirrored yet.
func (m *Mirror) updateLag(ctx context.Context) {
	cur := m.offsetCursor.Load()
	if cur < 0 {
		cur = m.src.OffsetRecordsMin()
	}
	head, err := m.offsetHead(ctx, cur)
	if err != nil {
		return
	}
	m.lagRecords.Store(max(head-cur, 0))
}

// load runs the migrations (once) and loads cursors and offset state from
// one consistent snapshot.
func (m *Mirror) load(ctx context.Context) error {
	if !m.migrated {
		if _, err := migratePool(ctx, m.pool, "up"); err != nil {
			return err
		}
		m.migrated = true
	}
	st := &state{cursors: map[string]int64{}, queues: progressTable{}}
	tx, err := m.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("load state: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `SELECT stream, position FROM mirror_cursors`)
	if err != nil {
		return fmt.Errorf("load cursors: %w", err)
	}
	var (
		stream   string
		position int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&stream, &position}, func() error {
		st.cursors[stream] = position
		return nil
	}); err != nil {
		return fmt.Errorf("load cursors: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT group_name, client_id, topic, queue_id, committed_offset, generation, acked_above, exact FROM consumer_offsets`)
	if err != nil {
		return fmt.Errorf("load offsets: %w", err)
	}
	var (
		k          offset.Key
		client     string
		committed  int64
		generation int64
		acked      []int64
		exact      bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&k.Group, &client, &k.Topic, &k.QueueID, &committed, &generation, &acked, &exact}, func() error {
		if client != "" {
			k.Group += offset.InstanceSep + client
		}
		s := &queueState{committed: committed, generation: uint32(generation), exact: exact}
		for _, off := range acked {
			if s.acked == nil {
				s.acked = make(map[int64]struct{}, len(acked))
			}
			s.acked[off] = struct{}{}
		}
		st.queues[k] = s
		return nil
	}); err != nil {
		return fmt.Errorf("load offsets: %w", err)
	}
	m.st = st
	if pos, ok := st.cursors[streamOffsets]; ok {
		m.offsetCursor.Store(pos)
	}
	return nil
}

// SQL of a pass. The status upsert creates a placeholder row when the
// arrival is not mirrored yet; the arrival upsert never touches status.
const (
	sqlMoveCursor   = `UPDATE mirror_cursors SET position = $2, updated_at = now() WHERE stream = $1 AND position = $3`
	sqlCreateCursor = `INSERT INTO mirror_cursors (stream, position) VALUES ($1, $2) ON CONFLICT (stream) DO NOTHING`
	sqlUpsertOffset = `INSERT INTO consumer_offsets
    (group_name, client_id, topic, queue_id, committed_offset, generation, acked_above, max_offset_seen, exact, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
ON CONFLICT (group_name, client_id, topic, queue_id) DO UPDATE SET
    committed_offset = EXCLUDED.committed_offset, generation = EXCLUDED.generation,
    acked_above = EXCLUDED.acked_above, max_offset_seen = EXCLUDED.max_offset_seen,
    exact = EXCLUDED.exact, updated_at = now()`
	sqlForgetGroups   = `DELETE FROM consumer_offsets WHERE group_name = ANY($1)`
	sqlForgetInstance = `DELETE FROM consumer_offsets WHERE group_name = $1 AND client_id = $2`
	sqlUpsertLetter   = `INSERT INTO dead_letters
    (group_name, message_id, dlq_offset, origin_message_id, original_topic, reconsume_times,
     last_reason, first_failed_at, dead_at, attempts, tag, keys, properties)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (group_name, message_id) DO UPDATE SET
    dlq_offset = EXCLUDED.dlq_offset, origin_message_id = EXCLUDED.origin_message_id,
    original_topic = EXCLUDED.original_topic, reconsume_times = EXCLUDED.reconsume_times,
    last_reason = EXCLUDED.last_reason, first_failed_at = EXCLUDED.first_failed_at,
    dead_at = EXCLUDED.dead_at, attempts = EXCLUDED.attempts, tag = EXCLUDED.tag,
    keys = EXCLUDED.keys, properties = EXCLUDED.properties, mirrored_at = now()`
	sqlUpsertStatus = `INSERT INTO dead_letters (group_name, message_id, status, status_at, resent_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (group_name, message_id) DO UPDATE SET
    status = EXCLUDED.status, status_at = EXCLUDED.status_at,
    resent_at = COALESCE(EXCLUDED.resent_at, dead_letters.resent_at), mirrored_at = now()`
)

// write applies one pass's changes and moves its cursors, in one
// transaction. Cursors move by compare-and-set on the positions the
// mirror loaded, so a concurrent writer fails the pass.
func (m *Mirror) write(ctx context.Context, st *state, ch *changes) error {
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()

	b := &pgx.Batch{}
	streams := make([]string, 0, len(ch.cursors))
	for s := range ch.cursors {
		streams = append(streams, s)
	}
	slices.Sort(streams) // a fixed lock order
	for _, s := range streams {
		if old, ok := st.cursors[s]; ok {
			b.Queue(sqlMoveCursor, s, ch.cursors[s], old)
		} else {
			b.Queue(sqlCreateCursor, s, ch.cursors[s])
		}
	}
	if len(ch.forget) > 0 { // before the upserts: a re-created group's rows follow its old ones' deletion
		var groups []string
		for _, name := range ch.forget {
			if group, client := splitKeyGroup(name); client != "" {
				b.Queue(sqlForgetInstance, group, client) // an idle instance
			} else {
				groups = append(groups, group) // with its instances' rows
			}
		}
		if len(groups) > 0 {
			b.Queue(sqlForgetGroups, groups)
		}
	}
	for k := range ch.touched {
		s := st.queues[k]
		group, client := splitKeyGroup(k.Group)
		b.Queue(sqlUpsertOffset, group, client, k.Topic, k.QueueID, s.committed, int64(s.generation), s.ackedAbove(), s.maxSeen(), s.exact)
	}
	for _, a := range ch.arrivals {
		d := a.letter
		attempts := d.Attempts
		if attempts == nil {
			attempts = []broker.Attempt{}
		}
		keys := d.Keys
		if keys == nil {
			keys = []string{}
		}
		props := d.Properties
		if props == nil {
			props = map[string]string{}
		}
		b.Queue(sqlUpsertLetter, a.group, d.MessageID, a.offset, d.OriginMessageID, d.OriginalTopic, d.ReconsumeTimes,
			d.Reason, d.FirstFailedAt, d.DeadAt, attempts, d.Tag, keys, props)
	}
	for _, s := range ch.statuses {
		var resentAt *time.Time
		if s.Status == broker.DLQResent {
			resentAt = &s.At
		}
		b.Queue(sqlUpsertStatus, s.Group, s.MessageID, s.Status, s.At, resentAt)
	}

	br := tx.SendBatch(ctx, b)
	for i := 0; i < b.Len(); i++ {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return fmt.Errorf("write: %w", err)
		}
		if i < len(streams) && tag.RowsAffected() != 1 {
			_ = br.Close()
			return fmt.Errorf("%w: stream %s", ErrConcurrentWriter, streams[i])
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
