package sqs

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// jsonContentType is the JSON 1.0 protocol's content type.
const jsonContentType = "application/x-amz-json-1.0"

// writeResult writes an operation's output.
func writeResult(w http.ResponseWriter, req *request, out any, requestID string) {
	w.Header().Set("X-Amzn-Requestid", requestID)
	if req.query {
		writeQueryResult(w, req, out, requestID)
		return
	}
	body, err := json.Marshal(out)
	if err != nil {
		writeError(w, req, errInternal("encoding the answer: %v", err), requestID)
		return
	}
	w.Header().Set("Content-Type", jsonContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// jsonError is the JSON protocol's error body.
type jsonError struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// writeError writes e in the protocol of req (JSON when req is nil: the
// request could not even be read).
func writeError(w http.ResponseWriter, req *request, e *apiError, requestID string) {
	w.Header().Set("X-Amzn-Requestid", requestID)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
	}
	if req != nil && req.query {
		writeQueryError(w, e, requestID)
		return
	}
	typ := e.shape
	if !containsHash(typ) {
		typ = "com.amazonaws.sqs#" + typ
	}
	fault := "Sender"
	if !e.sender() {
		fault = "Receiver"
	}
	// The SDKs of the JSON protocol take the query protocol's code from
	// this header (awsQueryCompatible).
	w.Header().Set("X-Amzn-Query-Error", e.code+";"+fault)
	w.Header().Set("Content-Type", jsonContentType)
	w.WriteHeader(e.status)
	body, _ := json.Marshal(jsonError{Type: typ, Message: e.msg})
	_, _ = w.Write(body)
}

func containsHash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' {
			return true
		}
	}
	return false
}

// WriteUnavailable answers r with the SQS error ServiceUnavailable (503,
// which the AWS SDKs retry) in r's protocol, saying why: what a replica
// of a cluster answers when it cannot hand a call to the leader.
func WriteUnavailable(w http.ResponseWriter, r *http.Request, why string) {
	e := errUnavailable("%s", why)
	e.retryAfter = time.Second
	writeError(w, &request{query: r.Header.Get("X-Amz-Target") == ""}, e, newRequestID())
}
