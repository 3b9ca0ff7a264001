package raftlog

import (
	"fmt"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The cost of the Raft path over the direct one, per batch of 4 messages
// of 512 bytes, sync flush (one voter, so no network): the direct
// PutBatch (one fdatasync), Append of the batch's entry plus the hard
// state that commits it (the CommitLog's flush, the index's, the hard
// state's), and the same through raft.RawNode's Ready/Advance loop.
// Frames are encoded by a source store in async mode, outside the timer.

const benchBatch, benchBody = 4, 512

func benchMessages(n int) []*message.Message {
	ms := make([]*message.Message, benchBatch)
	for i := range ms {
		ms[i] = storagetest.NewMessage("orders", int32(i%4), fmt.Sprintf("%0*d", benchBody, n*benchBatch+i), "t")
	}
	return ms
}

func benchOptions(b *testing.B) Options {
	o := testOptions(b.TempDir())
	o.Store.SegmentSize, o.Store.MaxMessageSize = 64<<20, 64<<10
	o.IndexFileEntries = DefaultIndexFileEntries
	return o
}

func benchSource(b *testing.B) *frameSource {
	so := benchOptions(b).Store
	so.HoldDispatch, so.FlushMode = true, commitlog.FlushAsync
	st, err := storage.Open(so)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return &frameSource{st: st}
}

func (f *frameSource) batch(b *testing.B, pos int64, n int) []byte {
	if err := f.st.TruncateFrom(pos); err != nil {
		b.Fatal(err)
	}
	if err := f.st.PutBatch(benchMessages(n), make([]storage.PutResult, benchBatch)); err != nil {
		b.Fatal(err)
	}
	d, err := f.st.ReadFrameRange(pos, f.st.WriteOffset(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func BenchmarkDirectPutBatch(b *testing.B) {
	st, err := storage.Open(benchOptions(b).Store)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	res := make([]storage.PutResult, benchBatch)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		ms := benchMessages(n)
		if err := st.PutBatch(ms, res); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendEntry(b *testing.B) {
	s, err := Open(benchOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	src := benchSource(b)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		data := src.batch(b, s.NextOffset(), n)
		i := uint64(n + 1)
		b.StartTimer()
		if err := s.Append([]*pb.Entry{pbEntry(i, 1, pb.EntryNormal, data)}); err != nil {
			b.Fatal(err)
		}
		if err := s.SetHardState(&pb.HardState{Term: proto.Uint64(1), Vote: proto.Uint64(1), Commit: proto.Uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawNodeProposal(b *testing.B) {
	s, err := Open(benchOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	src := benchSource(b)
	t := &testing.T{}
	n := startNode(t, s, true)
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		b.StopTimer()
		data := src.batch(b, s.NextOffset(), k)
		b.StartTimer()
		if err := n.rn.Propose(data); err != nil {
			b.Fatal(err)
		}
		n.drain()
	}
	b.StopTimer()
	if len(n.applied) != b.N {
		b.Fatalf("%d applied of %d", len(n.applied), b.N)
	}
}

// BenchmarkRawNodeProposal8: eight proposals per Ready, so one Append
// carries eight entries (one CommitLog flush and one index sync for all);
// ns/op is per proposal.
func BenchmarkRawNodeProposal8(b *testing.B) {
	s, err := Open(benchOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	src := benchSource(b)
	n := startNode(&testing.T{}, s, true)
	b.ResetTimer()
	for k := 0; k < b.N; k += 8 {
		b.StopTimer()
		pos := s.NextOffset()
		var batch [][]byte
		for j := 0; j < 8; j++ {
			d := src.batch(b, pos, k+j)
			_, pos, _ = commitlogExtent(d)
			batch = append(batch, d)
		}
		b.StartTimer()
		for _, d := range batch {
			if err := n.rn.Propose(d); err != nil {
				b.Fatal(err)
			}
		}
		n.drain()
	}
}
