package txn

import (
	"errors"
	"testing"
	"time"
)

func testHalf(id string, seq, phys int64, group string) Half {
	return Half{ID: id, Seq: seq, Phys: phys, Topic: "orders", Queue: 1, Group: group, CheckAfterMs: 1000, BornMs: 1_700_000_000_000}
}

const (
	id1 = "7F00000100001F900000000000000100"
	id2 = "7F00000100001F900000000000000200"
)

// TestApplyIsAFunctionOfTheRecords: the same records make the same state,
// whatever the clock, and a bad id changes nothing.
func TestApplyIsAFunctionOfTheRecords(t *testing.T) {
	apply := func() *State {
		s := NewState(2)
		if err := s.ApplyHalf(testHalf(id1, 0, 0x100, "pg")); err != nil {
			t.Fatal(err)
		}
		if err := s.ApplyHalf(testHalf("nope", 1, 0x180, "pg")); err == nil {
			t.Fatal("a bad id applied")
		}
		if err := s.ApplyHalf(testHalf(id2, 2, 0x200, "pg")); err != nil {
			t.Fatal(err)
		}
		s.ApplyOp(OpRecord{ID: id1, State: Checked, CheckTimes: 1, NextCheckMs: 1_700_000_002_000})
		s.ApplyOp(OpRecord{ID: id2, State: Committed})
		s.ApplyOp(OpRecord{ID: id2, State: Checked, CheckTimes: 5}) // finished: nothing
		s.Followed(HalfQueue, 3, Mark{Seq: 2, Phys: 0x200})
		s.Followed(OpQueue, 3, Mark{Seq: 2, Phys: 0x300})
		return s
	}
	a, b := apply(), apply()
	if string(a.EncodeSnapshot()) != string(b.EncodeSnapshot()) {
		t.Fatalf("two applies differ:\n%s\n%s", a.EncodeSnapshot(), b.EncodeSnapshot())
	}
	if a.Len() != 1 || a.Get(id2) != nil {
		t.Fatalf("pending %d", a.Len())
	}
	t1 := a.Get(id1)
	if t1.Checks() != 1 || !t1.Next().Equal(time.UnixMilli(1_700_000_002_000)) || t1.IDOffset() != 0x100 {
		t.Fatalf("%+v", t1)
	}
	// A carried copy with fewer checks than applied keeps the count.
	if err := a.ApplyHalf(Half{ID: id1, Seq: 7, Phys: 0x900, Checks: 0}); err != nil || t1.Phys() != 0x900 || t1.Checks() != 1 {
		t.Fatalf("carry: %v %+v", err, t1)
	}
}

// TestTakeDueAndExhausted: due transactions are taken with their op locks
// held, busy ones left; a transaction whose every check was handed out
// moves to the exhausted heap and wakes the roll-back loop.
func TestTakeDueAndExhausted(t *testing.T) {
	s := NewState(2)
	_ = s.ApplyHalf(testHalf(id1, 0, 0x100, "pg"))
	_ = s.ApplyHalf(testHalf(id2, 1, 0x200, "pg"))
	born := time.UnixMilli(1_700_000_000_000)
	if taken, _, _, next := s.TakeDue("pg", 10, born); len(taken) != 0 || !next.Equal(born.Add(time.Second)) {
		t.Fatalf("not due yet: %d, next %v", len(taken), next)
	}
	s.Get(id2).LockOp()
	taken, busy, changed, _ := s.TakeDue("pg", 10, born.Add(time.Second))
	if len(taken) != 1 || taken[0].ID() != id1 || !busy {
		t.Fatalf("taken %d busy %v", len(taken), busy)
	}
	if taken[0].TryLockOp() {
		t.Fatal("a taken transaction's op lock is free")
	}
	select {
	case <-s.Wake():
		t.Fatal("woken early")
	default:
	}
	s.ApplyOp(taken[0].CheckOp(born.Add(time.Second), time.Second))
	taken[0].UnlockOp()
	select {
	case <-changed:
	default:
		t.Fatal("placing a transaction did not signal its group")
	}
	s.ApplyOp(OpRecord{ID: id1, State: Checked, CheckTimes: 2, NextCheckMs: born.Add(3 * time.Second).UnixMilli()})
	select {
	case <-s.Wake():
	default:
		t.Fatal("an exhausted head did not wake the roll-back loop")
	}
	ex, _, next := s.TakeExhausted(10, born.Add(2*time.Second))
	if len(ex) != 0 || !next.Equal(born.Add(3*time.Second)) {
		t.Fatalf("exhausted early: %d, next %v", len(ex), next)
	}
	ex, _, _ = s.TakeExhausted(10, born.Add(3*time.Second))
	if len(ex) != 1 || ex[0].ID() != id1 {
		t.Fatalf("exhausted: %d", len(ex))
	}
	s.PutBack(ex) // a failed write: due again
	ex[0].UnlockOp()
	if again, _, _ := s.TakeExhausted(10, born.Add(3*time.Second)); len(again) != 1 {
		t.Fatalf("put back: %d", len(again))
	}
}

// TestReservations: a send's reservation counts until its half record is
// applied, or ends at once when nothing (or an applied record) was stored.
func TestReservations(t *testing.T) {
	s := NewState(15)
	full := errors.New("full")
	limit := func(n int) func(int, int) error {
		return func(inGroup, all int) error {
			if inGroup >= n {
				return full
			}
			return nil
		}
	}
	if err := s.Reserve("pg", limit(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve("pg", limit(1)); err != full {
		t.Fatalf("over the limit: %v", err)
	}
	s.Release("pg", true, 0x100) // stored, not applied yet
	if err := s.Reserve("pg", limit(1)); err != full {
		t.Fatalf("a stored send's reservation ended early: %v", err)
	}
	_ = s.ApplyHalf(testHalf(id1, 0, 0x100, "pg"))
	if err := s.Reserve("pg", limit(2)); err != nil {
		t.Fatalf("the reservation became the transaction: %v", err)
	}
	s.Release("pg", false, 0)
	s.ApplyOp(OpRecord{ID: id1, State: RolledBack})
	if len(s.groups) != 0 || s.reserved != 0 || len(s.stored) != 0 {
		t.Fatalf("left: groups %d reserved %d stored %d", len(s.groups), s.reserved, len(s.stored))
	}
}
