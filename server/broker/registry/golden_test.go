package registry

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/server/broker/retry"
)

// The family's formats, pinned byte for byte as the code before the move
// wrote them (server/broker's registry_golden_internal_test.go pins the
// same through the broker's requests, and how the files are read at
// open): a record body of each kind and the three snapshot files.

var (
	goldenAt     = time.UnixMilli(1_700_000_000_123).UTC()
	goldenSecret = []byte("0123456789abcdef0123456789abcdef")
)

// goldenRecords writes one record of every kind.
func goldenRecords() []Record {
	tomb := Tombstone{DeletedAt: goldenAt, CommitLogOffset: 2381, ScheduleOffsets: []int64{0, 7}}
	return []Record{
		{Kind: KindReceiptKey, Key: &receipt.Key{ID: 1, Secret: goldenSecret, CreatedMs: goldenAt.UnixMilli()}},
		{Kind: KindTopic, Topic: &TopicConfig{Name: "orders", Queues: 4, RetentionHours: 48, Perm: "rw", CreatedAt: goldenAt}},
		{Kind: KindGroup, Group: &GroupConfig{Name: "g", ConsumeMode: "clustering", RetryMaxTimes: 5, Invisible: 30 * time.Second,
			Subscriptions: []Subscription{{Topic: "orders", TagExpression: "a || b"}, {Topic: "audit", SQL: "x > 1"}},
			RetryPolicy:   &retry.Policy{Backoff: "exponential", Initial: time.Second, Max: time.Minute, Jitter: 0.25},
			ConsumeFrom:   "last", InstanceIdle: time.Hour, CreatedAt: goldenAt}},
		{Kind: KindGroup, Group: &GroupConfig{Name: "hook", ConsumeMode: "clustering", RetryMaxTimes: 16,
			Push:      &PushConfig{URL: "https://example.com/hook", Secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", Mode: "json", MaxConcurrency: 8, Timeout: 15 * time.Second},
			CreatedAt: goldenAt}},
		{Kind: KindGroupDeleted, Name: "g"},
		{Kind: KindTopicDeleted, Name: "orders", Tomb: &tomb},
		{Kind: KindTombstone, Name: "orders", Tomb: &Tombstone{DeletedAt: goldenAt, CommitLogOffset: 100}},
		{Kind: KindTombstone, Name: "never"},
	}
}

func TestGoldenRecordBodies(t *testing.T) {
	const at = `"2023-11-14T22:13:20.123Z"`
	secret := base64.StdEncoding.EncodeToString(goldenSecret)
	want := []string{
		`[{"kind":"receipt-key","key":{"id":1,"secret":"` + secret + `","createdMs":1700000000123}}]`,
		`[{"kind":"topic","topic":{"Name":"orders","Queues":4,"RetentionHours":48,"Perm":"rw","CreatedAt":` + at + `}}]`,
		`[{"kind":"group","group":{"Name":"g","ConsumeMode":"clustering","Orderly":false,"RetryMaxTimes":5,"Invisible":30000000000,` +
			`"Subscriptions":[{"Topic":"orders","TagExpression":"a || b"},{"Topic":"audit","TagExpression":"","SQL":"x \u003e 1"}],"ConsumeFrom":"last",` +
			`"RetryPolicy":{"Backoff":"exponential","Initial":1000000000,"Max":60000000000,"Jitter":0.25},"InstanceIdle":3600000000000,"CreatedAt":` + at + `}}]`,
		`[{"kind":"group","group":{"Name":"hook","ConsumeMode":"clustering","Orderly":false,"RetryMaxTimes":16,"Invisible":0,"Subscriptions":null,` +
			`"Push":{"URL":"https://example.com/hook","Secret":"whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0","Mode":"json","MaxConcurrency":8,"Timeout":15000000000,"Disabled":false},` +
			`"CreatedAt":` + at + `}}]`,
		`[{"kind":"group-deleted","name":"g"}]`,
		`[{"kind":"topic-deleted","name":"orders","tomb":{"DeletedAt":` + at + `,"CommitLogOffset":2381,"ScheduleOffsets":[0,7]}}]`,
		`[{"kind":"tombstone","name":"orders","tomb":{"DeletedAt":` + at + `,"CommitLogOffset":100,"ScheduleOffsets":null}}]`,
		`[{"kind":"tombstone","name":"never"}]`,
	}
	recs := goldenRecords()
	for i, rec := range recs {
		body, err := EncodeBody(rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != want[i] {
			t.Errorf("record %d:\n got %s\nwant %s", i, body, want[i])
		}
		back, err := DecodeBody(body)
		if err != nil || len(back) != 1 {
			t.Fatalf("record %d decodes to %v, %v", i, back, err)
		}
		again, _ := EncodeBody(back...)
		if string(again) != want[i] {
			t.Errorf("record %d decoded and encoded again:\n got %s\nwant %s", i, again, want[i])
		}
	}
	// A message holds one change's records, in order.
	both, err := EncodeBody(recs[4], recs[7])
	if err != nil || string(both) != `[{"kind":"group-deleted","name":"g"},{"kind":"tombstone","name":"never"}]` {
		t.Errorf("two records: %s %v", both, err)
	}
}

func TestGoldenSnapshotFiles(t *testing.T) {
	s := NewState()
	for _, rec := range goldenRecords() {
		if err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Apply(Record{Kind: KindTopic, Topic: &TopicConfig{Name: "orders", Queues: 1, Perm: "r", CreatedAt: goldenAt.Add(time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	topics, _ := s.EncodeTopics(12)
	groups, _ := s.EncodeGroups(12)
	keys, _ := s.EncodeReceiptKeys(12)
	wantTopics := `{
  "version": 2,
  "metaOffset": 12,
  "topics": {
    "orders": {
      "Name": "orders",
      "Queues": 1,
      "RetentionHours": 0,
      "Perm": "r",
      "CreatedAt": "2023-11-14T22:13:20.124Z",
      "Deleted": {
        "DeletedAt": "2023-11-14T22:13:20.123Z",
        "CommitLogOffset": 100,
        "ScheduleOffsets": null
      }
    }
  }
}`
	wantGroups := `{
  "version": 2,
  "metaOffset": 12,
  "groups": {
    "hook": {
      "Name": "hook",
      "ConsumeMode": "clustering",
      "Orderly": false,
      "RetryMaxTimes": 16,
      "Invisible": 0,
      "Subscriptions": null,
      "Push": {
        "URL": "https://example.com/hook",
        "Secret": "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0",
        "Mode": "json",
        "MaxConcurrency": 8,
        "Timeout": 15000000000,
        "Disabled": false
      },
      "CreatedAt": "2023-11-14T22:13:20.123Z"
    }
  }
}`
	wantKeys := `{
  "version": 2,
  "metaOffset": 12,
  "keys": [
    {
      "id": 1,
      "secret": "` + base64.StdEncoding.EncodeToString(goldenSecret) + `",
      "createdMs": 1700000000123
    }
  ]
}`
	for _, c := range []struct{ name, got, want string }{
		{TopicsFile, string(topics), wantTopics}, {GroupsFile, string(groups), wantGroups}, {ReceiptKeysFile, string(keys), wantKeys},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got, c.want)
		}
	}

	// An empty registry's files (a new data dir's first write).
	empty := NewState()
	topics, _ = empty.EncodeTopics(0)
	groups, _ = empty.EncodeGroups(0)
	keys, _ = empty.EncodeReceiptKeys(0)
	if string(topics) != "{\n  \"version\": 2,\n  \"metaOffset\": 0,\n  \"topics\": {}\n}" ||
		string(groups) != "{\n  \"version\": 2,\n  \"metaOffset\": 0,\n  \"groups\": {}\n}" ||
		string(keys) != "{\n  \"version\": 2,\n  \"metaOffset\": 0,\n  \"keys\": null\n}" {
		t.Errorf("empty:\n%s\n%s\n%s", topics, groups, keys)
	}
}
