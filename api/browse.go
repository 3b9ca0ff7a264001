package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// Browser is what the console's message search and backlog skip need.
type Browser interface {
	// SearchByTime returns one page of the messages of a topic stored in
	// a time range.
	SearchByTime(ctx context.Context, s broker.TimeSearch) (broker.TimeSearchResult, error)
	// SkipBacklog moves a group's offsets of topic ("" every topic it
	// reads) to the end of each queue.
	SkipBacklog(ctx context.Context, group, topic string) ([]broker.QueueProgress, error)
}

// MessageSearch is one page of messages found by store time.
type MessageSearch struct {
	// Messages are in queue order, then offset order.
	Messages []Message `json:"messages"`
	// Next is the cursor of the next page; absent when the search is done. A page may hold fewer than limit
	// messages (even none) and still have a next: each call does bounded work.
	Next string `json:"next,omitempty" example:"MS4xMg"`
	// Scanned counts the queue entries this page read.
	Scanned int `json:"scanned" example:"32"`
} //	@name	MessageSearch

// SkipBacklogRequest names the topic whose backlog a group skips.
type SkipBacklogRequest struct {
	// Topic limits the skip to one topic; absent: every topic the group reads.
	Topic string `json:"topic,omitempty" example:"orders"`
} //	@name	SkipBacklogRequest

// registerBrowseRoutes registers the search by time and the backlog skip.
func (h *handler) registerBrowseRoutes(r chi.Router) {
	// GET /v1/topics/{topic}/messages?from=&to= — messages by store time.
	r.Get("/topics/{topic}/messages", h.searchMessages)
	// POST /v1/groups/{group}/skip-backlog — move a group to the queues' ends.
	r.With(bodyLimit(smallBodyLimit), requireJSON).Post("/groups/{group}/skip-backlog", h.skipBacklog)
}

// searchMessages finds a topic's messages by store time.
//
//	@Summary		Find messages by store time
//	@ID				searchMessagesByTime
//	@Description	The messages of a topic stored in [from, to), queue by queue (queue 0 first), each queue in offset order; RocketMQ Dashboard's query by topic and time range. Each call does bounded work: at most `limit` messages, 1024 queue entries read and 64 queues started (one binary search over a queue's store times each); follow `next` for the rest.
//	@Tags			messages
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			topic	path		string	true	"Topic name"
//	@Param			from	query		string	true	"Stored at or after (RFC 3339)"	Format(date-time)
//	@Param			to		query		string	true	"Stored before (RFC 3339), after from"	Format(date-time)
//	@Param			queueId	query		integer	false	"Only this queue"	minimum(0)	Format(int32)
//	@Param			limit	query		integer	false	"Most messages to return"	minimum(1)	maximum(100)	default(32)
//	@Param			cursor	query		string	false	"The next of the previous page (opaque), with the same topic, from, to and queueId; absent: the first page"
//	@Success		200		{object}	MessageSearch
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument"
//	@Failure		404		{object}	Problem	"topic-not-found"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/topics/{topic}/messages [get]
func (h *handler) searchMessages(w http.ResponseWriter, r *http.Request) {
	topic, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	s, err := toTimeSearch(topic, r.URL.Query())
	if err != nil {
		WriteError(w, r, err)
		return
	}
	res, err := h.deps.Broker.SearchByTime(r.Context(), s)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	out := MessageSearch{Messages: toMessages(res.Messages), Scanned: res.Scanned}
	if res.Next != nil {
		out.Next = formatSearchCursor(*res.Next)
	}
	writeJSON(w, r, http.StatusOK, out)
}

// toTimeSearch reads a search's query parameters.
func toTimeSearch(topic string, q url.Values) (broker.TimeSearch, error) {
	get := q.Get
	s := broker.TimeSearch{Topic: topic, QueueID: -1}
	var err error
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &s.From}, {"to", &s.To}} {
		raw := get(p.name)
		if raw == "" {
			return s, invalidArgument("query parameter %s is required (an RFC 3339 time)", p.name)
		}
		if *p.dst, err = time.Parse(time.RFC3339Nano, raw); err != nil {
			return s, invalidArgument("query parameter %s %s is not an RFC 3339 time", p.name, broker.QuoteValue(raw))
		}
	}
	if !s.To.After(s.From) {
		return s, invalidArgument("to (%s) must be after from (%s)", get("to"), get("from"))
	}
	queue, err := queryInt(q, "queueId", -1, 0, 1<<31-1)
	if err != nil {
		return s, err
	}
	s.QueueID = int32(queue)
	limit, err := queryInt(q, "limit", MaxReadMessages, 1, broker.SearchMaxLimit)
	if err != nil {
		return s, err
	}
	s.Limit = int(limit)
	if raw := get("cursor"); raw != "" {
		pos, ok := parseSearchCursor(raw)
		if !ok {
			return s, invalidArgument("cursor %s is not a next of this search", broker.QuoteValue(raw))
		}
		s.After = &pos
	}
	return s, nil
}

// formatSearchCursor encodes a search position: base64url of
// "queue.offset" (offset -1: look the queue's start up by time).
func formatSearchCursor(p broker.SearchPosition) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(int64(p.QueueID), 10) + "." + strconv.FormatInt(p.Offset, 10)))
}

// maxSearchCursorLen bounds a cursor: two int64s, a dot, base64 (4/3).
const maxSearchCursorLen = 64

// parseSearchCursor decodes a cursor of formatSearchCursor.
func parseSearchCursor(s string) (broker.SearchPosition, bool) {
	if len(s) > maxSearchCursorLen {
		return broker.SearchPosition{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return broker.SearchPosition{}, false
	}
	queue, offset, ok := strings.Cut(string(raw), ".")
	if !ok {
		return broker.SearchPosition{}, false
	}
	q, err1 := strconv.ParseInt(queue, 10, 32)
	o, err2 := strconv.ParseInt(offset, 10, 64)
	if err1 != nil || err2 != nil || q < 0 || o < -1 {
		return broker.SearchPosition{}, false
	}
	return broker.SearchPosition{QueueID: int32(q), Offset: o}, true
}

// skipBacklog moves a group's offsets to the end of its queues.
//
//	@Summary		Skip a group's backlog
//	@ID				skipBacklog
//	@Description	Moves the group's committed offsets of the topic (absent: of every topic it reads) to the end of each queue, so that what is stored now is never delivered to it (mqadmin skipAccumulatedMessage). Retries already in the group's retry topic and leases already out stay. For a broadcasting group every known consumer instance moves. Answers the group's progress afterwards.
//	@Tags			offsets
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string				true	"Group name"
//	@Param			request	body		SkipBacklogRequest	false	"The topic (optional; an empty body skips every topic of the group)"
//	@Success		200		{object}	Progress
//	@Failure		400		{object}	Problem	"invalid-name, malformed-request"
//	@Failure		404		{object}	Problem	"group-not-found, topic-not-found"
//	@Failure		413		{object}	Problem	"payload-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/groups/{group}/skip-backlog [post]
func (h *handler) skipBacklog(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req SkipBacklogRequest
	if err := readJSON(r, &req, true); err != nil {
		WriteError(w, r, err)
		return
	}
	if req.Topic != "" && !validName(req.Topic) {
		WriteError(w, r, fmt.Errorf("%w: topic %s", broker.ErrInvalidName, broker.QuoteValue(req.Topic)))
		return
	}
	p, err := h.groupProgress(r.Context(), group, func(ctx context.Context, group string) ([]broker.QueueProgress, error) {
		return h.deps.Broker.SkipBacklog(ctx, group, req.Topic)
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
