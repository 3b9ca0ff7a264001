package timer

import (
	"testing"

	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage/message"
)

// FuzzDecodeStatuses: status records are read back from the CommitLog (at
// open, on a follower, by every catch-up of the index); decoding
// arbitrary bytes never panics, what decodes encodes to a body that
// decodes to the same, and applying it kills one record per entry with a
// seq.
func FuzzDecodeStatuses(f *testing.F) {
	f.Add([]byte(`[{"id":"7F00000100001F900000000000000100","status":"cancelled","at":"2023-11-14T22:13:22.123Z","seq":2,"topic":"orders"}]`))
	f.Add([]byte(`[{"id":"","status":"delivered","at":"2023-11-14T22:13:22.123+01:00","seq":7,"topic":"lost"},{}]`))
	f.Add([]byte(`[{"id":"7F00000100001F900000000000000100","status":"cancelled","at":"2023-11-14T22:13:20.123Z"}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"id":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeStatuses(data)
		if err != nil {
			return
		}
		body, err := EncodeStatuses(recs)
		if err != nil {
			t.Fatalf("decoded records do not encode: %v", err)
		}
		again, err := DecodeStatuses(body)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded records do not decode: %v (%d of %d)", err, len(again), len(recs))
		}
		withSeq := 0
		for i := range recs {
			a, b := recs[i], again[i]
			if a.ID != b.ID || a.Status != b.Status || !a.At.Equal(b.At) || a.Topic != b.Topic || (a.Seq == nil) != (b.Seq == nil) ||
				a.Seq != nil && *a.Seq != *b.Seq {
				t.Fatalf("round trip changed %d: %+v, %+v", i, a, b)
			}
			if a.Seq != nil {
				withSeq++
			}
		}
		var u timerindex.Update
		NewState().ApplyStatuses(&u, recs, func(string) []timerindex.Kill { return nil })
		if len(u.Kills) != withSeq || len(u.Births) != 0 {
			t.Fatalf("%d entries with a seq made %d kills", withSeq, len(u.Kills))
		}
	})
}

// FuzzApplyTimer: a timer record's properties are read back from the
// CommitLog; applying a record with arbitrary TIMER_ID, TIMER_PREV and
// TIMER_DELIVER_MS never panics and makes exactly one birth, at its own
// queue offset, and kills at most one record: the one it supersedes, or
// (an old-form copy) one below it.
func FuzzApplyTimer(f *testing.F) {
	f.Add("", "", "1700000060123", int64(0))
	f.Add("7F00000100001F900000000000000100", "3", "1700000300123", int64(9))
	f.Add("7F00000100001F900000000000000100", "", "1700000400000", int64(5))
	f.Add("not an id", "x", "-1", int64(-1))
	f.Add("", "99999999999999999999", "", int64(1<<62))
	f.Fuzz(func(t *testing.T, id, prev, due string, seq int64) {
		if seq < 0 {
			seq = -(seq + 1) // a queue offset is never negative
		}
		m := &message.Message{Topic: Topic, QueueOffset: seq, PhysicalOffset: 0x100}
		m.SetProperty(message.PropertyRealTopic, "orders")
		for k, v := range map[string]string{PropID: id, PropPrev: prev, message.PropertyDeliverTimeMs: due} {
			if v != "" {
				m.SetProperty(k, v)
			}
		}
		s := NewState()
		var u timerindex.Update
		s.ApplyTimer(&u, m, func(string) []timerindex.Kill { return []timerindex.Kill{{Seq: seq - 1}, {Seq: seq}} })
		if len(u.Births) != 1 || u.Births[0].Seq != seq || u.Births[0].Due != DueMs(m) || u.Births[0].ID != IDOffset(m) {
			t.Fatalf("births %+v", u.Births)
		}
		if len(u.Kills) > 1 {
			t.Fatalf("kills %+v", u.Kills)
		}
		for _, k := range u.Kills {
			if p, ok := Prev(m); ok && k.Seq != p || !ok && k.Seq >= seq {
				t.Fatalf("kill %+v of record %d (prev %q)", k, seq, prev)
			}
		}
	})
}
