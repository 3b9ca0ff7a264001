package timerindex

import "errors"

// Sentinel errors. Callers classify with errors.Is; the package wraps them
// with context.
var (
	// ErrNotFound reports a directory without a checkpoint: nothing to
	// open, the user builds the index (Create).
	ErrNotFound = errors.New("timerindex: no checkpoint")
	// ErrCorrupt reports a checkpoint or run file that breaks the format
	// (magic, version, size, crc) or that do not agree with each other.
	ErrCorrupt = errors.New("timerindex: corrupt")
	// ErrClosed reports use of a closed index.
	ErrClosed = errors.New("timerindex: closed")
	// ErrInvalidOptions reports unusable Options.
	ErrInvalidOptions = errors.New("timerindex: invalid options")
)
