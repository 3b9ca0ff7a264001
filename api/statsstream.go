package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The stats stream: GET /v1/stats as server-sent events
// (https://html.spec.whatwg.org/multipage/server-sent-events.html), one
// "stats" event at once and then one every intervalMs, until the client
// goes, the server shuts down (the stream ends; clients reconnect
// elsewhere) or a snapshot fails (a last "problem" event carries the
// problem+json). A stream holds a long-poll place (--max-waiters and
// the account's maxLongPolls) while it lasts; its write deadline moves
// with every event.

// Bounds of a stream's interval (ms).
const (
	minStreamIntervalMs     = 500
	maxStreamIntervalMs     = 60_000
	defaultStreamIntervalMs = 2_000
)

// streamStats streams the compact stats.
//
//	@Summary		Stream the compact stats (server-sent events)
//	@Description	The answer of getStats as server-sent events: a `stats` event at once and then every intervalMs (each event's data is one Stats object, its id counts from 1), until the client goes or the server shuts down. A snapshot that fails ends the stream with a `problem` event whose data is the Problem. A stream counts as a waiting pull against --max-waiters and the account's maxLongPolls. Browsers that must send an Authorization header read it with fetch (EventSource cannot send one).
//	@ID				streamStats
//	@Tags			broker
//	@Produce		text/event-stream
//	@Produce		application/problem+json
//	@Param			intervalMs	query		integer	false	"Milliseconds between events"	minimum(500)	maximum(60000)	default(2000)
//	@Success		200			{object}	Stats	"text/event-stream: event: stats, data: a Stats object"
//	@Failure		400			{object}	Problem	"invalid-argument"
//	@Failure		429			{object}	Problem	"too-many-waiters"
//	@Failure		500			{object}	Problem	"internal"
//	@Failure		503			{object}	Problem	"shutting-down"
//	@Router			/stats/stream [get]
func (h *handler) streamStats(w http.ResponseWriter, r *http.Request) {
	ms, err := queryInt(r.URL.Query(), "intervalMs", defaultStreamIntervalMs, minStreamIntervalMs, maxStreamIntervalMs)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	interval := time.Duration(ms) * time.Millisecond
	ctx := r.Context()
	first, err := h.stats(ctx)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	release, err := h.beginLongPoll(w, r, interval)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	defer release()

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no") // nginx: pass events on as they come
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	id := 0
	// send writes one event and flushes it; an error means the client is gone.
	send := func(event string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(interval + h.deps.WriteTimeout)
		_ = rc.SetWriteDeadline(deadline)
		_ = rc.SetReadDeadline(deadline)
		id++
		retry := ""
		if id == 1 {
			retry = fmt.Sprintf("retry: %d\n", ms) // EventSource's reconnection delay
		}
		if _, err := fmt.Fprintf(w, "%sevent: %s\nid: %d\ndata: %s\n\n", retry, event, id, data); err != nil {
			return err
		}
		return rc.Flush()
	}
	if send("stats", first) != nil {
		return
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.deps.PollContext.Done():
			return
		case <-ticker.C:
		}
		s, err := h.stats(ctx)
		if err != nil {
			p := ProblemOf(err)
			p.Instance = r.URL.EscapedPath()
			if sc := scopeOf(r); sc != nil {
				p.RequestID = sc.idHeader[0]
			}
			_ = send("problem", p)
			return
		}
		if send("stats", s) != nil {
			return
		}
	}
}
