package api

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/mqgate/mqgate/server/broker"
)

// The pull response is the largest body mqgate writes on a hot path (32
// messages of up to the message size each). encoding/json spends most of
// that time in reflection and in copying every body into a string first;
// appendMessage writes the same bytes — TestAppendMessageMatchesEncoder
// compares them with encoding/json's output of ToMessage — straight from
// the broker's message.

// writePullResponse writes the PullResponse of msgs.
func writePullResponse(w http.ResponseWriter, msgs []broker.ReceivedMessage) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := append((*buf)[:0], `{"messages":[`...)
	for i := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, &msgs[i])
	}
	b = append(b, "]}\n"...)
	*buf = b
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// appendMessage appends the JSON of ToMessage(*m), field for field as
// encoding/json writes it (declaration order, omitempty, sorted map keys).
func appendMessage(b []byte, m *broker.ReceivedMessage) []byte {
	b = append(b, `{"messageId":`...)
	b = appendJSONString(b, m.MessageID)
	if m.Receipt != "" {
		b = append(b, `,"receipt":`...)
		b = appendJSONString(b, m.Receipt)
	}
	b = append(b, `,"topic":`...)
	b = appendJSONString(b, m.Topic)
	b = append(b, `,"queueId":`...)
	b = strconv.AppendInt(b, int64(m.QueueID), 10)
	b = append(b, `,"queueOffset":`...)
	b = strconv.AppendInt(b, m.QueueOffset, 10)
	b = append(b, `,"reconsumeTimes":`...)
	b = strconv.AppendInt(b, int64(m.ReconsumeTimes), 10)
	if m.OriginMessageID != "" {
		b = append(b, `,"originMessageId":`...)
		b = appendJSONString(b, m.OriginMessageID)
	}
	if m.Tag != "" {
		b = append(b, `,"tag":`...)
		b = appendJSONString(b, m.Tag)
	}
	if len(m.Keys) > 0 {
		b = append(b, `,"keys":[`...)
		for i, k := range m.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
		}
		b = append(b, ']')
	}
	if len(m.Properties) > 0 {
		keys := make([]string, 0, len(m.Properties))
		for k := range m.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `,"properties":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, m.Properties[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"body":`...)
	if utf8.Valid(m.Body) {
		b = appendJSONString(b, m.Body)
		b = append(b, `,"bodyEncoding":"utf8"`...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, m.Body)
		b = append(b, `","bodyEncoding":"base64"`...)
	}
	b = appendTimeField(b, `,"bornAt":"`, m.BornAt)
	b = appendTimeField(b, `,"storedAt":"`, m.StoredAt)
	return append(b, '}')
}

// appendTimeField appends name and t as formatTime writes it, nothing for
// the zero time (omitempty of an empty string).
func appendTimeField(b []byte, name string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(b, name...)
	b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, '"')
}

// jsonSafe marks the ASCII bytes encoding/json writes as they are (its
// htmlSafeSet: not a control character, '"', '\\', '<', '>' or '&').
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json
// does with HTML escaping on: short escapes for \b \f \n \r \t " \,
// \u00XX for other control characters and < > &, U+FFFD for invalid
// UTF-8, and \u2028 \u2029 escaped.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		var r rune
		var size int
		switch v := any(s).(type) {
		case string:
			r, size = utf8.DecodeRuneInString(v[i:])
		case []byte:
			r, size = utf8.DecodeRune(v[i:])
		}
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
