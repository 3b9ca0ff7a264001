package api_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

const sendPath = "/v1/topics/orders/messages"

func TestSend(t *testing.T) {
	t.Parallel()

	t.Run("OKSingleJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := b.doJSON(t, http.MethodPost, sendPath, `{"body":"héllo","tag":"created","keys":["o-1","o-2"],
			"properties":{"a":"b"},"shardingKey":"c-42","delayLevel":3,"dedupId":"d-1"}`)
		resp := decode[api.SendResponse](t, rec, http.StatusOK)
		require.Equal(t, []api.SendResult{{MessageID: strings.Repeat("A", 31) + "0", QueueID: 0, QueueOffset: 100}}, resp.Results)
		require.Equal(t, "orders", b.broker.topic)
		require.Equal(t, []broker.SendMessage{{
			Body: []byte("héllo"), Tag: "created", Keys: []string{"o-1", "o-2"}, Properties: map[string]string{"a": "b"},
			ShardingKey: "c-42", DelayLevel: 3, DedupID: "d-1",
		}}, b.broker.sent)
		require.Empty(t, rec.Header().Get("Idempotent-Replayed"))
	})
	t.Run("OKBase64", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		raw := []byte{0, 0xff, 0xfe, 'x'}
		rec := b.doJSON(t, http.MethodPost, sendPath, fmt.Sprintf(`{"body":%q,"bodyEncoding":"base64"}`, base64.StdEncoding.EncodeToString(raw)))
		decode[api.SendResponse](t, rec, http.StatusOK)
		require.Equal(t, raw, b.broker.sent[0].Body)
	})
	t.Run("OKDeliverAtAndDelayMs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.SendResponse](t, b.doJSON(t, http.MethodPost, sendPath,
			`{"messages":[{"body":"a","deliverAt":"2026-12-01T10:00:00.5+01:00"},{"body":"b","delayMs":1500}]}`), http.StatusOK)
		require.True(t, b.broker.sent[0].DeliverAt.Equal(time.Date(2026, 12, 1, 9, 0, 0, 500_000_000, time.UTC)))
		require.Equal(t, int64(1500), b.broker.sent[1].DelayMs)
	})
	t.Run("OKBatchInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := decode[api.SendResponse](t, b.doJSON(t, http.MethodPost, sendPath,
			`{"messages":[{"body":"m0"},{"body":"m1","tag":"t"},{"body":"m2"}]}`), http.StatusOK)
		require.Len(t, resp.Results, 3)
		for i, r := range resp.Results {
			require.Equal(t, int64(100+i), r.QueueOffset)
			require.Equal(t, fmt.Sprintf("m%d", i), string(b.broker.sent[i].Body))
		}
		require.Equal(t, "t", b.broker.sent[1].Tag)
	})
	t.Run("OKRawWithHeaders", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := b.do(t, http.MethodPost, sendPath, "\x00raw bytes", "Content-Type", "application/octet-stream",
			"X-Mqgate-Tag", "paid", "X-Mqgate-Keys", "k1, k2,,", "X-Mqgate-Keys", "k3",
			"X-Mqgate-Property-Order-Id", "42", "x-mqgate-property-Region", "eu",
			"X-Mqgate-Sharding-Key", "c-1", "X-Mqgate-Delay-Level", "2")
		decode[api.SendResponse](t, rec, http.StatusOK)
		require.Equal(t, []broker.SendMessage{{
			Body: []byte("\x00raw bytes"), Tag: "paid", Keys: []string{"k1", "k2", "k3"},
			Properties: map[string]string{"order-id": "42", "region": "eu"}, ShardingKey: "c-1", DelayLevel: 2,
		}}, b.broker.sent)
	})
	t.Run("OKRawWithoutContentType", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.SendResponse](t, b.do(t, http.MethodPost, sendPath, `{"not":"an envelope"}`, "X-Mqgate-Deliver-At", "2026-12-01T00:00:00Z"), http.StatusOK)
		require.Equal(t, `{"not":"an envelope"}`, string(b.broker.sent[0].Body))
		require.False(t, b.broker.sent[0].DeliverAt.IsZero())
	})
	t.Run("OKStructuredJSONTypeIsRaw", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"specversion":"1.0","id":"1"}`
		decode[api.SendResponse](t, b.do(t, http.MethodPost, sendPath, body, "Content-Type", "application/cloudevents+json"), http.StatusOK)
		require.Equal(t, body, string(b.broker.sent[0].Body))
	})
	t.Run("OKSystemTopicNameIsUnescaped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.SendResponse](t, b.doJSON(t, http.MethodPost, "/v1/topics/%25DLQ%25g/messages", `{"body":"x"}`), http.StatusOK)
		require.Equal(t, "%DLQ%g", b.broker.topic)
	})
	t.Run("OKIdempotencyKeySingle", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.SendResponse](t, b.doJSON(t, http.MethodPost, sendPath, `{"body":"x"}`, "Idempotency-Key", `"key-1"`), http.StatusOK)
		require.Equal(t, "key-1", b.broker.sent[0].DedupID)
	})
	t.Run("OKIdempotencyKeyBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.SendResponse](t, b.doJSON(t, http.MethodPost, sendPath,
			`{"messages":[{"body":"a"},{"body":"b","dedupId":"own"},{"body":"c"}]}`, "Idempotency-Key", "k"), http.StatusOK)
		require.Equal(t, []string{"k:0", "own", "k:2"}, []string{b.broker.sent[0].DedupID, b.broker.sent[1].DedupID, b.broker.sent[2].DedupID})
	})
	t.Run("OKReplayHeader", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.duplicate = true
		rec := b.doJSON(t, http.MethodPost, sendPath, `{"body":"x"}`, "Idempotency-Key", "k")
		resp := decode[api.SendResponse](t, rec, http.StatusOK)
		require.True(t, resp.Results[0].Duplicate)
		require.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
	})
	t.Run("OKBodyAtMaxSize", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.SendResponse](t, b.do(t, http.MethodPost, sendPath, strings.Repeat("x", 1024), "Content-Type", "text/plain"), http.StatusOK)
		decode[api.SendResponse](t, b.doJSON(t, http.MethodPost, sendPath, `{"body":"`+strings.Repeat("y", 1024)+`"}`), http.StatusOK)
	})
}

func TestSendRejects(t *testing.T) {
	t.Parallel()
	json := "application/json"
	for _, tc := range []struct {
		name        string
		path        string
		contentType string
		body        string
		headers     []string
		status      int
		code        string
	}{
		{"EmptyJSONBody", sendPath, json, ``, nil, 400, "malformed-request"},
		{"EmptyMessageBody", sendPath, json, `{"body":""}`, nil, 400, "empty-body"},
		{"EmptyRawBody", sendPath, "text/plain", ``, nil, 400, "empty-body"},
		{"EmptyBatchEntry", sendPath, json, `{"messages":[{"body":"a"},{"body":""}]}`, nil, 400, "empty-body"},
		{"InvalidJSON", sendPath, json, `{"body":`, nil, 400, "malformed-request"},
		{"WrongType", sendPath, json, `{"body":5}`, nil, 400, "malformed-request"},
		{"UnknownField", sendPath, json, `{"body":"x","colour":"red"}`, nil, 400, "malformed-request"},
		{"TrailingData", sendPath, json, `{"body":"x"} {}`, nil, 400, "malformed-request"},
		{"InvalidBase64", sendPath, json, `{"body":"!!!","bodyEncoding":"base64"}`, nil, 400, "malformed-request"},
		{"UnknownEncoding", sendPath, json, `{"body":"x","bodyEncoding":"hex"}`, nil, 400, "invalid-argument"},
		{"SingleAndBatch", sendPath, json, `{"body":"x","messages":[{"body":"y"}]}`, nil, 400, "invalid-argument"},
		{"EmptyBatch", sendPath, json, `{"messages":[]}`, nil, 400, "invalid-argument"},
		{"TwoDelays", sendPath, json, `{"body":"x","delayLevel":1,"delayMs":5}`, nil, 400, "invalid-argument"},
		{"NegativeDelayLevel", sendPath, json, `{"body":"x","delayLevel":-1}`, nil, 400, "invalid-argument"},
		{"NegativeDelayMs", sendPath, json, `{"body":"x","delayMs":-1}`, nil, 400, "invalid-argument"},
		{"BadDeliverAt", sendPath, json, `{"body":"x","deliverAt":"tomorrow"}`, nil, 400, "invalid-argument"},
		{"InvalidUTF8", sendPath, json, "{\"body\":\"a\xffb\"}", nil, 400, "malformed-request"},
		{"LoneSurrogateEscape", sendPath, json, `{"body":"\ud800"}`, nil, 400, "malformed-request"},
		{"DuplicateMember", sendPath, json, `{"body":"a","body":"b"}`, nil, 400, "malformed-request"},
		{"CaseVariantMember", sendPath, json, `{"body":"a","BODY":"b"}`, nil, 400, "malformed-request"},
		{"WrongCaseMember", sendPath, json, `{"Body":"a"}`, nil, 400, "malformed-request"},
		{"DuplicateProperty", sendPath, json, `{"body":"a","properties":{"k":"1","k":"2"}}`, nil, 400, "malformed-request"},
		{"DuplicateInBatch", sendPath, json, `{"messages":[{"body":"a","tag":"x","tag":"y"}]}`, nil, 400, "malformed-request"},
		{"ClientIDTooLong", sendPath, json, `{"body":"x"}`, []string{"X-Mqgate-Client-Id", strings.Repeat("c", 129)}, 400, "value-too-long"},
		{"BadRawDelayHeader", sendPath, "text/plain", `x`, []string{"X-Mqgate-Delay-Level", "two"}, 400, "malformed-request"},
		{"BadRawDeliverAt", sendPath, "text/plain", `x`, []string{"X-Mqgate-Deliver-At", "soon"}, 400, "malformed-request"},
		{"IdempotencyKeyConflictsDedupID", sendPath, json, `{"body":"x","dedupId":"a"}`, []string{"Idempotency-Key", "b"}, 400, "invalid-argument"},
		{"IdempotencyKeyNotASCII", sendPath, json, `{"body":"x"}`, []string{"Idempotency-Key", "ключ"}, 400, "invalid-argument"},
		{"IdempotencyKeyTwice", sendPath, json, `{"body":"x"}`, []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, 400, "invalid-argument"},
		{"IdempotencyKeyTooLong", sendPath, json, `{"body":"x"}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "invalid-argument"},
		{"InvalidTopicName", "/v1/topics/a.b/messages", json, `{"body":"x"}`, nil, 400, "invalid-name"},
		{"EncodedSlashInTopic", "/v1/topics/a%2Fb/messages", json, `{"body":"x"}`, nil, 400, "invalid-name"},
		{"TopicTooLong", "/v1/topics/" + strings.Repeat("t", 256) + "/messages", json, `{"body":"x"}`, nil, 400, "invalid-name"},
		{"RawBodyOverMax", sendPath, "text/plain", strings.Repeat("x", 1025), nil, 413, "body-too-large"},
		{"JSONBodyOverMax", sendPath, json, `{"body":"` + strings.Repeat("y", 1025) + `"}`, nil, 413, "body-too-large"},
		{"RequestOverMax", sendPath, json, `{"messages":[` + strings.Repeat(`{"body":"0123456789"},`, 300) + `{"body":"x"}]}`, nil, 413, "body-too-large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			headers := append([]string{"Content-Type", tc.contentType}, tc.headers...)
			if tc.contentType == "" {
				headers = tc.headers
			}
			requireProblem(t, b.do(t, http.MethodPost, tc.path, tc.body, headers...), tc.status, tc.code)
			require.Nil(t, b.broker.sent, "the broker must not be called")
		})
	}

	t.Run("BatchOverCount", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(d *api.Deps) { d.MaxRequestSize = 1 << 20 })
		body := `{"messages":[` + strings.Repeat(`{"body":"x"},`, api.MaxBatchMessages) + `{"body":"x"}]}`
		requireProblem(t, b.doJSON(t, http.MethodPost, sendPath, body), 400, "invalid-argument")
	})
	t.Run("DeclaredLengthOverLimitIsRefusedUnread", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := &countingReader{}
		req := httptest.NewRequest(http.MethodPost, sendPath, body)
		req.ContentLength = 1 << 30
		req.Header.Set("Content-Type", "application/octet-stream")
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		requireProblem(t, rec, http.StatusRequestEntityTooLarge, "body-too-large")
		require.Zero(t, body.read, "no byte of an oversized body is read")
		require.Equal(t, "close", rec.Header().Get("Connection"))
	})
	t.Run("ChunkedOverLimitStopsReading", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := &countingReader{limit: 1 << 30}
		req := httptest.NewRequest(http.MethodPost, sendPath, body)
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		requireProblem(t, rec, http.StatusRequestEntityTooLarge, "body-too-large")
		require.Less(t, body.read, 64<<10, "reading stops near the limit")
	})
}

// countingReader yields limit bytes of '{' and counts what was read.
type countingReader struct {
	limit, read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.read >= c.limit {
		return 0, io.EOF
	}
	n := min(len(p), c.limit-c.read)
	for i := range p[:n] {
		p[i] = '['
	}
	c.read += n
	return n, nil
}
