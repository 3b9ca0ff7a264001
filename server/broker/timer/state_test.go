package timer

import "testing"

// The delivery's flight: a record is busy from Deliver until its status
// is applied (or its write failed, when it is unsure).
func TestStateFlight(t *testing.T) {
	s := NewState()
	live := map[int64]bool{1: true, 2: true, 3: true}
	isLive := func(seq int64) bool { return live[seq] }
	for _, seq := range []int64{1, 2, 3} {
		s.Deliver(seq)
	}
	if !s.Busy(1) || !s.Busy(2) || !s.Busy(3) || s.Busy(4) {
		t.Fatal("not in flight")
	}
	s.Landed(isLive) // nothing stored yet: all stay
	if !s.Busy(1) {
		t.Fatal("a record being written landed")
	}
	live[1] = false
	s.Delivered(1, live[1], true) // its status applied already
	s.Delivered(2, live[2], true) // stored, status not yet seen
	s.Delivered(3, live[3], false)
	if s.Busy(1) || !s.Busy(2) || s.Busy(3) {
		t.Fatalf("busy %v %v %v", s.Busy(1), s.Busy(2), s.Busy(3))
	}
	if s.Unsure(1) || s.Unsure(2) || !s.Unsure(3) {
		t.Fatal("unsure")
	}
	s.Landed(isLive)
	if !s.Busy(2) {
		t.Fatal("landed before its status")
	}
	live[2] = false
	s.Landed(isLive)
	if s.Busy(2) {
		t.Fatal("not landed after its status")
	}
	// The unsure record is delivered again, then settled.
	s.Deliver(3)
	if !s.Busy(3) || !s.Unsure(3) {
		t.Fatal("retry")
	}
	live[3] = false
	s.Delivered(3, live[3], true)
	if s.Busy(3) || s.Unsure(3) {
		t.Fatal("settled")
	}
}
