package storage

import "errors"

// Storage sentinels. Engine errors are wrapped into these at the facade, so
// callers classify with errors.Is against this package only.
var (
	ErrClosed           = errors.New("storage: store closed")
	ErrReadOnly         = errors.New("storage: write path failed; store is read-only until restart")
	ErrMessageTooLarge  = errors.New("storage: message too large")
	ErrInvalidMessage   = errors.New("storage: invalid message")
	ErrNotFound         = errors.New("storage: message not found")
	ErrOffsetTooSmall   = errors.New("storage: offset below the retained minimum")
	ErrOffsetOutOfRange = errors.New("storage: offset beyond the queue's maximum")
	ErrCorrupt          = errors.New("storage: corrupt data")
	// ErrDiskFull refuses an append, before any byte of it is written: the
	// file system is above the ceiling of its Class, or has no room for
	// the next CommitLog segment. It is retryable; nothing is lost.
	ErrDiskFull = errors.New("storage: disk full")
	ErrLocked   = errors.New("storage: data directory is used by another process")
)
