package sqs

import (
	"encoding/xml"
	"net/http"
)

// decodeQuery reads a query-protocol call (a form post, Action=<Op>).
func (h *Handler) decodeQuery(w http.ResponseWriter, r *http.Request, req *request) error {
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxRequestSize)
	if err := r.ParseForm(); err != nil {
		return errSerialization("the request is not a form: %v", err)
	}
	req.op = r.Form.Get("Action")
	if req.op == "" {
		return errMissing("Action")
	}
	return errUnsupported("the query protocol is not supported yet; use an SDK that speaks the JSON 1.0 protocol")
}

// writeQueryResult writes out as the query protocol's XML.
func writeQueryResult(w http.ResponseWriter, req *request, _ any, requestID string) {
	writeQueryError(w, errUnsupported("the query protocol is not supported yet"), requestID)
}

// queryErrorResponse is the query protocol's error body.
type queryErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

// writeQueryError writes e as the query protocol's ErrorResponse.
func writeQueryError(w http.ResponseWriter, e *apiError, requestID string) {
	typ := "Sender"
	if !e.sender() {
		typ = "Receiver"
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.status)
	body, _ := xml.Marshal(queryErrorResponse{Type: typ, Code: e.code, Message: e.msg, RequestID: requestID})
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
