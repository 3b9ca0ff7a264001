package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
)

// Consumer offsets and progress of a group: reading and committing
// offsets, progress with lag and backlog, and resets by store time.

// QueueOffset is a group's committed offset in one queue.
type QueueOffset struct {
	Topic   string `json:"topic" example:"orders"`
	QueueID int32  `json:"queueId" example:"0"`
	// Offset is the next offset the group consumes.
	Offset int64 `json:"offset" example:"42"`
	// BrokerOffset is the queue's max offset (read-only, ignored on commit).
	BrokerOffset int64 `json:"brokerOffset,omitempty" readonly:"true" example:"50"`
	// Lag is brokerOffset - offset (read-only, ignored on commit).
	Lag int64 `json:"lag,omitempty" readonly:"true" example:"8"`
} //	@name	QueueOffset

// Offsets lists committed offsets; it is also the commit request.
type Offsets struct {
	Offsets []QueueOffset `json:"offsets"`
} //	@name	Offsets

// QueueProgress is a group's progress in one queue (mqadmin consumerProgress).
type QueueProgress struct {
	Topic          string `json:"topic" example:"orders"`
	QueueID        int32  `json:"queueId" example:"0"`
	BrokerOffset   int64  `json:"brokerOffset" example:"50"`
	ConsumerOffset int64  `json:"consumerOffset" example:"42"`
	Lag            int64  `json:"lag" example:"8"`
	InFlight       int    `json:"inFlight" example:"2"`
	// LagIsLowerBound: the lag could not be counted completely; the true lag is higher.
	LagIsLowerBound bool   `json:"lagIsLowerBound,omitempty" example:"false"`
	LastStoredAt    string `json:"lastStoredAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.001Z"`
	// DroppedUnconsumed counts messages of the queue that retention removed before the group consumed them
	// (expired, the topic's shorter retentionHours, or --disk-pressure-delete), since the broker started.
	DroppedUnconsumed int64 `json:"droppedUnconsumed,omitempty" example:"0"`
	// MirroredOffset is the committed offset mirrored in PostgreSQL (only
	// with --database-url); it trails consumerOffset by the mirror's lag.
	// Absent while the mirror is degraded (a note says so).
	MirroredOffset *int64 `json:"mirroredOffset,omitempty" example:"40"`
} //	@name	QueueProgress

// Progress is a group's progress: the lag of its queues plus what waits in the delay ladder for it.
type Progress struct {
	Group string `json:"group" example:"billing"`
	// TotalLag is every message the group has still to consume: the queues' lag (queueId -1 rows count the
	// group's retries of that topic already due), plus retry.total and delayed.total. For a broadcasting group
	// the queues' part is its slowest consumer's: the largest of its own queues' lag and each instance's totalLag.
	TotalLag int64 `json:"totalLag" example:"11"`
	// TotalLagIsLowerBound: some part could not be counted (see notes); the true total is higher.
	TotalLagIsLowerBound bool            `json:"totalLagIsLowerBound,omitempty" example:"false"`
	Queues               []QueueProgress `json:"queues"`
	// Retry is the group's retries still waiting in the delay ladder or on a timer (not yet due).
	Retry LadderBacklog `json:"retry"`
	// Delayed is the delayed messages (delayLevel, delayMs, deliverAt) of the group's topics not yet due.
	Delayed DelayedBacklog `json:"delayed"`
	// Instances lists, for a broadcasting group, its consumer instances with their own offsets; the group's own
	// queues are listed in queues only when it has offsets of its own (committed without a client id) or no instances.
	Instances []InstanceProgress `json:"instances,omitempty"`
	// Notes explain counts that are unknown (null) or incomplete.
	Notes []string `json:"notes,omitempty"`
} //	@name	Progress

// InstanceProgress is one consumer instance of a broadcasting group (X-Mqgate-Client-Id) and its progress.
type InstanceProgress struct {
	// ClientID is the instance's X-Mqgate-Client-Id.
	ClientID string `json:"clientId" example:"worker-1"`
	// LastSeenAt is when its last request (pull, queue read, offset commit, or ack, nack or lease change with
	// one of its receipts) ended, or started while one is under way.
	LastSeenAt string `json:"lastSeenAt" format:"date-time" example:"2026-11-29T10:00:00.001Z"`
	// Active counts its requests under way (waiting pulls included).
	Active int `json:"active" example:"1"`
	// ForgetAt is when it is forgotten, its offsets with it, if it makes no request until then (the group's
	// instanceIdleMs after lastSeenAt); absent while a request is under way.
	ForgetAt string `json:"forgetAt,omitempty" format:"date-time" example:"2026-11-30T10:00:00.001Z"`
	// TotalLag is the sum of its queues' lag.
	TotalLag int64 `json:"totalLag" example:"3"`
	// TotalLagIsLowerBound: some queue's lag could not be counted completely.
	TotalLagIsLowerBound bool            `json:"totalLagIsLowerBound,omitempty" example:"false"`
	Queues               []QueueProgress `json:"queues"`
} //	@name	InstanceProgress

// LadderBacklog counts messages waiting in the delay ladder.
type LadderBacklog struct {
	// Total is the sum over byLevel plus timers; null when some level cannot be counted.
	Total *int64 `json:"total" example:"2"`
	// ByLevel lists the levels that hold messages.
	ByLevel []LevelBacklog `json:"byLevel"`
	// Timers counts the group's retries waiting on a timer (a nack's delayMs, an exponential or fixed retryPolicy).
	Timers int64 `json:"timers" example:"0"`
} //	@name	LadderBacklog

// DelayedBacklog counts a group's delayed messages not yet due.
type DelayedBacklog struct {
	// Total is the sum over byLevel plus timers; null when some level cannot be counted.
	Total *int64 `json:"total" example:"1"`
	// ByLevel lists the delay levels that hold messages (sent with delayLevel).
	ByLevel []LevelBacklog `json:"byLevel"`
	// Timers counts pending delayMs/deliverAt timers.
	Timers int64 `json:"timers" example:"0"`
} //	@name	DelayedBacklog

// LevelBacklog is what waits at one delay level.
type LevelBacklog struct {
	Level   int   `json:"level" example:"3"`
	DelayMs int64 `json:"delayMs" example:"10000"`
	// Count is how many messages wait there; null when it cannot be known yet (see notes).
	Count *int64 `json:"count" example:"2"`
	// AtLeast is, when count is null, how many were counted so far.
	AtLeast *int64 `json:"atLeast,omitempty" example:"2"`
} //	@name	LevelBacklog

// ResetOffsetRequest moves a group's offsets by store time.
type ResetOffsetRequest struct {
	// Timestamp: the group resumes at the first message stored at or after it (RFC 3339).
	Timestamp string `json:"timestamp" format:"date-time" example:"2026-11-29T00:00:00Z"`
	// Topic limits the reset to one topic (default: every subscribed topic).
	Topic string `json:"topic,omitempty" example:"orders"`
} //	@name	ResetOffsetRequest

// getOffsets returns a group's committed offsets.
//
//	@Summary		Get committed offsets
//	@ID				getOffsets
//	@Description	A broadcasting group's consumer instance (X-Mqgate-Client-Id) gets its own offsets (for an instance the group does not know yet, its subscribed queues at their first offsets; nothing is registered); without the header, the group's own.
//	@Tags			offsets
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string	true	"Group name"
//	@Param			X-Mqgate-Client-Id	header	string	false	"A broadcasting group's consumer instance (1 to 128 printable ASCII characters without spaces)"	maxLength(128)
//	@Success		200		{object}	Offsets
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, value-too-long"
//	@Failure		404		{object}	Problem	"group-not-found"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/groups/{group}/offsets [get]
func (h *handler) getOffsets(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	progress, err := h.deps.Broker.GetOffsets(r.Context(), group)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := Offsets{Offsets: make([]QueueOffset, 0, len(progress))}
	for _, p := range progress {
		resp.Offsets = append(resp.Offsets, QueueOffset{
			Topic: p.Topic, QueueID: p.QueueID, Offset: p.ConsumerOffset, BrokerOffset: p.BrokerOffset, Lag: p.Lag,
		})
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// commitOffsets stores offsets of an offset-mode group.
//
//	@Summary		Commit offsets
//	@ID				commitOffsets
//	@Description	Store the next offset to consume per queue (offset-based consumption; brokerOffset and lag are ignored). A broadcasting group's consumer instance (X-Mqgate-Client-Id) commits its own offsets, registering it when new (started by the group's consumeFrom); without the header the group's own offsets are set.
//	@Tags			offsets
//	@Accept			json
//	@Produce		application/problem+json
//	@Param			group	path	string	true	"Group name"
//	@Param			request	body	Offsets	true	"Offsets to commit"
//	@Param			X-Mqgate-Client-Id	header	string	false	"A broadcasting group's consumer instance (1 to 128 printable ASCII characters without spaces)"	maxLength(128)
//	@Success		204
//	@Failure		400	{object}	Problem	"invalid-name, invalid-argument, malformed-request, offset-out-of-range, value-too-long"
//	@Failure		404	{object}	Problem	"group-not-found, topic-not-found"
//	@Failure		409	{object}	Problem	"quota-exceeded (groups: the commit creates the group; instancesPerGroup: a broadcasting group's new consumer instance)"
//	@Failure		413	{object}	Problem	"body-too-large"
//	@Failure		415	{object}	Problem	"unsupported-media-type"
//	@Failure		500	{object}	Problem	"internal"
//	@Failure		503	{object}	Problem	"storage-read-only, shutting-down"
//	@Failure		507	{object}	Problem	"disk-full"
//	@Router			/groups/{group}/offsets [put]
func (h *handler) commitOffsets(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req Offsets
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := checkItems("offsets", len(req.Offsets)); err != nil {
		WriteError(w, r, err)
		return
	}
	commits := make([]broker.OffsetCommit, 0, len(req.Offsets))
	for i, o := range req.Offsets {
		switch {
		case !validName(o.Topic):
			WriteError(w, r, fmt.Errorf("%w: offsets[%d].topic %s", broker.ErrInvalidName, i, broker.QuoteValue(o.Topic)))
			return
		case o.QueueID < 0 || o.Offset < 0:
			WriteError(w, r, invalidArgument("offsets[%d]: queueId and offset must not be negative", i))
			return
		}
		if err := requireTopic(r, o.Topic, auth.PermSub); err != nil {
			WriteError(w, r, err)
			return
		}
		commits = append(commits, broker.OffsetCommit{Topic: o.Topic, QueueID: o.QueueID, Offset: o.Offset})
	}
	if err := h.deps.Broker.CommitOffsets(r.Context(), group, commits); err != nil {
		WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// progress returns a group's per-queue progress.
//
//	@Summary		Consumer progress
//	@ID				getProgress
//	@Description	Per queue: broker offset, consumer offset, lag and in-flight leases (mqadmin consumerProgress). Queue id -1 is the topic's view of the group's retry topic: its lag counts the retries of that topic already due.
//	@Description	`retry` counts the group's retries still waiting in the delay ladder, per level; `delayed` the delayed messages and timers of the group's topics not yet due. `totalLag` adds them all up. A count that cannot be known is null (never 0), with a note.
//	@Description	A broadcasting group lists its consumer instances in `instances`, each with its own offsets, lag, last request and when it is forgotten if it stays idle.
//	@Tags			offsets
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string	true	"Group name"
//	@Success		200		{object}	Progress
//	@Failure		400		{object}	Problem	"invalid-name"
//	@Failure		404		{object}	Problem	"group-not-found"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/groups/{group}/progress [get]
func (h *handler) progress(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	ctx := broker.WithClient(r.Context(), "") // the group's progress, whoever asks
	p, err := h.groupProgress(ctx, group, h.deps.Broker.Progress)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	instances, err := h.deps.Broker.Instances(ctx, group)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	addInstances(&p, instances)
	writeJSON(w, r, http.StatusOK, p)
}

// addInstances adds a broadcasting group's consumer instances to its
// progress; the queues' part of totalLag becomes the slowest consumer's.
func addInstances(p *Progress, instances []broker.InstanceProgress) {
	if len(instances) == 0 {
		return
	}
	var own int64
	for _, q := range p.Queues {
		own += q.Lag
	}
	slowest := own
	for _, in := range instances {
		ip := InstanceProgress{ClientID: in.ClientID, LastSeenAt: formatTime(in.LastSeen), Active: in.Active,
			ForgetAt: formatTime(in.ForgetAt), Queues: make([]QueueProgress, 0, len(in.Queues))}
		for _, q := range in.Queues {
			ip.TotalLag += q.Lag
			ip.TotalLagIsLowerBound = ip.TotalLagIsLowerBound || q.LagIsLowerBound
			ip.Queues = append(ip.Queues, toQueueProgress(q))
		}
		if ip.TotalLagIsLowerBound {
			p.TotalLagIsLowerBound = true
			p.Notes = append(p.Notes, fmt.Sprintf("the lag of instance %s is a lower bound (too many entries to count)", in.ClientID))
		}
		slowest = max(slowest, ip.TotalLag)
		p.Instances = append(p.Instances, ip)
	}
	p.TotalLag += slowest - own
}

// groupProgress gathers a group's queue progress (from queues) and its
// backlog in the delay ladder into the wire form.
func (h *handler) groupProgress(ctx context.Context, group string, queues func(context.Context, string) ([]broker.QueueProgress, error)) (Progress, error) {
	rows, err := queues(ctx, group)
	if err != nil {
		return Progress{}, err
	}
	backlog, err := h.deps.Broker.Backlog(ctx, group)
	if err != nil {
		return Progress{}, err
	}
	return toProgress(group, rows, backlog), nil
}

// resetOffset moves a group's offsets to a store time.
//
//	@Summary		Reset offsets by time
//	@ID				resetOffsets
//	@Description	Rewind or forward the group to the first message stored at or after timestamp (mqadmin resetOffsetByTime). Returns the new progress. For a broadcasting group X-Mqgate-Client-Id resets that consumer instance only; without it every known instance is reset (and the group's own offsets, when it has some).
//	@Tags			offsets
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string				true	"Group name"
//	@Param			request	body		ResetOffsetRequest	true	"Target time"
//	@Param			X-Mqgate-Client-Id	header	string	false	"A broadcasting group's consumer instance to reset alone (1 to 128 printable ASCII characters without spaces)"	maxLength(128)
//	@Success		200		{object}	Progress
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, malformed-request"
//	@Failure		404		{object}	Problem	"group-not-found, topic-not-found"
//	@Failure		409		{object}	Problem	"quota-exceeded (instancesPerGroup: X-Mqgate-Client-Id names a new consumer instance)"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"storage-read-only, shutting-down"
//	@Failure		507		{object}	Problem	"disk-full"
//	@Router			/groups/{group}/reset-offset [post]
func (h *handler) resetOffset(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req ResetOffsetRequest
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	at, err := time.Parse(time.RFC3339Nano, req.Timestamp)
	if err != nil {
		WriteError(w, r, invalidArgument("timestamp %s is not an RFC 3339 time", broker.QuoteValue(req.Timestamp)))
		return
	}
	if req.Topic != "" && !validName(req.Topic) {
		WriteError(w, r, fmt.Errorf("%w: topic %s", broker.ErrInvalidName, broker.QuoteValue(req.Topic)))
		return
	}
	p, err := h.groupProgress(r.Context(), group, func(ctx context.Context, group string) ([]broker.QueueProgress, error) {
		return h.deps.Broker.ResetOffset(ctx, group, req.Topic, at)
	})
	if err != nil {
		WriteError(w, r, err)
		return
	}
	instances, err := h.deps.Broker.Instances(r.Context(), group)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	addInstances(&p, instances)
	writeJSON(w, r, http.StatusOK, p)
}

// toProgress converts a group's progress to its wire form.
func toProgress(group string, queues []broker.QueueProgress, backlog broker.GroupBacklog) Progress {
	out := Progress{Group: group, Queues: make([]QueueProgress, 0, len(queues)), Notes: backlog.Notes}
	for _, q := range queues {
		out.TotalLag += q.Lag
		out.TotalLagIsLowerBound = out.TotalLagIsLowerBound || q.LagIsLowerBound
		out.Queues = append(out.Queues, toQueueProgress(q))
		if q.LagIsLowerBound {
			out.Notes = append(out.Notes, fmt.Sprintf("the lag of %s queue %d is a lower bound (too many entries to count)", q.Topic, q.QueueID))
		}
	}
	var retrySum, delayedSum int64
	out.Retry.ByLevel, out.Retry.Total, retrySum = toLevels(backlog.Retry, backlog.RetryTimers)
	out.Retry.Timers = backlog.RetryTimers
	out.Delayed.ByLevel, out.Delayed.Total, delayedSum = toLevels(backlog.Delayed, backlog.Timers)
	out.Delayed.Timers = backlog.Timers
	out.TotalLag += retrySum + delayedSum
	if out.Retry.Total == nil || out.Delayed.Total == nil {
		out.TotalLagIsLowerBound = true
	}
	return out
}

// toLevels converts per-level counts and sums them with extra: total is
// nil when some level's count is unknown, sum counts what is known (a
// lower bound then).
func toLevels(levels []broker.LevelBacklog, extra int64) (out []LevelBacklog, total *int64, sum int64) {
	out = make([]LevelBacklog, 0, len(levels))
	sum, known := extra, true
	for _, l := range levels {
		out = append(out, LevelBacklog{Level: l.Level, DelayMs: l.Delay.Milliseconds(), Count: l.Count, AtLeast: l.AtLeast})
		switch {
		case l.Count != nil:
			sum += *l.Count
		case l.AtLeast != nil:
			known = false
			sum += *l.AtLeast
		default:
			known = false
		}
	}
	if known {
		total = &sum
	}
	return out, total, sum
}

// toQueueProgress is one queue's progress in its wire form.
func toQueueProgress(q broker.QueueProgress) QueueProgress {
	return QueueProgress{
		Topic:           q.Topic,
		QueueID:         q.QueueID,
		BrokerOffset:    q.BrokerOffset,
		ConsumerOffset:  q.ConsumerOffset,
		Lag:             q.Lag,
		InFlight:        q.InFlight,
		LagIsLowerBound: q.LagIsLowerBound,
		LastStoredAt:    formatTime(q.LastStoredAt),
		MirroredOffset:  q.MirroredOffset,

		DroppedUnconsumed: q.DroppedUnconsumed,
	}
}
