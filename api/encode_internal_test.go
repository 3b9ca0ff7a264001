package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/mqgate/mqgate/server/broker"
)

// jsonText draws strings that exercise every escaping rule: ASCII with
// control characters and HTML characters, multi-byte runes, U+2028 and
// U+2029, and invalid UTF-8.
func jsonText() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.String(),
		rapid.StringOf(rapid.RuneFrom([]rune{0, '\b', '\f', '\n', '\r', '\t', 0x1f, 0x7f, '"', '\\', '<', '>', '&', 'a', 'é', '\u2028', '\u2029', '😀'})),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
	)
}

// drawMessages draws up to four received messages with every field set
// or left out, their texts from jsonText.
func drawMessages(t *rapid.T) []broker.ReceivedMessage {
	n := rapid.IntRange(0, 4).Draw(t, "n")
	msgs := make([]broker.ReceivedMessage, n)
	for i := range msgs {
		m := broker.ReceivedMessage{
			MessageID:       jsonText().Draw(t, "id"),
			Receipt:         jsonText().Draw(t, "receipt"),
			Topic:           jsonText().Draw(t, "topic"),
			QueueID:         rapid.Int32().Draw(t, "queue"),
			QueueOffset:     rapid.Int64().Draw(t, "offset"),
			ReconsumeTimes:  rapid.Int32().Draw(t, "reconsume"),
			OriginMessageID: jsonText().Draw(t, "origin"),
			Tag:             jsonText().Draw(t, "tag"),
			Body:            []byte(jsonText().Draw(t, "body")),
		}
		if rapid.Bool().Draw(t, "keys") {
			m.Keys = rapid.SliceOf(jsonText()).Draw(t, "keys")
		}
		if rapid.Bool().Draw(t, "props") {
			m.Properties = rapid.MapOf(jsonText(), jsonText()).Draw(t, "props")
		}
		if rapid.Bool().Draw(t, "times") {
			m.BornAt = time.UnixMilli(rapid.Int64Range(0, 1<<45).Draw(t, "born")).In(time.FixedZone("x", 3600))
			m.StoredAt = time.UnixMilli(rapid.Int64Range(0, 1<<45).Draw(t, "stored"))
		}
		if rapid.Bool().Draw(t, "lease") { // sub-millisecond and not UTC
			m.LeaseUntil = time.Unix(0, rapid.Int64Range(0, 1<<62).Draw(t, "leaseUntil")).In(time.FixedZone("y", -7200))
		}
		msgs[i] = m
	}
	return msgs
}

// TestAppendMessageMatchesEncoder: the hand-written pull response is
// encoding/json's output of PullResponse{ToPulledMessage(...)} (an Encoder
// with SetEscapeHTML(false), as writeJSON's), byte for byte.
func TestAppendMessageMatchesEncoder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		msgs := drawMessages(t)
		got := httptest.NewRecorder()
		writePullResponse(got, msgs)
		resp := PullResponse{Messages: make([]PulledMessage, 0, len(msgs))}
		for _, m := range msgs {
			resp.Messages = append(resp.Messages, ToPulledMessage(m))
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(resp); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Body.Bytes(), want.Bytes()) {
			t.Fatalf("got\n%s\nwant\n%s", got.Body.Bytes(), want.Bytes())
		}
	})
}

// TestReceiptResponseMatchesEncoder: the hand-written ack, nack and lease
// response is writeJSON's output of toReceiptResponse, byte for byte.
func TestReceiptResponseMatchesEncoder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		results := make([]broker.ReceiptResult, rapid.IntRange(0, 5).Draw(t, "n"))
		for i := range results {
			results[i] = broker.ReceiptResult{
				Receipt: jsonText().Draw(t, "receipt"),
				Status:  broker.ReceiptStatus(rapid.SampledFrom([]string{"ok", "expired", "invalid", ""}).Draw(t, "status")),
			}
			if rapid.Bool().Draw(t, "new") {
				results[i].NewReceipt = jsonText().Draw(t, "newReceipt")
			}
			if rapid.Bool().Draw(t, "error") {
				results[i].Error = jsonText().Draw(t, "error")
			}
			if rapid.Bool().Draw(t, "lease") {
				results[i].LeaseUntil = time.Unix(0, rapid.Int64Range(0, 1<<62).Draw(t, "leaseUntil")).In(time.FixedZone("y", 7200))
			}
		}
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeReceiptResponse(got, results)
		writeJSON(want, httptest.NewRequest("POST", "/", nil), 200, toReceiptResponse(results))
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("got\n%s\nwant\n%s", got.Body.Bytes(), want.Body.Bytes())
		}
		if got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Fatalf("Content-Type %q, want %q", got.Header().Get("Content-Type"), want.Header().Get("Content-Type"))
		}
	})
}

// BenchmarkPullResponse compares the hand-written pull response with
// encoding/json for 32 messages of 1 KiB.
func BenchmarkPullResponse(b *testing.B) {
	msgs := make([]broker.ReceivedMessage, 32)
	for i := range msgs {
		msgs[i] = broker.ReceivedMessage{
			MessageID: "7F00000100001F9000000000000004D2", Receipt: "AQAAAAAAAAABAAAAAQAAAAAAAAAqAWcGb3JkZXJzqf1tSC1hYmNkZWZnaGlqa2w",
			Topic: "orders", QueueID: 1, QueueOffset: int64(i), Tag: "created",
			Body: bytes.Repeat([]byte("x"), 1024), BornAt: time.Now(), StoredAt: time.Now(), LeaseUntil: time.Now().Add(30 * time.Second),
		}
	}
	b.Run("appendMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writePullResponse(httptest.NewRecorder(), msgs)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp := PullResponse{Messages: make([]PulledMessage, 0, len(msgs))}
			for _, m := range msgs {
				resp.Messages = append(resp.Messages, ToPulledMessage(m))
			}
			writeJSON(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), 200, resp)
		}
	})
}
