package storage

import (
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// RunRetentionForTest runs one retention pass as if the clock read now.
func RunRetentionForTest(s *Store, now time.Time) (RetentionResult, error) {
	s.retentionMu.Lock()
	defer s.retentionMu.Unlock()
	return s.runRetention(now)
}

// rawEncoder appends fixed payload bytes.
type rawEncoder []byte

func (p rawEncoder) Len() int                   { return len(p) }
func (p rawEncoder) Encode(dst []byte, _ int64) { copy(dst, p) }

// AppendRawForTest appends payload as a record of the open store without
// any of Put's checks, the way a bug in an encoder would.
func AppendRawForTest(s *Store, payload []byte) (int64, error) {
	res, err := s.commitLog.Append(rawEncoder(payload))
	return res.Offset, err
}

// SampleDiskForTest samples the disk usage now, as the monitor does every
// DiskCheckInterval.
func SampleDiskForTest(s *Store) (float64, error) { return s.sampleDisk() }

// RunScrubForTest runs one scrubber step as if the clock read now,
// verifying up to budget bytes (0: the configured rate's share).
func RunScrubForTest(s *Store, now time.Time, budget int64) (commitlog.ScrubResult, error) {
	return s.runScrub(now, budget)
}

// CheckpointForTest reads the checkpoint of the store in dir.
func CheckpointForTest(dir string) (clean bool, flushed, dispatched int64, err error) {
	c, err := readCheckpoint(vfs.OS(), dir)
	return c.Clean, c.Flushed, c.Dispatched, err
}

// WriteCheckpointForTest replaces the checkpoint of the closed store in
// dir, to stage what a crash (or a lagging checkpointer) leaves behind.
func WriteCheckpointForTest(dir string, clean bool, flushed, dispatched int64) error {
	return writeCheckpoint(vfs.OS(), dir, checkpoint{Clean: clean, Flushed: flushed, Dispatched: dispatched, WrittenAt: time.Now().UnixMilli()})
}

// KickCheckpointerForTest asks the background checkpointer for a pass now
// and returns its "a pass completed" signal.
func KickCheckpointerForTest(s *Store) <-chan struct{} {
	s.checkpointer.Kick()
	return s.checkpointer.Ran()
}
