package raftlog

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// FuzzDecoders: whatever bytes the Raft files hold, the decoders never
// panic, and what they accept encodes back to the same bytes (the index
// entry, a hard-state slot, the snapshot data) or decodes the same again
// (the meta and confs files).
func FuzzDecoders(f *testing.F) {
	ie := make([]byte, IndexEntrySize)
	putIndexEntry(ie, entry{index: 7, term: 3, offset: 4096, size: 300})
	f.Add(ie)
	f.Add(append(encodeHardSlot(hardState{seq: 1, term: 2, vote: 3, commit: 4}), encodeHardSlot(hardState{seq: 2, term: 2, vote: 3, commit: 5})...))
	mb, err := encodeMeta(meta{compact: mark{index: 5, term: 2, offset: 100}, snap: mark{index: 4, term: 2, offset: 90}, conf: &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, perFile: 8})
	require.NoError(f, err)
	f.Add(mb)
	f.Add(encodeConfs(map[uint64]confEntry{3: {term: 1, typ: pb.EntryConfChangeV2, data: []byte("cc")}, 9: {term: 2, typ: pb.EntryConfChange}}, []uint64{3, 9}))
	f.Add(encodeSnapData(1 << 40))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := decodeIndexEntry(b); err == nil {
			again := make([]byte, IndexEntrySize)
			putIndexEntry(again, e)
			require.True(t, bytes.Equal(b[:IndexEntrySize], again), "index entry round trip")
		}
		if h, err := decodeHardSlot(b); err == nil {
			slot := encodeHardSlot(h)
			require.True(t, bytes.Equal(b[:hardSlotSize], slot), "hard-state slot round trip")
		}
		if h, _, ok := decodeHardState(b); ok {
			// The winner is a valid slot with the highest sequence.
			for s := 0; s < 2 && len(b) >= (s+1)*hardSlotSize; s++ {
				if o, err := decodeHardSlot(b[s*hardSlotSize:]); err == nil {
					require.LessOrEqual(t, o.seq, h.seq)
				}
			}
		}
		if m, err := decodeMeta(b); err == nil {
			enc, err := encodeMeta(m)
			require.NoError(t, err)
			m2, err := decodeMeta(enc)
			require.NoError(t, err)
			require.Equal(t, m.compact, m2.compact)
			require.Equal(t, m.snap, m2.snap)
			require.Equal(t, m.perFile, m2.perFile)
			require.True(t, proto.Equal(m.conf, m2.conf))
		}
		if c, err := decodeConfs(b); err == nil {
			order := make([]uint64, 0, len(c))
			for i := range c {
				order = append(order, i)
			}
			c2, err := decodeConfs(encodeConfs(c, order))
			require.NoError(t, err)
			require.Equal(t, len(c), len(c2))
			for i, ce := range c {
				require.Equal(t, ce.term, c2[i].term)
				require.Equal(t, ce.typ, c2[i].typ)
				require.True(t, bytes.Equal(ce.data, c2[i].data))
			}
		}
		if off, err := DecodeSnapshotData(b); err == nil {
			require.True(t, bytes.Equal(b, encodeSnapData(off)), "snapshot data round trip")
		}
	})
}
