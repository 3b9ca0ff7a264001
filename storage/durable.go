package storage

// WaitDurable waits until the CommitLog is durable up to end (an offset at
// or below WriteOffset()): in sync flush mode one fdatasync covers every
// waiter it reaches; in async mode it returns at once. It completes an
// append made with PutClassNoWait when the caller decides later that the
// records must be durable (a Raft leader persisting the entries whose
// frames it wrote when it proposed them).
//
// On a replicated store it then waits for the commit point to pass end
// (WaitCommitted): durable means durable on a majority.
func (s *Store) WaitDurable(end int64) error {
	if err := s.WaitFlushed(end); err != nil {
		return err
	}
	return s.WaitCommitted(end)
}

// WaitFlushed is WaitDurable on this replica alone: the Raft log's own
// wait for the entries it persists.
func (s *Store) WaitFlushed(end int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.mapAppendErr(s.commitLog.WaitDurable(end))
}
