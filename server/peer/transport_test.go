package peer_test

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/server/peer"
)

func newTransport(t *testing.T, opts peer.Options) *peer.Transport {
	t.Helper()
	tr, err := peer.NewTransport(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

// TestTransportDelivers: messages reach their peers in the order sent,
// in batches; a message to an id with no peer is counted, not sent.
func TestTransportDelivers(t *testing.T) {
	t.Parallel()
	in2, in3 := newInbox(), newInbox()
	s2 := startServer(t, "", peer.Handler(in2.step, peer.HandlerOptions{ID: 2, Secret: "k"}))
	s3 := startServer(t, "", peer.Handler(in3.step, peer.HandlerOptions{ID: 3, Secret: "k"}))
	tr := newTransport(t, peer.Options{ID: 1, Secret: "k", Peers: map[uint64]string{1: "ignored:1", 2: s2.addr, 3: s3.addr}})
	require.Equal(t, map[uint64]string{2: s2.addr, 3: s3.addr}, tr.Peers())

	for i := 0; i < 100; i++ {
		m2 := msg(pb.MsgApp, 1, 2, 64)
		m2.Index = &[]uint64{uint64(i)}[0]
		tr.Send([]*pb.Message{m2, msg(pb.MsgHeartbeat, 1, 3), msg(pb.MsgHeartbeat, 1, 4)})
	}
	in2.waitFor(t, 100)
	in3.waitFor(t, 100)
	eventually(t, func() bool { return tr.Stats().Sent == 200 }) // counted once written into an accepted stream
	for i, m := range in2.all() {
		require.Equal(t, uint64(i), m.GetIndex(), "in order")
		require.Len(t, m.Entries, 1)
	}
	st := tr.Stats()
	require.Equal(t, uint64(200), st.Sent)
	require.Equal(t, uint64(100), st.Unknown)
	require.Zero(t, st.Dropped+st.Failed+st.Errors)
	require.LessOrEqual(t, st.Batches, uint64(200))
	require.Equal(t, uint64(100), tr.PeerStats(2).Sent)
}

// TestTransportBoundsBatches: a batch (one write into the stream) never
// exceeds MaxBatchBytes, save a single message larger than it, which
// goes alone: 40 messages of 4 KiB queued at once take at least 20
// writes of at most 10 KiB, and the big one its own.
func TestTransportBoundsBatches(t *testing.T) {
	t.Parallel()
	in := newInbox()
	s := startServer(t, "", peer.Handler(in.step, peer.HandlerOptions{ID: 2}))
	const limit = 10 << 10
	tr := newTransport(t, peer.Options{ID: 1, Peers: map[uint64]string{2: s.addr}, MaxBatchBytes: limit})
	var msgs []*pb.Message
	for i := 0; i < 40; i++ {
		msgs = append(msgs, msg(pb.MsgApp, 1, 2, 4<<10))
	}
	msgs = append(msgs, msg(pb.MsgApp, 1, 2, 3*limit))
	tr.Send(msgs)
	in.waitFor(t, len(msgs))
	eventually(t, func() bool { return tr.Stats().Sent == uint64(len(msgs)) })
	st := tr.Stats()
	require.GreaterOrEqual(t, st.Batches, uint64(21), "40 messages of 4 KiB in batches of at most 10 KiB, and the big one")
	require.Zero(t, st.Failed+st.Errors+st.Dropped)
	require.Len(t, in.all()[len(msgs)-1].Entries[0].GetData(), 3*limit, "the big one arrived whole, last")
}

// hangingListener accepts connections and never reads or answers.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestSendDoesNotBlockOnAHungPeer: a peer that takes the connection and
// never answers holds one request; Send still returns at once, the
// queue fills and the rest is dropped and counted; Close cancels the
// request under way.
func TestSendDoesNotBlockOnAHungPeer(t *testing.T) {
	t.Parallel()
	tr, err := peer.NewTransport(peer.Options{ID: 1, Peers: map[uint64]string{2: hangingListener(t)},
		QueueMessages: 256, MaxBatchBytes: 4 << 10})
	require.NoError(t, err)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; i < 10000; i++ {
			tr.Send([]*pb.Message{msg(pb.MsgApp, 1, 2, 128)})
		}
	}()
	select {
	case <-sent:
	case <-time.After(3 * time.Second):
		t.Fatal("Send blocked")
	}
	st := tr.Stats()
	// One batch (at most 4 KiB: about 20 messages) hangs, 256 wait.
	require.GreaterOrEqual(t, st.Dropped, uint64(10000-256-30))
	require.Zero(t, st.Sent)

	start := time.Now()
	require.NoError(t, tr.Close())
	require.NoError(t, tr.Close())
	require.Less(t, time.Since(start), 2*time.Second, "Close waited for the hung request")
	tr.Send([]*pb.Message{msg(pb.MsgApp, 1, 2)})
	require.Equal(t, st.Unknown+1, tr.Stats().Unknown, "after Close nothing is sent")
}

// TestQueueBoundedInBytes: the queue holds at most QueueBytes of entry
// data, however few messages that is.
func TestQueueBoundedInBytes(t *testing.T) {
	t.Parallel()
	tr := newTransport(t, peer.Options{ID: 1, Peers: map[uint64]string{2: hangingListener(t)},
		QueueBytes: 1 << 20, MaxBatchBytes: 128 << 10})
	for i := 0; i < 100; i++ {
		tr.Send([]*pb.Message{msg(pb.MsgApp, 1, 2, 64<<10)})
	}
	// At most 16 wait in the queue and one in the hung request.
	require.GreaterOrEqual(t, tr.Stats().Dropped, uint64(100-17))
	require.Less(t, tr.Stats().Dropped, uint64(100), "the first ones were queued")
}

// TestUnreachablePeer: a peer nobody listens for fails every batch: each
// failure is counted and reported, and the transport backs off between
// tries rather than spinning.
func TestUnreachablePeer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // connection refused from now on

	var reports atomic.Int64
	tr := newTransport(t, peer.Options{ID: 1, Peers: map[uint64]string{2: addr},
		BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Unreachable: func(id uint64) {
			require.Equal(t, uint64(2), id)
			reports.Add(1)
		}})
	feed := time.NewTicker(time.Millisecond)
	defer feed.Stop()
	window := time.After(500 * time.Millisecond)
loop:
	for {
		select {
		case <-feed.C:
			tr.Send([]*pb.Message{msg(pb.MsgHeartbeat, 1, 2)})
		case <-window:
			break loop
		}
	}
	st := tr.Stats()
	require.GreaterOrEqual(t, st.Errors, uint64(3))
	require.LessOrEqual(t, st.Errors, uint64(30), "500 ms of failures at 20..100 ms apart")
	require.Equal(t, int64(st.Errors), reports.Load())
	require.GreaterOrEqual(t, st.Failed, st.Errors)
	require.Zero(t, st.Sent)
}

// TestWrongSecretFails: a transport with another secret gets 401s:
// counted as failures, reported unreachable, nothing stepped.
func TestWrongSecretFails(t *testing.T) {
	t.Parallel()
	in := newInbox()
	s := startServer(t, "", peer.Handler(in.step, peer.HandlerOptions{ID: 2, Secret: "right"}))
	reported := make(chan uint64, 100)
	tr := newTransport(t, peer.Options{ID: 1, Secret: "wrong", Peers: map[uint64]string{2: s.addr},
		Unreachable: func(id uint64) {
			select {
			case reported <- id:
			default:
			}
		}})
	tr.Send([]*pb.Message{msg(pb.MsgHeartbeat, 1, 2)})
	select {
	case id := <-reported:
		require.Equal(t, uint64(2), id)
	case <-time.After(10 * time.Second):
		t.Fatal("no failure reported")
	}
	require.Zero(t, in.len())
	require.Zero(t, tr.Stats().Sent)
}

// TestMembership: AddPeer, RemovePeer and SetPeers change where Send
// delivers; a peer moved to another address is reached there.
func TestMembership(t *testing.T) {
	t.Parallel()
	in2, in3, in3b := newInbox(), newInbox(), newInbox()
	s2 := startServer(t, "", peer.Handler(in2.step, peer.HandlerOptions{ID: 2}))
	s3 := startServer(t, "", peer.Handler(in3.step, peer.HandlerOptions{ID: 3}))
	s3b := startServer(t, "", peer.Handler(in3b.step, peer.HandlerOptions{ID: 3}))
	tr := newTransport(t, peer.Options{ID: 1})
	hb := func(to uint64) []*pb.Message { return []*pb.Message{msg(pb.MsgHeartbeat, 1, to)} }

	tr.Send(hb(2))
	require.Equal(t, uint64(1), tr.Stats().Unknown)

	tr.AddPeer(2, s2.addr)
	tr.AddPeer(1, "self:1") // this node: ignored
	tr.AddPeer(0, "none:1")
	require.Equal(t, map[uint64]string{2: s2.addr}, tr.Peers())
	tr.Send(hb(2))
	in2.waitFor(t, 1)

	tr.SetPeers(map[uint64]string{3: s3.addr})
	require.Equal(t, map[uint64]string{3: s3.addr}, tr.Peers())
	tr.Send(hb(2))
	require.Equal(t, uint64(2), tr.Stats().Unknown)
	tr.Send(hb(3))
	in3.waitFor(t, 1)

	tr.AddPeer(3, s3.addr) // the same address: nothing changes
	tr.AddPeer(3, s3b.addr)
	tr.Send(hb(3))
	in3b.waitFor(t, 1)
	require.Equal(t, 1, in3.len())

	tr.RemovePeer(3)
	tr.RemovePeer(3)
	require.Empty(t, tr.Peers())
	tr.Send(hb(3))
	require.Equal(t, uint64(3), tr.Stats().Unknown)
	require.Equal(t, 1, in2.len())
}

// TestClientAddsTheSecret: Client's requests carry the bearer secret
// (replacing the caller's Authorization) and speak HTTP/2 without TLS;
// the caller's request is left as it was.
func TestClientAddsTheSecret(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !peer.Authorized(r, "k") {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, r.Proto)
	}))
	c := client(t, "k")
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+"/forwarded", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Basic dXNlcjpwdw==")
	resp, err := c.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "HTTP/2.0", string(b))
	require.Equal(t, "Basic dXNlcjpwdw==", req.Header.Get("Authorization"))

	resp, err = client(t, "").Get("http://" + s.addr + "/forwarded")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
