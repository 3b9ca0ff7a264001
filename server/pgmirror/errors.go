package pgmirror

import "errors"

// Sentinel errors.
var (
	// ErrConfig: the configuration cannot work.
	ErrConfig = errors.New("pgmirror: invalid configuration")
	// ErrDegraded wraps the last failure while the mirror is not keeping up.
	ErrDegraded = errors.New("pgmirror: degraded")
	// ErrLogBehind: a cursor is past the end of its stream, so the log is
	// not the one the mirror followed (a restored or replaced data dir).
	// The mirror writes nothing until SeedOffsets resets it.
	ErrLogBehind = errors.New("pgmirror: the log is behind the mirror (restored or replaced data dir? start once with offset seeding)")
	// ErrConcurrentWriter: a cursor moved under the mirror's feet: another
	// mqgate mirrors into the same schema.
	ErrConcurrentWriter = errors.New("pgmirror: another writer moved a mirror cursor")
	// ErrBadCursor: a listing cursor does not parse.
	ErrBadCursor = errors.New("pgmirror: bad cursor")
	// ErrUnknownCommand: Migrate got a command other than up, down, version.
	ErrUnknownCommand = errors.New("pgmirror: unknown migrate command")
	// ErrClosed: the mirror is closed.
	ErrClosed = errors.New("pgmirror: closed")
)
