package lease

import "sort"

// At is one offset of one key.
type At struct {
	Key Key
	Off int64
}

// Folded is the newest known state of one leased offset: the item, and
// the generation, time and client of the entry that named it.
type Folded struct {
	Item   Item
	Gen    uint32
	At     int64
	Client string
}

// Fold is what the lease records make: per offset the newest known state
// (Folded), and the highest epoch seen. A broker folds the snapshot and
// the records after it at open and while it follows another broker's
// log, and a leader of a replicated store folds the committed records; a
// Fold is not safe for concurrent use (the broker's locks guard it).
type Fold struct {
	live map[At]Folded
	top  uint64
}

// NewFold is an empty fold.
func NewFold() *Fold { return &Fold{live: map[At]Folded{}} }

// Apply folds rec in: of each offset the newest epoch wins; of one
// epoch, the later record. A release is kept (a later record of an older
// epoch must not bring the lease back) until Prune drops it.
func (f *Fold) Apply(rec Record) {
	for _, e := range rec.Entries {
		for _, it := range e.Items {
			f.top = max(f.top, it.Epoch)
			k := At{e.Key, it.Offset}
			if old, ok := f.live[k]; ok && old.Item.Epoch > it.Epoch {
				continue
			}
			f.live[k] = Folded{Item: it, Gen: e.Generation, At: e.At, Client: e.Client}
		}
	}
}

// Raise raises the highest epoch seen to at least epoch (a snapshot's
// epoch counter).
func (f *Fold) Raise(epoch uint64) { f.top = max(f.top, epoch) }

// Top is the highest epoch seen.
func (f *Fold) Top() uint64 { return f.top }

// Len is the number of offsets the fold holds, released ones included.
func (f *Fold) Len() int { return len(f.live) }

// Get is the folded state of k.
func (f *Fold) Get(k At) (Folded, bool) {
	fl, ok := f.live[k]
	return fl, ok
}

// Unreleased is every offset whose newest state is not a release, in
// offset order per key, the keys by group, topic and queue.
func (f *Fold) Unreleased() []At {
	keys := make([]At, 0, len(f.live))
	for k, fl := range f.live {
		if fl.Item.State != Released {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Key != b.Key {
			if a.Key.Group != b.Key.Group {
				return a.Key.Group < b.Key.Group
			}
			if a.Key.Topic != b.Key.Topic {
				return a.Key.Topic < b.Key.Topic
			}
			return a.Key.QueueID < b.Key.QueueID
		}
		return a.Off < b.Off
	})
	return keys
}

// Prune drops the released offsets, and those owed reports are owed no
// more, so that a fold, and the snapshot written from it, hold the live
// leases rather than every lease ever granted.
func (f *Fold) Prune(owed func(At, Folded) bool) {
	for k, fl := range f.live {
		if fl.Item.State == Released || !owed(k, fl) {
			delete(f.live, k)
		}
	}
}

// Record is the fold as one record body (a snapshot's): an entry per
// offset, in no particular order.
func (f *Fold) Record() Record {
	var rec Record
	for k, fl := range f.live {
		rec.Entries = append(rec.Entries, Entry{Key: k.Key, Generation: fl.Gen, At: fl.At, Client: fl.Client,
			Items: []Item{fl.Item}})
	}
	return rec
}
