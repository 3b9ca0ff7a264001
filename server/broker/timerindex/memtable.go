package timerindex

import (
	"slices"
	"sort"
)

// item is one index entry: a timer record's due time, timer id, seq and
// topic ordinal. Items are ordered by key; seq alone is unique.
type item struct {
	due   int64
	id    int64
	seq   int64
	topic uint32
}

// Key is a position in due order: (due, id, seq). Timers due at the same
// time are ordered by id, which a timer keeps across its records, so a
// listing resumed from a key neither repeats nor skips a timer that was
// copied meanwhile (a carry gives its record a new seq, not a new place).
type Key struct {
	Due int64 // unix ms
	ID  int64 // the timer's id: the CommitLog offset of its first record
	Seq int64
}

func (it item) key() Key { return Key{it.due, it.id, it.seq} }

// Less orders keys by due time, then id, then seq.
func (k Key) Less(o Key) bool {
	if k.Due != o.Due {
		return k.Due < o.Due
	}
	if k.ID != o.ID {
		return k.ID < o.ID
	}
	return k.Seq < o.Seq
}

// memChunk is how many items a buffer chunk holds before it splits.
const memChunk = 512

// memtable is the buffer: births not yet in a run, sorted by key, as a
// list of sorted chunks (a two-level B+ tree), so that an insert at a
// random due time moves at most memChunk items. Not safe for concurrent
// use.
type memtable struct {
	chunks [][]item // each sorted and non-empty; the chunks in order
	n      int
}

func (m *memtable) len() int { return m.n }

// locate returns the chunk an item with key k belongs in: the first whose
// last item is >= k, else the last.
func (m *memtable) locate(k Key) int {
	i := sort.Search(len(m.chunks), func(i int) bool {
		c := m.chunks[i]
		return !c[len(c)-1].key().Less(k)
	})
	return min(i, len(m.chunks)-1)
}

func (m *memtable) insert(it item) {
	if len(m.chunks) == 0 {
		m.chunks = append(m.chunks, append(make([]item, 0, memChunk), it))
		m.n = 1
		return
	}
	ci := m.locate(it.key())
	c := m.chunks[ci]
	j := sort.Search(len(c), func(j int) bool { return !c[j].key().Less(it.key()) })
	if j < len(c) && c[j].key() == it.key() {
		return // already there
	}
	c = slices.Insert(c, j, it)
	m.n++
	if len(c) <= memChunk {
		m.chunks[ci] = c
		return
	}
	half := len(c) / 2
	right := append(make([]item, 0, memChunk), c[half:]...)
	m.chunks[ci] = c[:half:half]
	m.chunks = slices.Insert(m.chunks, ci+1, right)
}

// seek is the position of the first item with key > after.
func (m *memtable) seek(after Key) (int, int) {
	if len(m.chunks) == 0 {
		return 0, 0
	}
	ci := sort.Search(len(m.chunks), func(i int) bool {
		c := m.chunks[i]
		return after.Less(c[len(c)-1].key())
	})
	if ci == len(m.chunks) {
		return ci, 0
	}
	c := m.chunks[ci]
	return ci, sort.Search(len(c), func(j int) bool { return after.Less(c[j].key()) })
}

// dropFrontWhile removes leading items while dead reports them dead.
func (m *memtable) dropFrontWhile(dead func(item) bool) {
	for len(m.chunks) > 0 {
		c := m.chunks[0]
		j := 0
		for j < len(c) && dead(c[j]) {
			j++
		}
		m.n -= j
		if j < len(c) {
			m.chunks[0] = c[j:]
			return
		}
		m.chunks = m.chunks[1:]
	}
}

// sorted returns a copy of the items, ascending.
func (m *memtable) sorted() []item {
	out := make([]item, 0, m.n)
	for _, c := range m.chunks {
		out = append(out, c...)
	}
	return out
}

// dropSeqsBelow removes every item whose seq is below seq (written to a
// run by a checkpoint).
func (m *memtable) dropSeqsBelow(seq int64) {
	var kept [][]item
	n := 0
	for _, c := range m.chunks {
		var k []item
		for _, it := range c {
			if it.seq >= seq {
				k = append(k, it)
			}
		}
		if len(k) > 0 {
			kept = append(kept, k)
			n += len(k)
		}
	}
	m.chunks, m.n = kept, n
}

// memIter walks the buffer in order from a position.
type memIter struct {
	m      *memtable
	ci, ij int
}

func (it *memIter) peek() (item, bool) {
	for it.ci < len(it.m.chunks) {
		if c := it.m.chunks[it.ci]; it.ij < len(c) {
			return c[it.ij], true
		}
		it.ci, it.ij = it.ci+1, 0
	}
	return item{}, false
}

func (it *memIter) advance() { it.ij++ }
