package raftlog

// Stats count what Append and the cuts did since Open.
type Stats struct {
	// Verified is the entries whose frames were already in the CommitLog
	// at their place (a leader's own, written when proposed) and were
	// checked there instead of appended.
	Verified uint64
	// Appended is the entries with frames appended (a follower's).
	Appended uint64
	// Conflicts is the conflicting suffixes cut (entries of a deposed
	// leader that the new leader's log replaced), ConflictEntries the
	// entries they held.
	Conflicts, ConflictEntries uint64
	// TailCuts is the cuts of CommitLog bytes past the last entry that no
	// entry took (Append's, when an entry differs from them, and
	// DropUnindexed's), TailBytes their bytes.
	TailCuts  uint64
	TailBytes int64
}

// Stats says what Append and the cuts did since Open.
func (s *Storage) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}
