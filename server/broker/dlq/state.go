package dlq

import "sync"

// Table is the status of every dead letter that has one (a letter not in
// it is Dead), by group and id: what the rmq_sys_DLQ records make, in
// order, the newest record of a letter winning.
//
// Its change lock orders status changes: a resend or discard holds it
// (LockChange) from reading a letter's status to applying the record it
// wrote, so that two racing requests never both decide on the same old
// status, and the records reach the log in the order they are applied
// (the order a follower applies them in). The table's own lock is taken
// inside each method. Lock order: the broker's topic gate, the change
// lock, the table's lock.
type Table struct {
	change sync.Mutex
	mu     sync.RWMutex
	m      map[key]StatusRecord
}

type key struct{ group, id string }

// LockChange and UnlockChange take and release the change lock.
func (t *Table) LockChange()   { t.change.Lock() }
func (t *Table) UnlockChange() { t.change.Unlock() }

// Get is the newest status record of group's dead letter id.
func (t *Table) Get(group, id string) (StatusRecord, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.m[key{group, id}]
	return r, ok
}

// Status is the status of group's dead letter id: Dead when no record
// changed it.
func (t *Table) Status(group, id string) string {
	if r, ok := t.Get(group, id); ok {
		return r.Status
	}
	return Dead
}

// Apply applies decoded status records in order: at open, on a follower,
// and after the broker's own writes. It reads neither the clock nor
// anything else: the time of a change is the record's.
func (t *Table) Apply(recs ...StatusRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[key]StatusRecord)
	}
	for _, r := range recs {
		t.m[key{r.Group, r.MessageID}] = r
	}
}

// Len is the number of letters with a status record.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
