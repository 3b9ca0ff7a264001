package pgmirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/storage/offset"
)

// Source is what the mirror reads from the broker: its projection feeds
// (server/broker events.go). *broker.Broker satisfies it.
type Source interface {
	OffsetRecords(ctx context.Context, from int64, max int) ([]offset.Record, int64, error)
	OffsetRecordsMin() int64
	DeadLetterArrivals(ctx context.Context, group string, from int64, max int) ([]broker.DeadLetter, int64, error)
	DeadLetterStatusChanges(ctx context.Context, from int64, max int) ([]broker.DLQStatusChange, int64, error)
	ProjectionSignals() (progress, deadLetters <-chan struct{})
	ListGroups(ctx context.Context) ([]broker.GroupConfig, error)
	Progress(ctx context.Context, group string) ([]broker.QueueProgress, error)
}

// offsetRecordsMaxer is implemented by a Source that can tell the end of
// the progress stream directly; without it the mirror finds the end with
// a few one-record probes.
type offsetRecordsMaxer interface{ OffsetRecordsMax() int64 }

// Stream names (mirror_cursors.stream). Part of the schema; never change.
const (
	streamOffsets   = "offsets"
	streamDLQStatus = "dlq_status"
	streamDLQPrefix = "dlq:"
)

// Mirror follows the broker's log into PostgreSQL. Open it, Start its
// writer, and Close it before the broker.
type Mirror struct {
	cfg  Config
	log  zerolog.Logger
	src  Source
	pool *pgxpool.Pool

	// passMu serialises passes, SeedOffsets and state reloads.
	passMu    sync.Mutex
	migrated  bool
	st        *state    // nil: (re)load from PostgreSQL before the next pass
	nextSweep time.Time // when every group's DLQ is read again
	sweepDue  bool      // the last DLQ read was cut by BatchSize

	health   sync.Mutex
	lastErr  error
	errSince time.Time

	lagRecords   atomic.Int64
	caughtUpAt   atomic.Int64 // unix nanos of the start of the last caught-up pass
	offsetCursor atomic.Int64 // last committed 'offsets' cursor (-1 unknown)
	counters     struct{ passes, failures, records, deadLetters, statuses, rows atomic.Int64 }

	writerMu  sync.Mutex
	writer    *worker.Service // runs loop; a new one at each Start after a Stop
	closed    bool            // under writerMu
	closeOnce sync.Once
}

// Open validates cfg, prepares a mirror of src and, if PostgreSQL
// answers within ConnectTimeout, runs the migrations ("up") and loads the
// mirror's state. It does not need PostgreSQL to be up: on failure the
// mirror starts degraded (Health says why) and the first passes of the
// writer retry. Only a configuration that can never work is an error.
func Open(ctx context.Context, cfg Config, src Source) (*Mirror, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc, err := cfg.poolConfig()
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgmirror: pool: %w", err)
	}
	m := &Mirror{
		cfg:  cfg,
		log:  cfg.Logger.With().Str("component", "pgmirror").Logger(),
		src:  src,
		pool: pool,
	}
	m.lastErr, m.errSince = fmt.Errorf("%w: not caught up yet", ErrDegraded), time.Now()
	m.caughtUpAt.Store(time.Now().UnixNano())
	m.offsetCursor.Store(-1)

	initCtx, cancel := context.WithTimeout(ctx, 2*cfg.ConnectTimeout)
	defer cancel()
	m.passMu.Lock()
	err = m.load(initCtx)
	m.passMu.Unlock()
	if err != nil {
		m.setHealth(err)
		m.log.Warn().Err(err).Msg("PostgreSQL mirror unavailable at start; serving anyway and retrying")
	}
	return m, nil
}

// Pool is the mirror's connection pool (for read models elsewhere).
func (m *Mirror) Pool() *pgxpool.Pool { return m.pool }

// Start runs the writer goroutine until ctx ends or Stop is called; it
// does nothing while the writer runs or after Close. Only a leader's
// broker writes the mirror (the server starts it with the broker's
// leader-only services), so a Start after a Stop runs a new writer.
func (m *Mirror) Start(ctx context.Context) {
	m.writerMu.Lock()
	defer m.writerMu.Unlock()
	if m.closed || m.writer != nil {
		return
	}
	m.writer = worker.New(m.loop)
	m.writer.Start(ctx)
}

// Stop stops the writer and waits for it; an unfinished pass is rolled
// back (its records are mirrored by the next run). Idempotent.
func (m *Mirror) Stop() {
	m.writerMu.Lock()
	w := m.writer
	m.writer = nil
	m.writerMu.Unlock()
	if w != nil {
		w.Stop()
	}
}

// Close stops the writer and closes the pool. Idempotent. Close the mirror
// before the broker it follows.
func (m *Mirror) Close() error {
	m.closeOnce.Do(func() {
		m.writerMu.Lock()
		m.closed = true
		m.writerMu.Unlock()
		m.Stop()
		m.pool.Close()
		m.setHealth(ErrClosed)
	})
	return nil
}

// loop is the writer: a pass whenever the log signals new progress
// records or dead-letter status changes (after BatchDelay, to batch a
// burst), at least every
// PollInterval, at once again while a pass was cut by BatchSize, and with
// exponential backoff after failures.
func (m *Mirror) loop(ctx context.Context) {
	poll := time.NewTicker(m.cfg.PollInterval)
	defer poll.Stop()
	retry := worker.NewBackoff(m.cfg.RetryMin, m.cfg.RetryMax)
	for {
		progress, deadLetters := m.src.ProjectionSignals() // before reading: no lost wake-up
		res, err := m.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			wait := retry.Next()
			m.log.Warn().Err(err).Dur("retry_in", wait).Msg("mirror pass failed")
			if !worker.Sleep(ctx, wait) {
				return
			}
			continue
		}
		if retry.Reset() > 0 {
			m.log.Info().Msg("mirror recovered")
		}
		if res.Written() {
			m.log.Debug().Object("pass", res).Msg("mirror pass")
		}
		if res.More {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-progress:
			if !worker.Sleep(ctx, m.cfg.BatchDelay) {
				return
			}
		case <-deadLetters:
			if !worker.Sleep(ctx, m.cfg.BatchDelay) {
				return
			}
		}
	}
}

// Health is nil while the last pass succeeded, else an error wrapping
// ErrDegraded (or ErrClosed) that says since when and why. For /readyz
// detail: the broker serves at full speed either way.
func (m *Mirror) Health() error {
	m.health.Lock()
	defer m.health.Unlock()
	if m.lastErr == nil {
		return nil
	}
	if errors.Is(m.lastErr, ErrClosed) {
		return m.lastErr
	}
	return fmt.Errorf("%w since %s: %w", ErrDegraded, m.errSince.UTC().Format(time.RFC3339), m.lastErr)
}

func (m *Mirror) setHealth(err error) {
	m.health.Lock()
	defer m.health.Unlock()
	if err == nil {
		m.lastErr = nil
		return
	}
	if m.lastErr == nil {
		m.errSince = time.Now()
	}
	m.lastErr = err
}

// Lag reports how far the mirror is behind the log: progress records not
// yet mirrored, and how long ago the mirror was last fully caught up
// (0 when it is). Updated by every pass, failed or not.
func (m *Mirror) Lag() (records int64, age time.Duration) {
	records = m.lagRecords.Load()
	if records == 0 && m.Health() == nil {
		return 0, 0
	}
	return records, time.Since(time.Unix(0, m.caughtUpAt.Load()))
}

// Stats are the mirror's counters and gauges, for metrics.
type Stats struct {
	// Passes and Failures count passes run and passes failed.
	Passes, Failures int64
	// Records counts progress records applied; DeadLetters and
	// StatusChanges the dead-letter arrivals and status changes mirrored.
	Records, DeadLetters, StatusChanges int64
	// Rows counts rows written (after coalescing).
	Rows int64
	// LagRecords and LagSeconds are Lag's two numbers.
	LagRecords int64
	LagSeconds float64
	// Healthy is Health() == nil.
	Healthy bool
}

// Stats returns a snapshot of the counters.
func (m *Mirror) Stats() Stats {
	records, age := m.Lag()
	return Stats{
		Passes:        m.counters.passes.Load(),
		Failures:      m.counters.failures.Load(),
		Records:       m.counters.records.Load(),
		DeadLetters:   m.counters.deadLetters.Load(),
		StatusChanges: m.counters.statuses.Load(),
		Rows:          m.counters.rows.Load(),
		LagRecords:    records,
		LagSeconds:    age.Seconds(),
		Healthy:       m.Health() == nil,
	}
}
