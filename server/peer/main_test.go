package peer_test

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/server/peer"
)

// TestMain fails the package on goroutines left running: every
// transport, server and client a test starts must be closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a peer listener on 127.0.0.1:0 serving h.
type server struct {
	addr string
	srv  *http.Server
	done chan struct{}
}

func startServer(t testing.TB, addr string, h http.Handler) *server {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s := &server{addr: ln.Addr().String(), srv: peer.NewServer(addr, h, nil), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(s.stop)
	return s
}

// stop closes the listener and every connection (a second stop is
// harmless).
func (s *server) stop() {
	_ = s.srv.Close()
	<-s.done
}

// inbox collects what a handler steps.
type inbox struct {
	mu   sync.Mutex
	msgs []*pb.Message
	more chan struct{}
}

func newInbox() *inbox { return &inbox{more: make(chan struct{}, 1)} }

func (b *inbox) step(m *pb.Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.more <- struct{}{}:
	default:
	}
}

func (b *inbox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

func (b *inbox) all() []*pb.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*pb.Message(nil), b.msgs...)
}

// waitFor waits until the inbox holds n messages.
func (b *inbox) waitFor(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for b.len() < n {
		select {
		case <-b.more:
		case <-deadline:
			t.Fatalf("inbox holds %d messages, want %d", b.len(), n)
		}
	}
}

// msg builds a message of type typ from → to with entries of the sizes
// given.
func msg(typ pb.MessageType, from, to uint64, entrySizes ...int) *pb.Message {
	m := &pb.Message{Type: typ.Enum(), From: proto.Uint64(from), To: proto.Uint64(to), Term: proto.Uint64(3),
		Index: proto.Uint64(10), LogTerm: proto.Uint64(2), Commit: proto.Uint64(9)}
	for i, n := range entrySizes {
		data := make([]byte, n)
		for k := range data {
			data[k] = byte(i + k)
		}
		m.Entries = append(m.Entries, &pb.Entry{Index: proto.Uint64(uint64(11 + i)), Term: proto.Uint64(3),
			Type: pb.EntryNormal.Enum(), Data: data})
	}
	return m
}

// eventually waits for cond, polling.
func eventually(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition the test waits for
	}
}

// newMux is the peer port's mux as the server will build it: the Raft
// messages beside other routes.
func newMux(step func(*pb.Message), id uint64) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(peer.MessagesPath, peer.Handler(step, peer.HandlerOptions{ID: id, Secret: clusterSecret}))
	return mux
}
