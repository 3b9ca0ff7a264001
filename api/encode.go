package api

import (
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/mqgate/mqgate/server/broker"
)

// The pull response is the largest body mqgate writes on a hot path (32
// messages of up to the message size each). encoding/json spends most of
// that time in reflection and in copying every body into a string first;
// appendMessage writes the same bytes — TestAppendMessageMatchesEncoder
// compares them with encoding/json's output of ToPulledMessage — straight from
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
	writeJSONBytes(w, b)
}

// writeJSONBytes writes b, a complete JSON document, as a 200.
func writeJSONBytes(w http.ResponseWriter, b []byte) { writeBody(w, jsonContentType, b) }

// jsonContentType and batchContentType are Content-Type header values,
// shared by every response instead of a slice allocated per response
// (net/http only reads them; Header.Set and Add replace or copy them).
var (
	jsonContentType  = []string{"application/json"}
	batchContentType = []string{ContentTypeBatch}
)

// autoContentLength is the largest body for which writeBody leaves
// Content-Length to net/http: a handler that returns with at most this
// much written (net/http's buffer before it switches to chunking, 2048
// bytes) gets its Content-Length computed without an allocation, where
// setting it costs the number's string and the header's slice.
const autoContentLength = 2048

// setContentLength declares the length n of a whole body about to be
// written, unless net/http will (n at most autoContentLength).
func setContentLength(h http.Header, n int) {
	if n > autoContentLength {
		h.Set("Content-Length", strconv.Itoa(n))
	}
}

// writeBody writes b, a whole body of the Content-Type contentType, as a
// 200 with a Content-Length.
func writeBody(w http.ResponseWriter, contentType []string, b []byte) {
	h := w.Header()
	h["Content-Type"] = contentType
	setContentLength(h, len(b))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writePullBatch writes msgs as a binary batch (ContentTypeBatch, the
// pull's Accept rendering; README "Binary pulls"): a 4-byte big-endian
// message count, then per message a 4-byte big-endian length and the
// message's JSON (a PulledMessage) without body and bodyEncoding, then a 4-byte big-endian
// length and the body's bytes as stored. A client reads the metadata of
// 32 messages instead of scanning 32 escaped bodies, and the server skips
// escaping them.
func writePullBatch(w http.ResponseWriter, msgs []broker.ReceivedMessage) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := binary.BigEndian.AppendUint32((*buf)[:0], uint32(len(msgs)))
	for i := range msgs {
		m := &msgs[i]
		at := len(b)
		b = append(b, 0, 0, 0, 0)
		b = appendMessageHead(b, m)
		b = appendMessageTimes(b, m)
		b = append(b, '}')
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Body)))
		b = append(b, m.Body...)
	}
	*buf = b
	writeBody(w, batchContentType, b)
}

// appendMessage appends the JSON of ToPulledMessage(*m), field for field as
// encoding/json writes it (declaration order, omitempty, sorted map keys).
func appendMessage(b []byte, m *broker.ReceivedMessage) []byte {
	b = appendMessageHead(b, m)
	b = append(b, `,"body":`...)
	if utf8.Valid(m.Body) {
		b = appendJSONString(b, m.Body)
		b = append(b, `,"bodyEncoding":"utf8"`...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, m.Body)
		b = append(b, `","bodyEncoding":"base64"`...)
	}
	b = appendMessageTimes(b, m)
	return append(b, '}')
}

// appendMessageHead appends the opening brace and the fields before the
// body (messageId, receipt, leaseUntil … properties).
func appendMessageHead(b []byte, m *broker.ReceivedMessage) []byte {
	b = append(b, `{"messageId":`...)
	b = appendJSONString(b, m.MessageID)
	b = append(b, `,"receipt":`...)
	b = appendJSONString(b, m.Receipt)
	b = append(b, `,"leaseUntil":"`...)
	if !m.LeaseUntil.IsZero() {
		b = appendTimeMillis(b, m.LeaseUntil.UTC())
	}
	b = append(b, '"')
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
	return b
}

// appendMessageTimes appends the fields after the body (bornAt, storedAt).
func appendMessageTimes(b []byte, m *broker.ReceivedMessage) []byte {
	b = appendTimeField(b, `,"bornAt":"`, m.BornAt)
	return appendTimeField(b, `,"storedAt":"`, m.StoredAt)
}

// appendTimeField appends name and t as formatTime writes it, nothing for
// the zero time (omitempty of an empty string).
func appendTimeField(b []byte, name string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(b, name...)
	b = appendTimeMillis(b, t.UTC())
	return append(b, '"')
}

// appendTimeMillis appends t (UTC) as "2006-01-02T15:04:05.000Z", what
// t.AppendFormat with that layout writes, without parsing the layout.
func appendTimeMillis(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	two := func(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	b = two(b, int(month))
	b = append(b, '-')
	b = two(b, day)
	b = append(b, 'T')
	b = two(b, hour)
	b = append(b, ':')
	b = two(b, minute)
	b = append(b, ':')
	b = two(b, sec)
	return append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// jsonSafe marks the ASCII bytes written as they are: all but the
// control characters, '"' and '\\'. HTML's < > & are not escaped (as
// encoding/json's Encoder with SetEscapeHTML(false), which writeJSON uses
// too): every response is application/json, never HTML.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = false, false
	return t
}()

const hexDigits = "0123456789abcdef"

// needsAttention has the high bit set in each byte of w (and perhaps in a
// byte just above one of those) that needs escaping or a UTF-8 check: a
// control character, a byte >= 0x80, '"' or '\\'; zero when none does. The
// tests are the classic "has a zero byte" bit tricks on w, and on w XOR
// each character spread over the word; a false alarm only sends the
// caller to its byte-by-byte path.
func needsAttention(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	bad := w                    // >= 0x80
	bad |= (w - 0x20*ones) & ^w // < 0x20
	q, bs := w^('"'*ones), w^('\\'*ones)
	bad |= (q - ones) & ^q
	bad |= (bs - ones) & ^bs
	return bad & highs
}

// plainPrefix returns the index of the first byte at or after i that
// may need escaping, moving sixteen bytes at a time (the common case of a
// text body), or an index within the last sixteen bytes of s.
func plainPrefix(s []byte, i int) int {
	for i+16 <= len(s) {
		if needsAttention(binary.LittleEndian.Uint64(s[i:]))|needsAttention(binary.LittleEndian.Uint64(s[i+8:])) != 0 {
			break
		}
		i += 16
	}
	if i+8 <= len(s) && needsAttention(binary.LittleEndian.Uint64(s[i:])) == 0 {
		i += 8
	}
	return i
}

// appendJSONString appends s as a JSON string exactly as encoding/json's
// Encoder does with SetEscapeHTML(false): short escapes for \b \f \n \r
// \t " \, \u00XX for other control characters, U+FFFD for invalid UTF-8,
// and \u2028 \u2029 escaped.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	switch v := any(s).(type) {
	case string:
		return appendJSONBytes(b, unsafe.Slice(unsafe.StringData(v), len(v)))
	case []byte:
		return appendJSONBytes(b, v)
	}
	panic("unreachable")
}

// appendJSONBytes is appendJSONString over bytes (a string's bytes are
// read in place, never written).
func appendJSONBytes(b []byte, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Sixteen bytes at a time while none needs attention, then byte
		// by byte.
		if i = plainPrefix(s, i); i >= len(s) {
			break
		}
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
		r, size := utf8.DecodeRune(s[i:])
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
