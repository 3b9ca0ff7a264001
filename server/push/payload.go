package push

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

// Body modes of a push request (broker.PushConfig.Mode).
const (
	// ModeJSON posts the message as the pull API renders it (the default).
	ModeJSON = "json"
	// ModeBinary posts the raw body with the metadata in headers.
	ModeBinary = "binary"
)

// Headers of a push request besides the Standard Webhooks ones. In binary
// mode the message's metadata travels in the X-Mqgate-* headers; the
// group is named in both modes.
const (
	HeaderGroup           = "X-Mqgate-Group"
	HeaderMessageID       = "X-Mqgate-Message-Id"
	HeaderTopic           = "X-Mqgate-Topic"
	HeaderQueueID         = "X-Mqgate-Queue-Id"
	HeaderQueueOffset     = "X-Mqgate-Queue-Offset"
	HeaderReconsumeTimes  = "X-Mqgate-Reconsume-Times"
	HeaderOriginMessageID = "X-Mqgate-Origin-Message-Id"
	HeaderTag             = "X-Mqgate-Tag"
	HeaderKeys            = "X-Mqgate-Keys"
	HeaderPropertyPrefix  = "X-Mqgate-Property-"
	HeaderBornAt          = "X-Mqgate-Born-At"
	HeaderStoredAt        = "X-Mqgate-Stored-At"
	// HeaderDelayLevel in a receiver's answer picks the retry delay level
	// (-1 = dead-letter now, 0 = the broker's ladder, 1..n = that level).
	HeaderDelayLevel = "X-Mqgate-Delay-Level"
	// HeaderPushHop is on every push request (value 1): mqgate's send
	// endpoint refuses requests carrying it (508 push-loop), so a push
	// into any gateway's send endpoint stores nothing and cannot loop.
	HeaderPushHop = api.HeaderPushHop
)

// Message is the JSON body of a push in json mode: the api package's
// Message, what a pull returns, without the receipt (the gateway settles
// the lease itself).
type Message = api.Message

// webhookID is the message's idempotency key for the receiver: the id of
// its first copy, the same for every retry.
func webhookID(m broker.ReceivedMessage) string {
	if m.OriginMessageID != "" {
		return m.OriginMessageID
	}
	return m.MessageID
}

// encodeJSON renders m as the json-mode body.
func encodeJSON(m broker.ReceivedMessage) ([]byte, error) {
	m.Receipt = ""
	return json.Marshal(api.ToMessage(m))
}

// setBinaryHeaders puts m's metadata into h for a binary-mode push. A tag,
// key or property that cannot be a header (a control character, or a
// property name that is not an HTTP token) is left out: json mode carries
// everything.
func setBinaryHeaders(h http.Header, m broker.ReceivedMessage) {
	h.Set("Content-Type", "application/octet-stream")
	h.Set(HeaderMessageID, m.MessageID)
	h.Set(HeaderTopic, m.Topic)
	h.Set(HeaderQueueID, strconv.Itoa(int(m.QueueID)))
	h.Set(HeaderQueueOffset, strconv.FormatInt(m.QueueOffset, 10))
	h.Set(HeaderReconsumeTimes, strconv.Itoa(int(m.ReconsumeTimes)))
	set := func(name, value string) {
		if value != "" && validHeaderValue(value) {
			h.Set(name, value)
		}
	}
	set(HeaderOriginMessageID, m.OriginMessageID)
	set(HeaderTag, m.Tag)
	set(HeaderKeys, strings.Join(m.Keys, ","))
	wire := api.ToMessage(m) // the times exactly as the API renders them
	set(HeaderBornAt, wire.BornAt)
	set(HeaderStoredAt, wire.StoredAt)
	for k, v := range m.Properties {
		if validToken(k) {
			set(HeaderPropertyPrefix+k, v)
		}
	}
}

// validHeaderValue reports whether v may be sent as a header value.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
