package timerindex

import "container/heap"

// source is a sorted stream of items: the buffer or a run.
type source interface {
	peek() (item, bool)
	advance()
}

// merger yields the items of several sources in key order, each key once
// (a key found in two sources is one record).
type merger struct {
	heads []mergeHead
	last  Key
	any   bool
}

type mergeHead struct {
	it  item
	src source
}

func newMerger(srcs []source) *merger {
	m := &merger{heads: make([]mergeHead, 0, len(srcs))}
	for _, s := range srcs {
		if it, ok := s.peek(); ok {
			m.heads = append(m.heads, mergeHead{it, s})
		}
	}
	heap.Init(m)
	return m
}

func (m *merger) Len() int           { return len(m.heads) }
func (m *merger) Less(i, j int) bool { return m.heads[i].it.key().Less(m.heads[j].it.key()) }
func (m *merger) Swap(i, j int)      { m.heads[i], m.heads[j] = m.heads[j], m.heads[i] }
func (m *merger) Push(x any)         { m.heads = append(m.heads, x.(mergeHead)) }
func (m *merger) Pop() any {
	h := m.heads[len(m.heads)-1]
	m.heads = m.heads[:len(m.heads)-1]
	return h
}

// next returns the next item in key order.
func (m *merger) next() (item, bool) {
	for len(m.heads) > 0 {
		h := &m.heads[0]
		it := h.it
		h.src.advance()
		if nx, ok := h.src.peek(); ok {
			h.it = nx
			heap.Fix(m, 0)
		} else {
			heap.Pop(m)
		}
		if m.any && it.key() == m.last {
			continue
		}
		m.last, m.any = it.key(), true
		return it, true
	}
	return item{}, false
}
