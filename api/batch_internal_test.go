package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mqgate/mqgate/server/broker"
)

// FuzzSplitBatch: any bytes either are refused or split into frames that
// re-encode to exactly the input, each within the limits.
func FuzzSplitBatch(f *testing.F) {
	f.Add(AppendBatch(nil, []byte("a"), []byte("bc")))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(append(AppendBatch(nil, []byte("x")), 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxCount, maxSize = 8, 64
		frames, err := splitBatch(data, maxCount, maxSize)
		if err != nil {
			return
		}
		if len(frames) == 0 || len(frames) > maxCount {
			t.Fatalf("%d frames accepted; 1..%d allowed", len(frames), maxCount)
		}
		for i, fr := range frames {
			if len(fr) == 0 || len(fr) > maxSize {
				t.Fatalf("frame %d has %d bytes", i, len(fr))
			}
		}
		if again := AppendBatch(nil, frames...); !bytes.Equal(again, data) {
			t.Fatalf("frames re-encode to %x, not %x", again, data)
		}
	})
}

// TestWriteSendResponseMatchesEncoder: the hand-written response is the
// encoder's, byte for byte, including duplicates and the fallback for an
// id that is not hex.
func TestWriteSendResponseMatchesEncoder(t *testing.T) {
	for _, results := range [][]broker.SendResult{
		nil,
		{{MessageID: "7F00000100001F9000000000000004D2", QueueID: 3, QueueOffset: 42}},
		{{MessageID: "AB", QueueID: 0, QueueOffset: 0, Duplicate: true}, {MessageID: "cd", QueueID: -1, QueueOffset: 1 << 62}},
		{{MessageID: `a"b`, QueueID: 1, QueueOffset: 2}},
	} {
		got := httptest.NewRecorder()
		writeSendResponse(got, httptest.NewRequest(http.MethodPost, "/", nil), results)
		resp := SendResponse{Results: []SendResult{}}
		for _, res := range results {
			resp.Results = append(resp.Results, SendResult{MessageID: res.MessageID, QueueID: res.QueueID, QueueOffset: res.QueueOffset, Duplicate: res.Duplicate})
		}
		want := httptest.NewRecorder()
		writeJSON(want, httptest.NewRequest(http.MethodPost, "/", nil), http.StatusOK, resp)
		if got.Body.String() != want.Body.String() || got.Header().Get("Content-Length") != want.Header().Get("Content-Length") {
			t.Fatalf("got %q, want %q", got.Body.String(), want.Body.String())
		}
	}
}
