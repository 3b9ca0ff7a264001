package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// Timers is the pending-timer administration (delayMs / deliverAt sends).
type Timers interface {
	// ListTimers lists pending timers of topic ("" = all), soonest first.
	ListTimers(ctx context.Context, topic, cursor string, limit int) ([]broker.Timer, string, error)
	// GetTimer returns one pending timer with its body.
	GetTimer(ctx context.Context, id string) (broker.Timer, error)
	// CancelTimer cancels a pending timer.
	CancelTimer(ctx context.Context, id string) error
	// RescheduleTimer moves a pending timer to a new due time.
	RescheduleTimer(ctx context.Context, id string, at time.Time) (broker.Timer, error)
}

// Timer is a pending delayed message (sent with delayMs or deliverAt).
type Timer struct {
	// ID is the send's messageId; the delivered message gets a new one.
	ID          string            `json:"id" example:"7F00000100001F900000000000000A10"`
	Topic       string            `json:"topic" example:"orders"`
	QueueID     int32             `json:"queueId" example:"1"`
	DeliverAt   string            `json:"deliverAt" format:"date-time" example:"2026-12-01T10:00:00.000Z"`
	ScheduledAt string            `json:"scheduledAt" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
	Tag         string            `json:"tag,omitempty" example:"created"`
	Keys        []string          `json:"keys,omitempty"`
	Properties  map[string]string `json:"properties,omitempty"`
	// Body and BodyEncoding are only in the single-timer view.
	Body         string `json:"body,omitempty" example:"later"`
	BodyEncoding string `json:"bodyEncoding,omitempty" enums:"utf8,base64" example:"utf8"`
} //	@name	Timer

// TimerList is one page of pending timers.
type TimerList struct {
	Items []Timer `json:"items"`
	// Next is the cursor of the next page; absent on the last page.
	Next string `json:"next,omitempty" example:"7F00000100001F900000000000000A10"`
} //	@name	TimerList

// RescheduleRequest moves a timer: deliverAt, or delayMs from now.
type RescheduleRequest struct {
	DeliverAt string `json:"deliverAt,omitempty" format:"date-time" example:"2026-12-01T10:00:00Z"`
	DelayMs   int64  `json:"delayMs,omitempty" minimum:"0" example:"60000"`
} //	@name	RescheduleRequest

// registerTimerRoutes registers the timer administration.
func (h *handler) registerTimerRoutes(r chi.Router) {
	// GET /v1/timers — list pending timers.
	r.Get("/timers", h.listTimers)
	// GET /v1/timers/{id} — one pending timer with its body.
	r.Get("/timers/{id}", h.getTimer)
	// DELETE /v1/timers/{id} — cancel.
	r.Delete("/timers/{id}", h.cancelTimer)
	// PUT /v1/timers/{id} — reschedule.
	r.With(bodyLimit(smallBodyLimit), requireJSON).Put("/timers/{id}", h.rescheduleTimer)
}

// listTimers lists pending timers, soonest first.
//
//	@Summary		List pending timers
//	@ID				listTimers
//	@Description	Messages sent with delayMs or deliverAt wait here until due (up to a year ahead, past the CommitLog's retention). Pages follow `next`.
//	@Tags			timers
//	@Produce		json
//	@Param			topic	query		string	false	"Only timers of this topic"
//	@Param			cursor	query		string	false	"The next of the previous page (opaque); absent: the first page"
//	@Param			limit	query		int		false	"Page size"	minimum(1)	maximum(500)	default(100)
//	@Success		200		{object}	TimerList
//	@Failure		400		{object}	Problem	"invalid-argument"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/timers [get]
func (h *handler) listTimers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := queryInt(q, "limit", 100, 1, 500)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	items, next, err := h.deps.Broker.ListTimers(r.Context(), q.Get("topic"), q.Get("cursor"), int(limit))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := TimerList{Items: make([]Timer, 0, len(items)), Next: next}
	for _, t := range items {
		resp.Items = append(resp.Items, toTimer(t, false))
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// getTimer returns one pending timer with its body.
//
//	@Summary	Get a pending timer
//	@ID			getTimer
//	@Tags		timers
//	@Produce	json
//	@Param		id	path		string	true	"Timer id (the send's messageId)"
//	@Success	200	{object}	Timer
//	@Failure	400	{object}	Problem	"invalid-argument"
//	@Failure	404	{object}	Problem	"message-not-found"
//	@Failure	500	{object}	Problem	"internal"
//	@Failure	503	{object}	Problem	"shutting-down"
//	@Router		/timers/{id} [get]
func (h *handler) getTimer(w http.ResponseWriter, r *http.Request) {
	t, err := h.deps.Broker.GetTimer(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toTimer(t, true))
}

// cancelTimer cancels a pending timer: it is never delivered.
//
//	@Summary	Cancel a pending timer
//	@ID			cancelTimer
//	@Tags		timers
//	@Param		id	path	string	true	"Timer id"
//	@Success	204
//	@Failure	400	{object}	Problem	"invalid-argument"
//	@Failure	404	{object}	Problem	"message-not-found"
//	@Failure	500	{object}	Problem	"internal"
//	@Failure	503	{object}	Problem	"storage-read-only, shutting-down"
//	@Failure	507	{object}	Problem	"disk-full"
//	@Router		/timers/{id} [delete]
func (h *handler) cancelTimer(w http.ResponseWriter, r *http.Request) {
	if err := h.deps.Broker.CancelTimer(r.Context(), chi.URLParam(r, "id")); err != nil {
		WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// rescheduleTimer moves a pending timer.
//
//	@Summary	Reschedule a pending timer
//	@ID			rescheduleTimer
//	@Tags		timers
//	@Accept		json
//	@Produce	json
//	@Param		id		path		string				true	"Timer id"
//	@Param		request	body		RescheduleRequest	true	"The new due time"
//	@Success	200		{object}	Timer
//	@Failure	400		{object}	Problem	"invalid-argument, malformed-request"
//	@Failure	404		{object}	Problem	"message-not-found"
//	@Failure	413		{object}	Problem	"body-too-large"
//	@Failure	415		{object}	Problem	"unsupported-media-type"
//	@Failure	500		{object}	Problem	"internal"
//	@Failure	503		{object}	Problem	"storage-read-only, shutting-down"
//	@Failure	507		{object}	Problem	"disk-full"
//	@Router		/timers/{id} [put]
func (h *handler) rescheduleTimer(w http.ResponseWriter, r *http.Request) {
	var req RescheduleRequest
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	var at time.Time
	switch {
	case req.DeliverAt != "" && req.DelayMs != 0:
		WriteError(w, r, invalidArgument("give deliverAt or delayMs, not both"))
		return
	case req.DeliverAt != "":
		var err error
		if at, err = time.Parse(time.RFC3339Nano, req.DeliverAt); err != nil {
			WriteError(w, r, invalidArgument("deliverAt %s is not an RFC 3339 time", broker.QuoteValue(req.DeliverAt)))
			return
		}
	case req.DelayMs > 0:
		at = time.Now().Add(time.Duration(req.DelayMs) * time.Millisecond)
	default:
		WriteError(w, r, invalidArgument("give deliverAt or a positive delayMs"))
		return
	}
	t, err := h.deps.Broker.RescheduleTimer(r.Context(), chi.URLParam(r, "id"), at)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toTimer(t, false))
}

func toTimer(t broker.Timer, withBody bool) Timer {
	out := Timer{ID: t.ID, Topic: t.Topic, QueueID: t.QueueID, DeliverAt: formatTime(t.DeliverAt),
		ScheduledAt: formatTime(t.ScheduledAt), Tag: t.Tag, Keys: t.Keys, Properties: t.Properties}
	if withBody {
		m := ToMessage(broker.ReceivedMessage{Body: t.Body})
		out.Body, out.BodyEncoding = m.Body, m.BodyEncoding
	}
	return out
}
