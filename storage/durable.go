package storage

// WaitDurable waits until the CommitLog is durable up to end (an offset at
// or below WriteOffset()): in sync flush mode one fdatasync covers every
// waiter it reaches; in async mode it returns at once. It completes an
// append made with PutClassNoWait when the caller decides later that the
// records must be durable (a Raft leader persisting the entries whose
// frames it wrote when it proposed them).
func (s *Store) WaitDurable(end int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.mapAppendErr(s.commitLog.WaitDurable(end))
}
