package api

import (
	"net/http"

	"github.com/mqgate/mqgate/server/broker"
)

// W3C Trace Context (https://www.w3.org/TR/trace-context/) across mqgate:
// the traceparent and tracestate headers of a send are stored with each
// message as the properties of the same names (unless the message sets
// them itself), so a pull hands them to the consumer in the message's
// properties and a push sends them as the request's own headers: one
// trace spans producer → mqgate → consumer.

// Property and header names of the trace context.
const (
	PropTraceparent = "traceparent"
	PropTracestate  = "tracestate"
)

// maxTracestateLen is the longest tracestate kept (the W3C limit is 32
// list members of at most 256 + 1 + 256 characters; 512 is what
// implementations must propagate at least).
const maxTracestateLen = 512

// ValidTraceparent reports whether v is a traceparent mqgate propagates:
// version 00 (or a later version, of which only the first four fields are
// read), a non-zero 32-hex-digit trace id, a non-zero 16-hex-digit parent
// id and two hex digits of flags, lower-case, dash-separated. Version ff
// is invalid.
func ValidTraceparent(v string) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	if len(v) > 55 && (v[:2] == "00" || v[55] != '-') {
		return false // version 00 is exactly 55 characters; later ones continue with "-"
	}
	if v[:2] == "ff" || !lowerHex(v[:2]) || !lowerHex(v[3:35]) || !lowerHex(v[36:52]) || !lowerHex(v[53:55]) {
		return false
	}
	return !allZero(v[3:35]) && !allZero(v[36:52])
}

// validTracestate reports whether v may be stored and forwarded: at most
// maxTracestateLen printable ASCII characters (the list syntax itself is
// the tracing system's business).
func validTracestate(v string) bool {
	if v == "" || len(v) > maxTracestateLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// TraceContextHeaders returns the traceparent and tracestate to forward
// of a message's properties ("" when it has no valid traceparent; a
// tracestate only with one).
func TraceContextHeaders(props map[string]string) (traceparent, tracestate string) {
	tp := props[PropTraceparent]
	if !ValidTraceparent(tp) {
		return "", ""
	}
	if ts := props[PropTracestate]; validTracestate(ts) {
		tracestate = ts
	}
	return tp, tracestate
}

// applyTraceContext stores the trace context of a send request with each
// message that does not carry one of its own. A malformed traceparent is
// ignored, as the W3C recommendation says (never an error: tracing must
// not break sends), and so is a tracestate without a valid traceparent.
func applyTraceContext(h http.Header, msgs []broker.SendMessage) {
	tp := h.Values("Traceparent")
	if len(tp) != 1 || !ValidTraceparent(tp[0]) {
		return
	}
	ts := ""
	if v := h.Values("Tracestate"); len(v) > 0 {
		// Several tracestate headers are one list (RFC 9110 field combination).
		joined := v[0]
		for _, s := range v[1:] {
			joined += "," + s
		}
		if validTracestate(joined) {
			ts = joined
		}
	}
	for i := range msgs {
		m := &msgs[i]
		if _, own := m.Properties[PropTraceparent]; own {
			continue
		}
		if m.Properties == nil {
			m.Properties = make(map[string]string, 2)
		}
		m.Properties[PropTraceparent] = tp[0]
		if ts != "" {
			if _, own := m.Properties[PropTracestate]; !own {
				m.Properties[PropTracestate] = ts
			}
		}
	}
}
