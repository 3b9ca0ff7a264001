package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/mqgate/mqgate/storage/commitlog"
)

// A damaged replica. On a single node a record whose bytes changed after
// they were written is quarantined and passed over (see "Damaged records"
// in doc.go): the store goes on with what it has. A replica of a Raft
// group must not: the other replicas hold the record intact, this one may
// have acknowledged it to its leader as durable, and a replica that goes
// on voting with a log it no longer holds can elect a leader that lacks
// acknowledged writes. So on a replicated store the first quarantine whose
// cause is damage to the bytes (a frame failing its checks, a fault reading
// the mapping) also marks the store damaged: config/damaged.json is written
// durably before the mark shows (Damage, Damaged), the owner stops the
// replica (package shard: it leaves the group's votes to the others), and
// Open refuses a replicated store that holds the file, with ErrCorrupt,
// until the replica is rebuilt from the others (which starts from an empty
// data dir). A record quarantined for what its intact bytes say (a
// payload that does not decode) is the same on every replica and marks
// nothing.

// damageFile marks a replicated store found damaged while it ran.
const damageFile = "damaged.json"

// damageMark is the store's damage state (closed once, on the first).
type damageMark struct {
	mu  sync.Mutex
	rec *QuarantinedRecord
	c   chan struct{}
}

// isDamage reports whether a quarantine's cause is damage to the bytes
// of this copy of the log, rather than what intact bytes say.
func isDamage(cause error) bool {
	return errors.Is(cause, commitlog.ErrCorrupt) || errors.Is(cause, commitlog.ErrFault)
}

// markDamaged records the first damage of a replicated store: durably in
// config/damaged.json, then in memory (Damage is closed). Called with the
// quarantine list's lock held, so records are marked in the order they
// were quarantined.
func (s *Store) markDamaged(rec QuarantinedRecord) {
	d := &s.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rec != nil {
		return
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = s.WriteMeta(damageFile, b)
	}
	if err != nil {
		// The replica stops all the same; a restart before the file is
		// written finds the damage again (the scrubber, the reads).
		s.log.Error().Err(err).Msg("writing the damage mark failed")
	}
	d.rec = &rec
	close(d.c)
	s.log.Error().Int64("offset", rec.Offset).Str("stage", rec.Stage).Str("reason", rec.Reason).
		Msg("this replica's log is damaged: it stops and must be rebuilt from the others")
}

// Damage is closed once a replicated store finds its flushed data
// damaged (see damage.go); never for a single node's store.
func (s *Store) Damage() <-chan struct{} { return s.damage.c }

// Damaged returns the first damage a replicated store found, if any.
func (s *Store) Damaged() (QuarantinedRecord, bool) {
	d := &s.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rec == nil {
		return QuarantinedRecord{}, false
	}
	return *d.rec, true
}

// checkDamageMark refuses to open a replicated store marked damaged.
func (s *Store) checkDamageMark() error {
	b, err := s.ReadMeta(damageFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: reading the damage mark: %w", ErrCorrupt, err)
	}
	var rec QuarantinedRecord
	if json.Unmarshal(b, &rec) != nil {
		return fmt.Errorf("%w: this replica was marked damaged (config/%s, unreadable)", ErrCorrupt, damageFile)
	}
	return fmt.Errorf("%w: this replica was marked damaged at %s: the record at CommitLog offset %d (found by %s: %s)",
		ErrCorrupt, rec.At.Format("2006-01-02T15:04:05Z"), rec.Offset, rec.Stage, rec.Reason)
}
