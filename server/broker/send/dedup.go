package send

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Key is an idempotency key: a dedup id names one send per topic.
type Key struct{ Topic, ID string }

// Verdict is the dedup table's answer to a send of a dedup id.
type Verdict int

const (
	// Unknown: the table holds no send of the key within the window. The
	// broker asks the store, whose index answers for keys the table no
	// longer holds (e.g. after a restart): Found, or else Claim.
	Unknown Verdict = iota
	// Repeat: a send of the key with the same body settled within the
	// window; the send answers its result.
	Repeat
	// InFlight: a send of the key is still being written.
	InFlight
	// Reused: a send of the key within the window had another body.
	Reused
)

// Table remembers recent idempotency keys, R being the result a repeat
// answers. An entry is pending (a claim) while its send is written:
// claims are memory only, and a send's key becomes durable as the
// message's record itself (its DEDUP_ID property, which the store
// indexes). A settled entry answers repeats until it falls out of the
// window; a pending one is never forgotten.
//
// Table has one lock (Lock): Lookup, Found, Claim and Release need it
// held; Settle, Expire and DropTopic take it. It reads no clock: every time is the
// caller's.
type Table[R any] struct {
	mu      sync.Mutex
	entries map[Key]*entry[R]
}

type entry[R any] struct {
	pending bool
	body    [sha256.Size]byte // the request body's hash: same key + other body = Reused
	result  R
	at      time.Time
}

// Claim is a key claimed by a send being written: the message at Index of
// the send.
type Claim[R any] struct {
	key   Key
	index int
	entry *entry[R]
}

// Index is the message of the send that claimed the key.
func (c Claim[R]) Index() int { return c.index }

// Init makes the table empty.
func (d *Table[R]) Init() { d.entries = make(map[Key]*entry[R]) }

// Lock locks the table.
func (d *Table[R]) Lock() { d.mu.Lock() }

// Unlock unlocks the table.
func (d *Table[R]) Unlock() { d.mu.Unlock() }

// Lookup is the verdict on a send of body under key, the window starting
// at since (a settled entry stored before it is forgotten), with the
// result a Repeat answers.
func (d *Table[R]) Lookup(key Key, body []byte, since time.Time) (Verdict, R) {
	e, ok := d.entries[key]
	if !ok || (e.at.Before(since) && !e.pending) {
		var zero R
		return Unknown, zero
	}
	return e.decide(body)
}

// Found remembers the send of key the store holds (its body, store time
// and result) and is the verdict on a send of body under key.
func (d *Table[R]) Found(key Key, body, stored []byte, at time.Time, result R) (Verdict, R) {
	e := &entry[R]{body: sha256.Sum256(stored), at: at, result: result}
	d.entries[key] = e
	return e.decide(body)
}

func (e *entry[R]) decide(body []byte) (Verdict, R) {
	var zero R
	switch {
	case e.pending:
		return InFlight, zero
	case e.body != sha256.Sum256(body):
		return Reused, zero
	default:
		return Repeat, e.result
	}
}

// Claim claims key for the send of body at now, message index of the
// send: concurrent sends of key are InFlight until Settle or Release.
func (d *Table[R]) Claim(key Key, body []byte, now time.Time, index int) Claim[R] {
	e := &entry[R]{pending: true, body: sha256.Sum256(body), at: now}
	d.entries[key] = e
	return Claim[R]{key: key, index: index, entry: e}
}

// Release forgets claims (their send was refused before its write).
func (d *Table[R]) Release(claims []Claim[R]) {
	for _, c := range claims {
		delete(d.entries, c.key)
	}
}

// Settle records the outcome of claims: on success (err nil) they answer
// later repeats with result(index); on failure they are released so that
// a retry can store.
func (d *Table[R]) Settle(claims []Claim[R], result func(index int) R, err error) {
	if len(claims) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range claims {
		if err != nil {
			delete(d.entries, c.key)
			continue
		}
		c.entry.pending = false
		c.entry.result = result(c.index)
	}
}

// Expire forgets settled keys stored before before (the window's start).
func (d *Table[R]) Expire(before time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, e := range d.entries {
		if !e.pending && e.at.Before(before) {
			delete(d.entries, k)
		}
	}
}

// DropTopic forgets the settled keys of topic (a deleted topic's).
func (d *Table[R]) DropTopic(topic string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, e := range d.entries {
		if k.Topic == topic && !e.pending {
			delete(d.entries, k)
		}
	}
}
