package auth

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the failure limiter.
const (
	// DefaultFailuresPerMinute is how many failed authentications one
	// account (or the unknown accounts together) may have per minute from
	// one address before its failures are slowed.
	DefaultFailuresPerMinute = 10
	// maxTracked bounds the (account, address) pairs tracked.
	maxTracked = 16384
	// failureDelayBase and failureDelayMax bound how long a failure over
	// the limit is held back: base·2^k, at most max.
	failureDelayBase = 100 * time.Millisecond
	failureDelayMax  = 3 * time.Second
)

// unknownAccount is the limiter's key of every accessKey the ACL does not
// hold (and of failures naming none: a malformed header, a bad token).
const unknownAccount = "\x00unknown"

// bucket is a token bucket of failures: burst tokens, refilled at rate
// per second; each failure takes one.
type bucket struct {
	tokens float64
	last   time.Time
	// over counts the failures since the bucket ran dry.
	over int
}

// failureKey is what failures count under: an account (or unknownAccount)
// from an address (an IPv6 one by its /64).
type failureKey struct {
	account string
	addr    netip.Addr
}

// failureLimiter slows guessing without locking anybody out. It is asked
// only after the credentials were checked and found wrong, so a request
// whose credentials are right is never slowed nor refused, whatever others
// did before. Failures count per (account, address), and those naming no
// account of the ACL per address. A failure that finds its bucket empty is
// refused with 429 and Retry-After (when a token is back) and answered
// late, 100 ms doubling up to 3 s, which holds a sequential guesser back;
// a parallel one is bounded by the hash slots instead. A failure on an
// account from an address whose unknown-account bucket is empty counts as
// over the limit too, so that the answer never tells a guesser who ran
// out of unknown-account tries whether a name is an account. The table is
// bounded; IPv6 addresses count per /64, the smallest block one host
// usually gets.
type failureLimiter struct {
	burst float64
	rate  float64 // tokens per second

	mu      sync.Mutex
	buckets map[failureKey]*bucket
}

func newFailureLimiter(perMinute int) *failureLimiter {
	if perMinute <= 0 {
		perMinute = DefaultFailuresPerMinute
	}
	return &failureLimiter{
		burst:   float64(perMinute),
		rate:    float64(perMinute) / 60,
		buckets: make(map[failureKey]*bucket),
	}
}

// addressKey is the address an IPv4 address counts under, or the /64 of
// an IPv6 one.
func addressKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// refill brings b's tokens up to now.
func (l *failureLimiter) refill(b *bucket, now time.Time) {
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.over = 0
	}
}

// wait is how long b needs until it holds a token again.
func (l *failureLimiter) wait(b *bucket) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - b.tokens) / l.rate * float64(time.Second)))
}

// verdict is what the limiter makes of one failure.
type verdict struct {
	// retryAfter is 0 when the failure was within the limit; otherwise the
	// failure is refused (429) and a token is back after retryAfter.
	retryAfter time.Duration
	// delay is how long to hold the answer back.
	delay time.Duration
	// dried reports that this failure used the last token of its bucket
	// (logged once per episode).
	dried bool
}

// fail records a failed attempt on account (unknownAccount for none of
// the ACL) from addr.
func (l *failureLimiter) fail(addr netip.Addr, account string, now time.Time) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	addr = addressKey(addr)
	b := l.bucket(failureKey{account, addr}, now)
	var v verdict
	if l.take(b, now) {
		v.dried = b.tokens < 1
		if account == unknownAccount {
			return v
		}
		// Over the limit too when the address used up its unknown-account
		// tries (without taking from them).
		u, ok := l.buckets[failureKey{unknownAccount, addr}]
		if !ok {
			return v
		}
		l.refill(u, now)
		if u.tokens >= 1 {
			return v
		}
		b = u
	}
	v.retryAfter = max(l.wait(b), time.Second)
	v.delay = min(failureDelayBase<<min(max(b.over-1, 0), 16), failureDelayMax)
	return v
}

// take takes one token from b and reports whether there was one.
func (l *failureLimiter) take(b *bucket, now time.Time) bool {
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	b.over++
	return false
}

// bucket returns k's bucket, making room when the table is full: first by
// dropping buckets that have refilled (they carry no information), then
// arbitrary ones.
func (l *failureLimiter) bucket(k failureKey, now time.Time) *bucket {
	if b, ok := l.buckets[k]; ok {
		return b
	}
	if len(l.buckets) >= maxTracked {
		for key, b := range l.buckets {
			l.refill(b, now)
			if b.tokens >= l.burst {
				delete(l.buckets, key)
			}
		}
		for key := range l.buckets {
			if len(l.buckets) < maxTracked {
				break
			}
			delete(l.buckets, key)
		}
	}
	b := &bucket{tokens: l.burst, last: now}
	l.buckets[k] = b
	return b
}

// tracked is the number of (account, address) pairs tracked.
func (l *failureLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
