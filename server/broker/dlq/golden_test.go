package dlq

import (
	"maps"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

// The family's formats, pinned byte for byte with the code from before it
// moved here from server/broker: the rmq_sys_DLQ record body, a carried
// copy's properties, the listing's filter and cursor.
// server/broker's dlq_golden_internal_test.go pins the same through the
// broker's requests (written there against that code, their expected
// texts unchanged since).

var goldenDLQAt = time.UnixMilli(1_700_000_000_123)

const (
	goldenID0 = "7F00000100001F900000000000000100"
	goldenID1 = "7F00000100001F900000000000000180"
)

func TestGoldenDLQStatusRecords(t *testing.T) {
	at := goldenDLQAt.UTC()
	for _, c := range []struct {
		recs []StatusRecord
		body string
	}{
		{[]StatusRecord{{Group: "g", MessageID: goldenID0, Status: Discarded, At: at}},
			`[{"group":"g","messageId":"` + goldenID0 + `","status":"discarded","at":"2023-11-14T22:13:20.123Z"}]`},
		{[]StatusRecord{{Group: "g", MessageID: goldenID0, Status: Resent, At: at.Add(1500 * time.Millisecond)},
			{Group: "g", MessageID: goldenID1, Status: Resent, At: at.Add(1500 * time.Millisecond)}},
			`[{"group":"g","messageId":"` + goldenID0 + `","status":"resent","at":"2023-11-14T22:13:21.623Z"},` +
				`{"group":"g","messageId":"` + goldenID1 + `","status":"resent","at":"2023-11-14T22:13:21.623Z"}]`},
	} {
		m, err := StatusMessage(c.recs, goldenDLQAt)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Body) != c.body {
			t.Errorf("status record:\n got %s\nwant %s", m.Body, c.body)
		}
		if m.Topic != "rmq_sys_DLQ" || m.QueueID != 0 || m.BornTimestamp != 1_700_000_000_123 || len(m.Properties) != 0 {
			t.Errorf("status record: topic %s queue %d born %d properties %v", m.Topic, m.QueueID, m.BornTimestamp, m.Properties)
		}
		got, err := DecodeStatuses([]byte(c.body))
		if err != nil || len(got) != len(c.recs) {
			t.Fatalf("decodes to %+v, %v", got, err)
		}
		for i := range got {
			if got[i].Group != c.recs[i].Group || got[i].MessageID != c.recs[i].MessageID || got[i].Status != c.recs[i].Status ||
				!got[i].At.Equal(c.recs[i].At) || got[i].At.Location() != time.UTC {
				t.Errorf("decoded %d: %+v, want %+v", i, got[i], c.recs[i])
			}
		}
	}
	// Only the JSON is checked (as before the move): a record is applied
	// as it was written.
	for body, ok := range map[string]bool{
		`{"group":"g"}`: false,
		`[{"group":"g","messageId":"X","status":"resent","at":"not a time"}]`:           false,
		`[{"group":"","messageId":"","status":"whatever","at":"0001-01-01T00:00:00Z"}]`: true,
		`[]`:   true,
		`null`: true,
	} {
		if _, err := DecodeStatuses([]byte(body)); (err == nil) != ok {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestGoldenDLQProperties(t *testing.T) {
	host := message.Host{127, 0, 0, 1, 0, 0, 0x1f, 0x90}
	m := &message.Message{Topic: "%DLQ%g", StoreHost: host, PhysicalOffset: 0x100, StoreTimestamp: 1_700_000_100_000}
	m.SetProperty("user", "v")
	m.SetProperty(PropReason, "boom")
	if StableID(m) != goldenID0 || !DeadAt(m).Equal(time.UnixMilli(1_700_000_100_000)) || DeadAt(m).Location() != time.UTC {
		t.Fatalf("first copy: %s %v", StableID(m), DeadAt(m))
	}
	c := &message.Message{Topic: m.Topic, Properties: maps.Clone(m.Properties), StoreHost: host, PhysicalOffset: 0x900, StoreTimestamp: 1_700_000_200_000}
	MarkCarried(c, m)
	want := map[string]string{"user": "v", "DLQ_REASON": "boom", "DLQ_ID": goldenID0, "DLQ_DEAD_AT": "1700000100000", "UNIQ_KEY": "dlq:" + goldenID0}
	if !maps.Equal(c.Properties, want) {
		t.Fatalf("carried: %v", c.Properties)
	}
	if StableID(c) != goldenID0 || !DeadAt(c).Equal(time.UnixMilli(1_700_000_100_000)) {
		t.Fatalf("carried: %s %v", StableID(c), DeadAt(c))
	}
	// Carried again: the same id and death time.
	c2 := &message.Message{Topic: c.Topic, Properties: maps.Clone(c.Properties), StoreHost: host, PhysicalOffset: 0x1000}
	MarkCarried(c2, c)
	if !maps.Equal(c2.Properties, want) {
		t.Fatalf("carried again: %v", c2.Properties)
	}
	if Topic("g") != "%DLQ%g" {
		t.Fatal(Topic("g"))
	}
	if g, ok := GroupOf("%DLQ%g"); !ok || g != "g" {
		t.Fatal(g, ok)
	}
	if _, ok := GroupOf("%RETRY%g"); ok {
		t.Fatal("a retry topic is a DLQ")
	}
}

func TestGoldenDLQFilter(t *testing.T) {
	d := struct {
		OriginalTopic, Reason, Status string
		DeadAt                        time.Time
	}{OriginalTopic: "orders", Reason: "Boom Twice", DeadAt: goldenDLQAt, Status: Resent}
	for f, want := range map[Filter]bool{
		{}:                                           true,
		{OriginalTopic: "orders"}:                    true,
		{OriginalTopic: "other"}:                     false,
		{From: goldenDLQAt}:                          true,
		{From: goldenDLQAt.Add(1)}:                   false,
		{To: goldenDLQAt}:                            true,
		{To: goldenDLQAt.Add(-1)}:                    false,
		{ReasonContains: "boom t"}:                   true,
		{ReasonContains: "BOOM"}:                     true,
		{ReasonContains: "thrice"}:                   false,
		{Status: Resent}:                             true,
		{Status: Dead}:                               false,
		{OriginalTopic: "orders", Status: Discarded}: false,
	} {
		if got := f.Match(d.OriginalTopic, d.DeadAt, d.Reason, d.Status); got != want {
			t.Errorf("%+v: %v, want %v", f, got, want)
		}
	}
}

func TestGoldenDLQCursor(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1": 1, "2": 2, "7": 7, "9223372036854775807": 1<<63 - 1, "+3": 3, "007": 7} {
		if got, ok := ParseCursor(s); !ok || got != want {
			t.Errorf("%q: %d %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "x", "-1", "1.5", " 1", "99999999999999999999"} {
		if _, ok := ParseCursor(s); ok {
			t.Errorf("%q parses", s)
		}
	}
	if FormatCursor(12) != "12" {
		t.Error(FormatCursor(12))
	}
	for limit, want := range map[int]int{-1: 100, 0: 100, 1: 1, 500: 500, 501: 100} {
		if PageLimit(limit) != want {
			t.Errorf("limit %d: %d", limit, PageLimit(limit))
		}
	}
}
