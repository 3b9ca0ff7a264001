package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mqgate/mqgate/server/broker"
)

// How SQS messages are stored (README "SQS API"): the body as the
// message's body; each message attribute as a user property of its name
// (a String or Number attribute its value, a Binary one its value in
// base64), with the data type of those that are not plain String in the
// property sqs.types (a JSON object); AWSTraceHeader in sqs.trace; a FIFO
// message's MessageGroupId in sqs.group (and as the sharding key) and its
// deduplication id in sqs.dedup (and as the broker's dedup id). A message
// sent through the native API reads as one whose user properties are
// String attributes. Property names starting "sqs." are the endpoint's.
const (
	propPrefix = "sqs."
	propTypes  = propPrefix + "types"
	propTrace  = propPrefix + "trace"
	propGroup  = propPrefix + "group"
	propDedup  = propPrefix + "dedup"
)

// Limits of SQS.
const (
	maxBatchEntries      = 10
	maxMessageAttributes = 10
	maxAttributeName     = 256
	maxReceive           = 10
	maxWaitSeconds       = 20
	maxVisibility        = 43200
	maxDelaySeconds      = 900
	maxBatchID           = 80
)

// receipt handles wrap the broker's receipts: "mq1" and the receipt in
// unpadded base64url, opaque to clients.
const handlePrefix = "mq1"

func wrapReceipt(r string) string {
	return handlePrefix + base64.RawURLEncoding.EncodeToString([]byte(r))
}

func unwrapReceipt(h string) (string, error) {
	rest, ok := strings.CutPrefix(h, handlePrefix)
	if !ok || rest == "" {
		return "", errReceiptHandleInvalid(h)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || !utf8.Valid(b) {
		return "", errReceiptHandleInvalid(h)
	}
	return string(b), nil
}

type sendMessageInput struct {
	QueueUrl                string //nolint:revive // the wire name
	MessageBody             string
	DelaySeconds            *int
	MessageAttributes       map[string]attributeValue
	MessageSystemAttributes map[string]attributeValue
	MessageDeduplicationId  string //nolint:revive // the wire name
	MessageGroupId          string //nolint:revive // the wire name
}

type sendMessageOutput struct {
	MessageId                    string //nolint:revive // the wire name
	MD5OfMessageBody             string
	MD5OfMessageAttributes       string `json:",omitempty"`
	MD5OfMessageSystemAttributes string `json:",omitempty"`
	SequenceNumber               string `json:",omitempty"`
}

func (h *Handler) sendMessage(ctx context.Context, _ *request, in *sendMessageInput) (*sendMessageOutput, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	msg, out, err := h.prepareSend(qs, in)
	if err != nil {
		return nil, err
	}
	res, err := h.sendOne(ctx, qs, msg)
	if err != nil {
		return nil, err
	}
	finishSend(qs, out, res)
	return out, nil
}

// sendOne sends one message. A FIFO message whose deduplication id was
// used within the window for another body is accepted and not delivered,
// as on SQS: its answer carries a fresh MessageId and no sequence number
// (the first message's are not at hand).
func (h *Handler) sendOne(ctx context.Context, qs *queueState, msg broker.SendMessage) (broker.SendResult, error) {
	res, err := h.b.Send(ctx, qs.name.topic(), []broker.SendMessage{msg})
	if errors.Is(err, broker.ErrIdempotencyKeyReused) {
		return broker.SendResult{MessageID: strings.ReplaceAll(newRequestID(), "-", ""), QueueID: -1, Duplicate: true}, nil
	}
	if err != nil {
		return broker.SendResult{}, err
	}
	return res[0], nil
}

// prepareSend checks one message and builds what the broker stores and
// the answer's checksums.
func (h *Handler) prepareSend(qs *queueState, in *sendMessageInput) (broker.SendMessage, *sendMessageOutput, error) {
	var msg broker.SendMessage
	if in.MessageBody == "" {
		return msg, nil, errMissing("MessageBody")
	}
	if err := checkBody(in.MessageBody); err != nil {
		return msg, nil, err
	}
	size := len(in.MessageBody)
	props := map[string]string{}
	types := map[string]string{}
	if len(in.MessageAttributes) > maxMessageAttributes {
		return msg, nil, errInvalidParameter("Number of message attributes [%d] exceeds the allowed maximum [%d].", len(in.MessageAttributes), maxMessageAttributes)
	}
	for name, a := range in.MessageAttributes {
		v, n, err := checkAttribute(name, a)
		if err != nil {
			return msg, nil, err
		}
		size += n
		props[name] = v
		if a.DataType != "String" {
			types[name] = a.DataType
		}
	}
	for name, a := range in.MessageSystemAttributes {
		if name != "AWSTraceHeader" {
			return msg, nil, errInvalidParameter("Message system attribute name %q is invalid.", truncate(name, 100))
		}
		if a.DataType != "String" || a.StringValue == nil || *a.StringValue == "" {
			return msg, nil, errInvalidParameter("Message system attribute AWSTraceHeader must be a non-empty String.")
		}
		props[propTrace] = *a.StringValue
	}
	if len(types) > 0 {
		b, _ := json.Marshal(types)
		props[propTypes] = string(b)
	}
	if limit := attrInt(qs.attrs, attrMaxMessageSize); size > limit {
		return msg, nil, errInvalidParameter("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", limit)
	}
	delay := attrInt(qs.attrs, attrDelaySeconds)
	if in.DelaySeconds != nil {
		if qs.name.fifo() && *in.DelaySeconds != 0 {
			return msg, nil, errInvalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", *in.DelaySeconds)
		}
		if *in.DelaySeconds < 0 || *in.DelaySeconds > maxDelaySeconds {
			return msg, nil, errInvalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and %d.", *in.DelaySeconds, maxDelaySeconds)
		}
		delay = *in.DelaySeconds
	}
	if qs.name.fifo() {
		if in.MessageGroupId == "" {
			return msg, nil, errMissing("MessageGroupId")
		}
		dedup := in.MessageDeduplicationId
		if dedup == "" {
			if qs.attrs[attrContentBasedDedup] != "true" {
				return msg, nil, errInvalidParameter("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
			}
			sum := sha256.Sum256([]byte(in.MessageBody))
			dedup = hex.EncodeToString(sum[:])
		}
		if err := checkFifoID("MessageDeduplicationId", dedup); err != nil {
			return msg, nil, err
		}
		if err := checkFifoID("MessageGroupId", in.MessageGroupId); err != nil {
			return msg, nil, err
		}
		props[propGroup], props[propDedup] = in.MessageGroupId, dedup
		msg.ShardingKey, msg.DedupID = in.MessageGroupId, dedup
		if qs.attrs[attrDeduplicationScope] == "messageGroup" {
			// Deduplicated within the message group: the group is part of
			// the broker's dedup id (hashed, to stay within its limit).
			sum := sha256.Sum256([]byte(in.MessageGroupId + "\n" + dedup))
			msg.DedupID = "g-" + hex.EncodeToString(sum[:])
		}
	} else if in.MessageDeduplicationId != "" {
		return msg, nil, errInvalidParameter("The request include parameter MessageDeduplicationId that is not valid for this queue type")
	} else if in.MessageGroupId != "" {
		// A fair queue: the group is the sharding key, so one tenant's
		// backlog fills one broker queue of the topic, and receives,
		// which start at the next queue each time, reach the other
		// tenants' messages past it. No order is kept (the group is not
		// orderly).
		if err := checkFifoID("MessageGroupId", in.MessageGroupId); err != nil {
			return msg, nil, err
		}
		props[propGroup] = in.MessageGroupId
		msg.ShardingKey = in.MessageGroupId
	}
	msg.Body = []byte(in.MessageBody)
	msg.Properties = props
	if delay > 0 {
		msg.DelayMs = int64(delay) * 1000
	}
	out := &sendMessageOutput{
		MD5OfMessageBody:             md5Hex(in.MessageBody),
		MD5OfMessageAttributes:       md5OfAttributes(in.MessageAttributes),
		MD5OfMessageSystemAttributes: md5OfAttributes(in.MessageSystemAttributes),
	}
	return msg, out, nil
}

// finishSend fills the answer from where the broker stored the message.
func finishSend(qs *queueState, out *sendMessageOutput, res broker.SendResult) {
	out.MessageId = res.MessageID
	if qs.name.fifo() && res.QueueID >= 0 {
		out.SequenceNumber = sequenceNumber(res.QueueID, res.QueueOffset)
	}
}

// sequenceNumber is a FIFO message's sequence number: its queue and its
// offset there, increasing within a message group.
func sequenceNumber(queue int32, offset int64) string {
	return strconv.FormatInt(int64(queue), 10) + fmt.Sprintf("%019d", offset)
}

// checkBody checks the characters SQS allows in a body: #x9 | #xA | #xD
// | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF.
func checkBody(s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return errInvalidMessageContents("Invalid binary character in the message body: the body is not UTF-8.")
			}
		}
		if !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return errInvalidMessageContents(fmt.Sprintf("Invalid binary character '#x%X' was found in the message body, the set of allowed characters is available at http://www.w3.org/TR/REC-xml/#charsets", r))
		}
	}
	return nil
}

// checkFifoID checks a MessageGroupId or MessageDeduplicationId: 1 to 128
// printable ASCII characters.
func checkFifoID(field, v string) error {
	if v == "" || len(v) > 128 {
		return errInvalidParameter("Value for parameter %s is invalid. Reason: must be 1 to 128 characters.", field)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return errInvalidParameter("Value for parameter %s is invalid. Reason: only printable ASCII characters without spaces are allowed.", field)
		}
	}
	return nil
}

// checkAttribute checks one message attribute and returns the property
// value that stores it and its size as SQS counts it.
func checkAttribute(name string, a attributeValue) (string, int, error) {
	if name == "" || len(name) > maxAttributeName {
		return "", 0, errInvalidParameter("Message attribute name must be 1 to %d characters.", maxAttributeName)
	}
	lower := strings.ToLower(name)
	if strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") || strings.HasPrefix(name, propPrefix) ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return "", 0, errInvalidParameter("Message attribute name '%s' is reserved or malformed.", truncate(name, 100))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", 0, errInvalidParameter("Message attribute name '%s' contains an invalid character.", truncate(name, 100))
		}
	}
	base, _, _ := strings.Cut(a.DataType, ".")
	if len(a.DataType) > 256 || len(a.StringListValues) > 0 || len(a.BinaryListValues) > 0 {
		return "", 0, errInvalidParameter("Message attribute '%s' must have a DataType of String, Number or Binary (list values are not supported).", truncate(name, 100))
	}
	size := len(name) + len(a.DataType)
	switch base {
	case "String", "Number":
		if a.StringValue == nil || *a.StringValue == "" || a.BinaryValue != nil {
			return "", 0, errInvalidParameter("Message attribute '%s' must contain a non-empty value of type '%s'.", truncate(name, 100), base)
		}
		v := *a.StringValue
		if err := checkBody(v); err != nil {
			return "", 0, errInvalidParameter("Message attribute '%s' has an invalid character.", truncate(name, 100))
		}
		if base == "Number" {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return "", 0, errInvalidParameter("Can't cast the value of message (user) attribute '%s' to a number.", truncate(name, 100))
			}
		}
		return v, size + len(v), nil
	case "Binary":
		if len(a.BinaryValue) == 0 || a.StringValue != nil {
			return "", 0, errInvalidParameter("Message attribute '%s' must contain a non-empty value of type 'Binary'.", truncate(name, 100))
		}
		return base64.StdEncoding.EncodeToString(a.BinaryValue), size + len(a.BinaryValue), nil
	}
	return "", 0, errInvalidParameter("The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", truncate(name, 100))
}

type batchEntry struct {
	Id string //nolint:revive // the wire name
}

// checkBatch checks the entry count and ids of a batch.
func checkBatch(ids []string) error {
	if len(ids) == 0 {
		return errEmptyBatch()
	}
	if len(ids) > maxBatchEntries {
		return errTooManyEntries(len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id == "" || len(id) > maxBatchID {
			return errInvalidBatchEntryID(id)
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
				return errInvalidBatchEntryID(id)
			}
		}
		if seen[id] {
			return errIDsNotDistinct(id)
		}
		seen[id] = true
	}
	return nil
}

type sendBatchEntry struct {
	Id                      string //nolint:revive // the wire name
	MessageBody             string
	DelaySeconds            *int
	MessageAttributes       map[string]attributeValue
	MessageSystemAttributes map[string]attributeValue
	MessageDeduplicationId  string //nolint:revive // the wire name
	MessageGroupId          string //nolint:revive // the wire name
}

type sendMessageBatchInput struct {
	QueueUrl string //nolint:revive // the wire name
	Entries  []sendBatchEntry
}

type sendBatchResult struct {
	Id string //nolint:revive // the wire name
	sendMessageOutput
}

type batchFailure struct {
	Id          string //nolint:revive // the wire name
	Code        string
	Message     string
	SenderFault bool
}

type sendMessageBatchOutput struct {
	Successful []sendBatchResult
	Failed     []batchFailure
}

func failure(id string, e *apiError) batchFailure {
	return batchFailure{Id: id, Code: e.shape, Message: e.msg, SenderFault: e.sender()}
}

func (h *Handler) sendMessageBatch(ctx context.Context, _ *request, in *sendMessageBatchInput) (*sendMessageBatchOutput, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = e.Id
		total += len(e.MessageBody)
	}
	if err := checkBatch(ids); err != nil {
		return nil, err
	}
	if limit := attrInt(qs.attrs, attrMaxMessageSize); total > limit {
		return nil, errBatchTooLong(total, limit)
	}
	out := &sendMessageBatchOutput{Successful: []sendBatchResult{}, Failed: []batchFailure{}}
	var msgs []broker.SendMessage
	var pending []sendBatchResult
	for _, e := range in.Entries {
		msg, res, err := h.prepareSend(qs, &sendMessageInput{
			MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds, MessageAttributes: e.MessageAttributes,
			MessageSystemAttributes: e.MessageSystemAttributes, MessageDeduplicationId: e.MessageDeduplicationId, MessageGroupId: e.MessageGroupId,
		})
		if err != nil {
			out.Failed = append(out.Failed, failure(e.Id, asAPIError(err)))
			continue
		}
		msgs = append(msgs, msg)
		pending = append(pending, sendBatchResult{Id: e.Id, sendMessageOutput: *res})
	}
	if len(msgs) == 0 {
		return out, nil
	}
	res, err := h.b.Send(ctx, qs.name.topic(), msgs)
	if err != nil {
		ae := asAPIError(err)
		if !ae.sender() && !errors.Is(err, broker.ErrIdempotencyKeyReused) {
			return nil, err
		}
		// The broker refused the batch as a whole (a limit of one
		// message): send them one by one so each gets its own answer.
		for i, m := range msgs {
			r, err := h.sendOne(ctx, qs, m)
			if err != nil {
				out.Failed = append(out.Failed, failure(pending[i].Id, asAPIError(err)))
				continue
			}
			finishSend(qs, &pending[i].sendMessageOutput, r)
			out.Successful = append(out.Successful, pending[i])
		}
		return out, nil
	}
	for i := range pending {
		finishSend(qs, &pending[i].sendMessageOutput, res[i])
	}
	out.Successful = append(out.Successful, pending...)
	return out, nil
}

type receiveMessageInput struct {
	QueueUrl                    string   //nolint:revive // the wire name
	AttributeNames              []string //nolint:revive // the wire name
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	MaxNumberOfMessages         *int
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
	ReceiveRequestAttemptId     string //nolint:revive // the wire name
}

type message struct {
	MessageId              string //nolint:revive // the wire name
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string         `json:",omitempty"`
	MD5OfMessageAttributes string                    `json:",omitempty"`
	MessageAttributes      map[string]attributeValue `json:",omitempty"`
}

type receiveMessageOutput struct {
	Messages []message `json:",omitempty"`
}

// systemAttributes are the message system attributes ReceiveMessage
// reports.
var systemAttributes = []string{
	"ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp", "SentTimestamp", "SenderId",
	"MessageGroupId", "MessageDeduplicationId", "SequenceNumber", "AWSTraceHeader",
}

func intParam(name string, p *int, def, lo, hi int) (int, error) {
	if p == nil {
		return def, nil
	}
	if *p < lo || *p > hi {
		return 0, errInvalidParameter("Value %d for parameter %s is invalid. Reason: Must be between %d and %d, if provided.", *p, name, lo, hi)
	}
	return *p, nil
}

func (h *Handler) receiveMessage(ctx context.Context, _ *request, in *receiveMessageInput) (*receiveMessageOutput, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	n, err := intParam("MaxNumberOfMessages", in.MaxNumberOfMessages, 1, 1, maxReceive)
	if err != nil {
		return nil, err
	}
	wait, err := intParam("WaitTimeSeconds", in.WaitTimeSeconds, attrInt(qs.attrs, attrWaitTime), 0, maxWaitSeconds)
	if err != nil {
		return nil, err
	}
	vis, err := intParam("VisibilityTimeout", in.VisibilityTimeout, attrInt(qs.attrs, attrVisibilityTimeout), 0, maxVisibility)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, a := range append(in.AttributeNames, in.MessageSystemAttributeNames...) {
		switch {
		case a == "All":
			for _, s := range systemAttributes {
				want[s] = true
			}
		case contains(systemAttributes, a):
			want[a] = true
		case a == "SqsManagedSseEnabled" || a == "MessageGroupId" || a == "DeadLetterQueueSourceArn":
		default:
			return nil, errInvalidAttributeName(a)
		}
	}
	// A long poll takes a slot for as long as it waits. With none free it
	// still gets the messages there are at once, but one that would have
	// to wait is refused with RequestThrottled — one of the codes the AWS
	// SDKs and the CLI retry with backoff — rather than answered empty,
	// which a receive loop would turn into a busy loop.
	overCap := false
	if wait > 0 {
		select {
		case h.waiting <- struct{}{}:
			defer func() { <-h.waiting }()
		default:
			overCap, wait = true, 0
		}
	}
	if err := h.redrive(ctx, qs.name); err != nil {
		// The letters wait for the mover's next pass.
		h.log.Warn().Err(err).Str("queue", string(qs.name)).Msg("SQS redrive before a receive failed")
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(h.opts.PollContext, cancel)
	defer stop()
	pull := broker.PullRequest{
		Group: qs.name.topic(), Topic: qs.name.topic(), MaxMessages: n,
		Wait: time.Duration(wait) * time.Second, Invisible: visibility(vis), NoAutoCreate: true,
	}
	msgs, err := h.b.Pull(pctx, pull)
	if errors.Is(err, broker.ErrGroupNotFound) {
		if err := h.ensureGroup(ctx, qs); err != nil {
			return nil, err
		}
		msgs, err = h.b.Pull(pctx, pull)
	}
	if err != nil {
		if h.opts.PollContext.Err() != nil && ctx.Err() == nil {
			return &receiveMessageOutput{}, nil // shutting down: an empty answer
		}
		return nil, err
	}
	if overCap && len(msgs) == 0 {
		return nil, errThrottled("Too many receives are waiting (%d, --sqs-max-waiting-receives): retry later, or receive with a shorter WaitTimeSeconds.", cap(h.waiting))
	}
	out := &receiveMessageOutput{}
	now := h.opts.Now()
	for _, m := range msgs {
		out.Messages = append(out.Messages, toMessage(qs, m, want, in.MessageAttributeNames, now))
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// toMessage renders a delivered message.
func toMessage(qs *queueState, m broker.ReceivedMessage, want map[string]bool, attrNames []string, now time.Time) message {
	body := strings.ToValidUTF8(string(m.Body), "\uFFFD")
	id := m.MessageID
	if m.OriginMessageID != "" {
		id = m.OriginMessageID
	}
	if kept := m.Properties[propID]; kept != "" {
		id = kept // a redriven copy
	}
	out := message{MessageId: id, ReceiptHandle: wrapReceipt(m.Receipt), Body: body, MD5OfBody: md5Hex(body)}
	sys := map[string]string{}
	set := func(name, v string) {
		if want[name] && v != "" {
			sys[name] = v
		}
	}
	set("ApproximateReceiveCount", strconv.Itoa(int(m.ReconsumeTimes)+1))
	set("SentTimestamp", strconv.FormatInt(m.BornAt.UnixMilli(), 10))
	first := now
	if m.ReconsumeTimes > 0 {
		first = m.BornAt // a lower bound: the first receive is not recorded
	}
	set("ApproximateFirstReceiveTimestamp", strconv.FormatInt(first.UnixMilli(), 10))
	set("SenderId", defaultAccount)
	set("MessageGroupId", m.Properties[propGroup])
	set("AWSTraceHeader", m.Properties[propTrace])
	if qs.name.fifo() {
		set("MessageDeduplicationId", m.Properties[propDedup])
		set("SequenceNumber", sequenceNumber(m.QueueID, m.QueueOffset))
	}
	if len(sys) > 0 {
		out.Attributes = sys
	}
	attrs := messageAttributes(m.Properties, attrNames)
	if len(attrs) > 0 {
		out.MessageAttributes = attrs
		out.MD5OfMessageAttributes = md5OfAttributes(attrs)
	}
	return out
}

// messageAttributes are the message attributes stored in props that
// names selects ("All", ".*", "prefix.*" or a name).
func messageAttributes(props map[string]string, names []string) map[string]attributeValue {
	if len(names) == 0 {
		return nil
	}
	var types map[string]string
	if t := props[propTypes]; t != "" {
		_ = json.Unmarshal([]byte(t), &types)
	}
	out := map[string]attributeValue{}
	for k, v := range props {
		if strings.HasPrefix(k, propPrefix) || !selected(k, names) {
			continue
		}
		typ := types[k]
		if typ == "" {
			typ = "String"
		}
		if strings.HasPrefix(typ, "Binary") {
			if b, err := base64.StdEncoding.DecodeString(v); err == nil {
				out[k] = attributeValue{DataType: typ, BinaryValue: b}
				continue
			}
			typ = "String"
		}
		v = strings.ToValidUTF8(v, "\uFFFD")
		out[k] = attributeValue{DataType: typ, StringValue: &v}
	}
	return out
}

func selected(name string, names []string) bool {
	for _, n := range names {
		if n == "All" || n == ".*" || n == name {
			return true
		}
		if p, ok := strings.CutSuffix(n, ".*"); ok && strings.HasPrefix(name, p+".") {
			return true
		}
	}
	return false
}

type deleteMessageInput struct {
	QueueUrl      string //nolint:revive // the wire name
	ReceiptHandle string
}

func (h *Handler) deleteMessage(ctx context.Context, _ *request, in *deleteMessageInput) (*empty, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if in.ReceiptHandle == "" {
		return nil, errMissing("ReceiptHandle")
	}
	r, err := unwrapReceipt(in.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	res, err := h.b.Ack(ctx, qs.name.topic(), []string{r})
	if err != nil {
		return nil, err
	}
	if res[0].Status == broker.ReceiptInvalid {
		return nil, errReceiptHandleInvalid(in.ReceiptHandle)
	}
	// An expired receipt deletes nothing and succeeds, as on SQS (the
	// message comes again under a newer handle).
	return &empty{}, nil
}

type receiptEntry struct {
	Id                string //nolint:revive // the wire name
	ReceiptHandle     string
	VisibilityTimeout int
}

type batchReceiptsInput struct {
	QueueUrl string //nolint:revive // the wire name
	Entries  []receiptEntry
}

type batchOutput struct {
	Successful []batchEntry
	Failed     []batchFailure
}

func (h *Handler) deleteMessageBatch(ctx context.Context, _ *request, in *batchReceiptsInput) (*batchOutput, error) {
	return h.receiptBatch(ctx, in, func(group string, receipts []string, _ []receiptEntry) ([]broker.ReceiptResult, error) {
		return h.b.Ack(ctx, group, receipts)
	}, false)
}

type changeVisibilityInput struct {
	QueueUrl          string //nolint:revive // the wire name
	ReceiptHandle     string
	VisibilityTimeout *int
}

func (h *Handler) changeMessageVisibility(ctx context.Context, _ *request, in *changeVisibilityInput) (*empty, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if in.ReceiptHandle == "" {
		return nil, errMissing("ReceiptHandle")
	}
	if in.VisibilityTimeout == nil {
		return nil, errMissing("VisibilityTimeout")
	}
	vis, err := intParam("VisibilityTimeout", in.VisibilityTimeout, 0, 0, maxVisibility)
	if err != nil {
		return nil, err
	}
	r, err := unwrapReceipt(in.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	res, err := h.b.ChangeLease(ctx, qs.name.topic(), []broker.LeaseItem{{Receipt: r, Invisible: time.Duration(vis) * time.Second}})
	if err != nil {
		return nil, err
	}
	switch res[0].Status {
	case broker.ReceiptInvalid:
		return nil, errReceiptHandleInvalid(in.ReceiptHandle)
	case broker.ReceiptExpired:
		return nil, errMessageNotInflight()
	}
	return &empty{}, nil
}

func (h *Handler) changeMessageVisibilityBatch(ctx context.Context, _ *request, in *batchReceiptsInput) (*batchOutput, error) {
	for _, e := range in.Entries {
		if e.VisibilityTimeout < 0 || e.VisibilityTimeout > maxVisibility {
			return nil, errInvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and %d.", e.VisibilityTimeout, maxVisibility)
		}
	}
	return h.receiptBatch(ctx, in, func(group string, receipts []string, entries []receiptEntry) ([]broker.ReceiptResult, error) {
		items := make([]broker.LeaseItem, len(receipts))
		for i, r := range receipts {
			items[i] = broker.LeaseItem{Receipt: r, Invisible: time.Duration(entries[i].VisibilityTimeout) * time.Second}
		}
		return h.b.ChangeLease(ctx, group, items)
	}, true)
}

// receiptBatch runs a batch of receipt operations: entries whose handle
// is malformed fail alone, the rest go to the broker in one call.
func (h *Handler) receiptBatch(ctx context.Context, in *batchReceiptsInput, call func(group string, receipts []string, entries []receiptEntry) ([]broker.ReceiptResult, error), expiredFails bool) (*batchOutput, error) {
	qs, err := h.resolve(ctx, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if err := checkBatch(ids); err != nil {
		return nil, err
	}
	out := &batchOutput{Successful: []batchEntry{}, Failed: []batchFailure{}}
	var receipts []string
	var entries []receiptEntry
	for _, e := range in.Entries {
		r, err := unwrapReceipt(e.ReceiptHandle)
		if err != nil {
			out.Failed = append(out.Failed, failure(e.Id, asAPIError(err)))
			continue
		}
		receipts = append(receipts, r)
		entries = append(entries, e)
	}
	if len(receipts) == 0 {
		return out, nil
	}
	res, err := call(qs.name.topic(), receipts, entries)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		e := entries[i]
		switch {
		case r.Status == broker.ReceiptInvalid:
			out.Failed = append(out.Failed, failure(e.Id, errReceiptHandleInvalid(e.ReceiptHandle)))
		case r.Status == broker.ReceiptExpired && expiredFails:
			out.Failed = append(out.Failed, failure(e.Id, errMessageNotInflight()))
		default:
			out.Successful = append(out.Successful, batchEntry{Id: e.Id})
		}
	}
	return out, nil
}
