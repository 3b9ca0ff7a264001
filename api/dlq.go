package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// DeadLetters is the dead-letter administration the transport needs.
type DeadLetters interface {
	// ListDeadLetters lists a group's dead letters matching f from cursor.
	ListDeadLetters(ctx context.Context, group string, f broker.DLQFilter, cursor string, limit int) ([]broker.DeadLetter, string, error)
	// GetDeadLetter returns one dead letter with its body.
	GetDeadLetter(ctx context.Context, group, id string) (broker.DeadLetter, error)
	// ResendDeadLetters sends dead letters back to their original topics.
	ResendDeadLetters(ctx context.Context, group string, ids []string, f *broker.DLQFilter) (broker.ResendResult, error)
	// DiscardDeadLetter marks a dead letter discarded.
	DiscardDeadLetter(ctx context.Context, group, id string) error
}

// Attempt is one failed delivery of a message. The history keeps the newest attempts (at most 32, in 8 KiB,
// each reason cut to 512 bytes); older ones are folded into a first entry with outcome "omitted", the time of
// the first failure and their count.
type Attempt struct {
	At         string `json:"at" format:"date-time" example:"2026-11-29T10:00:10.000Z"`
	Outcome    string `json:"outcome" enums:"nack,expired,omitted" example:"nack"`
	Client     string `json:"client,omitempty" example:"billing-worker-3"`
	Reason     string `json:"reason,omitempty" example:"payment service unavailable"`
	DelayLevel int    `json:"delayLevel" example:"0"`
	// DelayMs is the delay the retry after this attempt waited on a timer (a nack's delayMs or the retryPolicy).
	DelayMs int64 `json:"delayMs,omitempty" example:"0"`
	// Count is, for outcome "omitted", how many earlier attempts the entry stands for.
	Count int `json:"count,omitempty" example:"0"`
} //	@name	Attempt

// DeadLetter is one message of a group's dead-letter queue.
type DeadLetter struct {
	// MessageID identifies the dead letter: resend or discard it by this id.
	MessageID       string            `json:"messageId" example:"7F00000100001F9000000000000009A4"`
	OriginMessageID string            `json:"originMessageId" example:"7F00000100001F9000000000000004D2"`
	OriginalTopic   string            `json:"originalTopic" example:"orders"`
	ReconsumeTimes  int32             `json:"reconsumeTimes" example:"17"`
	Reason          string            `json:"reason" example:"payment service unavailable"`
	FirstFailedAt   string            `json:"firstFailedAt" format:"date-time" example:"2026-11-29T10:00:10.000Z"`
	DeadAt          string            `json:"deadAt" format:"date-time" example:"2026-11-29T10:05:00.000Z"`
	Status          string            `json:"status" enums:"dead,resent,discarded" example:"dead"`
	StatusAt        string            `json:"statusAt,omitempty" format:"date-time" example:"2026-11-29T11:00:00.000Z"`
	Attempts        []Attempt         `json:"attempts"`
	Tag             string            `json:"tag,omitempty" example:"created"`
	Keys            []string          `json:"keys,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
	// Body and BodyEncoding are only in the single-letter view.
	Body         string `json:"body,omitempty" example:"hello"`
	BodyEncoding string `json:"bodyEncoding,omitempty" enums:"utf8,base64" example:"utf8"`
} //	@name	DeadLetter

// DeadLetterList is one page of dead letters.
type DeadLetterList struct {
	Items []DeadLetter `json:"items"`
	// Next is the cursor of the next page; absent on the last page.
	Next string `json:"next,omitempty" example:"7"`
} //	@name	DeadLetterList

// DLQFilter selects dead letters for a bulk resend.
type DLQFilter struct {
	OriginalTopic  string `json:"originalTopic,omitempty" example:"orders"`
	From           string `json:"from,omitempty" format:"date-time" example:"2026-11-29T00:00:00Z"`
	To             string `json:"to,omitempty" format:"date-time" example:"2026-11-30T00:00:00Z"`
	ReasonContains string `json:"reasonContains,omitempty" example:"timeout"`
} //	@name	DLQFilter

// ResendRequest names dead letters to resend: by id, or by filter.
type ResendRequest struct {
	MessageIDs []string   `json:"messageIds,omitempty"`
	Filter     *DLQFilter `json:"filter,omitempty"`
} //	@name	ResendRequest

// ResendResponse reports a resend.
type ResendResponse struct {
	Resent  []string `json:"resent"`
	Skipped []string `json:"skipped"`
} //	@name	ResendResponse

// registerDLQRoutes registers the dead-letter administration.
func (h *handler) registerDLQRoutes(r chi.Router) {
	// GET /v1/groups/{group}/dlq — list dead letters.
	r.Get("/groups/{group}/dlq", h.listDLQ)
	// GET /v1/groups/{group}/dlq/{messageId} — one dead letter with its body.
	r.Get("/groups/{group}/dlq/{messageId}", h.getDLQ)
	// DELETE /v1/groups/{group}/dlq/{messageId} — discard a dead letter.
	r.Delete("/groups/{group}/dlq/{messageId}", h.discardDLQ)
	// POST /v1/groups/{group}/dlq/resend — resend to the original topics.
	r.With(bodyLimit(smallBodyLimit), requireJSON).Post("/groups/{group}/dlq/resend", h.resendDLQ)
}

func parseOptionalTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalidArgument("%s %s is not an RFC 3339 time", name, broker.QuoteValue(v))
	}
	return t, nil
}

func toDLQFilter(originalTopic, from, to, reason string) (broker.DLQFilter, error) {
	f := broker.DLQFilter{OriginalTopic: originalTopic, ReasonContains: reason}
	var err error
	if f.From, err = parseOptionalTime("from", from); err != nil {
		return f, err
	}
	if f.To, err = parseOptionalTime("to", to); err != nil {
		return f, err
	}
	return f, nil
}

// listDLQ lists a group's dead letters, oldest first.
//
//	@Summary		List dead letters
//	@ID				listDeadLetters
//	@Description	Dead letters never reach pulls. Each carries its attempt history; resend or discard it by messageId. Filters combine; pages follow `next`.
//	@Tags			dlq
//	@Produce		json
//	@Param			group			path		string	true	"Group name"
//	@Param			originalTopic	query		string	false	"Only letters of this topic"
//	@Param			from			query		string	false	"Dead at or after (RFC 3339)"	Format(date-time)
//	@Param			to				query		string	false	"Dead at or before (RFC 3339)"	Format(date-time)
//	@Param			reasonContains	query		string	false	"Case-insensitive text in the last reason"
//	@Param			status			query		string	false	"Only letters in this status"	Enums(dead, resent, discarded)
//	@Param			cursor			query		string	false	"The next of the previous page (opaque); absent: the first page"
//	@Param			limit			query		int		false	"Page size"	minimum(1)	maximum(500)	default(100)
//	@Success		200				{object}	DeadLetterList
//	@Failure		400				{object}	Problem	"invalid-name, invalid-argument"
//	@Failure		404				{object}	Problem	"group-not-found"
//	@Failure		500				{object}	Problem	"internal"
//	@Failure		503				{object}	Problem	"shutting-down"
//	@Router			/groups/{group}/dlq [get]
func (h *handler) listDLQ(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	q := r.URL.Query()
	f, err := toDLQFilter(q.Get("originalTopic"), q.Get("from"), q.Get("to"), q.Get("reasonContains"))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	switch f.Status = q.Get("status"); f.Status {
	case "", broker.DLQDead, broker.DLQResent, broker.DLQDiscarded:
	default:
		WriteError(w, r, invalidArgument("status must be dead, resent or discarded"))
		return
	}
	limit, err := queryInt(q, "limit", 100, 1, 500)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	items, next, err := h.deps.Broker.ListDeadLetters(r.Context(), group, f, q.Get("cursor"), int(limit))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := DeadLetterList{Items: make([]DeadLetter, 0, len(items)), Next: next}
	for _, d := range items {
		resp.Items = append(resp.Items, toDeadLetter(d, false))
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// getDLQ returns one dead letter with its body.
//
//	@Summary	Get a dead letter
//	@ID			getDeadLetter
//	@Tags		dlq
//	@Produce	json
//	@Param		group		path		string	true	"Group name"
//	@Param		messageId	path		string	true	"Dead letter id"
//	@Success	200			{object}	DeadLetter
//	@Failure	400			{object}	Problem	"invalid-name, invalid-argument"
//	@Failure	404			{object}	Problem	"group-not-found, message-not-found"
//	@Failure	500			{object}	Problem	"internal"
//	@Failure	503			{object}	Problem	"shutting-down"
//	@Router		/groups/{group}/dlq/{messageId} [get]
func (h *handler) getDLQ(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	d, err := h.deps.Broker.GetDeadLetter(r.Context(), group, chi.URLParam(r, "messageId"))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toDeadLetter(d, true))
}

// discardDLQ marks a dead letter discarded.
//
//	@Summary	Discard a dead letter
//	@ID			discardDeadLetter
//	@Tags		dlq
//	@Param		group		path	string	true	"Group name"
//	@Param		messageId	path	string	true	"Dead letter id"
//	@Success	204
//	@Failure	400	{object}	Problem	"invalid-name, invalid-argument"
//	@Failure	404	{object}	Problem	"group-not-found, message-not-found"
//	@Failure	500	{object}	Problem	"internal"
//	@Failure	503	{object}	Problem	"storage-read-only, shutting-down"
//	@Failure	507	{object}	Problem	"disk-full"
//	@Router		/groups/{group}/dlq/{messageId} [delete]
func (h *handler) discardDLQ(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	if err := h.deps.Broker.DiscardDeadLetter(r.Context(), group, chi.URLParam(r, "messageId")); err != nil {
		WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resendDLQ sends dead letters back to their original topics.
//
//	@Summary		Resend dead letters
//	@ID				resendDeadLetters
//	@Description	Resends the named dead letters (or every dead one matching the filter, up to 10 000, at about 5 000 messages/s) to their original topics with a fresh attempt count; ORIGIN_MESSAGE_ID is kept. A letter is resent once: later requests list it under skipped.
//	@Tags			dlq
//	@Accept			json
//	@Produce		json
//	@Param			group	path		string			true	"Group name"
//	@Param			request	body		ResendRequest	true	"Ids or a filter"
//	@Success		200		{object}	ResendResponse
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, malformed-request"
//	@Failure		404		{object}	Problem	"group-not-found, message-not-found, topic-not-found"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"storage-read-only, shutting-down"
//	@Failure		507		{object}	Problem	"disk-full"
//	@Router			/groups/{group}/dlq/resend [post]
func (h *handler) resendDLQ(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req ResendRequest
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	if (len(req.MessageIDs) == 0) == (req.Filter == nil) {
		WriteError(w, r, invalidArgument("give either messageIds or filter"))
		return
	}
	var filter *broker.DLQFilter
	if req.Filter != nil {
		f, err := toDLQFilter(req.Filter.OriginalTopic, req.Filter.From, req.Filter.To, req.Filter.ReasonContains)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		filter = &f
	}
	res, err := h.deps.Broker.ResendDeadLetters(r.Context(), group, req.MessageIDs, filter)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := ResendResponse{Resent: res.Resent, Skipped: res.Skipped}
	if resp.Resent == nil {
		resp.Resent = []string{}
	}
	if resp.Skipped == nil {
		resp.Skipped = []string{}
	}
	writeJSON(w, r, http.StatusOK, resp)
}

func toDeadLetter(d broker.DeadLetter, withBody bool) DeadLetter {
	out := DeadLetter{
		MessageID:       d.MessageID,
		OriginMessageID: d.OriginMessageID,
		OriginalTopic:   d.OriginalTopic,
		ReconsumeTimes:  d.ReconsumeTimes,
		Reason:          d.Reason,
		FirstFailedAt:   formatTime(d.FirstFailedAt),
		DeadAt:          formatTime(d.DeadAt),
		Status:          d.Status,
		StatusAt:        formatTime(d.StatusAt),
		Attempts:        make([]Attempt, 0, len(d.Attempts)),
		Tag:             d.Tag,
		Keys:            d.Keys,
		Properties:      d.Properties,
	}
	for _, a := range d.Attempts {
		out.Attempts = append(out.Attempts, Attempt{At: formatTime(a.At), Outcome: a.Outcome, Client: a.Client, Reason: a.Reason, DelayLevel: a.Level, DelayMs: a.DelayMs, Count: a.Count})
	}
	if withBody {
		m := ToMessage(broker.ReceivedMessage{Body: d.Body})
		out.Body, out.BodyEncoding = m.Body, m.BodyEncoding
	}
	return out
}
