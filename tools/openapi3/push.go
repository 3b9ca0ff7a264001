package main

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mqgate/mqgate/server/push"
)

// pushOperations are the operations the callback hangs on: the group PUT,
// which configures a push endpoint (GroupRequest.push). PATCH can too, but
// a second reference makes oapi-codegen declare the callback's types twice.
var pushOperations = []string{"putGroup"}

// addPushCallback describes the request the gateway POSTs to a group's
// push endpoint and the answers it understands (server/push's doc.go, the
// delivery contract) as an OpenAPI 3.0 callback of the group operations.
func addPushCallback(doc *openapi3.T, _ wireTypes) error {
	message := doc.Components.Schemas["Message"]
	if message == nil {
		return fmt.Errorf("no Message schema")
	}
	header := func(name, description string, schema *openapi3.Schema, required bool, example any) *openapi3.ParameterRef {
		return &openapi3.ParameterRef{Value: &openapi3.Parameter{
			In: openapi3.ParameterInHeader, Name: name, Description: description,
			Required: required, Schema: schema.NewRef(), Example: example,
		}}
	}
	str := openapi3.NewStringSchema
	integer := func(format string) *openapi3.Schema {
		s := openapi3.NewIntegerSchema()
		s.Format = format
		return s
	}
	binaryOnly := " (binary mode)"
	params := openapi3.Parameters{
		header(push.HeaderID, "Standard Webhooks message id: the message's originMessageId, or its messageId on a first delivery; the same for every retry. Deduplicate by it: delivery is at least once.",
			str(), true, "7F00000100001F9000000000000004D2"),
		header(push.HeaderTimestamp, "Standard Webhooks timestamp: unix seconds of this attempt.", integer("int64"), true, 1796119200),
		header(push.HeaderSignature, `Standard Webhooks signature: "v1," and the base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}", keyed with the base64-decoded part of the group's "whsec_" secret.`,
			str(), true, "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="),
		header(push.HeaderGroup, "The consumer group.", str(), true, "billing"),
		header(push.HeaderPushHop, "Always 1: a send endpoint of mqgate refuses a request carrying it (508 push-loop), so a push into a send endpoint stores nothing.", str(), true, "1"),
		header("User-Agent", "mqgate-push/1", str(), true, "mqgate-push/1"),
		header(push.HeaderMessageID, "The message id"+binaryOnly+".", str(), false, nil),
		header(push.HeaderTopic, "The message's topic"+binaryOnly+".", str(), false, nil),
		header(push.HeaderQueueID, "The queue"+binaryOnly+".", integer("int32"), false, nil),
		header(push.HeaderQueueOffset, "The offset in the queue"+binaryOnly+".", integer("int64"), false, nil),
		header(push.HeaderReconsumeTimes, "Earlier failed deliveries"+binaryOnly+".", integer("int32"), false, nil),
		header(push.HeaderOriginMessageID, "The id of the first copy of a retried message"+binaryOnly+".", str(), false, nil),
		header(push.HeaderTag, "The tag"+binaryOnly+".", str(), false, nil),
		header(push.HeaderKeys, "The keys, comma-separated"+binaryOnly+". Each user property travels as "+push.HeaderPropertyPrefix+"<name>; header names are case-insensitive, so read the name case-insensitively (json mode keeps it as sent); a value that cannot be a header is left out (json mode carries everything).",
			str(), false, nil),
		header(push.HeaderBornAt, "When the gateway received the message, RFC 3339"+binaryOnly+".", openapi3.NewDateTimeSchema(), false, nil),
		header(push.HeaderStoredAt, "When the message was stored, RFC 3339"+binaryOnly+".", openapi3.NewDateTimeSchema(), false, nil),
	}
	binary := openapi3.NewStringSchema()
	binary.Format = "binary"
	retryHeaders := openapi3.Headers{
		push.HeaderDelayLevel: &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "The retry's delay level: -1 dead-letters the message now, 0 takes the group's ladder (level 3 + reconsumeTimes), n that level (above the top level: the top one). Wins over Retry-After.",
			Schema:      openapi3.NewIntegerSchema().WithMin(-1).NewRef(),
		}}},
		headerRetryAfter: &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "Seconds or an HTTP date: the retry waits at the smallest delay level at least that long (the top level when none is).",
			Schema:      openapi3.NewStringSchema().NewRef(),
		}}},
	}
	desc := func(s string) *string { return &s }
	deliver := &openapi3.Operation{
		OperationID: "pushMessage",
		Tags:        []string{"groups"},
		Summary:     "A message pushed to the group's endpoint",
		Description: "The gateway POSTs every message of the group's subscribed topics to push.url, signed per Standard Webhooks, " +
			"at most push.maxConcurrency at a time, each within push.timeoutMs (the lease is extended while it runs). " +
			"The answer settles the message: 2xx acks it; any other status, a timeout or a failed connection nacks it into the group's retry ladder " +
			"and, after retryMaxTimes, its dead-letter queue; 410 Gone also disables the endpoint until a PUT enables it. Redirects are not followed.",
		Parameters: params,
		// The receiver checks webhook-signature, no scheme of this API.
		Security: &openapi3.SecurityRequirements{},
		RequestBody: &openapi3.RequestBodyRef{Value: &openapi3.RequestBody{
			Required:    true,
			Description: `push.mode "json" (the default): the message as a pull returns it, without receipt. "binary": the raw body, its metadata in the X-Mqgate-* headers.`,
			Content: openapi3.Content{
				mediaJSON:                  &openapi3.MediaType{Schema: openapi3.NewSchemaRef("#/components/schemas/Message", message.Value)},
				"application/octet-stream": &openapi3.MediaType{Schema: binary.NewRef()},
			},
		}},
		Responses: openapi3.NewResponses(
			openapi3.WithName("2XX", &openapi3.Response{Description: desc("Acks the message (the body is ignored).")}),
			openapi3.WithName("410", &openapi3.Response{Description: desc("Nacks the message and disables the endpoint (push.disabled, with a disabledReason)."), Headers: retryHeaders}),
			openapi3.WithName("default", &openapi3.Response{Description: desc("Any other status (3xx included) nacks the message: its retry waits at the delay level the headers pick, or the ladder's next."), Headers: retryHeaders}),
		),
	}
	// The callback sits in the operation itself, not in
	// components/callbacks behind a $ref: ogen refuses a referenced
	// callback ("putGroup.callbacks.push"), and other generators ignore
	// callbacks either way.
	callback := openapi3.NewCallback(
		openapi3.WithCallback("{$request.body#/push/url}", &openapi3.PathItem{Post: deliver}),
	)
	found := 0
	err := operations(doc, func(path, method string, op *openapi3.Operation) error {
		for _, id := range pushOperations {
			if op.OperationID == id {
				found++
				op.Callbacks = openapi3.Callbacks{"push": &openapi3.CallbackRef{Value: callback}}
			}
		}
		return nil
	})
	if err == nil && found != len(pushOperations) {
		err = fmt.Errorf("found %d of the operations %v", found, pushOperations)
	}
	return err
}
