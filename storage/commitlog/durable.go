package commitlog

// WaitDurable waits, in FlushSync, until the log is durable up to end (an
// offset at or below Written()), kicking the flusher: one fdatasync
// covers every waiter it reaches, as for appends. In FlushAsync it
// returns at once. A writer that appended without waiting
// (AppendBatchNoWait) and must now promise durability — a Raft leader
// persisting entries whose frames it wrote when it proposed them — calls
// it.
func (l *Log) WaitDurable(end int64) error {
	if l.isClosed.Load() {
		return ErrClosed
	}
	return l.commit(end)
}
