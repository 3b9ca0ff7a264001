package lease

import (
	"errors"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Notes gathers the lease changes made under one pop state's lock (or by
// one ack-side request) into one record. The zero value is empty.
type Notes struct{ rec Record }

// Empty reports whether n notes no change.
func (n *Notes) Empty() bool { return n == nil || len(n.rec.Entries) == 0 }

// Record is what n notes, as one record.
func (n *Notes) Record() Record { return n.rec }

// Note adds it, a change of key's lease on it.Offset held by client, to
// n: to the last entry when that is of the same key and client, else as
// a new entry with the key's progress generation and the time now.
func (l *Log) Note(n *Notes, key offset.Key, client string, it Item) {
	if k := len(n.rec.Entries); k > 0 {
		if e := &n.rec.Entries[k-1]; e.Key == Key(key) && e.Client == client {
			e.Items = append(e.Items, it)
			return
		}
	}
	n.rec.Entries = append(n.rec.Entries, Entry{Key: Key(key), Generation: l.cfg.Generation(key), At: l.cfg.Clock.Now().UnixMilli(), Client: client, Items: []Item{it}})
}

// NoteReleased notes that the lease of epoch on off is given up (visible
// again): no client, no deadline.
func (l *Log) NoteReleased(n *Notes, key offset.Key, off int64, epoch uint64) {
	l.Note(n, key, "", Item{Offset: off, Epoch: epoch, State: Released})
}

// Stages collects the lease records a request appended under pop state
// locks (Stage), to wait for their flush once the locks are released
// (Wait): the log then holds lease changes in the order they were made,
// the order a follower folds them in, while no lock is held across a
// flush. The zero value is ready.
type Stages struct {
	waits []func() error
	err   error
}

// Stage appends n's changes (and resets n); the caller holds the lock of
// the pop state they were decided under, and applies them once Stage
// returns nil (the record is appended). An append refused is Stage's
// error, and Wait's.
func (s *Stages) Stage(l *Log, n *Notes) error {
	if n.Empty() {
		return nil
	}
	w, err := l.appendStaged(n)
	*n = Notes{}
	if err != nil {
		s.err = errors.Join(s.err, err)
		return err
	}
	s.waits = append(s.waits, w)
	return nil
}

// Wait returns once every staged record is flushed (sync mode), or the
// first error.
func (s *Stages) Wait() error {
	if s.err != nil {
		return s.err
	}
	for _, w := range s.waits {
		if err := w(); err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) appendStaged(n *Notes) (func() error, error) {
	m, err := l.message(n)
	if err != nil {
		return nil, err
	}
	w, err := l.cfg.Store.PutClassStaged(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1))
	if err != nil {
		return nil, l.cfg.StoreError(err)
	}
	return func() error { return l.cfg.StoreError(w()) }, nil
}

// message is n's changes as one rmq_sys_LEASE message.
func (l *Log) message(n *Notes) (*message.Message, error) {
	body, err := EncodeRecord(n.rec)
	if err != nil {
		return nil, err
	}
	return &message.Message{Topic: Topic, Body: body, BornTimestamp: l.cfg.Clock.Now().UnixMilli()}, nil
}

// GrantsMessage is a pull's grants (n) as one rmq_sys_LEASE record, nil
// when n holds none. The pull appends it in one batch with the progress
// record of the offsets its filters passed over, without waiting for the
// flush (package progress's Ledger.PersistNoWait): a grant lost with the
// log's tail only delivers its message again at once, as before leases
// were records.
func (l *Log) GrantsMessage(n *Notes) (*message.Message, error) {
	if n.Empty() {
		return nil, nil
	}
	return l.message(n)
}
