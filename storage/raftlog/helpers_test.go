package raftlog

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

const testSegment = 8 << 10

var testStoreID = message.Host{7, 7, 7, 7, 7, 7, 7, 7}

// testOptions are the options of a Raft log in dir: small segments (a
// few entries roll one) and small index files.
func testOptions(dir string) Options {
	so := storagetest.SmallOptions(dir)
	so.SegmentSize, so.MaxMessageSize = testSegment, 2<<10
	so.StoreID = testStoreID
	so.Clock = clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	return Options{Store: so, IndexFileEntries: 8}
}

// frameSource encodes entry data the way a leader does: it writes the
// messages into its own store, whose log is kept equal to the follower's
// below the position asked for (it cuts its own suffix first), and cuts
// the frames it wrote out of it.
type frameSource struct {
	st *storage.Store
	n  int
}

func newFrameSource(t require.TestingT, dir string) *frameSource {
	so := testOptions(dir).Store
	so.HoldDispatch = true // nothing dispatched: any suffix can be cut
	st, err := storage.Open(so)
	require.NoError(t, err)
	return &frameSource{st: st}
}

// frames returns the frame stream of n messages appended at pos.
func (f *frameSource) frames(t require.TestingT, pos int64, n int, size int) []byte {
	require.LessOrEqual(t, pos, f.st.WriteOffset(), "the source is behind the log")
	require.NoError(t, f.st.TruncateFrom(pos))
	ms := make([]*message.Message, n)
	for i := range ms {
		f.n++
		body := fmt.Sprintf("m%d-%0*d", f.n, size, f.n)
		ms[i] = storagetest.NewMessage([]string{"orders", "audit"}[f.n%2], int32(f.n%3), body, "t")
	}
	require.NoError(t, f.st.PutBatch(ms, make([]storage.PutResult, n)))
	b, err := f.st.ReadFrameRange(pos, f.st.WriteOffset(), nil)
	require.NoError(t, err)
	return b
}

func (f *frameSource) close() { _ = f.st.Close() }

func pbEntry(index, term uint64, typ pb.EntryType, data []byte) *pb.Entry {
	return &pb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term), Type: typ.Enum(), Data: data}
}

// requireSameEntries: the same indexes, terms, types and data.
func requireSameEntries(t require.TestingT, want, got []*pb.Entry, msgAndArgs ...any) {
	require.Equal(t, len(want), len(got), msgAndArgs...)
	for k := range want {
		require.Equal(t, want[k].GetIndex(), got[k].GetIndex(), msgAndArgs...)
		require.Equal(t, want[k].GetTerm(), got[k].GetTerm(), msgAndArgs...)
		require.Equal(t, want[k].GetType(), got[k].GetType(), msgAndArgs...)
		require.Equal(t, len(want[k].GetData()), len(got[k].GetData()), msgAndArgs...)
		if len(want[k].GetData()) > 0 {
			require.Equal(t, want[k].GetData(), got[k].GetData(), msgAndArgs...)
		}
	}
}

// commitlogExtent is the CommitLog range a frame stream covers.
func commitlogExtent(b []byte) (int64, int64, error) { return commitlog.StreamExtent(b) }
