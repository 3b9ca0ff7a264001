package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/pgmirror"
)

// Migrate runs `mqgate migrate up|down|version` against databaseURL and
// returns the schema version it leaves.
func Migrate(ctx context.Context, databaseURL, command string) (string, error) {
	st, err := pgmirror.Migrate(ctx, databaseURL, command)
	return st.String(), err
}

// mirroredBroker is the broker with the dead-letter listing answered from
// PostgreSQL (SQL filters, keyset pagination) while the mirror is healthy.
// It falls back to the log when the mirror is degraded, so the listing
// never depends on PostgreSQL being up.
type mirroredBroker struct {
	*broker.Broker
	mirror *pgmirror.Mirror
}

// ListDeadLetters lists from PostgreSQL when the mirror is healthy.
func (m mirroredBroker) ListDeadLetters(ctx context.Context, group string, f broker.DLQFilter, cursor string, limit int) ([]broker.DeadLetter, string, error) {
	if m.mirror.Health() == nil {
		if _, err := m.Broker.GetGroup(ctx, group); err != nil {
			return nil, "", err
		}
		return m.mirror.ListDeadLetters(ctx, group, f, cursor, limit)
	}
	return m.Broker.ListDeadLetters(ctx, group, f, cursor, limit)
}

// Progress adds the mirrored committed offsets next to the live ones. The
// mirror is only read when healthy, so progress never waits on an outage.
// It is read before the live progress: both only grow, and the mirror
// trails the log, so read in this order mirroredOffset never shows ahead
// of consumerOffset (read the other way round, acks landing in between
// could make it look so). In between, AwaitApplied lets the acks the
// mirror may already have read from the log (flushed, so visible) reach
// the live table: the broker applies a record just after its flush.
func (m mirroredBroker) Progress(ctx context.Context, group string) ([]broker.QueueProgress, error) {
	client := ""
	if g, err := m.Broker.GetGroup(ctx, group); err == nil && g.ConsumeMode == broker.ConsumeBroadcasting {
		client = broker.ClientOf(ctx) // the rows are that consumer instance's
	}
	mirrored := m.mirrored(ctx, group, client)
	if mirrored != nil {
		m.Broker.AwaitApplied()
	}
	live, err := m.Broker.Progress(ctx, group)
	if err != nil {
		return live, err
	}
	addMirrored(live, mirrored)
	return live, nil
}

// Instances adds each consumer instance's mirrored offsets, read before
// the live ones as Progress does.
func (m mirroredBroker) Instances(ctx context.Context, group string) ([]broker.InstanceProgress, error) {
	var mirrored map[string][]pgmirror.Offset
	if m.mirror.Health() == nil {
		mirrored, _ = m.mirror.InstancesOffsets(ctx, group) // on error the live view alone is the answer
		m.Broker.AwaitApplied()
	}
	live, err := m.Broker.Instances(ctx, group)
	if err != nil {
		return live, err
	}
	for i := range live {
		addMirrored(live[i].Queues, mirrored[live[i].ClientID])
	}
	return live, nil
}

// mirrored reads the mirrored offsets of a group (or of one of its
// consumer instances) when the mirror is healthy; on error the live view
// alone is the answer.
func (m mirroredBroker) mirrored(ctx context.Context, group, client string) []pgmirror.Offset {
	if m.mirror.Health() != nil {
		return nil
	}
	out, _ := m.mirror.InstanceOffsets(ctx, group, client)
	return out
}

// addMirrored sets the mirrored offset of each live row the mirror has.
func addMirrored(live []broker.QueueProgress, mirrored []pgmirror.Offset) {
	if len(mirrored) == 0 {
		return
	}
	type key struct {
		topic string
		queue int32
	}
	byQueue := make(map[key]int64, len(mirrored))
	for _, o := range mirrored {
		byQueue[key{o.Topic, o.QueueID}] = o.Committed
	}
	for i := range live {
		if v, ok := byQueue[key{live[i].Topic, live[i].QueueID}]; ok {
			live[i].MirroredOffset = &v
		}
	}
}

// Backlog adds a note when the mirror is degraded: the mirrored offsets
// are then left out of the progress (unknown, not 0).
func (m mirroredBroker) Backlog(ctx context.Context, group string) (broker.GroupBacklog, error) {
	out, err := m.Broker.Backlog(ctx, group)
	if err == nil {
		if herr := m.mirror.Health(); herr != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("mirroredOffset is left out: the PostgreSQL mirror is degraded (%v)", herr))
		}
	}
	return out, err
}

// openMirror opens the PostgreSQL mirror when a database is configured
// (nil in embedded mode); its writer runs while the broker leads.
func openMirror(ctx context.Context, cfg Config, b *broker.Broker, log zerolog.Logger) (*pgmirror.Mirror, error) {
	if cfg.DatabaseURL == "" {
		return nil, nil
	}
	m, err := pgmirror.Open(ctx, pgmirror.Config{DatabaseURL: cfg.DatabaseURL, Logger: log}, b)
	if err != nil {
		return nil, fmt.Errorf("open postgres mirror: %w", err)
	}
	if cfg.SeedOffsets {
		res, err := m.SeedOffsets(ctx, b)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("seed offsets from postgres: %w", err), m.Close())
		}
		log.Info().Interface("result", res).Msg("consumer offsets seeded from the postgres mirror")
	}
	return m, nil
}

// mirrorStat reports the mirror's state for GET /v1/stats (all zero
// without a mirror).
func (s *Server) mirrorStat() api.MirrorStat {
	m := s.mirror
	if m == nil {
		return api.MirrorStat{}
	}
	st := m.Stats()
	out := api.MirrorStat{Enabled: true, BehindRecords: st.LagRecords, BehindMs: int64(st.LagSeconds * 1000),
		PassesTotal: st.Passes, FailuresTotal: st.Failures}
	if err := m.Health(); err != nil {
		out.LastError = err.Error()
	}
	out.Healthy = out.LastError == ""
	return out
}

// registerMirrorMetrics exports the mirror's lag and health.
func registerMirrorMetrics(reg prometheus.Registerer, m *pgmirror.Mirror) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mqgate_mirror_lag_records", Help: "Progress records not yet mirrored to PostgreSQL."},
			func() float64 { r, _ := m.Lag(); return float64(r) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mqgate_mirror_lag_seconds", Help: "Seconds since the mirror was last caught up (0 when it is)."},
			func() float64 { _, a := m.Lag(); return a.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mqgate_mirror_healthy", Help: "1 when the last mirror pass succeeded."},
			func() float64 {
				if m.Health() == nil {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mqgate_mirror_passes_total", Help: "Mirror passes."},
			func() float64 { return float64(m.Stats().Passes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mqgate_mirror_failures_total", Help: "Failed mirror passes."},
			func() float64 { return float64(m.Stats().Failures) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mqgate_mirror_records_total", Help: "Progress records mirrored."},
			func() float64 { return float64(m.Stats().Records) }),
	)
}
