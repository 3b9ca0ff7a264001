package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// Tracer is the message trace the transport needs.
type Tracer interface {
	// Trace returns the life of the message id names (any of its copies).
	Trace(ctx context.Context, id string) (broker.MessageTrace, error)
}

// registerTraceRoutes registers the message trace.
func (h *handler) registerTraceRoutes(r chi.Router) {
	// GET /v1/messages/{messageId}/trace — a message's life.
	r.Get("/messages/{messageId}/trace", h.getMessageTrace)
}

// MessageTrace is the life of one message across its copies (retries, dead letters, resends), oldest event
// first. It lists at most 128 events: beyond that the oldest 64 and the newest 63 stay and one events-dropped
// event stands between them for the rest.
type MessageTrace struct {
	// MessageID is the id asked for.
	MessageID string `json:"messageId" example:"7F00000100001F900000000000000530"`
	// OriginMessageID is the id of the message's life: the one its copies carry as originMessageId.
	OriginMessageID string       `json:"originMessageId" example:"7F00000100001F9000000000000004D2"`
	Events          []TraceEvent `json:"events"`
	// DroppedEvents counts the events the bound left out (at least that many when truncated).
	DroppedEvents int `json:"droppedEvents" example:"0"`
	// Truncated: the message has more copies or trace records than a trace reads; older events may be missing.
	Truncated bool `json:"truncated" example:"false"`
	// Partial: deliveries, acks and push outcomes may be missing (tracing is off, --message-trace=false, or
	// the trace follower had not caught up within two seconds).
	Partial bool `json:"partial" example:"false"`
} //	@name	MessageTrace

// TraceEvent is one event of a message's life. Which members an event has depends on its type: stored (topic,
// queueId, queueOffset; dueAt of a delayed send; transactionId), delivered (group, clientId, epoch, attempt,
// leaseUntil), released (a lease changed to 0), acked, nacked (reason, delayLevel, delayMs), lease-expired,
// retried (retryMessageId, dueAt, delayLevel or delayMs, reconsumeTimes; inPlace for an ordered message),
// dead-lettered (deadLetterId, reason), resent (deadLetterId), discarded, transaction-committed (where the
// message went), transaction-rolled-back (reason), pushed (httpStatus, result), events-dropped (count).
type TraceEvent struct {
	Type string `json:"type" enums:"stored,delivered,released,acked,nacked,lease-expired,retried,dead-lettered,resent,discarded,transaction-committed,transaction-rolled-back,pushed,events-dropped" example:"delivered"`
	At   string `json:"at" format:"date-time" example:"2026-11-29T10:00:00.120Z"`
	// MessageID is the copy the event is about (the one stored, delivered or failed).
	MessageID   string `json:"messageId,omitempty" example:"7F00000100001F9000000000000004D2"`
	Topic       string `json:"topic,omitempty" example:"orders"`
	QueueID     *int32 `json:"queueId,omitempty" example:"1"`
	QueueOffset *int64 `json:"queueOffset,omitempty" example:"42"`
	Group       string `json:"group,omitempty" example:"billing"`
	// ClientID is the consumer's X-Mqgate-Client-Id (when it sent one).
	ClientID string `json:"clientId,omitempty" example:"billing-worker-3"`
	// Epoch is the delivery's lease epoch, the one its receipt carries (a decimal string: it exceeds 2^53).
	Epoch string `json:"epoch,omitempty" example:"1796160825542408448"`
	// Attempt numbers the deliveries of the message's life from 1.
	Attempt    int    `json:"attempt,omitempty" example:"1"`
	LeaseUntil string `json:"leaseUntil,omitempty" format:"date-time" example:"2026-11-29T10:00:30.120Z"`
	// Reason is a nack's, a dead letter's or a rollback's reason (at most 256 bytes; longer ones are cut).
	Reason         string `json:"reason,omitempty" example:"payment service unavailable"`
	DelayLevel     *int   `json:"delayLevel,omitempty" example:"0"`
	DelayMs        int64  `json:"delayMs,omitempty" example:"0"`
	DueAt          string `json:"dueAt,omitempty" format:"date-time" example:"2026-11-29T10:00:10.000Z"`
	ReconsumeTimes int32  `json:"reconsumeTimes,omitempty" example:"1"`
	// RetryMessageID is the id the retry is delivered as.
	RetryMessageID string `json:"retryMessageId,omitempty" example:"7F00000100001F900000000000000530"`
	DeadLetterID   string `json:"deadLetterId,omitempty" example:"7F00000100001F9000000000000009A4"`
	TransactionID  string `json:"transactionId,omitempty" example:"7F00000100001F9000000000000004D2"`
	// HTTPStatus is the push endpoint's answer (absent without one).
	HTTPStatus int `json:"httpStatus,omitempty" example:"200"`
	// Result is a push's outcome.
	Result  string `json:"result,omitempty" enums:"ok,3xx,4xx,5xx,gone,timeout,network,forbidden,abandoned" example:"ok"`
	InPlace bool   `json:"inPlace,omitempty" example:"false"`
	// Count is how many events an events-dropped event stands for.
	Count int `json:"count,omitempty" example:"0"`
} //	@name	TraceEvent

// getMessageTrace lists the life of a message.
//
//	@Summary		Trace a message
//	@Description	The life of a message across its copies, oldest event first: stored, delivered, acked, nacked, lease-expired, released, retried, dead-lettered, resent, discarded, transaction-committed or -rolled-back, pushed. Any id of the message finds it: its own, a retry's, a dead letter's, a resend's, a delayed send's delivery, a transaction's. Deliveries, acks and push outcomes come from records a background follower indexes; the call waits up to two seconds for it to catch up (partial says when it did not).
//	@ID				getMessageTrace
//	@Tags			messages
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			messageId	path		string	true	"32-hex-character message id"
//	@Success		200			{object}	MessageTrace
//	@Failure		400			{object}	Problem	"invalid-argument"
//	@Failure		404			{object}	Problem	"message-not-found"
//	@Failure		500			{object}	Problem	"internal"
//	@Failure		503			{object}	Problem	"shutting-down"
//	@Router			/messages/{messageId}/trace [get]
func (h *handler) getMessageTrace(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "messageId")
	if !isMessageID(id) {
		WriteError(w, r, invalidArgument("messageId %s must be %d hexadecimal characters", broker.QuoteValue(id), messageIDLength))
		return
	}
	tr, err := h.deps.Broker.Trace(r.Context(), strings.ToUpper(id))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toMessageTrace(tr))
}

func toMessageTrace(tr broker.MessageTrace) MessageTrace {
	out := MessageTrace{MessageID: tr.MessageID, OriginMessageID: tr.OriginMessageID, Events: make([]TraceEvent, len(tr.Events)),
		DroppedEvents: tr.DroppedEvents, Truncated: tr.Truncated, Partial: tr.Partial}
	for i, e := range tr.Events {
		ev := TraceEvent{Type: e.Type, At: formatTime(e.At), MessageID: e.MessageID, Topic: e.Topic, Group: e.Group,
			ClientID: e.ClientID, Attempt: e.Attempt, LeaseUntil: formatTime(e.LeaseUntil), Reason: e.Reason,
			DelayMs: e.DelayMs, DueAt: formatTime(e.DueAt), ReconsumeTimes: e.ReconsumeTimes, RetryMessageID: e.RetryMessageID,
			DeadLetterID: e.DeadLetterID, TransactionID: e.TransactionID, HTTPStatus: e.HTTPStatus, Result: e.Result,
			InPlace: e.InPlace, Count: e.Count}
		if e.HasPosition {
			q := e.QueueID
			ev.QueueID = &q
			if e.QueueOffset >= 0 {
				off := e.QueueOffset
				ev.QueueOffset = &off
			}
		}
		if e.Epoch != 0 {
			ev.Epoch = strconv.FormatUint(e.Epoch, 10)
		}
		if e.HasDelayLevel {
			lv := e.DelayLevel
			ev.DelayLevel = &lv
		}
		out.Events[i] = ev
	}
	return out
}
