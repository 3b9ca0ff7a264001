package peer

import (
	"io"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The framing's pieces, for the tests of package peer_test.
var (
	AppendHeader  = appendHeader
	AppendMessage = appendMessage
	SplitFrames   = splitFrames
	DecodeBatch   = decodeBatch
)

// ReadStream reads a whole stream's body as the handler does: the
// messages before the first error, and the error (nil when it ended
// cleanly).
func ReadStream(r io.Reader, to uint64, limit int64) ([]*pb.Message, error) {
	sr := newStreamReader(r, to, limit)
	if err := sr.header(); err != nil {
		return nil, err
	}
	var out []*pb.Message
	for {
		m, err := sr.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}
