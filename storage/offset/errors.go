package offset

import "errors"

// Sentinel errors.
var (
	ErrCorrupt   = errors.New("offset: corrupt record")
	ErrTooLong   = errors.New("offset: name too long")
	ErrBadSnap   = errors.New("offset: invalid snapshot")
	errTooMany   = errors.New("offset: too many entries in one record")
	errBadOffset = errors.New("offset: negative offset")
)
