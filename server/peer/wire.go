package peer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The body of POST /raft/v1/messages (doc.go, "Wire format").
const (
	// MessagesPath is the route of the Raft messages on the peer port.
	MessagesPath = "/raft/v1/messages"
	// CopyPath is the route of a copy of the leader's data (GET; a tar
	// stream, package shard's copies), which a joining replica starts
	// from.
	CopyPath = "/raft/v1/copy"
	// ContentType names the framing below.
	ContentType = "application/x-mqgate-raft"
	// StreamContentType marks a stream: the same framing, read message by
	// message as it arrives, in the body of one long-lived request (doc.go,
	// "Streams").
	StreamContentType = "application/x-mqgate-raft-stream"

	magic      = "MQRF"
	version    = 1
	headerSize = len(magic) + 1
)

// ErrMalformed: a body that is not a well-formed batch (the handler's
// 400). Nothing of such a body is stepped.
var ErrMalformed = errors.New("peer: malformed batch")

// appendHeader starts a batch.
func appendHeader(buf []byte) []byte {
	return append(append(buf, magic...), version)
}

// appendMessage adds one length-prefixed message to a batch. The size
// proto.Size computes is cached in m, so the marshal that follows does
// not walk the message twice (messages are never changed once Raft hands
// them out, which is what makes the cached size safe).
func appendMessage(buf []byte, m *pb.Message) ([]byte, error) {
	n := proto.Size(m)
	buf = binary.AppendUvarint(buf, uint64(n))
	start := len(buf)
	buf, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, m)
	if err != nil {
		return buf[:start], fmt.Errorf("peer: marshal %s to %d: %w", m.GetType(), m.GetTo(), err)
	}
	if len(buf)-start != n {
		// The size changed under us: the message was modified after Send.
		return buf[:start], fmt.Errorf("peer: marshal %s to %d: size %d, expected %d", m.GetType(), m.GetTo(), len(buf)-start, n)
	}
	return buf, nil
}

// splitFrames checks a batch's framing and returns its messages' bytes
// (subslices of body). It is strict: the magic and version must match,
// every length must be the shortest uvarint of a length between 1 and
// what is left, and nothing may follow the last message. A batch holds at
// least one message.
func splitFrames(body []byte) ([][]byte, error) {
	if len(body) < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrMalformed, len(body))
	}
	if string(body[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrMalformed, body[:len(magic)])
	}
	if v := body[len(magic)]; v != version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrMalformed, v, version)
	}
	var frames [][]byte
	for p := headerSize; p < len(body); {
		n, k := binary.Uvarint(body[p:])
		switch {
		case k == 0:
			return nil, fmt.Errorf("%w: length at byte %d cut short", ErrMalformed, p)
		case k < 0:
			return nil, fmt.Errorf("%w: length at byte %d overflows", ErrMalformed, p)
		case k != uvarintLen(n):
			return nil, fmt.Errorf("%w: length at byte %d is not minimally encoded", ErrMalformed, p)
		case n == 0:
			return nil, fmt.Errorf("%w: empty message at byte %d", ErrMalformed, p)
		case n > uint64(len(body)-p-k):
			return nil, fmt.Errorf("%w: message at byte %d of %d bytes runs past the end (%d left)", ErrMalformed, p, n, len(body)-p-k)
		}
		p += k
		frames = append(frames, body[p:p+int(n)])
		p += int(n)
	}
	if len(frames) == 0 {
		return nil, fmt.Errorf("%w: no message", ErrMalformed)
	}
	return frames, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// decodeBatch decodes a batch addressed to node to: the framing
// (splitFrames), each message (decodeMessage). Any failure fails the
// whole batch.
func decodeBatch(body []byte, to uint64) ([]*pb.Message, error) {
	frames, err := splitFrames(body)
	if err != nil {
		return nil, err
	}
	msgs := make([]*pb.Message, len(frames))
	for i, f := range frames {
		if msgs[i], err = decodeMessage(f, to); err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrMalformed, i, err)
		}
	}
	return msgs, nil
}

// decodeMessage decodes one message's bytes (protobuf; the message keeps
// no reference to them) and checks that a peer may send it to node to
// (checkMessage).
func decodeMessage(b []byte, to uint64) (*pb.Message, error) {
	m := &pb.Message{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	if err := checkMessage(m, to); err != nil {
		return nil, err
	}
	return m, nil
}

// streamReader reads a stream's body: the header, then one message at a
// time as it arrives, with splitFrames' rules for each length (minimally
// encoded, 1 or more) and a bound on each message's size.
type streamReader struct {
	br    *bufio.Reader
	to    uint64
	limit uint64
	buf   []byte
	n     int // messages read
}

func newStreamReader(r io.Reader, to uint64, limit int64) *streamReader {
	return &streamReader{br: bufio.NewReaderSize(r, 64<<10), to: to, limit: uint64(max(limit, 1))}
}

// header reads and checks the magic and version.
func (s *streamReader) header() error {
	var h [headerSize]byte
	if _, err := io.ReadFull(s.br, h[:]); err != nil {
		return fmt.Errorf("%w: stream header: %w", ErrMalformed, err)
	}
	if string(h[:len(magic)]) != magic {
		return fmt.Errorf("%w: bad magic %q", ErrMalformed, h[:len(magic)])
	}
	if h[len(magic)] != version {
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, h[len(magic)], version)
	}
	return nil
}

// next returns the next message; io.EOF when the stream ended cleanly
// (between two messages), ErrMalformed (wrapped) for bytes that do not
// frame or decode, or the reader's error.
func (s *streamReader) next() (*pb.Message, error) {
	var n uint64
	k := 0
	for shift := uint(0); ; shift += 7 {
		c, err := s.br.ReadByte()
		if err != nil {
			if err == io.EOF && k > 0 {
				return nil, fmt.Errorf("%w: length of message %d cut short", ErrMalformed, s.n)
			}
			return nil, err
		}
		k++
		if k == binary.MaxVarintLen64 && c > 1 {
			return nil, fmt.Errorf("%w: length of message %d overflows", ErrMalformed, s.n)
		}
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	switch {
	case k != uvarintLen(n):
		return nil, fmt.Errorf("%w: length of message %d is not minimally encoded", ErrMalformed, s.n)
	case n == 0:
		return nil, fmt.Errorf("%w: message %d is empty", ErrMalformed, s.n)
	case n > s.limit:
		return nil, fmt.Errorf("%w: message %d of %d bytes is over the limit of %d", ErrMalformed, s.n, n, s.limit)
	}
	if uint64(cap(s.buf)) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	if _, err := io.ReadFull(s.br, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: message %d cut short", ErrMalformed, s.n)
		}
		return nil, err
	}
	if cap(s.buf) > 1<<20 {
		s.buf = nil // a huge lone message: do not keep its buffer
	}
	m, err := decodeMessage(b, s.to)
	if err != nil {
		return nil, fmt.Errorf("%w: message %d: %w", ErrMalformed, s.n, err)
	}
	s.n++
	return m, nil
}

// remoteType: the message types one replica sends another. The rest
// are local to a node (MsgHup, MsgBeat, the storage-thread messages…),
// and MsgProp and MsgForgetLeader come from the application: proposals
// are never forwarded (a follower refuses a Put, storage/shard/doc.go),
// and a leader must not take entries whose frames it did not write.
func remoteType(t pb.MessageType) bool {
	switch t {
	case pb.MsgApp, pb.MsgAppResp,
		pb.MsgVote, pb.MsgVoteResp, pb.MsgPreVote, pb.MsgPreVoteResp,
		pb.MsgSnap, pb.MsgHeartbeat, pb.MsgHeartbeatResp,
		pb.MsgTransferLeader, pb.MsgTimeoutNow, pb.MsgReadIndex, pb.MsgReadIndexResp:
		return true
	}
	return false
}

// checkMessage refuses what no correct peer sends to node to: another
// node's message, a sender of 0 or one of raft's local ids (raft skips
// its own checks for those), a type that is not remoteType.
func checkMessage(m *pb.Message, to uint64) error {
	if m.GetTo() != to {
		return fmt.Errorf("addressed to %d, this node is %d", m.GetTo(), to)
	}
	if f := m.GetFrom(); f == 0 || f == to || raft.IsLocalMsgTarget(f) {
		return fmt.Errorf("bad sender %d", f)
	}
	if m.Type == nil || !remoteType(m.GetType()) {
		return fmt.Errorf("type %s is not sent between replicas", m.GetType())
	}
	return nil
}
