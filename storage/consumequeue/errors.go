package consumequeue

import "errors"

// Sentinel errors. Callers classify with errors.Is; the package wraps them
// with context.
var (
	// ErrOffsetTooSmall reports an offset below MinOffset (deleted by
	// retention).
	ErrOffsetTooSmall = errors.New("consumequeue: offset below min offset")
	// ErrOffsetOutOfRange reports a read at or beyond MaxOffset.
	ErrOffsetOutOfRange = errors.New("consumequeue: offset out of range")
	// ErrGap reports a Put (or TruncateFrom) beyond MaxOffset, which would
	// leave a hole in the queue.
	ErrGap = errors.New("consumequeue: offset beyond max offset")
	// ErrClosed reports use of a closed queue.
	ErrClosed = errors.New("consumequeue: queue closed")
	// ErrCorrupt reports on-disk data that breaks the format: a bad file
	// name or size, a missing file, or an empty or invalid entry below
	// MaxOffset.
	ErrCorrupt = errors.New("consumequeue: corrupt")
	// ErrInvalidEntry reports a Put of an entry that could not be a record:
	// size <= 0, a negative commit log offset, or a commit log offset not
	// above the previous entry's.
	ErrInvalidEntry = errors.New("consumequeue: invalid entry")
	// ErrInvalidOptions reports unusable Options.
	ErrInvalidOptions = errors.New("consumequeue: invalid options")
)
