package auth

import "errors"

// ErrInvalidACL is wrapped by every error about an ACL file's content.
var ErrInvalidACL = errors.New("auth: invalid acl")

// Errors about the file's mode.
var (
	// ErrFileMode: the file's permission bits are refused.
	ErrFileMode = errors.New("auth: acl file mode refused")
)

// Errors of authentication. The api package maps them to 401, 403 and 429
// and shows their text to the caller (so no "auth: " prefix).
var (
	// ErrUnauthenticated: no credentials, or credentials that do not
	// verify. The detail never says which of accessKey and secret was
	// wrong.
	ErrUnauthenticated = errors.New("authentication required")
	// ErrForbidden: a known account without the permission, or a request
	// from an address outside a white list.
	ErrForbidden = errors.New("permission denied")
	// ErrThrottled: wrong credentials, after too many failures of the
	// account (or of unknown accessKeys) from the address; the error's
	// RetryAfter says when to try again. Correct credentials never get it.
	ErrThrottled = errors.New("too many failed authentications")
)

// ErrJWTConfig is wrapped by configuration errors of JWT verification.
var ErrJWTConfig = errors.New("auth: invalid jwt configuration")

// errBadToken is the error of every token that does not verify (its
// cause goes to the debug log only).
var errBadToken = errors.New("invalid bearer token")
