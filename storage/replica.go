package storage

import (
	"errors"
	"fmt"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
)

// A replica's store follows another's log through frame streams (see
// commitlog's frames.go): ReadFrames on the leader, AppendFrames on the
// follower, which then holds the leader's CommitLog byte for byte (same
// segment size), derives its ConsumeQueues and index from it as the
// leader does, and takes the leader's store id, so that once promoted it
// mints ids and queue offsets that continue the leader's.

// ReadFrames appends to dst the frame stream of the CommitLog from offset
// (a frame start), at most maxBytes of it (at least one frame) and only
// what is durable; it returns the stream and the offset after it.
func (s *Store) ReadFrames(offset int64, maxBytes int, dst []byte) ([]byte, int64, error) {
	if s.closed.Load() {
		return dst, offset, ErrClosed
	}
	b, next, err := s.commitLog.ReadFrames(offset, maxBytes, dst)
	return b, next, s.mapAppendErr(err)
}

// ReadFramesTo is ReadFrames that goes no further than to (a frame
// boundary, such as the end of a Raft entry).
func (s *Store) ReadFramesTo(offset, to int64, maxBytes int, dst []byte) ([]byte, int64, error) {
	if s.closed.Load() {
		return dst, offset, ErrClosed
	}
	b, next, err := s.commitLog.ReadFramesTo(offset, to, maxBytes, dst)
	return b, next, s.mapAppendErr(err)
}

// AppendFrames appends a frame stream that starts at WriteOffset() and
// waits, in sync mode, until it is durable. A stream that fails its checks
// is refused whole (ErrCorrupt). A store that follows takes no Put of its
// own: its queue offsets come from the frames.
func (s *Store) AppendFrames(frames []byte) (int64, error) {
	end, err := s.AppendFramesNoWait(frames)
	if err != nil {
		return 0, err
	}
	return end, s.WaitFlushed(end)
}

// AppendFramesNoWait is AppendFrames without the wait for the flush: the
// caller waits with WaitFlushed(end) (a Raft log that must not hold its
// lock for the flush).
func (s *Store) AppendFramesNoWait(frames []byte) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	var d message.DispatchInfo
	end, err := s.commitLog.AppendFramesNoWait(frames, func(_ int64, payload []byte) {
		// Under the append lock, where putEncoder assigns them too.
		if message.DecodeDispatch(payload, &d) != nil {
			return // the dispatcher sets it aside, as the leader's did
		}
		key := queueKey{string(d.Topic), d.QueueID}
		if next := d.QueueOffset + 1; next > s.queueOffsets[key] {
			s.queueOffsets[key] = next
		}
		s.setStoreID(d.StoreHost)
	})
	if err != nil {
		if errors.Is(err, commitlog.ErrCorrupt) {
			return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return 0, s.mapAppendErr(err)
	}
	return end, nil
}
