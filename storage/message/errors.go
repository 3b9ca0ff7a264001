package message

import "errors"

// Sentinel errors. Callers classify with errors.Is; the package wraps them
// with context.
var (
	// ErrCorrupt reports a payload that is not a well-formed encoding.
	ErrCorrupt = errors.New("message: corrupt payload")
	// ErrTooLarge reports a message (topic, body or properties) over a
	// size limit of the format.
	ErrTooLarge = errors.New("message: too large")
	// ErrBadID reports a string that is not a 32-character hexadecimal
	// message id.
	ErrBadID = errors.New("message: bad message id")
	// ErrInvalid reports a message that breaks a rule of the format other
	// than size (an empty topic or an empty property key).
	ErrInvalid = errors.New("message: invalid message")
)
