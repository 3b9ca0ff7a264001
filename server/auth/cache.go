package auth

import (
	"container/list"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"sync"
	"time"
)

// Defaults of the verified-credential cache.
const (
	// defaultCacheSize is the most credentials remembered per ACL.
	defaultCacheSize = 4096
	// defaultCacheTTL is how long a verified credential is remembered.
	defaultCacheTTL = time.Minute
)

// cacheKeySecret keys the cache's HMAC: random per process, so that the
// cache's keys are no unsalted hash of any secret.
var cacheKeySecret = func() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return b
}()

// credentialCache remembers, for a short time, the (accessKey, secret)
// pairs that passed a password-hash check, so that a client sending Basic
// credentials on every request pays bcrypt or argon2id once per TTL, not
// per request. It keeps only an HMAC of the pair, is bounded (least
// recently used first out) and belongs to one ACL: a reload starts empty,
// so a removed account or rotated secret is never served from it.
type credentialCache struct {
	size int
	ttl  time.Duration

	mu sync.Mutex
	// order holds the entries, most recently used first.
	order *list.List
	items map[cacheKey]*list.Element
}

type cacheKey [sha256.Size]byte

// cacheEntry is one remembered pair.
type cacheEntry struct {
	key    cacheKey
	expiry time.Time
}

func newCredentialCache(size int, ttl time.Duration) *credentialCache {
	return &credentialCache{size: size, ttl: ttl, order: list.New(), items: make(map[cacheKey]*list.Element)}
}

// key is the HMAC of the pair.
func (c *credentialCache) key(accessKey string, secret []byte) cacheKey {
	m := hmac.New(sha256.New, cacheKeySecret)
	m.Write([]byte(accessKey))
	m.Write([]byte{0})
	m.Write(secret)
	var k cacheKey
	m.Sum(k[:0])
	return k
}

// has reports whether the pair was verified within the TTL.
func (c *credentialCache) has(k cacheKey, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return false
	}
	if now.After(e.Value.(*cacheEntry).expiry) {
		c.order.Remove(e)
		delete(c.items, k)
		return false
	}
	c.order.MoveToFront(e)
	return true
}

// add remembers a verified pair.
func (c *credentialCache) add(k cacheKey, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		e.Value.(*cacheEntry).expiry = now.Add(c.ttl)
		return
	}
	for c.order.Len() >= c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*cacheEntry).key)
	}
	c.items[k] = c.order.PushFront(&cacheEntry{key: k, expiry: now.Add(c.ttl)})
}

// len is the number of remembered pairs.
func (c *credentialCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
