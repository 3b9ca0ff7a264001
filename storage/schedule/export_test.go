package schedule

import "time"

// RunOnceForTest runs one pass of level's worker as if the clock read now.
func RunOnceForTest(s *Scheduler, level int, now time.Time) (RunResult, error) {
	return s.runOnce(level, now)
}
