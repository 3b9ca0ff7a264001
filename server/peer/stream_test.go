package peer_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/server/peer"
)

// postStream sends body as a stream (the whole of it, then the end) and
// returns the status and the answer.
func postStream(t *testing.T, c *http.Client, addr string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+peer.MessagesPath, io.NopCloser(bytes.NewReader(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", peer.StreamContentType)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestStreamStepsUntilABadMessage: a stream is answered 200 at once and
// its messages are stepped as they come; a message that does not decode
// ends it, with the reason in the answer, and what came before it was
// stepped (unlike a batch, which is stepped whole or not at all).
func TestStreamStepsUntilABadMessage(t *testing.T) {
	t.Parallel()
	in := newInbox()
	s := startServer(t, "", peer.Handler(in.step, peer.HandlerOptions{ID: 2, Secret: "k"}))
	c := client(t, "k")

	code, answer := postStream(t, c, s.addr, encode(t, msg(pb.MsgApp, 1, 2, 100), msg(pb.MsgHeartbeat, 1, 2)))
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, answer, "a stream that ends cleanly is answered with nothing")
	require.Equal(t, 2, in.len())

	bad := append(encode(t, msg(pb.MsgHeartbeat, 1, 2)), frame(marshal(t, msg(pb.MsgHeartbeat, 1, 3)))[5:]...)
	bad = append(bad, frame(marshal(t, msg(pb.MsgHeartbeat, 1, 2)))[5:]...)
	code, answer = postStream(t, c, s.addr, bad)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, answer, "message 1")
	require.Contains(t, answer, "addressed to 3")
	require.Equal(t, 3, in.len(), "the message before the bad one was stepped, the one after it not")

	code, _ = postStream(t, client(t, "wrong"), s.addr, encode(t, msg(pb.MsgHeartbeat, 1, 2)))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, 3, in.len())

	code, answer = postStream(t, c, s.addr, []byte("MQRF\x09"))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, answer, "version 9")
}

// TestStreamNeedsHTTP2: over HTTP/1.1 a stream is refused (a 505): an
// HTTP/1 server cannot read a request while its answer is open.
func TestStreamNeedsHTTP2(t *testing.T) {
	t.Parallel()
	in := newInbox()
	s := startServer(t, "", peer.Handler(in.step, peer.HandlerOptions{ID: 2}))
	req, err := http.NewRequest(http.MethodPost, "http://"+s.addr+peer.MessagesPath, bytes.NewReader(encode(t, msg(pb.MsgHeartbeat, 1, 2))))
	require.NoError(t, err)
	req.Header.Set("Content-Type", peer.StreamContentType)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, 1, resp.ProtoMajor)
	require.Equal(t, http.StatusHTTPVersionNotSupported, resp.StatusCode)
	require.Zero(t, in.len())
}

// TestStreamSurvivesAPeerRestart: a peer that restarts ends the stream;
// the transport opens a new one to the new process, and messages flow
// again.
func TestStreamSurvivesAPeerRestart(t *testing.T) {
	t.Parallel()
	in := newInbox()
	s := startServer(t, "", peer.Handler(in.step, peer.HandlerOptions{ID: 2}))
	tr := newTransport(t, peer.Options{ID: 1, Peers: map[uint64]string{2: s.addr},
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	tr.Send([]*pb.Message{msg(pb.MsgHeartbeat, 1, 2)})
	in.waitFor(t, 1)
	s.stop()
	in2 := newInbox()
	startServer(t, s.addr, peer.Handler(in2.step, peer.HandlerOptions{ID: 2}))
	eventually(t, func() bool {
		tr.Send([]*pb.Message{msg(pb.MsgHeartbeat, 1, 2)})
		return in2.len() > 0
	})
	sent := tr.Stats().Sent
	for i := 0; i < 50; i++ {
		tr.Send([]*pb.Message{msg(pb.MsgApp, 1, 2, 64)})
	}
	eventually(t, func() bool { return tr.Stats().Sent >= sent+50 })
	eventually(t, func() bool { return in2.len() >= 51 })
}

// TestStreamStalledPeer: a peer that accepts a stream and stops reading
// holds the writes only until RequestTimeout: the stream is cancelled,
// counted and reported, and a new one is opened.
func TestStreamStalledPeer(t *testing.T) {
	t.Parallel()
	var opened atomic.Int64
	release := make(chan struct{})
	s := startServer(t, "", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opened.Add(1)
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select { // never reads the body
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer close(release)
	var reports atomic.Int64
	tr := newTransport(t, peer.Options{ID: 1, Peers: map[uint64]string{2: s.addr}, RequestTimeout: 300 * time.Millisecond,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, MaxBatchBytes: 1 << 20,
		Unreachable: func(uint64) { reports.Add(1) }})
	for i := 0; i < 16; i++ { // 16 MiB: far more than the peer's flow-control window
		tr.Send([]*pb.Message{msg(pb.MsgApp, 1, 2, 1<<20)})
	}
	eventually(t, func() bool { return tr.Stats().Errors >= 1 && opened.Load() >= 2 })
	require.Positive(t, reports.Load())
	require.Positive(t, tr.Stats().Failed)
}

// FuzzStreamReader: the stream decoder never panics, and agrees with
// the batch decoder: a body the batch decoder accepts is a stream of the
// same messages that ends cleanly, and a stream that ends cleanly with
// at least one message is a batch the batch decoder accepts.
func FuzzStreamReader(f *testing.F) {
	f.Add(encode(f, msg(pb.MsgApp, 1, 2, 1024, 0, 3)))
	f.Add(encode(f, msg(pb.MsgHeartbeat, 1, 2), msg(pb.MsgVote, 3, 2), snapMsg(1, 2, 100)))
	f.Add([]byte("MQRF\x01"))
	for _, body := range malformed(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := peer.ReadStream(bytes.NewReader(body), 2, 1<<20)
		batch, berr := peer.DecodeBatch(body, 2)
		if berr == nil {
			require.NoError(t, err)
			require.Len(t, got, len(batch))
			for i := range got {
				require.True(t, proto.Equal(batch[i], got[i]))
			}
			return
		}
		if err == nil && len(got) > 0 {
			t.Fatalf("the stream reader took %d messages of a body the batch decoder refuses: %v", len(got), berr)
		}
		if err != nil {
			require.True(t, errors.Is(err, peer.ErrMalformed), "%v", err)
		}
	})
}
