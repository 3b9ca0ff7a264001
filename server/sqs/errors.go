package sqs

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// apiError is an error in the shapes the SDKs parse: the JSON protocol's
// __type (its shape name) with the query protocol's code in the
// x-amzn-query-error header, which the SDKs of both generations read as
// the error code, and the query protocol's ErrorResponse.
type apiError struct {
	// shape is the error's name in the JSON protocol ("QueueDoesNotExist").
	shape string
	// code is its code in the query protocol
	// ("AWS.SimpleQueueService.NonExistentQueue").
	code string
	// status is the HTTP status.
	status int
	// msg explains it.
	msg string
	// retryAfter, when not 0, is sent as Retry-After.
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

// sender reports whether the client is at fault (the query protocol's
// Type: Sender or Receiver).
func (e *apiError) sender() bool { return e.status < 500 }

func newError(shape, code string, status int, format string, args ...any) *apiError {
	return &apiError{shape: shape, code: code, status: status, msg: fmt.Sprintf(format, args...)}
}

// The errors of the SQS API this endpoint answers. Each shape's code is
// the one AWS documents for the query protocol.
func errQueueDoesNotExist(q queueName) *apiError {
	return newError("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", http.StatusBadRequest,
		"The specified queue %s does not exist.", q)
}

func errQueueNameExists(q queueName) *apiError {
	return newError("QueueNameExists", "QueueAlreadyExists", http.StatusBadRequest,
		"A queue named %s already exists with different attributes.", q)
}

func errInvalidAddress(raw string) *apiError {
	return newError("InvalidAddress", "InvalidAddress", http.StatusNotFound, "The address %q is not valid for this endpoint.", raw)
}

func errInvalidParameter(format string, args ...any) *apiError {
	return newError("InvalidParameterValue", "InvalidParameterValue", http.StatusBadRequest, format, args...)
}

func errMissing(name string) *apiError {
	return newError("MissingParameter", "MissingParameter", http.StatusBadRequest,
		"The request must contain the parameter %s.", name)
}

func errInvalidAttributeName(name string) *apiError {
	return newError("InvalidAttributeName", "InvalidAttributeName", http.StatusBadRequest,
		"Unknown Attribute %s.", name)
}

func errInvalidAttributeValue(name, why string) *apiError {
	return newError("InvalidAttributeValue", "InvalidAttributeValue", http.StatusBadRequest,
		"Invalid value for the parameter %s: %s", name, why)
}

func errReceiptHandleInvalid(handle string) *apiError {
	return newError("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", http.StatusBadRequest,
		"The input receipt handle %q is not a valid receipt handle.", truncate(handle, 64))
}

func errMessageNotInflight() *apiError {
	return newError("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", http.StatusBadRequest,
		"The message referred to is not in flight.")
}

func errEmptyBatch() *apiError {
	return newError("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", http.StatusBadRequest,
		"There should be at least one entry in the request.")
}

func errTooManyEntries(n int) *apiError {
	return newError("TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", http.StatusBadRequest,
		"Maximum number of entries per request are %d. You have sent %d.", maxBatchEntries, n)
}

func errIDsNotDistinct(id string) *apiError {
	return newError("BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", http.StatusBadRequest,
		"Id %s repeated.", id)
}

func errInvalidBatchEntryID(id string) *apiError {
	return newError("InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", http.StatusBadRequest,
		"A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long: %q.", truncate(id, 100))
}

func errBatchTooLong(n, limit int) *apiError {
	return newError("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", http.StatusBadRequest,
		"Batch requests cannot be longer than %d bytes. You have sent %d bytes.", limit, n)
}

func errInvalidMessageContents(why string) *apiError {
	return newError("InvalidMessageContents", "InvalidMessageContents", http.StatusBadRequest, "%s", why)
}

func errInvalidAction(action string) *apiError {
	return newError("InvalidAction", "InvalidAction", http.StatusBadRequest,
		"The action or operation requested is invalid: %q.", truncate(action, 100))
}

func errSerialization(format string, args ...any) *apiError {
	return newError("com.amazon.coral.service#SerializationException", "MalformedQueryString", http.StatusBadRequest, format, args...)
}

func errOverLimit(format string, args ...any) *apiError {
	return newError("OverLimit", "OverLimit", http.StatusForbidden, format, args...)
}

func errThrottled(format string, args ...any) *apiError {
	return newError("RequestThrottled", "RequestThrottled", http.StatusBadRequest, format, args...)
}

func errUnavailable(format string, args ...any) *apiError {
	return newError("ServiceUnavailable", "ServiceUnavailable", http.StatusServiceUnavailable, format, args...)
}

func errInternal(format string, args ...any) *apiError {
	return newError("InternalError", "InternalError", http.StatusInternalServerError, format, args...)
}

// asAPIError is err as an apiError: itself, or a broker error mapped by
// mapBrokerErr.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return mapBrokerErr(err)
}

// truncate cuts s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
