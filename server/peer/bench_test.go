package peer_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/server/peer"
)

// BenchmarkTransport: MsgApp messages of 1 KiB entries from one
// transport to a peer's server on loopback (h2c, with the secret), each
// message decoded and stepped into a counter. The sender keeps at most
// half a queue (in messages and in bytes) in flight, so nothing is dropped: the figure is the
// transport's throughput, not its drop rate. One op is one message.
func BenchmarkTransport(b *testing.B) {
	for _, entries := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			var got atomic.Int64
			wake := make(chan struct{}, 1)
			step := func(*pb.Message) {
				got.Add(1)
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			s := startServer(b, "", peer.Handler(step, peer.HandlerOptions{ID: 2, Secret: "k"}))
			tr, err := peer.NewTransport(peer.Options{ID: 1, Secret: "k", Peers: map[uint64]string{2: s.addr}})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			sizes := make([]int, entries)
			for i := range sizes {
				sizes[i] = 1024
			}
			m := msg(pb.MsgApp, 1, 2, sizes...)
			batch := []*pb.Message{m}
			window := int64(min(peer.DefaultQueueMessages/2, peer.DefaultQueueBytes/2/(entries*1024)))
			wait := func() {
				select {
				case <-wake:
				case <-time.After(10 * time.Second):
					b.Fatalf("stalled: %d of %d received, %+v", got.Load(), b.N, tr.Stats())
				}
			}
			b.SetBytes(int64(entries * 1024))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for int64(i)-got.Load() >= window {
					wait()
				}
				tr.Send(batch)
			}
			for got.Load() < int64(b.N) {
				wait()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if st := tr.Stats(); st.Dropped > 0 || st.Failed > 0 {
				b.Fatalf("dropped %d, failed %d", st.Dropped, st.Failed)
			}
		})
	}
}
