package timer

import (
	"maps"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage/message"
)

// The family's formats, pinned byte for byte with the code from before it
// moved here from server/broker: a timer record's properties (first
// record, copy, delivery), the status record body, and what applying the
// records makes. server/broker's timer_golden_internal_test.go pins the
// same through the broker's requests (written there against that code,
// its expected texts unchanged since).

var goldenTimerAt = time.UnixMilli(1_700_000_000_123)

var goldenHost = message.Host{127, 0, 0, 1, 0, 0, 0x1f, 0x90}

const (
	goldenID0 = "7F00000100001F900000000000000100"
	goldenID1 = "7F00000100001F900000000000000180"
)

func TestGoldenTimerRecord(t *testing.T) {
	m := &message.Message{Topic: "orders", QueueID: 1, Body: []byte("body 0")}
	m.SetProperty("TAGS", "tag")
	m.SetProperty("user", "v")
	Wrap(m, goldenTimerAt.Add(2*time.Minute).Add(500*time.Microsecond))
	want := map[string]string{"TAGS": "tag", "user": "v", "REAL_TOPIC": "orders", "REAL_QID": "1", "TIMER_DELIVER_MS": "1700000120124"}
	if m.Topic != "rmq_sys_TIMER" || m.QueueID != 0 || !maps.Equal(m.Properties, want) {
		t.Fatalf("first record: %s/%d %v", m.Topic, m.QueueID, m.Properties)
	}
	if FormatDue(goldenTimerAt) != "1700000000123" || FormatDue(goldenTimerAt.Add(1)) != "1700000000124" {
		t.Fatal(FormatDue(goldenTimerAt), FormatDue(goldenTimerAt.Add(1)))
	}
	// As stored: queue offset 3 at CommitLog offset 0x100.
	m.StoreHost, m.PhysicalOffset, m.QueueOffset = goldenHost, 0x100, 3
	if ID(m) != goldenID0 || IDOffset(m) != 0x100 || DueMs(m) != 1_700_000_120_124 || !Due(m).Equal(time.UnixMilli(1_700_000_120_124)) {
		t.Fatalf("first record: %s %d %d", ID(m), IDOffset(m), DueMs(m))
	}
	if _, ok := Prev(m); ok {
		t.Fatal("a first record supersedes nothing")
	}

	// A copy (a reschedule, a carry) at CommitLog offset 0x180.
	c := &message.Message{Topic: Topic, Body: m.Body, Properties: maps.Clone(m.Properties), StoreHost: goldenHost, PhysicalOffset: 0x180, QueueOffset: 9}
	MarkCopy(c, m, goldenTimerAt.Add(5*time.Minute))
	want = maps.Clone(m.Properties)
	want["TIMER_ID"] = goldenID0
	want["TIMER_PREV"] = "3"
	want["UNIQ_KEY"] = "timer:" + goldenID0
	want["TIMER_DELIVER_MS"] = "1700000300123"
	if !maps.Equal(c.Properties, want) {
		t.Fatalf("copy: %v\nwant %v", c.Properties, want)
	}
	if prev, ok := Prev(c); !ok || prev != 3 || ID(c) != goldenID0 || IDOffset(c) != 0x100 || Key(ID(c)) != "timer:"+goldenID0 {
		t.Fatalf("copy: prev %d %v, id %s %d", prev, ok, ID(c), IDOffset(c))
	}
	// A copy of the copy names the same timer and the copy.
	c2 := &message.Message{Topic: Topic, Properties: maps.Clone(c.Properties), StoreHost: goldenHost, PhysicalOffset: 0x200}
	MarkCopy(c2, c, goldenTimerAt.Add(5*time.Minute))
	want["TIMER_PREV"] = "9"
	if !maps.Equal(c2.Properties, want) {
		t.Fatalf("copy of the copy: %v", c2.Properties)
	}

	// The delivery keeps none of the timer's properties.
	out := map[string]string{}
	for k, v := range c.Properties {
		drop := false
		for _, d := range DeliveryDrops {
			drop = drop || d == k
		}
		if !drop {
			out[k] = v
		}
	}
	if !maps.Equal(out, map[string]string{"TAGS": "tag", "user": "v"}) {
		t.Fatalf("delivered: %v", out)
	}
}

func TestGoldenTimerStatusRecords(t *testing.T) {
	m := &message.Message{Topic: Topic, StoreHost: goldenHost, PhysicalOffset: 0x100, QueueOffset: 2}
	m.SetProperty("REAL_TOPIC", "orders")
	c := &message.Message{Topic: Topic, StoreHost: goldenHost, PhysicalOffset: 0x300, QueueOffset: 5}
	c.SetProperty("REAL_TOPIC", "orders")
	c.SetProperty("TIMER_ID", goldenID1)
	at := goldenTimerAt.Add(2 * time.Second).In(time.FixedZone("x", 3600))
	for _, tc := range []struct {
		recs []StatusRecord
		body string
	}{
		{[]StatusRecord{Settle(m, Cancelled, at)},
			`[{"id":"` + goldenID0 + `","status":"cancelled","at":"2023-11-14T22:13:22.123Z","seq":2,"topic":"orders"}]`},
		{[]StatusRecord{Settle(c, Delivered, at), Settle(m, Delivered, at)},
			`[{"id":"` + goldenID1 + `","status":"delivered","at":"2023-11-14T22:13:22.123Z","seq":5,"topic":"orders"},` +
				`{"id":"` + goldenID0 + `","status":"delivered","at":"2023-11-14T22:13:22.123Z","seq":2,"topic":"orders"}]`},
		{[]StatusRecord{{Status: Delivered, At: at.UTC(), Seq: ptr(7), Topic: "lost"}}, // a record lost to retention
			`[{"id":"","status":"delivered","at":"2023-11-14T22:13:22.123Z","seq":7,"topic":"lost"}]`},
	} {
		sm, err := StatusMessage(tc.recs, goldenTimerAt)
		if err != nil {
			t.Fatal(err)
		}
		if string(sm.Body) != tc.body {
			t.Errorf("status record:\n got %s\nwant %s", sm.Body, tc.body)
		}
		if sm.Topic != "rmq_sys_TIMER_STATUS" || sm.QueueID != 0 || sm.BornTimestamp != 1_700_000_000_123 || len(sm.Properties) != 0 {
			t.Errorf("status record: %s/%d born %d %v", sm.Topic, sm.QueueID, sm.BornTimestamp, sm.Properties)
		}
		got, err := DecodeStatuses(sm.Body)
		if err != nil || len(got) != len(tc.recs) {
			t.Fatalf("decodes to %+v, %v", got, err)
		}
		for i := range got {
			w := tc.recs[i]
			if got[i].ID != w.ID || got[i].Status != w.Status || !got[i].At.Equal(w.At) || *got[i].Seq != *w.Seq || got[i].Topic != w.Topic {
				t.Errorf("decoded %d: %+v, want %+v", i, got[i], w)
			}
		}
	}
	// An entry written before the index: no seq, no topic.
	old := `[{"id":"` + goldenID0 + `","status":"cancelled","at":"2023-11-14T22:13:20.123Z"}]`
	got, err := DecodeStatuses([]byte(old))
	if err != nil || len(got) != 1 || got[0].Seq != nil || got[0].Topic != "" || got[0].ID != goldenID0 {
		t.Fatalf("old entry: %+v %v", got, err)
	}
	if body, _ := EncodeStatuses(got); string(body) != old {
		t.Fatalf("old entry re-encoded: %s", body)
	}
	// Only the JSON is checked (as before the move).
	for body, ok := range map[string]bool{
		`{"id":"x"}`: false,
		`[{"id":"x","status":"delivered","at":"not a time","seq":1}]`: false,
		`[{"seq":"1"}]`: false,
		``:              false,
		`[{"id":"","status":"whatever","at":"0001-01-01T00:00:00Z","seq":-1}]`: true,
		`[]`:   true,
		`null`: true,
	} {
		if _, err := DecodeStatuses([]byte(body)); (err == nil) != ok {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestGoldenTimerApply(t *testing.T) {
	first := func(seq, phys int64, due string) *message.Message {
		m := &message.Message{Topic: Topic, StoreHost: goldenHost, PhysicalOffset: phys, QueueOffset: seq}
		m.SetProperty("REAL_TOPIC", "orders")
		m.SetProperty("TIMER_DELIVER_MS", due)
		return m
	}
	m0 := first(0, 0x100, "1700000060123")
	m1 := first(1, 0x180, "1700000120124")
	c := &message.Message{Topic: Topic, Properties: maps.Clone(m0.Properties), QueueOffset: 2}
	MarkCopy(c, m0, time.UnixMilli(1_700_000_300_123))
	finds := map[string][]timerindex.Kill{}
	var asked []string
	older := func(id string) []timerindex.Kill { asked = append(asked, id); return finds[id] }

	s := NewState()
	var u timerindex.Update
	for _, m := range []*message.Message{m0, m1, c} {
		s.ApplyTimer(&u, m, older)
	}
	wantBirths := []timerindex.Entry{
		{Due: 1_700_000_060_123, ID: 0x100, Seq: 0, Topic: "orders"},
		{Due: 1_700_000_120_124, ID: 0x180, Seq: 1, Topic: "orders"},
		{Due: 1_700_000_300_123, ID: 0x100, Seq: 2, Topic: "orders"},
	}
	if !equal(u.Births, wantBirths) || !equal(u.Kills, []timerindex.Kill{{Seq: 0, Topic: "orders"}}) || len(asked) != 0 {
		t.Fatalf("births %+v kills %+v asked %v", u.Births, u.Kills, asked)
	}
	if due, ok := s.TakeBornDue(); !ok || due != 1_700_000_060_123 {
		t.Fatalf("born due %d %v", due, ok)
	}
	if _, ok := s.TakeBornDue(); ok {
		t.Fatal("born due taken twice")
	}

	u = timerindex.Update{}
	recs, err := DecodeStatuses([]byte(`[{"id":"` + goldenID1 + `","status":"delivered","at":"2023-11-14T23:13:20.123Z","seq":1,"topic":"orders"},` +
		`{"id":"","status":"whatever","at":"0001-01-01T00:00:00Z","seq":-1,"topic":"t"}]`))
	if err != nil {
		t.Fatal(err)
	}
	s.ApplyStatuses(&u, recs, older)
	if !equal(u.Kills, []timerindex.Kill{{Seq: 1, Topic: "orders"}, {Seq: -1, Topic: "t"}}) || len(u.Births) != 0 || len(asked) != 0 {
		t.Fatalf("kills %+v asked %v", u.Kills, asked)
	}

	// Old-form records: a copy with TIMER_ID and no TIMER_PREV kills the
	// timer's earlier records (those older finds below it) and is
	// remembered; a status entry without seq kills every record of its
	// timer (the remembered one first).
	finds[goldenID1] = []timerindex.Kill{{Seq: 7, Topic: "orders"}, {Seq: 1, Topic: "orders"}}
	oc := &message.Message{Topic: Topic, QueueOffset: 5}
	oc.SetProperty("REAL_TOPIC", "orders")
	oc.SetProperty("TIMER_ID", goldenID1)
	oc.SetProperty("TIMER_DELIVER_MS", "1700000400000")
	u = timerindex.Update{}
	s.ApplyTimer(&u, oc, older)
	if !equal(u.Births, []timerindex.Entry{{Due: 1_700_000_400_000, ID: 0x180, Seq: 5, Topic: "orders"}}) ||
		!equal(u.Kills, []timerindex.Kill{{Seq: 1, Topic: "orders"}}) || !equal(s.Legacy(), []int64{5}) {
		t.Fatalf("old copy: births %+v kills %+v legacy %v", u.Births, u.Kills, s.Legacy())
	}
	u = timerindex.Update{}
	recs, _ = DecodeStatuses([]byte(`[{"id":"` + goldenID1 + `","status":"cancelled","at":"2023-11-14T22:13:20.123Z"},{"id":"not an id","status":"cancelled","at":"2023-11-14T22:13:20.123Z"}]`))
	s.ApplyStatuses(&u, recs, older)
	if !equal(u.Kills, []timerindex.Kill{{Seq: 5, Topic: "orders"}, {Seq: 7, Topic: "orders"}, {Seq: 1, Topic: "orders"}}) {
		t.Fatalf("old status: kills %+v", u.Kills)
	}
	if !equal(asked, []string{goldenID1, goldenID1, "not an id"}) {
		t.Fatalf("asked %v", asked)
	}
	s.ForgetLegacy()
	if len(s.Legacy()) != 0 {
		t.Fatal(s.Legacy())
	}
	// A TIMER_PREV that does not parse is an old-form copy.
	bad := &message.Message{Topic: Topic, QueueOffset: 6, Properties: map[string]string{"TIMER_ID": goldenID0, "TIMER_PREV": "x", "REAL_TOPIC": "orders"}}
	u = timerindex.Update{}
	s.ApplyTimer(&u, bad, older)
	if !equal(u.Births, []timerindex.Entry{{Due: 0, ID: 0x100, Seq: 6, Topic: "orders"}}) || len(u.Kills) != 0 || !equal(s.Legacy(), []int64{6}) {
		t.Fatalf("bad prev: births %+v kills %+v legacy %v", u.Births, u.Kills, s.Legacy())
	}
}

func ptr(v int64) *int64 { return &v }

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
