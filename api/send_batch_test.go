package api_test

import (
	"encoding/binary"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
)

// batchBody is the binary batch encoding of bodies.
func batchBody(bodies ...string) string {
	bs := make([][]byte, len(bodies))
	for i, b := range bodies {
		bs[i] = []byte(b)
	}
	return string(api.AppendBatch(nil, bs...))
}

func TestSendBinaryBatch(t *testing.T) {
	t.Parallel()

	t.Run("OKInOrderWithHeaders", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := b.do(t, http.MethodPost, sendPath, batchBody("m0", "\x00\xffm1", strings.Repeat("z", 1024)),
			"Content-Type", api.ContentTypeBatch, "X-Mqgate-Tag", "paid", "X-Mqgate-Property-Region", "eu",
			"Idempotency-Key", "k")
		resp := decode[api.SendResponse](t, rec, http.StatusOK)
		require.Len(t, resp.Results, 3)
		require.Len(t, b.broker.sent, 3)
		for i, want := range []string{"m0", "\x00\xffm1", strings.Repeat("z", 1024)} {
			m := b.broker.sent[i]
			require.Equal(t, want, string(m.Body))
			require.Equal(t, "paid", m.Tag)
			require.Equal(t, map[string]string{"region": "eu"}, m.Properties)
			require.Equal(t, "k:"+string(rune('0'+i)), m.DedupID)
			require.Equal(t, int64(100+i), resp.Results[i].QueueOffset)
		}
	})
	t.Run("ContentTypeWithParameters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		decode[api.SendResponse](t, b.do(t, http.MethodPost, sendPath, batchBody("a", "b"),
			"Content-Type", api.ContentTypeBatch+"; version=1"), http.StatusOK)
		require.Len(t, b.broker.sent, 2)
	})

	many := make([]string, api.MaxBatchMessages+1)
	for i := range many {
		many[i] = "x"
	}
	count := func(n uint32) string { return string(binary.BigEndian.AppendUint32(nil, n)) }
	for _, tc := range []struct {
		name, body string
		status     int
		code, says string
	}{
		{"TooShort", "\x00\x01", http.StatusBadRequest, "malformed-request", "4-byte big-endian message count"},
		{"ZeroCount", count(0), http.StatusBadRequest, "invalid-argument", "1 to 256"},
		{"TooMany", batchBody(many...), http.StatusBadRequest, "invalid-argument", "257 messages"},
		{"HugeCountSmallBody", count(200) + "\x00", http.StatusBadRequest, "malformed-request", "announces 200 messages"},
		{"TruncatedSize", count(2) + batchBody("a")[4:] + "\x00\x00\x00", http.StatusBadRequest, "malformed-request", "messages[1]"},
		{"TruncatedBody", count(1) + count(10) + "abc", http.StatusBadRequest, "malformed-request", "announces 10 bytes but 3 remain"},
		{"TrailingBytes", batchBody("a") + "junk", http.StatusBadRequest, "malformed-request", "4 bytes follow"},
		{"EmptyMessage", batchBody("a", ""), http.StatusBadRequest, "empty-body", "messages[1]"},
		{"MessageTooLarge", batchBody("a", strings.Repeat("y", 1025)), http.StatusRequestEntityTooLarge, "body-too-large", "messages[1].body"},
		{"SizeBeyondInt32", count(1) + count(0xffffffff) + "a", http.StatusRequestEntityTooLarge, "body-too-large", "messages[0].body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rec := b.do(t, http.MethodPost, sendPath, tc.body, "Content-Type", api.ContentTypeBatch)
			p := requireProblem(t, rec, tc.status, tc.code)
			require.Contains(t, p.Detail, tc.says)
			require.Empty(t, b.broker.sent, "nothing is sent from a refused batch")
		})
	}
	t.Run("BadHeaderAttribute", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := b.do(t, http.MethodPost, sendPath, batchBody("a"), "Content-Type", api.ContentTypeBatch, "X-Mqgate-Delay-Ms", "soon")
		requireProblem(t, rec, http.StatusBadRequest, "malformed-request")
		require.Empty(t, b.broker.sent)
	})
}
