package api

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// ContentTypeBatch is the media type of a binary batch send: a 4-byte
// big-endian message count, then per message a 4-byte big-endian size and
// the body.
const ContentTypeBatch = "application/vnd.mqgate.batch"

// Headers of a raw (non-JSON) send.
const (
	headerContentType    = "Content-Type"
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
	headerTag            = "X-Mqgate-Tag"
	headerKeys           = "X-Mqgate-Keys"
	headerMqgatePrefix   = "X-Mqgate-" // every header of a send's attributes starts so
	headerPropertyPrefix = "X-Mqgate-Property-"
	headerShardingKey    = "X-Mqgate-Sharding-Key"
	headerDelayLevel     = "X-Mqgate-Delay-Level"
	headerDelayMs        = "X-Mqgate-Delay-Ms"
	headerDeliverAt      = "X-Mqgate-Deliver-At"
	// A raw send's transaction fields (transactions.go).
	headerTransactional = "X-Mqgate-Transactional"
	headerProducerGroup = "X-Mqgate-Producer-Group"
	headerCheckAfterMs  = "X-Mqgate-Check-After-Ms"
)

// Body encodings of SendMessage.body and Message.body.
const (
	encodingUTF8   = "utf8"
	encodingBase64 = "base64"
)

// maxDedupIDLength bounds Idempotency-Key and dedupId (bytes).
const maxDedupIDLength = broker.MaxDedupIDBytes

// maxDelayMs is the longest delayMs a send may ask for (one year; the
// broker may apply a lower configured maximum).
const maxDelayMs = 366 * 24 * 60 * 60 * 1000

// SendMessage is one message of a send request.
type SendMessage struct {
	// Body is the payload: UTF-8 text, or base64 when bodyEncoding is "base64". Must not be empty.
	Body string `json:"body" example:"hello"`
	// BodyEncoding says how body is encoded: "utf8" (default) or "base64".
	BodyEncoding string `json:"bodyEncoding,omitempty" enums:"utf8,base64" example:"utf8"`
	// Tag is one filterable label.
	Tag string `json:"tag,omitempty" example:"created"`
	// Keys are business keys for lookup by key.
	Keys []string `json:"keys,omitempty" example:"order-1001"`
	// Properties are user properties carried with the message, their names as given (SQL filters match names case-sensitively).
	Properties map[string]string `json:"properties,omitempty"`
	// ShardingKey routes the message to queue hash(shardingKey) mod queues, keeping messages with one key in order.
	ShardingKey string `json:"shardingKey,omitempty" example:"customer-42"`
	// DelayLevel delays delivery by a configured delay level (1 = 1s … 18 = 2h by default).
	DelayLevel int `json:"delayLevel,omitempty" minimum:"0" example:"0"`
	// DeliverAt delays delivery until this RFC 3339 time. At most one of delayLevel, delayMs, deliverAt.
	DeliverAt string `json:"deliverAt,omitempty" format:"date-time" example:"2026-12-01T10:00:00Z"`
	// DelayMs delays delivery by this many milliseconds.
	DelayMs int64 `json:"delayMs,omitempty" minimum:"0" example:"0"`
	// DedupID makes retries of this message idempotent within the dedup window.
	DedupID string `json:"dedupId,omitempty" maxLength:"255" example:"order-1001-created"`
	// Transactional stores the message as a half message, invisible to every group until its transaction is committed (POST /v1/transactions/{transactionId}/commit). A send carries one transactional message; it cannot be delayed.
	Transactional bool `json:"transactional,omitempty" example:"false"`
	// ProducerGroup is the group whose producers are asked about the transaction while it is not resolved (POST /v1/producer-groups/{producerGroup}/transactions/pull). Required with transactional.
	ProducerGroup string `json:"producerGroup,omitempty" maxLength:"120" example:"order-service"`
	// CheckAfterMs is how long after the send the first check falls due (default 6000).
	CheckAfterMs int64 `json:"checkAfterMs,omitempty" minimum:"100" maximum:"86400000" example:"6000"`
} //	@name	SendMessage

// SendRequest is the JSON body of a send: either the fields of one
// SendMessage, or only `messages` for a batch.
type SendRequest struct {
	SendMessage
	// Messages is a batch of messages, stored in order. Leave the single-message fields out when it is set.
	Messages *[]SendMessage `json:"messages,omitempty"`
} //	@name	SendRequest

// SendResult is where one message was stored.
type SendResult struct {
	// MessageID is the 32-hex-character message id.
	MessageID string `json:"messageId" example:"7F00000100001F9000000000000004D2"`
	// QueueID is the queue the message went to.
	QueueID int32 `json:"queueId" example:"1"`
	// QueueOffset is the message's offset in that queue.
	QueueOffset int64 `json:"queueOffset" example:"42"`
	// Duplicate is true when the dedup id matched an earlier send; the result is that send's.
	Duplicate bool `json:"duplicate,omitempty" example:"false"`
	// TransactionID names the transaction of a transactional send (the messageId; queueOffset is -1 until it is committed).
	TransactionID string `json:"transactionId,omitempty" example:"7F00000100001F9000000000000004D2"`
} //	@name	SendResult

// SendResponse lists one result per message, in request order.
type SendResponse struct {
	Results []SendResult `json:"results"`
} //	@name	SendResponse

// registerSendRoutes registers the send route.
func (h *handler) registerSendRoutes(r chi.Router) {
	// POST /v1/topics/{topic}/messages — send one message or a batch.
	r.With(refusePushHop, bodyLimit(h.deps.MaxRequestSize)).Post("/topics/{topic}/messages", h.send)
}

// send stores one message or a batch in a topic.
//
//	@Summary		Send messages
//	@ID				sendMessages
//	@Description	Send one message or a batch to a topic.
//	@Description
//	@Description	With `Content-Type: application/json` the body is one SendMessage, or `{"messages":[…]}` for a batch (at most 256 messages, stored in order).
//	@Description	With `Content-Type: application/vnd.mqgate.batch` the body is a binary batch: a 4-byte big-endian message count (1-256), then per message a 4-byte big-endian body size and the body (the framing of NSQ's binary `/mpub`); the `X-Mqgate-*` headers apply to every message.
//	@Description	With any other Content-Type the body is one raw message; its tag, keys and properties come from the `X-Mqgate-*` headers.
//	@Description	Each `X-Mqgate-Property-<name>` header (not declared below: OpenAPI cannot name a header family) is a property named `<name>` in lower case, since HTTP header names are case-insensitive and proxies may change their case: `X-Mqgate-Property-Source: web` is the property `source`. Property names in SQL filters (a pull's or a subscription's `sql`) are case-sensitive, so such a property is filtered by its lower-case name: `source = 'web'` matches it, `Source = 'web'` does not. JSON `properties` keep their names as given.
//	@Description
//	@Description	`Idempotency-Key` makes a retry safe: within the dedup window a repeated send returns the first result (with `Idempotent-Replayed: true`), the same key with a different payload is refused (422), and a concurrent duplicate gets 409. In a batch, message i without its own `dedupId` uses `<key>:<i>`.
//	@Description	A 503 `flush-timeout` means the outcome is unknown: retry with the same key.
//	@Description
//	@Description	`"transactional": true` with a `producerGroup` stores a half message: invisible to every group until its transaction (the `transactionId` of the result) is committed, or discarded by a rollback; while it is unresolved the producer group is asked about it (`POST /v1/producer-groups/{producerGroup}/transactions/pull`). One message per send, not delayed; with authentication it needs PUB on the producer group too.
//	@Tags			messages
//	@Accept			json
//	@Accept			octet-stream
//	@Accept			plain
//	@Accept			application/vnd.mqgate.batch
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			topic					path		string		true	"Topic name"
//	@Param			request					body		SendRequest	true	"One message, or {messages:[…]}"
//	@Param			Idempotency-Key			header		string		false	"Idempotency key (at most 255 printable ASCII characters)"
//	@Param			traceparent				header		string		false	"W3C trace context: stored with each message as its property traceparent (unless the message sets one), handed to consumers in the message's properties and as the traceparent header of a push; a malformed value is ignored"
//	@Param			tracestate				header		string		false	"W3C trace context: stored as the property tracestate with a valid traceparent (at most 512 characters)"
//	@Param			X-Mqgate-Tag			header		string		false	"Raw send: tag"
//	@Param			X-Mqgate-Keys			header		string		false	"Raw send: comma-separated keys"
//	@Param			X-Mqgate-Sharding-Key	header		string		false	"Raw send: sharding key"
//	@Param			X-Mqgate-Delay-Level	header		integer		false	"Raw send: delay level"
//	@Param			X-Mqgate-Delay-Ms		header		integer		false	"Raw send: delay in milliseconds"
//	@Param			X-Mqgate-Deliver-At		header		string		false	"Raw send: RFC 3339 delivery time"
//	@Param			X-Mqgate-Transactional	header		boolean		false	"Raw send: true for a transactional (half) message"
//	@Param			X-Mqgate-Producer-Group	header		string		false	"Raw send: the producer group of a transactional message"
//	@Param			X-Mqgate-Check-After-Ms	header		integer		false	"Raw send: checkAfterMs of a transactional message"
//	@Success		200						{object}	SendResponse
//	@Header			200						{boolean}	Idempotent-Replayed	"true when every message of the request repeated an earlier send (Idempotency-Key or dedupId): the results are that send's"
//	@Failure		400						{object}	Problem	"invalid-name, invalid-argument, malformed-request, empty-body, value-too-long (tag, keys, shardingKey, dedupId: 255 bytes; 64 keys; field and limit members name which)"
//	@Failure		404						{object}	Problem	"topic-not-found"
//	@Failure		409						{object}	Problem	"idempotency-request-in-flight (Retry-After), quota-exceeded (topics: the send creates the topic; pendingTimers; a transactional send: transactionsPerProducerGroup, pendingTransactions)"
//	@Failure		413						{object}	Problem	"body-too-large, properties-too-large (properties with tag, keys, sharding key and dedup id: 16 KiB, 128 properties)"
//	@Failure		422						{object}	Problem	"idempotency-key-reused"
//	@Failure		429						{object}	Problem	"rate-limited (the account's requestsPerSecond or messagesPerSecond; Retry-After)"
//	@Failure		500						{object}	Problem	"internal"
//	@Failure		503						{object}	Problem	"flush-timeout, storage-read-only, shutting-down"
//	@Failure		507						{object}	Problem	"disk-full"
//	@Failure		508						{object}	Problem	"push-loop (the request carries X-Mqgate-Push-Hop)"
//	@Router			/topics/{topic}/messages [post]
func (h *handler) send(w http.ResponseWriter, r *http.Request) {
	topic, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var msgs []broker.SendMessage
	batch := false
	body := getBuffer() // the raw body or the JSON text; free once sent
	defer putBuffer(body)
	switch sendFormat(header(r.Header, headerContentType)) {
	case formatEnvelope:
		msgs, batch, err = h.decodeEnvelope(r, body)
	case formatBinaryBatch:
		msgs, err = h.decodeBinaryBatch(r, body)
		batch = true
	default:
		msgs, err = h.decodeRaw(r, body)
	}
	if err != nil {
		WriteError(w, r, err)
		return
	}
	applyTraceContext(r.Header, msgs) // tracecontext.go
	if err := applyIdempotencyKey(msgs, batch, key); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := h.allowMessages(r, len(msgs)); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := requireProducerGroups(r, msgs); err != nil {
		WriteError(w, r, err)
		return
	}

	results, err := h.deps.Broker.Send(r.Context(), topic, msgs)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	replayed := len(results) > 0
	for _, res := range results {
		replayed = replayed && res.Duplicate
	}
	if replayed {
		w.Header().Set(headerReplayed, "true")
	}
	writeSendResponse(w, r, results)
}

// writeSendResponse writes the SendResponse of results. Message ids are
// hex, so the JSON is appended directly, without reflection; an id that is
// not (never produced by the broker) takes the general encoder.
func writeSendResponse(w http.ResponseWriter, r *http.Request, results []broker.SendResult) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := append((*buf)[:0], `{"results":[`...)
	for i, res := range results {
		if !isHex(res.MessageID) || res.TransactionID != "" && !isHex(res.TransactionID) {
			resp := SendResponse{Results: make([]SendResult, 0, len(results))}
			for _, res := range results {
				resp.Results = append(resp.Results, SendResult{MessageID: res.MessageID, QueueID: res.QueueID, QueueOffset: res.QueueOffset,
					Duplicate: res.Duplicate, TransactionID: res.TransactionID})
			}
			writeJSON(w, r, http.StatusOK, resp)
			return
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"messageId":"`...)
		b = append(b, res.MessageID...)
		b = append(b, `","queueId":`...)
		b = strconv.AppendInt(b, int64(res.QueueID), 10)
		b = append(b, `,"queueOffset":`...)
		b = strconv.AppendInt(b, res.QueueOffset, 10)
		if res.Duplicate {
			b = append(b, `,"duplicate":true`...)
		}
		if res.TransactionID != "" {
			b = append(b, `,"transactionId":"`...)
			b = append(b, res.TransactionID...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, "]}\n"...)
	*buf = b
	writeJSONBytes(w, b)
}

// isHex reports whether s is non-empty and all hexadecimal digits.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'F' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// Send body formats, chosen by the Content-Type.
const (
	formatRaw         = iota // any other type: one message, the body as-is
	formatEnvelope           // application/json: SendRequest
	formatBinaryBatch        // ContentTypeBatch: length-prefixed bodies
)

// sendFormat maps a send's Content-Type to its body format: exactly
// application/json is the JSON envelope, ContentTypeBatch the binary
// batch; any other type, application/*+json included, is a raw message
// body.
func sendFormat(contentType string) int {
	switch contentType { // the common spellings, without parsing
	case "application/json":
		return formatEnvelope
	case ContentTypeBatch:
		return formatBinaryBatch
	case "application/octet-stream", "text/plain", "":
		return formatRaw
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return formatRaw
	case mediaType == "application/json":
		return formatEnvelope
	case mediaType == ContentTypeBatch:
		return formatBinaryBatch
	}
	return formatRaw
}

// batchWithMessageFields is the error of a body with both messages and
// fields of a single message (m): it names those fields and says what to
// send instead.
func batchWithMessageFields(m SendMessage) error {
	if m.Transactional || m.ProducerGroup != "" || m.CheckAfterMs != 0 {
		return invalidArgument("a transactional send carries one message: send {body, transactional, producerGroup, …} " +
			"without messages, one send per transactional message (a batch of messages cannot be transactional)")
	}
	var fields []string
	v, t := reflect.ValueOf(m), reflect.TypeOf(m)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" && !v.Field(i).IsZero() {
			fields = append(fields, name)
		}
	}
	return invalidArgument("the body has messages and also %s of a single message: send either {messages:[…]} "+
		"with those fields in each message, or one message without messages", strings.Join(fields, ", "))
}

// decodeEnvelope decodes a JSON send body: one message, or a batch (then
// batch is true).
func (h *handler) decodeEnvelope(r *http.Request, buf *[]byte) (msgs []broker.SendMessage, batch bool, err error) {
	if err := readBodyInto(r, buf); err != nil {
		return nil, false, err
	}
	var req SendRequest
	if err := decodeJSON(*buf, &req); err != nil {
		if errors.Is(err, errUnknownMember) {
			err = fmt.Errorf("%w (the JSON body is a message {body, tag, …} or {messages:[…]}; "+
				"to store a JSON document as-is, send it with another Content-Type such as application/octet-stream)", err)
		}
		return nil, false, err
	}
	if req.Messages == nil {
		msg, err := h.convertMessage(req.SendMessage, "")
		if err != nil {
			return nil, false, err
		}
		return []broker.SendMessage{msg}, false, nil
	}
	if !reflect.ValueOf(req.SendMessage).IsZero() {
		return nil, true, batchWithMessageFields(req.SendMessage)
	}
	list := *req.Messages
	if len(list) == 0 {
		return nil, true, invalidArgument("messages must hold at least one message")
	}
	if len(list) > MaxBatchMessages {
		return nil, true, invalidArgument("messages holds %d messages; at most %d are allowed", len(list), MaxBatchMessages)
	}
	msgs = make([]broker.SendMessage, 0, len(list))
	for i, m := range list {
		msg, err := h.convertMessage(m, fmt.Sprintf("messages[%d].", i))
		if err != nil {
			return nil, true, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, true, nil
}

// convertMessage validates one JSON message and converts it; prefix names
// the message in error details ("messages[3].").
func (h *handler) convertMessage(m SendMessage, prefix string) (broker.SendMessage, error) {
	var body []byte
	switch m.BodyEncoding {
	case "", encodingUTF8:
		body = []byte(m.Body)
	case encodingBase64:
		decoded, err := base64.StdEncoding.DecodeString(m.Body)
		if err != nil {
			return broker.SendMessage{}, fmt.Errorf("%w: %sbody is not valid base64: %v", ErrMalformedRequest, prefix, err)
		}
		body = decoded
	default:
		return broker.SendMessage{}, invalidArgument("%sbodyEncoding %s must be %q or %q", prefix, broker.QuoteValue(m.BodyEncoding), encodingUTF8, encodingBase64)
	}
	msg := broker.SendMessage{
		Body:        body,
		Tag:         m.Tag,
		Keys:        m.Keys,
		Properties:  m.Properties,
		ShardingKey: m.ShardingKey,
		DelayLevel:  m.DelayLevel,
		DelayMs:     m.DelayMs,
		DedupID:     m.DedupID,

		Transactional: m.Transactional,
		ProducerGroup: m.ProducerGroup,
		CheckAfterMs:  m.CheckAfterMs,
	}
	if m.DeliverAt != "" {
		at, err := time.Parse(time.RFC3339Nano, m.DeliverAt)
		if err != nil {
			return broker.SendMessage{}, invalidArgument("%sdeliverAt %s is not an RFC 3339 time", prefix, broker.QuoteValue(m.DeliverAt))
		}
		msg.DeliverAt = at
	}
	return msg, h.checkMessage(msg, prefix)
}

// checkMessage applies the transport's own checks to one message; the
// broker's Send checks every limit of the message itself (tag, keys,
// properties, sharding key, dedup id: broker.LimitError) before writing.
func (h *handler) checkMessage(m broker.SendMessage, prefix string) error {
	switch {
	case len(m.Body) == 0:
		return fmt.Errorf("%w: %sbody is empty", broker.ErrEmptyBody, prefix)
	case len(m.Body) > h.deps.MaxMessageSize:
		return &broker.LimitError{Field: prefix + "body", Size: len(m.Body), Limit: h.deps.MaxMessageSize, Kind: broker.ErrTooLarge}
	case m.DelayLevel < 0:
		return invalidArgument("%sdelayLevel %d must not be negative", prefix, m.DelayLevel)
	case m.DelayMs < 0 || m.DelayMs > maxDelayMs:
		return invalidArgument("%sdelayMs %d must be between 0 and %d", prefix, m.DelayMs, int64(maxDelayMs))
	}
	delays := 0
	for _, set := range []bool{m.DelayLevel > 0, m.DelayMs > 0, !m.DeliverAt.IsZero()} {
		if set {
			delays++
		}
	}
	if delays > 1 {
		return invalidArgument("%suse at most one of delayLevel, delayMs and deliverAt", prefix)
	}
	return nil
}

// decodeRaw reads a non-JSON send body as one message whose attributes come
// from X-Mqgate-* headers.
func (h *handler) decodeRaw(r *http.Request, buf *[]byte) ([]broker.SendMessage, error) {
	limit := int64(h.deps.MaxMessageSize)
	if r.ContentLength > limit {
		return nil, &broker.LimitError{Field: "body", Size: int(r.ContentLength), Limit: h.deps.MaxMessageSize, Kind: broker.ErrTooLarge}
	}
	if err := readInto(buf, io.LimitReader(r.Body, limit+1), r.ContentLength); err != nil {
		return nil, fmt.Errorf("%w: reading body: %w", ErrMalformedRequest, err)
	}
	msg, err := headerAttributes(r)
	if err != nil {
		return nil, err
	}
	msg.Body = *buf
	if err := h.checkMessage(msg, ""); err != nil {
		return nil, err
	}
	return []broker.SendMessage{msg}, nil
}

// decodeBinaryBatch reads a ContentTypeBatch body: a 4-byte big-endian
// message count, then for each message a 4-byte big-endian body size and
// the body (the framing of NSQ's binary /mpub). The X-Mqgate-* headers
// give every message of the batch its tag, keys, properties, sharding key
// and delay, as for a raw send. Bodies alias buf, which outlives the send.
func (h *handler) decodeBinaryBatch(r *http.Request, buf *[]byte) ([]broker.SendMessage, error) {
	if err := readBodyInto(r, buf); err != nil {
		return nil, err
	}
	attrs, err := headerAttributes(r)
	if err != nil {
		return nil, err
	}
	frames, err := splitBatch(*buf, MaxBatchMessages, h.deps.MaxMessageSize)
	if err != nil {
		return nil, err
	}
	msgs := make([]broker.SendMessage, len(frames))
	for i, body := range frames {
		msgs[i] = attrs
		msgs[i].Body = body
		if err := h.checkMessage(msgs[i], "messages["+strconv.Itoa(i)+"]."); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// splitBatch splits a binary batch into its bodies (slices of data). The
// count must be 1..maxCount, every body 1..maxSize bytes, and the frames
// must cover data exactly.
func splitBatch(data []byte, maxCount, maxSize int) ([][]byte, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: a %s body starts with a 4-byte big-endian message count; the body has %d bytes", ErrMalformedRequest, ContentTypeBatch, len(data))
	}
	count := binary.BigEndian.Uint32(data)
	if count == 0 || count > uint32(maxCount) {
		return nil, invalidArgument("the batch holds %d messages; 1 to %d are allowed", count, maxCount)
	}
	if uint64(count)*4 > uint64(len(data)-4) {
		return nil, fmt.Errorf("%w: the batch announces %d messages but has only %d bytes after the count", ErrMalformedRequest, count, len(data)-4)
	}
	frames := make([][]byte, 0, count)
	rest := data[4:]
	for i := 0; i < int(count); i++ {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: messages[%d]: the body ends before its 4-byte size", ErrMalformedRequest, i)
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		switch {
		case size == 0:
			return nil, fmt.Errorf("%w: messages[%d].body is empty", broker.ErrEmptyBody, i)
		case size > uint32(maxSize):
			return nil, &broker.LimitError{Field: "messages[" + strconv.Itoa(i) + "].body", Size: int(min(size, 1<<31-1)), Limit: maxSize, Kind: broker.ErrTooLarge}
		case uint64(size) > uint64(len(rest)):
			return nil, fmt.Errorf("%w: messages[%d] announces %d bytes but %d remain", ErrMalformedRequest, i, size, len(rest))
		}
		frames = append(frames, rest[:size:size])
		rest = rest[size:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes follow the last of the %d messages", ErrMalformedRequest, len(rest), count)
	}
	return frames, nil
}

// AppendBatch appends the ContentTypeBatch encoding of bodies to dst.
func AppendBatch(dst []byte, bodies ...[]byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(bodies)))
	for _, b := range bodies {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
		dst = append(dst, b...)
	}
	return dst
}

// headerAttributes reads the X-Mqgate-* attributes of a raw or binary
// batch send into a message without a body.
func headerAttributes(r *http.Request) (broker.SendMessage, error) {
	var msg broker.SendMessage
	// One pass over the headers finds the properties and whether any
	// X-Mqgate-* header is there at all; most sends carry none, and then
	// the lookups below are skipped.
	attributes := false
	for name, values := range r.Header {
		if len(name) <= len(headerMqgatePrefix) || !strings.EqualFold(name[:len(headerMqgatePrefix)], headerMqgatePrefix) {
			continue
		}
		attributes = true
		if len(name) > len(headerPropertyPrefix) && strings.EqualFold(name[:len(headerPropertyPrefix)], headerPropertyPrefix) && len(values) > 0 {
			if msg.Properties == nil {
				msg.Properties = make(map[string]string)
			}
			// Header names are case-insensitive, so property names from headers are lower-cased.
			msg.Properties[strings.ToLower(name[len(headerPropertyPrefix):])] = values[0]
		}
	}
	if !attributes {
		return msg, nil
	}
	msg.Tag = header(r.Header, headerTag)
	msg.ShardingKey = header(r.Header, headerShardingKey)
	for _, line := range r.Header[headerKeys] {
		for _, k := range strings.Split(line, ",") {
			if k = strings.TrimSpace(k); k != "" {
				msg.Keys = append(msg.Keys, k)
			}
		}
	}
	if v := header(r.Header, headerDelayLevel); v != "" {
		level, err := strconv.Atoi(v)
		if err != nil {
			return msg, fmt.Errorf("%w: %s %s is not an integer", ErrMalformedRequest, headerDelayLevel, broker.QuoteValue(v))
		}
		msg.DelayLevel = level
	}
	if v := header(r.Header, headerDelayMs); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return msg, fmt.Errorf("%w: %s %s is not an integer", ErrMalformedRequest, headerDelayMs, broker.QuoteValue(v))
		}
		msg.DelayMs = ms
	}
	if v := header(r.Header, headerDeliverAt); v != "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return msg, fmt.Errorf("%w: %s %s is not an RFC 3339 time", ErrMalformedRequest, headerDeliverAt, broker.QuoteValue(v))
		}
		msg.DeliverAt = at
	}
	return msg, transactionHeaders(r, &msg)
}

// header is h.Get(key) for a key already in canonical form (every header
// constant of this package): net/http stores a request's header names
// canonicalized, so the map is indexed directly instead of canonicalizing
// key again on every call.
func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// idempotencyKey returns the Idempotency-Key header ("" when absent). The
// draft standard makes it a structured-field string ("…"); a bare token is
// accepted too.
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header[headerIdempotencyKey]
	if len(values) == 0 {
		return "", nil
	}
	if len(values) > 1 {
		return "", invalidArgument("%s must appear once", headerIdempotencyKey)
	}
	key := strings.TrimSpace(values[0])
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if key == "" || len(key) > maxDedupIDLength {
		return "", invalidArgument("%s must be 1-%d characters", headerIdempotencyKey, maxDedupIDLength)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", invalidArgument("%s must be printable ASCII", headerIdempotencyKey)
		}
	}
	return key, nil
}

// applyIdempotencyKey turns the request's idempotency key into per-message
// dedup ids: the key itself for a single message, "<key>:<i>" for message i
// of a batch that has no dedupId of its own.
func applyIdempotencyKey(msgs []broker.SendMessage, batch bool, key string) error {
	if key == "" {
		return nil
	}
	if !batch {
		if msgs[0].DedupID != "" && msgs[0].DedupID != key {
			return invalidArgument("dedupId %s differs from %s %s", broker.QuoteValue(msgs[0].DedupID), headerIdempotencyKey, broker.QuoteValue(key))
		}
		msgs[0].DedupID = key
		return nil
	}
	for i := range msgs {
		if msgs[i].DedupID == "" {
			msgs[i].DedupID = key + ":" + strconv.Itoa(i)
		}
	}
	return nil
}
