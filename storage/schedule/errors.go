package schedule

import "errors"

// Sentinel errors.
var (
	ErrBadLevels   = errors.New("schedule: invalid delay levels")
	ErrBadProgress = errors.New("schedule: invalid progress file")
	ErrStopped     = errors.New("schedule: stopped")
)
