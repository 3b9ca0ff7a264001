package api

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// BatchedMessage is one message of a binary pull response (a pull with
// Accept: ContentTypeBatch): its metadata, as the JSON response's
// PulledMessage without Body and BodyEncoding, and its body as stored.
type BatchedMessage struct {
	Message PulledMessage
	Body    []byte
}

// DecodePullBatch decodes a binary pull response: a 4-byte big-endian
// message count, then per message a 4-byte big-endian length and the
// metadata's JSON, then a 4-byte big-endian length and the body. The
// bodies are slices of b. It never panics: a short, long or malformed
// response is an error naming the message and what is wrong.
func DecodePullBatch(b []byte) ([]BatchedMessage, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("pull batch: %d bytes, want at least the 4-byte count", len(b))
	}
	count := binary.BigEndian.Uint32(b)
	rest := b[4:]
	if uint64(count)*8 > uint64(len(rest)) { // every message has two lengths
		return nil, fmt.Errorf("pull batch: %d messages announced in %d bytes", count, len(rest))
	}
	out := make([]BatchedMessage, count)
	for i := range out {
		meta, r, err := batchFrame(rest, i, "metadata")
		if err != nil {
			return nil, err
		}
		body, r, err := batchFrame(r, i, "body")
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(meta, &out[i].Message); err != nil {
			return nil, fmt.Errorf("pull batch: message %d: metadata: %w", i, err)
		}
		out[i].Body, rest = body, r
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("pull batch: %d bytes after the last of %d messages", len(rest), count)
	}
	return out, nil
}

// batchFrame splits a 4-byte big-endian length and that many bytes off b.
func batchFrame(b []byte, i int, what string) (frame, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("pull batch: message %d: the response ends before the %s length", i, what)
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, fmt.Errorf("pull batch: message %d: %s of %d bytes, %d remain", i, what, n, len(b)-4)
	}
	return b[4 : 4+n : 4+n], b[4+n:], nil
}
