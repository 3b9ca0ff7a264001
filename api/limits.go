package api

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mqgate/mqgate/server/auth"
)

// Abuse limits per account: a request rate, a message rate and a cap on
// the pulls waiting at once. The account is the authenticated principal
// (never an address or a header a client could write); with
// authentication off every caller is the one account "anonymous".
// Each rate is a token bucket (golang.org/x/time/rate) holding one
// second's worth — at least one full batch (MaxBatchMessages) for
// messages, so that every valid send can pass. A request over a rate is
// refused with 429 rate-limited and Retry-After (when the bucket will hold
// enough tokens); a pull over the cap gets 429 too-many-waiters.

// AccountLimits are the abuse limits of an account: the server's defaults
// (flags), which an account of the ACL file may override. 0 means
// unlimited.
type AccountLimits struct {
	// RequestsPerSecond is the API request rate.
	RequestsPerSecond float64
	// MessagesPerSecond is the rate of messages sent (a batch of n counts n).
	MessagesPerSecond float64
	// MaxLongPolls is how many pulls with waitMs > 0 may wait at once.
	MaxLongPolls int
}

// of is l with the account's own settings applied (p nil: anonymous).
func (l AccountLimits) of(p *auth.Principal) AccountLimits {
	if p == nil {
		return l
	}
	own := p.Limits()
	if own.RequestsPerSecond != nil {
		l.RequestsPerSecond = *own.RequestsPerSecond
	}
	if own.MessagesPerSecond != nil {
		l.MessagesPerSecond = *own.MessagesPerSecond
	}
	if own.MaxLongPolls != nil {
		l.MaxLongPolls = *own.MaxLongPolls
	}
	return l
}

// RateLimitError is ErrRateLimited with the limit and the time to wait.
type RateLimitError struct {
	// Account is the account over its limit.
	Account string
	// What is "requests" or "messages"; Setting the ACL file's key.
	What, Setting string
	// Limit is the rate, per second.
	Limit float64
	// Wait is when the bucket holds enough again.
	Wait time.Duration
}

// Error says which limit.
func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%v: account %q is over its %s %s per second (%s); retry in %s",
		ErrRateLimited, e.Account, formatRate(e.Limit), e.What, e.Setting, e.Wait.Round(time.Millisecond))
}

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// RetryAfter is the time to wait (the Retry-After header).
func (e *RateLimitError) RetryAfter() time.Duration { return e.Wait }

// formatRate prints a rate without a needless fraction.
func formatRate(r float64) string {
	if r == math.Trunc(r) {
		return fmt.Sprintf("%d", int64(r))
	}
	return fmt.Sprintf("%g", r)
}

// anonymous names the one account of a server without authentication.
const anonymous = "anonymous"

// accountLimiter keeps the buckets and long-poll counts of the accounts.
// Its table is keyed by authenticated account names only, so it is
// bounded by the ACL file (plus anonymous).
type accountLimiter struct {
	defaults AccountLimits
	now      func() time.Time

	mu       sync.Mutex
	accounts map[string]*accountState
}

// accountState is one account's buckets (nil: unlimited) and waiting pulls.
type accountState struct {
	requests, messages *rate.Limiter
	polls              int
}

// newAccountLimiter returns a limiter with the server's defaults.
func newAccountLimiter(defaults AccountLimits) *accountLimiter {
	return &accountLimiter{defaults: defaults, now: time.Now, accounts: make(map[string]*accountState)}
}

// principalOf is the request's caller: its principal, nil for anonymous
// (authentication off); ok is false when authentication is on and the
// request has no principal (a path that is no route).
func (h *handler) principalOf(r *http.Request) (p *auth.Principal, name string, ok bool) {
	if h.deps.Auth == nil {
		return nil, anonymous, true
	}
	p, ok = principalFrom(r)
	if !ok {
		return nil, "", false
	}
	return p, p.Name(), true
}

// state returns the account's state with its buckets set to limits
// (created, or adjusted after an ACL reload changed them). Call with mu.
func (l *accountLimiter) state(name string, limits AccountLimits) *accountState {
	s := l.accounts[name]
	if s == nil {
		s = &accountState{}
		l.accounts[name] = s
	}
	s.requests = adjust(s.requests, limits.RequestsPerSecond, 1)
	s.messages = adjust(s.messages, limits.MessagesPerSecond, MaxBatchMessages)
	return s
}

// adjust returns a bucket of perSecond with one second's burst (at least
// minBurst), reusing b when it has that rate; nil for unlimited.
func adjust(b *rate.Limiter, perSecond float64, minBurst int) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	burst := max(minBurst, int(math.Ceil(perSecond)))
	if b != nil && float64(b.Limit()) == perSecond && b.Burst() == burst {
		return b
	}
	return rate.NewLimiter(rate.Limit(perSecond), burst)
}

// take takes n tokens of the bucket, or returns how long until it could.
func take(b *rate.Limiter, n int, now time.Time) time.Duration {
	if b == nil {
		return 0
	}
	res := b.ReserveN(now, n)
	if !res.OK() {
		return time.Second // n over the burst: not possible by construction
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// rateLimit refuses a request over its account's request rate.
func (h *handler) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, name, ok := h.principalOf(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		limits := h.limits.defaults.of(p)
		if limits.RequestsPerSecond <= 0 { // unlimited: no bucket, no lock
			next.ServeHTTP(w, r)
			return
		}
		l := h.limits
		l.mu.Lock()
		wait := take(l.state(name, limits).requests, 1, l.now())
		l.mu.Unlock()
		if wait > 0 {
			WriteError(w, r, &RateLimitError{Account: name, What: "requests", Setting: "requestsPerSecond", Limit: limits.RequestsPerSecond, Wait: wait})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowMessages takes n messages of the caller's message rate.
func (h *handler) allowMessages(r *http.Request, n int) error {
	p, name, ok := h.principalOf(r)
	if !ok {
		return nil
	}
	limits := h.limits.defaults.of(p)
	if limits.MessagesPerSecond <= 0 { // unlimited: no bucket, no lock
		return nil
	}
	l := h.limits
	l.mu.Lock()
	wait := take(l.state(name, limits).messages, n, l.now())
	l.mu.Unlock()
	if wait > 0 {
		return &RateLimitError{Account: name, What: "messages", Setting: "messagesPerSecond", Limit: limits.MessagesPerSecond, Wait: wait}
	}
	return nil
}

// longPoll takes one of the caller's long-poll slots; release gives it
// back.
func (h *handler) longPoll(r *http.Request) (release func(), err error) {
	p, name, ok := h.principalOf(r)
	if !ok {
		return func() {}, nil
	}
	limits := h.limits.defaults.of(p)
	l := h.limits
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(name, limits)
	if limits.MaxLongPolls > 0 && s.polls >= limits.MaxLongPolls {
		return nil, fmt.Errorf("%w: account %q has %d pulls waiting, its limit (maxLongPolls)", ErrTooManyWaiters, name, s.polls)
	}
	s.polls++
	return func() {
		l.mu.Lock()
		s.polls--
		l.mu.Unlock()
	}, nil
}
