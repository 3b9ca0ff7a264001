package raftlog

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// node is one voter driven the way the node loop will drive it: the
// Ready/Advance contract with the entries persisted before the hard
// state, and committed entries applied in order.
type node struct {
	t       *testing.T
	s       *Storage
	rn      *raft.RawNode
	applied []*pb.Entry // committed normal entries with data, in order
	conf    *pb.ConfState
}

func startNode(t *testing.T, s *Storage, bootstrap bool) *node {
	t.Helper()
	rn, err := raft.NewRawNode(&raft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, CheckQuorum: true, PreVote: true,
		Logger: quietLogger{},
	})
	require.NoError(t, err)
	if bootstrap {
		require.NoError(t, rn.Bootstrap([]raft.Peer{{ID: 1}}))
	}
	n := &node{t: t, s: s, rn: rn}
	n.drain()
	require.NoError(t, rn.Campaign())
	n.drain()
	require.Equal(t, raft.StateLeader, rn.Status().RaftState)
	return n
}

// drain handles every Ready: persist (entries, then the hard state),
// apply the committed entries, advance.
func (n *node) drain() {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		require.NoError(n.t, n.s.Append(rd.Entries))
		if !raft.IsEmptyHardState(rd.HardState) {
			require.NoError(n.t, n.s.SetHardState(rd.HardState))
		}
		for _, e := range rd.CommittedEntries {
			switch e.GetType() {
			case pb.EntryConfChange:
				var cc pb.ConfChange
				require.NoError(n.t, proto.Unmarshal(e.GetData(), &cc))
				n.conf = n.rn.ApplyConfChange(&cc)
			case pb.EntryConfChangeV2:
				var cc pb.ConfChangeV2
				require.NoError(n.t, proto.Unmarshal(e.GetData(), &cc))
				n.conf = n.rn.ApplyConfChange(&cc)
			default:
				if len(e.GetData()) > 0 {
					n.applied = append(n.applied, e)
				}
			}
		}
		n.rn.Advance(rd)
	}
}

// TestSingleVoterProposesAndApplies: one voter over the Storage, driven
// by raft.RawNode: it bootstraps (configuration entries), elects itself,
// proposes batches of messages as frame streams encoded at the log's end
// (several proposals per Ready, so one Append carries several entries and
// one flush), applies them in order, and its store serves every message
// from its ConsumeQueues once committed. Reopened, it comes back at its
// term and log, wins a new election and goes on.
func TestSingleVoterProposesAndApplies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	n := startNode(t, s, true)

	var proposed [][]byte
	messages := 0
	propose := func(rounds int) {
		for r := 0; r < rounds; r++ {
			next := s.NextOffset() // drained: nothing is pending
			for k := 0; k < 1+r%3; k++ {
				data := src.frames(t, next, 1+r%4, 100+r%700)
				_, end, err := commitlogExtent(data)
				require.NoError(t, err)
				require.NoError(t, n.rn.Propose(data))
				proposed = append(proposed, data)
				messages += 1 + r%4
				next = end
			}
			n.drain()
		}
	}
	start := time.Now()
	propose(200)
	took := time.Since(start)
	require.Equal(t, []uint64{1}, n.conf.GetVoters())
	require.Len(t, n.applied, len(proposed))
	for k := range proposed {
		require.True(t, bytes.Equal(proposed[k], n.applied[k].GetData()), "entry %d applied as proposed", k)
	}
	st := s.Store()
	st.SetDispatchLimit(s.CommitOffset())
	require.Eventually(t, func() bool { return st.Dispatched() >= st.WriteOffset() }, 10*time.Second, time.Millisecond)
	served := 0
	for _, topic := range []string{"orders", "audit"} {
		for q := int32(0); q < 3; q++ {
			served += int(st.MaxOffset(topic, q))
		}
	}
	require.Equal(t, messages, served, "every committed message is in its ConsumeQueue")
	t.Logf("%d entries (%d messages, %d KiB of frames) proposed, persisted and applied in %v", len(proposed), messages, st.WriteOffset()>>10, took)

	hs, _, err := s.InitialState()
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	hs2, cs, err := s.InitialState()
	require.NoError(t, err)
	require.True(t, proto.Equal(hs, hs2), "the hard state survives")
	require.Empty(t, cs.GetVoters(), "no snapshot yet: the configuration is in the log")
	n = startNode(t, s, false)
	require.Greater(t, n.rn.Status().GetTerm(), hs.GetTerm(), "a new term")
	require.Len(t, n.applied, len(proposed), "the log is applied again from the start")
	before := len(proposed)
	propose(20)
	require.Len(t, n.applied, len(proposed))
	require.Greater(t, len(proposed), before)

	// A snapshot and a compaction at the applied index, then a reopen:
	// raft restarts from the snapshot.
	applied := n.rn.Status().Applied
	_, err = s.CreateSnapshot(applied, n.conf, nil)
	require.NoError(t, err)
	require.NoError(t, s.Compact(applied))
	require.NoError(t, s.Close())
	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	_, cs, err = s.InitialState()
	require.NoError(t, err)
	require.Equal(t, []uint64{1}, cs.GetVoters())
	n = startNode(t, s, false)
	propose(5)
	require.Len(t, n.applied, 5*2-1, "only the entries after the snapshot")
}

// quietLogger drops raft's log lines (it logs every election).
type quietLogger struct{}

func (quietLogger) Debug(...any)                   {}
func (quietLogger) Debugf(string, ...any)          {}
func (quietLogger) Error(...any)                   {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Info(...any)                    {}
func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Warning(...any)                 {}
func (quietLogger) Warningf(string, ...any)        {}
func (quietLogger) Fatal(v ...any)                 { panic(v) }
func (quietLogger) Fatalf(format string, v ...any) { panic(format) }
func (quietLogger) Panic(v ...any)                 { panic(v) }
func (quietLogger) Panicf(format string, v ...any) { panic(format) }
