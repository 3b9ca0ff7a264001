package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// pollGrace is how much longer than waitMs a pull lets the broker take
// before its context ends.
const pollGrace = 5 * time.Second

// PullRequest asks for leased messages.
type PullRequest struct {
	// MaxMessages is the most messages to return (default 16).
	MaxMessages int `json:"maxMessages,omitempty" minimum:"1" maximum:"32" default:"16" example:"16"`
	// WaitMs is how long to long-poll when nothing is available (0 = answer at once).
	WaitMs int64 `json:"waitMs,omitempty" minimum:"0" maximum:"30000" default:"0" example:"20000"`
	// InvisibleMs is the lease length (0 = the group's invisibleMs, else the default lease of 30 s); each message's leaseUntil says when it runs out.
	InvisibleMs int64 `json:"invisibleMs,omitempty" minimum:"0" maximum:"43200000" example:"30000"`
	// TagExpression filters by tag: "*" or "a || b" (default: the group's subscription of the topic).
	TagExpression string `json:"tagExpression,omitempty" example:"created || paid"`
	// SQL filters by properties, an SQL92 expression like a subscription's sql (default: the group's
	// subscription of the topic). Property names are case-sensitive; one sent as an X-Mqgate-Property-<name>
	// header is lower-case. A message either filter refuses counts as consumed for the group.
	SQL string `json:"sql,omitempty" example:"amount > 100"`
} //	@name	PullRequest

// PulledMessage is a leased message, as a pull returns it: a Message
// with the receipt of its lease and when the lease runs out.
type PulledMessage struct {
	// MessageID is the 32-hex-character message id.
	MessageID string `json:"messageId" example:"7F00000100001F9000000000000004D2"`
	// Receipt is the lease handle for ack, nack and lease changes.
	Receipt string `json:"receipt" example:"ARjtLxX9uENgAAAAAQAAAAAAAAAABmxhZGRlcghsYWRkZXItZCsbpUybO_juz9j6uV4s4D4"`
	// LeaseUntil is when the lease runs out (RFC 3339 with milliseconds, UTC): the pull's invisibleMs, else the group's invisibleMs, else 30 s (the default lease), counted from the moment the lease was granted. Ack, nack or change the lease before then; afterwards the message goes to another consumer and the receipt is expired.
	LeaseUntil string `json:"leaseUntil" format:"date-time" example:"2026-11-29T10:00:30.000Z"`
	// Topic is the message's original topic.
	Topic string `json:"topic" example:"orders"`
	// QueueID is the queue the message was read from.
	QueueID int32 `json:"queueId" example:"1"`
	// QueueOffset is the message's offset in that queue.
	QueueOffset int64 `json:"queueOffset" example:"42"`
	// ReconsumeTimes counts earlier failed deliveries.
	ReconsumeTimes int32 `json:"reconsumeTimes" example:"0"`
	// OriginMessageID is the id of the first copy of a retried message.
	OriginMessageID string `json:"originMessageId,omitempty" example:"7F00000100001F9000000000000004D2"`
	// Tag is the message's tag.
	Tag string `json:"tag,omitempty" example:"created"`
	// Keys are the message's business keys.
	Keys []string `json:"keys,omitempty" example:"order-1001"`
	// Properties are the user properties (names as sent: a header-born property's name is lower-case).
	Properties map[string]string `json:"properties,omitempty"`
	// Body is the payload: the text itself when it is valid UTF-8, else base64.
	Body string `json:"body" example:"hello"`
	// BodyEncoding is "utf8" or "base64".
	BodyEncoding string `json:"bodyEncoding" enums:"utf8,base64" example:"utf8"`
	// BornAt is when the gateway received the message (RFC 3339).
	BornAt string `json:"bornAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
	// StoredAt is when the message was stored (RFC 3339).
	StoredAt string `json:"storedAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.001Z"`
} //	@name	PulledMessage

// Message is a looked-up or pushed message: what a pull returns without
// the lease (PulledMessage).
type Message struct {
	// MessageID is the 32-hex-character message id.
	MessageID string `json:"messageId" example:"7F00000100001F9000000000000004D2"`
	// Topic is the message's original topic.
	Topic string `json:"topic" example:"orders"`
	// QueueID is the queue the message was read from.
	QueueID int32 `json:"queueId" example:"1"`
	// QueueOffset is the message's offset in that queue.
	QueueOffset int64 `json:"queueOffset" example:"42"`
	// ReconsumeTimes counts earlier failed deliveries.
	ReconsumeTimes int32 `json:"reconsumeTimes" example:"0"`
	// OriginMessageID is the id of the first copy of a retried message.
	OriginMessageID string `json:"originMessageId,omitempty" example:"7F00000100001F9000000000000004D2"`
	// Tag is the message's tag.
	Tag string `json:"tag,omitempty" example:"created"`
	// Keys are the message's business keys.
	Keys []string `json:"keys,omitempty" example:"order-1001"`
	// Properties are the user properties (names as sent: a header-born property's name is lower-case).
	Properties map[string]string `json:"properties,omitempty"`
	// Body is the payload: the text itself when it is valid UTF-8, else base64.
	Body string `json:"body" example:"hello"`
	// BodyEncoding is "utf8" or "base64".
	BodyEncoding string `json:"bodyEncoding" enums:"utf8,base64" example:"utf8"`
	// BornAt is when the gateway received the message (RFC 3339).
	BornAt string `json:"bornAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
	// StoredAt is when the message was stored (RFC 3339).
	StoredAt string `json:"storedAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.001Z"`
} //	@name	Message

// PullResponse lists the leased messages (empty when the wait ran out).
type PullResponse struct {
	Messages []PulledMessage `json:"messages"`
} //	@name	PullResponse

// registerPullRoutes registers the pull route.
func (h *handler) registerPullRoutes(r chi.Router) {
	// POST /v1/groups/{group}/topics/{topic}/pull — lease messages (long poll).
	r.With(bodyLimit(smallBodyLimit), requireJSON, optionsInBody("pull", `{"maxMessages":16,"waitMs":20000}`)).Post("/groups/{group}/topics/{topic}/pull", h.pull)
}

// pull leases messages of a topic for a group, long-polling when none is
// available.
//
//	@Summary		Pull (pop) messages
//	@ID				pullMessages
//	@Description	Lease up to maxMessages messages of the topic (and of the group's retry topic) for the group. Each message carries a receipt; until its lease runs out (leaseUntil) no other member of the group gets it. Ack it, nack it, or change its lease with the receipt.
//	@Description	When nothing is available the call waits up to waitMs (at most 30000) and returns as soon as a message lands; it answers 200 with an empty list when the wait runs out or the server shuts down. An empty body takes all defaults.
//	@Description	In a broadcasting group every consumer instance gets every message: X-Mqgate-Client-Id is required (400 client-id-required without it) and names the instance, whose offsets, leases and retries are its own. Its first request registers it (409 quota-exceeded past --max-instances-per-group) and starts it by the group's consumeFrom. A nack or an expired lease of an instance is retried in place, to the same instance, after the nack's delay or the group's retryPolicy; after retryMaxTimes it goes to the group's dead-letter queue, and a resend of it goes back to that instance.
//	@Description	Every message carries leaseUntil, when its lease runs out (RFC 3339 with milliseconds, UTC): the moment of the lease plus invisibleMs, else the group's invisibleMs, else the default lease of 30 s.
//	@Description	Content negotiation: with `Accept: application/vnd.mqgate.batch` the 200 is a binary batch instead of JSON, for consumers that want the bodies as bytes: a 4-byte big-endian message count, then per message a 4-byte big-endian length and the message's JSON (a PulledMessage without body and bodyEncoding, so with receipt and leaseUntil), then a 4-byte big-endian length and the body as stored. Errors are problem+json either way. The 200 lists only application/json so that generated clients type it as a PullResponse; the binary batch is named in x-mqgate-alternative-media-types.
//	@Tags			consume
//	@Accept			json
//	@Produce		json
//	@Produce		application/vnd.mqgate.batch
//	@Produce		application/problem+json
//	@Param			group	path		string		true	"Consumer group"
//	@Param			topic	path		string		true	"Topic"
//	@Param			request	body		PullRequest	false	"Pull options"
//	@Param			X-Mqgate-Client-Id	header	string	false	"The calling consumer (1 to 128 printable ASCII characters without spaces), recorded in leases and attempt histories; required by a broadcasting group, where it names the consumer instance"	maxLength(128)
//	@Success		200		{object}	PullResponse
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument (also a query string: the options go in the body), invalid-sql, malformed-request, value-too-long, client-id-required (a broadcasting group's pull without X-Mqgate-Client-Id)"
//	@Failure		404		{object}	Problem	"topic-not-found, group-not-found"
//	@Failure		409		{object}	Problem	"quota-exceeded (groups: the pull creates the group; instancesPerGroup: a broadcasting group's new consumer instance)"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		429		{object}	Problem	"too-many-waiters (the server's --max-waiters or the account's maxLongPolls), rate-limited"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/groups/{group}/topics/{topic}/pull [post]
func (h *handler) pull(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	topic, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req PullRequest
	if err := readJSON(r, &req, true); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := checkPoll(&req.MaxMessages, req.WaitMs); err != nil {
		WriteError(w, r, err)
		return
	}
	if req.InvisibleMs < 0 || req.InvisibleMs > MaxInvisibleMs {
		WriteError(w, r, invalidArgument("invisibleMs %d must be between 0 and %d", req.InvisibleMs, MaxInvisibleMs))
		return
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond

	if wait > 0 {
		release, err := h.beginLongPoll(w, r, wait)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		defer release()
	}

	ctx, cancel := context.WithTimeout(r.Context(), wait+pollGrace)
	defer cancel()
	stop := context.AfterFunc(h.deps.PollContext, cancel)
	defer stop()

	msgs, err := h.deps.Broker.Pull(ctx, broker.PullRequest{
		Group:         group,
		Topic:         topic,
		MaxMessages:   req.MaxMessages,
		Wait:          wait,
		Invisible:     time.Duration(req.InvisibleMs) * time.Millisecond,
		TagExpression: req.TagExpression,
		SQL:           req.SQL,
	})
	if err != nil {
		// A wait cut short by shutdown or by the server-side limit is an
		// empty answer, not an error; a client that went away gets nothing.
		ended := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		if !ended || r.Context().Err() != nil {
			WriteError(w, r, err)
			return
		}
		msgs = nil
	}
	w.Header().Add("Vary", "Accept")
	if acceptsBatch(r) {
		writePullBatch(w, msgs)
		return
	}
	writePullResponse(w, msgs)
}

// acceptsBatch reports whether the request's Accept header names
// ContentTypeBatch (parameters and other listed types aside): the
// client asks for the binary rendering of the pull response. Anything
// else gets JSON, as before.
func acceptsBatch(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), ContentTypeBatch) {
				return true
			}
		}
	}
	return false
}

// ToMessage converts a broker message to its wire form without a lease
// (a lookup, and what a push in json mode posts). The body goes out as
// text when it is valid UTF-8 and as base64 otherwise.
func ToMessage(m broker.ReceivedMessage) Message {
	out := Message{
		MessageID:       m.MessageID,
		Topic:           m.Topic,
		QueueID:         m.QueueID,
		QueueOffset:     m.QueueOffset,
		ReconsumeTimes:  m.ReconsumeTimes,
		OriginMessageID: m.OriginMessageID,
		Tag:             m.Tag,
		Keys:            m.Keys,
		Properties:      m.Properties,
		BornAt:          formatTime(m.BornAt),
		StoredAt:        formatTime(m.StoredAt),
	}
	out.Body, out.BodyEncoding = wireBody(m.Body)
	return out
}

// ToPulledMessage converts a leased broker message to what a pull returns
// (appendMessage writes the same bytes without reflection).
func ToPulledMessage(m broker.ReceivedMessage) PulledMessage {
	out := PulledMessage{
		MessageID:       m.MessageID,
		Receipt:         m.Receipt,
		LeaseUntil:      formatTime(m.LeaseUntil),
		Topic:           m.Topic,
		QueueID:         m.QueueID,
		QueueOffset:     m.QueueOffset,
		ReconsumeTimes:  m.ReconsumeTimes,
		OriginMessageID: m.OriginMessageID,
		Tag:             m.Tag,
		Keys:            m.Keys,
		Properties:      m.Properties,
		BornAt:          formatTime(m.BornAt),
		StoredAt:        formatTime(m.StoredAt),
	}
	out.Body, out.BodyEncoding = wireBody(m.Body)
	return out
}

// wireBody is a body as JSON carries it: the text itself when it is valid
// UTF-8, else base64, and which of the two.
func wireBody(b []byte) (body, encoding string) {
	if utf8.Valid(b) {
		return string(b), encodingUTF8
	}
	return base64.StdEncoding.EncodeToString(b), encodingBase64
}

// checkPoll resolves a long poll's maxMessages (0: DefaultPullMessages)
// and checks it and waitMs against their bounds.
func checkPoll(maxMessages *int, waitMs int64) error {
	if *maxMessages == 0 {
		*maxMessages = DefaultPullMessages
	}
	switch {
	case *maxMessages < 1 || *maxMessages > MaxPullMessages:
		return invalidArgument("maxMessages %d must be between 1 and %d", *maxMessages, MaxPullMessages)
	case waitMs < 0 || waitMs > MaxWaitMs:
		return invalidArgument("waitMs %d must be between 0 and %d", waitMs, MaxWaitMs)
	}
	return nil
}

// beginLongPoll admits a request that waits up to wait: a place among
// the server's --max-waiters and the account's long polls, and write and
// read deadlines that let the response outlive the server-wide
// WriteTimeout (the read deadline's expiry would cancel the request
// context). Not every ResponseWriter supports deadlines. release gives
// the places back.
func (h *handler) beginLongPoll(w http.ResponseWriter, r *http.Request, wait time.Duration) (release func(), err error) {
	select {
	case h.waiters <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: %d pulls are already waiting", ErrTooManyWaiters, cap(h.waiters))
	}
	done, err := h.longPoll(r)
	if err != nil {
		<-h.waiters
		return nil, err
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(wait + h.deps.WriteTimeout)
	_ = rc.SetWriteDeadline(deadline)
	_ = rc.SetReadDeadline(deadline)
	return func() {
		done()
		<-h.waiters
	}, nil
}
