package index

import "errors"

// Index sentinels. Every error the package returns wraps one of them (or an
// I/O error from the file system), so callers classify with errors.Is.
var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("index: closed")
	// ErrCorrupt marks data that fails its checks (bad header, broken chain).
	// Open repairs or quarantines what it can and only fails on I/O errors,
	// so callers mostly see it in logs and wrapped decode errors.
	ErrCorrupt = errors.New("index: corrupt data")
	// ErrKeyTooLong is returned by Add and Lookup for a key longer than
	// MaxKeyLength.
	ErrKeyTooLong = errors.New("index: key too long")
	// ErrInvalidArgument is returned for bad Options, a negative physical
	// offset or a negative timestamp.
	ErrInvalidArgument = errors.New("index: invalid argument")
	// ErrOutOfOrder is returned by Add for a physical offset below the last
	// one added (or below MaxPhysicalOffset right after Open).
	ErrOutOfOrder = errors.New("index: physical offset below the last one added")
	// ErrFailed is returned by Add and Flush after an msync or header write
	// failed: the page cache can no longer be trusted to reach the disk
	// (fsyncgate), so the index refuses writes until it is reopened.
	// Lookups keep working.
	ErrFailed = errors.New("index: a write to disk failed; index is read-only until reopened")
)
