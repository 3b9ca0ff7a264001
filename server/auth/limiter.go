package auth

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the failure limiter.
const (
	// DefaultFailuresPerMinute is how many failed authentications an
	// address (or an account) may have per minute before it is slowed.
	DefaultFailuresPerMinute = 10
	// maxTracked bounds the addresses (and the accounts) tracked.
	maxTracked = 16384
	// accountDelayBase and accountDelayMax bound the delay of a failed
	// attempt on an account over its limit: base·2^k, at most max.
	accountDelayBase = 100 * time.Millisecond
	accountDelayMax  = 3 * time.Second
)

// bucket is a token bucket of failures: burst tokens, refilled at rate
// per second; each failure takes one.
type bucket struct {
	tokens float64
	last   time.Time
	// over counts the failures since the bucket ran dry.
	over int
}

// failureLimiter slows guessing. Per address, an address whose failures
// exhaust its bucket is refused (429 with Retry-After) before any secret
// is checked, until a token is back — so a guesser costs no hashing either.
// Per account, failures past the limit are answered late (exponentially,
// up to accountDelayMax), while correct credentials are never slowed: a
// guesser cannot lock the real user out. Both tables are bounded; IPv6
// addresses count per /64, the smallest block one host usually gets.
type failureLimiter struct {
	burst float64
	rate  float64 // tokens per second

	mu        sync.Mutex
	addresses map[netip.Addr]*bucket
	accounts  map[string]*bucket
}

func newFailureLimiter(perMinute int) *failureLimiter {
	if perMinute <= 0 {
		perMinute = DefaultFailuresPerMinute
	}
	return &failureLimiter{
		burst:     float64(perMinute),
		rate:      float64(perMinute) / 60,
		addresses: make(map[netip.Addr]*bucket),
		accounts:  make(map[string]*bucket),
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

// addressWait is how long addr must wait before its next attempt (0:
// none).
func (l *failureLimiter) addressWait(addr netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.addresses[addressKey(addr)]
	if !ok {
		return 0
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// fail records a failed attempt from addr on account and returns how
// long to hold the answer back, and whether this failure used the
// address's last token (it is refused from now on, for a while).
func (l *failureLimiter) fail(addr netip.Addr, account string, now time.Time) (delay time.Duration, addressDry bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addressBucket(addressKey(addr), now)
	l.take(a, now)
	addressDry = a.tokens < 1 && a.over == 0
	b := l.bucketOf(l.accounts, account, now)
	if l.take(b, now) {
		return 0, addressDry
	}
	shift := min(b.over-1, 16)
	return min(accountDelayBase<<shift, accountDelayMax), addressDry
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

func (l *failureLimiter) addressBucket(a netip.Addr, now time.Time) *bucket {
	return bucketOfMap(l, l.addresses, a, now)
}

func (l *failureLimiter) bucketOf(m map[string]*bucket, k string, now time.Time) *bucket {
	return bucketOfMap(l, m, k, now)
}

// bucketOfMap returns k's bucket in m, making room when m is full: first
// by dropping buckets that have refilled (they carry no information), then
// arbitrary ones.
func bucketOfMap[K comparable](l *failureLimiter, m map[K]*bucket, k K, now time.Time) *bucket {
	if b, ok := m[k]; ok {
		return b
	}
	if len(m) >= maxTracked {
		for key, b := range m {
			l.refill(b, now)
			if b.tokens >= l.burst {
				delete(m, key)
			}
		}
		for key := range m {
			if len(m) < maxTracked {
				break
			}
			delete(m, key)
		}
	}
	b := &bucket{tokens: l.burst, last: now}
	m[k] = b
	return b
}

// tracked is the number of addresses and accounts tracked.
func (l *failureLimiter) tracked() (addresses, accounts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addresses), len(l.accounts)
}
