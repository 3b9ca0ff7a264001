package peer_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/server/peer"
)

// encode frames msgs as the transport does.
func encode(t testing.TB, msgs ...*pb.Message) []byte {
	t.Helper()
	buf := peer.AppendHeader(nil)
	for _, m := range msgs {
		var err error
		buf, err = peer.AppendMessage(buf, m)
		require.NoError(t, err)
	}
	return buf
}

// frame frames raw message bytes, valid or not.
func frame(raw ...[]byte) []byte {
	buf := peer.AppendHeader(nil)
	for _, r := range raw {
		buf = binary.AppendUvarint(buf, uint64(len(r)))
		buf = append(buf, r...)
	}
	return buf
}

func marshal(t testing.TB, m *pb.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func snapMsg(from, to uint64, size int) *pb.Message {
	m := msg(pb.MsgSnap, from, to)
	m.Snapshot = &pb.Snapshot{Data: bytes.Repeat([]byte{7}, size), Metadata: &pb.SnapshotMetadata{
		Index: proto.Uint64(100), Term: proto.Uint64(3), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	return m
}

// TestRoundTrip: what the transport encodes decodes to the same
// messages, in order.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	in := []*pb.Message{
		msg(pb.MsgApp, 1, 2, 1024, 0, 300, 1),
		msg(pb.MsgHeartbeat, 1, 2),
		msg(pb.MsgAppResp, 3, 2),
		snapMsg(1, 2, 5000),
		msg(pb.MsgPreVote, 3, 2),
	}
	out, err := peer.DecodeBatch(encode(t, in...), 2)
	require.NoError(t, err)
	require.Len(t, out, len(in))
	for i := range in {
		require.True(t, proto.Equal(in[i], out[i]), "message %d: %v != %v", i, in[i], out[i])
	}
}

// malformed are bodies the handler must refuse whole, each with why.
func malformed(t testing.TB) map[string][]byte {
	good := marshal(t, msg(pb.MsgHeartbeat, 1, 2))
	valid := frame(good)
	nonMinimal := append(peer.AppendHeader(nil), byte(len(good))|0x80, 0x00)
	nonMinimal = append(nonMinimal, good...)
	overflow := append(peer.AppendHeader(nil), bytes.Repeat([]byte{0xff}, 10)...)
	overflow = append(overflow, 0x01)
	huge := binary.AppendUvarint(peer.AppendHeader(nil), math.MaxUint64)
	return map[string][]byte{
		"empty":                   {},
		"header only":             peer.AppendHeader(nil),
		"short header":            []byte("MQR"),
		"bad magic":               append([]byte("XQRF"), valid[4:]...),
		"bad version":             append([]byte("MQRF\x02"), valid[5:]...),
		"length cut short":        append(peer.AppendHeader(nil), 0x80),
		"length overflows":        overflow,
		"length not minimal":      nonMinimal,
		"zero length":             append(peer.AppendHeader(nil), 0x00),
		"length past end":         valid[:len(valid)-1],
		"huge length":             huge,
		"trailing byte":           append(append([]byte(nil), valid...), 0x05),
		"trailing partial frame":  append(append([]byte(nil), valid...), 0x05, 0x08),
		"not protobuf":            frame([]byte{0xff, 0xff, 0xff}),
		"good then bad":           frame(good, []byte{0x0a}),
		"addressed to another":    frame(marshal(t, msg(pb.MsgHeartbeat, 1, 3))),
		"no sender":               frame(marshal(t, msg(pb.MsgHeartbeat, 0, 2))),
		"sender is this node":     frame(marshal(t, msg(pb.MsgHeartbeat, 2, 2))),
		"sender a local id":       frame(marshal(t, msg(pb.MsgApp, math.MaxUint64, 2))),
		"sender the apply thread": frame(marshal(t, msg(pb.MsgAppResp, math.MaxUint64-1, 2))),
		"no type":                 frame(marshal(t, &pb.Message{From: proto.Uint64(1), To: proto.Uint64(2)})),
		"MsgHup":                  frame(marshal(t, msg(pb.MsgHup, 1, 2))),
		"MsgProp":                 frame(good, marshal(t, msg(pb.MsgProp, 1, 2, 10))),
		"MsgStorageAppend":        frame(marshal(t, msg(pb.MsgStorageAppend, 1, 2))),
		"MsgForgetLeader":         frame(marshal(t, msg(pb.MsgForgetLeader, 1, 2))),
		"unknown type":            frame(append(marshal(t, &pb.Message{From: proto.Uint64(1), To: proto.Uint64(2)}), 0x08, 0x63)),
	}
}

// TestDecodeRefusesMalformed: each malformed body fails with
// ErrMalformed and yields no message.
func TestDecodeRefusesMalformed(t *testing.T) {
	t.Parallel()
	for name, body := range malformed(t) {
		t.Run(name, func(t *testing.T) {
			msgs, err := peer.DecodeBatch(body, 2)
			require.True(t, errors.Is(err, peer.ErrMalformed), "%v", err)
			require.Nil(t, msgs)
		})
	}
}

// FuzzDecodeBatch: the decoder of untrusted bodies never panics; what it
// accepts is framed exactly as the transport frames (re-framing gives
// the same bytes), and every message it returns is one this node may
// take and survives a marshal round trip.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(encode(f, msg(pb.MsgApp, 1, 2, 1024, 0, 3)))
	f.Add(encode(f, msg(pb.MsgHeartbeat, 1, 2), msg(pb.MsgVote, 3, 2), snapMsg(1, 2, 100)))
	for _, body := range malformed(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := peer.DecodeBatch(body, 2)
		if err != nil {
			require.True(t, errors.Is(err, peer.ErrMalformed), "%v", err)
			require.Nil(t, msgs)
			return
		}
		frames, err := peer.SplitFrames(body)
		require.NoError(t, err)
		require.Equal(t, body, frame(frames...))
		require.Len(t, msgs, len(frames))
		for _, m := range msgs {
			require.Equal(t, uint64(2), m.GetTo())
			again, err := peer.DecodeBatch(encode(t, m), 2)
			require.NoError(t, err)
			require.True(t, proto.Equal(m, again[0]))
		}
	})
}
