package storage

import "time"

// RunRetentionForTest runs one retention pass as if the clock read now.
func RunRetentionForTest(s *Store, now time.Time) (RetentionResult, error) {
	return s.runRetention(now)
}
