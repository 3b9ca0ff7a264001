package push

import "errors"

// Sentinel errors of package push; wrapped with context, classified with
// errors.Is. ErrForbiddenAddress reaches callers (a group's push url), so
// its text has no "push: " prefix.
var (
	// ErrForbiddenAddress: the endpoint resolved to an address push may not
	// reach (link-local, cloud metadata, unspecified, multicast, or on the
	// operator's deny list). Nothing was sent.
	ErrForbiddenAddress = errors.New("forbidden address")
	// ErrBadSignature: a webhook's Standard Webhooks headers do not verify.
	ErrBadSignature = errors.New("push: bad webhook signature")
	// ErrInvalidConfig: a dispatcher Config is out of range.
	ErrInvalidConfig = errors.New("push: invalid config")
)
