package timerindex

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// The live set's chunk geometry. Part of the on-disk format (the
// checkpoint's live section); never change.
const (
	chunkBits   = 16
	chunkSize   = 1 << chunkBits // seqs per chunk
	bitmapWords = chunkSize / 64 // uint64 words of a bitmap chunk
	// arrayMax is the most members an array chunk holds (8 KiB, the size
	// of a bitmap); one more turns it into a bitmap.
	arrayMax = 4096
	// arrayBack is the member count at which a bitmap chunk turns back
	// into an array (below arrayMax, so that a chunk does not flip at
	// every add and remove around the limit).
	arrayBack = arrayMax / 2
	// maxChunkSpan bounds the chunks between the floor and the highest
	// member a checkpoint may hold (68 billion seqs: no retention window
	// holds as many timer records), so that a damaged file cannot make
	// the decoder allocate without bound.
	maxChunkSpan = 1 << 20

	chunkArray  = 0
	chunkBitmap = 1
)

// chunk holds the members of one 65 536-seq range: a sorted array of
// offsets, or a bitmap.
type chunk struct {
	card  int
	array []uint16 // the members' offsets, ascending; used when words is nil
	words []uint64 // bitmapWords words, or nil
}

func (c *chunk) contains(low uint16) bool {
	if c.words != nil {
		return c.words[low>>6]&(1<<(low&63)) != 0
	}
	_, ok := slices.BinarySearch(c.array, low)
	return ok
}

func (c *chunk) add(low uint16) bool {
	if c.words != nil {
		w, bit := &c.words[low>>6], uint64(1)<<(low&63)
		if *w&bit != 0 {
			return false
		}
		*w |= bit
		c.card++
		return true
	}
	if n := len(c.array); n == 0 || c.array[n-1] < low {
		c.array = append(c.array, low) // births come in seq order
	} else {
		i, ok := slices.BinarySearch(c.array, low)
		if ok {
			return false
		}
		c.array = slices.Insert(c.array, i, low)
	}
	c.card++
	if c.card > arrayMax {
		c.words = make([]uint64, bitmapWords)
		for _, v := range c.array {
			c.words[v>>6] |= 1 << (v & 63)
		}
		c.array = nil
	}
	return true
}

func (c *chunk) remove(low uint16) bool {
	if c.words != nil {
		w, bit := &c.words[low>>6], uint64(1)<<(low&63)
		if *w&bit == 0 {
			return false
		}
		*w &^= bit
		c.card--
		if c.card <= arrayBack {
			c.array = make([]uint16, 0, c.card)
			c.array = c.appendMembers(c.array, 0)
			c.words = nil
		}
		return true
	}
	i, ok := slices.BinarySearch(c.array, low)
	if !ok {
		return false
	}
	c.array = slices.Delete(c.array, i, i+1)
	c.card--
	return true
}

// appendMembers appends the members >= from, ascending.
func (c *chunk) appendMembers(dst []uint16, from uint16) []uint16 {
	if c.words == nil {
		i, _ := slices.BinarySearch(c.array, from)
		return append(dst, c.array[i:]...)
	}
	for w := int(from >> 6); w < bitmapWords; w++ {
		word := c.words[w]
		if w == int(from>>6) {
			word &= ^uint64(0) << (from & 63)
		}
		for word != 0 {
			dst = append(dst, uint16(w<<6+bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
	return dst
}

// next is the smallest member >= from.
func (c *chunk) next(from uint16) (uint16, bool) {
	if c.words == nil {
		i, _ := slices.BinarySearch(c.array, from)
		if i == len(c.array) {
			return 0, false
		}
		return c.array[i], true
	}
	for w := int(from >> 6); w < bitmapWords; w++ {
		word := c.words[w]
		if w == int(from>>6) {
			word &= ^uint64(0) << (from & 63)
		}
		if word != 0 {
			return uint16(w<<6 + bits.TrailingZeros64(word)), true
		}
	}
	return 0, false
}

func (c *chunk) clone() *chunk {
	return &chunk{card: c.card, array: slices.Clone(c.array), words: slices.Clone(c.words)}
}

// liveSet is the set of pending seqs (see doc.go). Not safe for
// concurrent use.
type liveSet struct {
	floor  int64    // seqs below are dead: never members, never added
	base   int64    // floor rounded down to a chunk: chunks[i] covers [base+i*chunkSize, base+(i+1)*chunkSize)
	chunks []*chunk // nil: no member
	total  int64
}

func newLiveSet(floor int64) *liveSet {
	floor = max(floor, 0)
	return &liveSet{floor: floor, base: floor &^ (chunkSize - 1)}
}

func (s *liveSet) locate(seq int64) (int, uint16) {
	d := seq - s.base
	return int(d >> chunkBits), uint16(d & (chunkSize - 1))
}

func (s *liveSet) contains(seq int64) bool {
	if seq < s.floor {
		return false
	}
	i, low := s.locate(seq)
	if i >= len(s.chunks) || s.chunks[i] == nil {
		return false
	}
	return s.chunks[i].contains(low)
}

// add makes seq a member; false if it was one already or lies below the
// floor.
func (s *liveSet) add(seq int64) bool {
	if seq < s.floor {
		return false
	}
	i, low := s.locate(seq)
	for len(s.chunks) <= i {
		s.chunks = append(s.chunks, nil)
	}
	c := s.chunks[i]
	if c == nil {
		c = &chunk{}
		s.chunks[i] = c
	}
	if !c.add(low) {
		return false
	}
	s.total++
	return true
}

// remove drops seq; false if it was not a member.
func (s *liveSet) remove(seq int64) bool {
	if seq < s.floor {
		return false
	}
	i, low := s.locate(seq)
	if i >= len(s.chunks) || s.chunks[i] == nil || !s.chunks[i].remove(low) {
		return false
	}
	if s.chunks[i].card == 0 {
		s.chunks[i] = nil
	}
	s.total--
	s.trimTail()
	return true
}

func (s *liveSet) trimTail() {
	n := len(s.chunks)
	for n > 0 && s.chunks[n-1] == nil {
		n--
	}
	s.chunks = s.chunks[:n]
}

// raiseFloor makes every seq below floor dead and returns how many
// members that removed.
func (s *liveSet) raiseFloor(floor int64) int64 {
	if floor <= s.floor {
		return 0
	}
	var removed int64
	for seq, ok := s.next(s.floor); ok && seq < floor; seq, ok = s.next(seq + 1) {
		// Members in the boundary chunk; whole chunks below go at once.
		i, _ := s.locate(seq)
		if end := s.base + int64(i+1)*chunkSize; end <= floor {
			removed += int64(s.chunks[i].card)
			s.total -= int64(s.chunks[i].card)
			s.chunks[i] = nil
			seq = end - 1
			continue
		}
		s.remove(seq)
		removed++
	}
	s.floor = floor
	newBase := floor &^ (chunkSize - 1)
	drop := int((newBase - s.base) >> chunkBits)
	if drop >= len(s.chunks) {
		s.chunks = nil
	} else {
		s.chunks = slices.Clone(s.chunks[drop:]) // let the old array go
	}
	s.base = newBase
	s.trimTail()
	return removed
}

// next is the smallest member >= from.
func (s *liveSet) next(from int64) (int64, bool) {
	from = max(from, s.floor)
	i, low := s.locate(from)
	for ; i < len(s.chunks); i, low = i+1, 0 {
		if c := s.chunks[i]; c != nil {
			if v, ok := c.next(low); ok {
				return s.base + int64(i)<<chunkBits + int64(v), true
			}
		}
	}
	return 0, false
}

func (s *liveSet) clone() *liveSet {
	out := &liveSet{floor: s.floor, base: s.base, total: s.total, chunks: make([]*chunk, len(s.chunks))}
	for i, c := range s.chunks {
		if c != nil {
			out.chunks[i] = c.clone()
		}
	}
	return out
}

// bytes is the memory the set holds, roughly.
func (s *liveSet) bytes() int64 {
	n := int64(cap(s.chunks)) * 8
	for _, c := range s.chunks {
		if c != nil {
			n += 48 + int64(cap(c.array))*2 + int64(cap(c.words))*8
		}
	}
	return n
}

// encode appends the checkpoint's live section (see doc.go).
func (s *liveSet) encode(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.floor))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.total))
	n := 0
	for _, c := range s.chunks {
		if c != nil {
			n++
		}
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	for i, c := range s.chunks {
		if c == nil {
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32((s.base>>chunkBits)+int64(i)))
		if c.words != nil {
			dst = append(dst, chunkBitmap)
			dst = binary.BigEndian.AppendUint32(dst, uint32(c.card))
			for _, w := range c.words {
				dst = binary.BigEndian.AppendUint64(dst, w)
			}
			continue
		}
		dst = append(dst, chunkArray)
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.card))
		for _, v := range c.array {
			dst = binary.BigEndian.AppendUint16(dst, v)
		}
	}
	return dst
}

// decodeLiveSet reads a live section and returns the rest of b.
func decodeLiveSet(b []byte) (*liveSet, []byte, error) {
	r := reader{b: b}
	floor, total, n := int64(r.u64()), int64(r.u64()), int(r.u32())
	if r.err != nil || floor < 0 || total < 0 {
		return nil, nil, fmt.Errorf("%w: live set header", ErrCorrupt)
	}
	s := newLiveSet(floor)
	prev := int64(-1)
	var sum int64
	for k := 0; k < n; k++ {
		number, kind, card := int64(r.u32()), r.u8(), int(r.u32())
		if r.err != nil {
			return nil, nil, fmt.Errorf("%w: live chunk %d of %d: %w", ErrCorrupt, k, n, r.err)
		}
		i := int(number - s.base>>chunkBits)
		if number <= prev || i < 0 || i >= maxChunkSpan || card <= 0 || card > chunkSize {
			return nil, nil, fmt.Errorf("%w: live chunk %d: number %d, cardinality %d", ErrCorrupt, k, number, card)
		}
		prev = number
		c := &chunk{card: card}
		switch kind {
		case chunkArray:
			if card > arrayMax {
				return nil, nil, fmt.Errorf("%w: live chunk %d: array of %d", ErrCorrupt, k, card)
			}
			c.array = make([]uint16, card)
			for j := range c.array {
				c.array[j] = r.u16()
				if j > 0 && c.array[j] <= c.array[j-1] && r.err == nil {
					return nil, nil, fmt.Errorf("%w: live chunk %d: array not ascending", ErrCorrupt, k)
				}
			}
		case chunkBitmap:
			c.words = make([]uint64, bitmapWords)
			ones := 0
			for j := range c.words {
				c.words[j] = r.u64()
				ones += bits.OnesCount64(c.words[j])
			}
			if ones != card && r.err == nil {
				return nil, nil, fmt.Errorf("%w: live chunk %d: %d bits for cardinality %d", ErrCorrupt, k, ones, card)
			}
		default:
			return nil, nil, fmt.Errorf("%w: live chunk %d: kind %d", ErrCorrupt, k, kind)
		}
		if r.err != nil {
			return nil, nil, fmt.Errorf("%w: live chunk %d: %w", ErrCorrupt, k, r.err)
		}
		if number == s.base>>chunkBits {
			if first, ok := c.next(0); ok && s.base+int64(first) < floor {
				return nil, nil, fmt.Errorf("%w: live member %d below the floor %d", ErrCorrupt, s.base+int64(first), floor)
			}
		}
		for len(s.chunks) < i {
			s.chunks = append(s.chunks, nil)
		}
		s.chunks = append(s.chunks, c)
		sum += int64(card)
	}
	if sum != total {
		return nil, nil, fmt.Errorf("%w: live set of %d members says %d", ErrCorrupt, sum, total)
	}
	s.total = total
	return s, r.b, nil
}

// reader decodes big-endian fields, remembering the first short read.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%w: %d bytes short", ErrCorrupt, n-len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
