package api

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// The compact stats endpoint, for dashboards that poll (the console polls
// it every 2 s): totals since start, from which a poller computes rates
// between two snapshots, and the gauges an operator watches. Its topic and
// group rows are bounded like the metrics' labels
// (--metrics-max-label-values; the rest summed under "_other").

// Stats is a compact snapshot of the broker's counters and gauges.
type Stats struct {
	// At is when the snapshot was taken.
	At       string `json:"at" format:"date-time" example:"2026-12-01T10:00:00.000Z"`
	UptimeMs int64  `json:"uptimeMs" example:"3600000"`
	// Totals since start: messages stored by sends, leases granted, acks,
	// failed deliveries sent back to a retry topic (nacks and expired
	// leases), messages moved to a DLQ, and messages the delay scheduler
	// delivered.
	SentTotal         uint64 `json:"sentTotal" example:"1200"`
	DeliveredTotal    uint64 `json:"deliveredTotal" example:"1180"`
	AckedTotal        uint64 `json:"ackedTotal" example:"1150"`
	RetriedTotal      uint64 `json:"retriedTotal" example:"25"`
	DeadLetteredTotal uint64 `json:"deadLetteredTotal" example:"2"`
	ScheduledTotal    uint64 `json:"scheduledTotal" example:"30"`
	// InFlight counts leased messages not yet acknowledged.
	InFlight int64 `json:"inFlight" example:"12"`
	// TotalLag sums, over groups and the topics they read, the messages
	// not consumed yet: in the topics' queues and due retries (retries
	// waiting for their delay level are in delayedBacklog).
	// OldestUnackedMs is the age of the oldest in the topics' queues.
	TotalLag        int64 `json:"totalLag" example:"40"`
	OldestUnackedMs int64 `json:"oldestUnackedMs" example:"1500"`
	// DelayedBacklog is the delay scheduler's backlog per level (delayed
	// sends and retries); TimersPending the delayMs/deliverAt timers.
	DelayedBacklog []LevelBacklogStat `json:"delayedBacklog"`
	TimersPending  int                `json:"timersPending" example:"3"`
	// StoreBytes is the CommitLog's disk space; DiskUsedRatio the used
	// fraction of its file system, with the ceilings above which sends,
	// then acks and nacks, are refused.
	StoreBytes         int64   `json:"storeBytes" example:"1073741824"`
	DiskUsedRatio      float64 `json:"diskUsedRatio" example:"0.42"`
	DiskSendCeiling    float64 `json:"diskSendCeiling" example:"0.85"`
	DiskSystemCeiling  float64 `json:"diskSystemCeiling" example:"0.95"`
	DispatchLagBytes   int64   `json:"dispatchLagBytes" example:"0"`
	QuarantinedRecords int64   `json:"quarantinedRecords" example:"0"`
	// Topics and Consumers are the rows per topic and per (group, topic).
	Topics    []TopicStat    `json:"topics"`
	Consumers []ConsumerStat `json:"consumers"`
	// Mirror is the PostgreSQL mirror's state.
	Mirror MirrorStat `json:"mirror"`
} //	@name	Stats

// MirrorStat is the state of the PostgreSQL mirror (--database-url): how
// far it is behind the log and why its last pass failed. The broker
// serves at full speed either way; the mirror catches up from the log.
type MirrorStat struct {
	// Enabled: a database is configured. Without one every other member is zero.
	Enabled bool `json:"enabled" example:"true"`
	// Healthy: the last pass succeeded.
	Healthy bool `json:"healthy" example:"true"`
	// BehindRecords counts progress records not mirrored yet; BehindMs is the time since the mirror was last
	// caught up (0 when it is).
	BehindRecords int64 `json:"behindRecords" example:"0"`
	BehindMs      int64 `json:"behindMs" example:"0"`
	// LastError is why the last pass failed, with since when; absent while healthy.
	LastError string `json:"lastError,omitempty" example:"postgres mirror degraded since 2026-12-01T10:00:00Z: dial tcp 127.0.0.1:5432: connect: connection refused"`
	// PassesTotal and FailuresTotal count the mirror's passes and the failed ones since start.
	PassesTotal   int64 `json:"passesTotal" example:"1200"`
	FailuresTotal int64 `json:"failuresTotal" example:"0"`
} //	@name	MirrorStat

// LevelBacklogStat is one delay level's backlog.
type LevelBacklogStat struct {
	Level   int   `json:"level" example:"3"`
	DelayMs int64 `json:"delayMs" example:"10000"`
	Backlog int64 `json:"backlog" example:"4"`
} //	@name	LevelBacklogStat

// TopicStat is one topic's totals.
type TopicStat struct {
	Topic     string `json:"topic" example:"orders"`
	SentTotal uint64 `json:"sentTotal" example:"1200"`
} //	@name	TopicStat

// ConsumerStat is one group's consumption of one topic; the group's
// totals (delivered, acked, in flight) are repeated on each of its rows.
type ConsumerStat struct {
	Group           string `json:"group" example:"billing"`
	Topic           string `json:"topic" example:"orders"`
	Lag             int64  `json:"lag" example:"40"`
	OldestUnackedMs int64  `json:"oldestUnackedMs" example:"1500"`
	InFlight        int64  `json:"inFlight" example:"12"`
	DeliveredTotal  uint64 `json:"deliveredTotal" example:"1180"`
	AckedTotal      uint64 `json:"ackedTotal" example:"1150"`
} //	@name	ConsumerStat

// registerStatsRoutes registers the stats route.
func (h *handler) registerStatsRoutes(r chi.Router) {
	// GET /v1/stats — the compact stats a dashboard polls.
	r.Get("/stats", h.getStats)
	// GET /v1/stats/stream — the same as server-sent events.
	r.Get("/stats/stream", h.streamStats)
}

// getStats reports the compact stats.
//
//	@Summary		Compact stats for dashboards
//	@Description	Totals since start (a poller computes rates from two snapshots), lag, in flight, delayed backlog and disk, in one small answer. Topic and group rows are bounded by --metrics-max-label-values (the rest summed under "_other").
//	@ID				getStats
//	@Tags			broker
//	@Produce		json
//	@Produce		application/problem+json
//	@Success		200	{object}	Stats
//	@Failure		500	{object}	Problem	"internal"
//	@Failure		503	{object}	Problem	"shutting-down"
//	@Router			/stats [get]
func (h *handler) getStats(w http.ResponseWriter, r *http.Request) {
	out, err := h.stats(r.Context())
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
}

// stats takes one snapshot.
func (h *handler) stats(ctx context.Context) (Stats, error) {
	s, err := h.deps.Broker.Status(ctx)
	if err != nil {
		return Stats{}, err
	}
	out := Stats{
		At:                 formatTime(time.Now()),
		UptimeMs:           s.Uptime.Milliseconds(),
		ScheduledTotal:     s.Scheduled,
		DelayedBacklog:     make([]LevelBacklogStat, 0, len(s.Levels)),
		TimersPending:      s.TimersPending,
		StoreBytes:         s.StoreBytes,
		DiskUsedRatio:      s.Disk.Usage,
		DiskSendCeiling:    s.Disk.SendCeiling,
		DiskSystemCeiling:  s.Disk.SystemCeiling,
		DispatchLagBytes:   s.Dispatch.LagBytes,
		QuarantinedRecords: s.Quarantined,
		Topics:             []TopicStat{},
		Consumers:          []ConsumerStat{},
	}
	if h.deps.Mirror != nil {
		out.Mirror = h.deps.Mirror()
	}
	for _, l := range s.Levels {
		out.DelayedBacklog = append(out.DelayedBacklog, LevelBacklogStat{Level: l.Level, DelayMs: l.Delay.Milliseconds(), Backlog: l.Backlog})
	}
	fillStats(&out, h.deps.Broker.Stats(), h.deps.Broker.ConsumerLags())
	return out, nil
}

// fillStats adds the broker's counters and lags to out.
func fillStats(out *Stats, st broker.Stats, lags []broker.ConsumerLag) {
	sum := func(m map[string]uint64) (n uint64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	out.SentTotal = sum(st.Sent)
	out.DeliveredTotal = sum(st.Delivered)
	out.AckedTotal = sum(st.Acked)
	out.DeadLetteredTotal = sum(st.DeadLetters)
	for _, rc := range st.Retries {
		out.RetriedTotal += rc.Count
	}
	for _, n := range st.InFlight {
		out.InFlight += int64(n)
	}
	for t, n := range st.Sent {
		out.Topics = append(out.Topics, TopicStat{Topic: t, SentTotal: n})
	}
	sort.Slice(out.Topics, func(i, j int) bool { return out.Topics[i].Topic < out.Topics[j].Topic })
	for _, l := range lags {
		out.TotalLag += l.Lag
		out.OldestUnackedMs = max(out.OldestUnackedMs, l.OldestUnacked.Milliseconds())
		out.Consumers = append(out.Consumers, ConsumerStat{Group: l.Group, Topic: l.Topic, Lag: l.Lag,
			OldestUnackedMs: l.OldestUnacked.Milliseconds(), InFlight: int64(st.InFlight[l.Group]),
			DeliveredTotal: st.Delivered[l.Group], AckedTotal: st.Acked[l.Group]})
	}
}
