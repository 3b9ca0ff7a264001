package registry

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server/broker/receipt"
)

func TestApply(t *testing.T) {
	s := NewState()
	before := s.Topics()
	for _, rec := range goldenRecords() {
		if err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if len(before) != 0 {
		t.Error("a map handed out was changed in place")
	}
	if _, ok := s.Topic("orders"); ok {
		t.Error("a deleted topic is still there")
	}
	if tomb, ok := s.Tombstone("orders"); !ok || tomb.CommitLogOffset != 100 || tomb.ScheduleOffsets != nil {
		t.Errorf("the tombstone record replaces the deletion's: %+v %v", tomb, ok)
	}
	if _, ok := s.Tombstone("never"); ok {
		t.Error("a nil tombstone is kept")
	}
	if _, ok := s.Group("g"); ok {
		t.Error("a deleted group is still there")
	}
	if g, ok := s.Group("hook"); !ok || g.Push == nil || !g.CreatedAt.Equal(goldenAt) {
		t.Errorf("group: %+v %v", g, ok)
	}
	if keys := s.Ring().Keys(); len(keys) != 1 || keys[0].ID != 1 {
		t.Errorf("keys: %+v", keys)
	}

	// Applying the same records again changes nothing.
	topics, tombs, groups := s.Topics(), s.Tombstones(), s.Groups()
	for _, rec := range goldenRecords() {
		if err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if !maps.EqualFunc(topics, s.Topics(), func(a, b TopicConfig) bool { return a == b }) || len(tombs) != len(s.Tombstones()) || len(groups) != len(s.Groups()) {
		t.Error("applying the records again changed the state")
	}

	// Unusable records are refused and change nothing.
	for _, rec := range []Record{
		{Kind: KindTopic}, {Kind: KindGroup}, {Kind: KindReceiptKey}, {Kind: "nonsense", Name: "hook"},
		{Kind: KindReceiptKey, Key: &receipt.Key{ID: 2, Secret: []byte("short")}},
	} {
		if err := s.Apply(rec); err == nil {
			t.Errorf("%+v applied", rec)
		}
	}
	if len(s.Groups()) != 1 || len(s.Ring().Keys()) != 1 {
		t.Error("a refused record changed the state")
	}
}

func TestCreatedAfterTheDeletion(t *testing.T) {
	s := NewState()
	now := goldenAt.Add(500 * time.Microsecond) // within goldenAt's millisecond
	if at := s.TopicCreatedAt("t", now); !at.Equal(goldenAt) || at.Location() != time.UTC {
		t.Errorf("a new name: %v", at)
	}
	if err := s.Apply(Record{Kind: KindTopicDeleted, Name: "t", Tomb: &Tombstone{DeletedAt: goldenAt}}); err != nil {
		t.Fatal(err)
	}
	if at := s.TopicCreatedAt("t", now); !at.Equal(goldenAt.Add(time.Millisecond)) {
		t.Errorf("created again in the deletion's millisecond: %v", at)
	}
	if at := s.TopicCreatedAt("t", goldenAt.Add(-time.Second)); !at.Equal(goldenAt.Add(time.Millisecond)) {
		t.Errorf("created again on a clock behind the deletion: %v", at)
	}
	if at := s.TopicCreatedAt("t", goldenAt.Add(time.Second)); !at.Equal(goldenAt.Add(time.Second)) {
		t.Errorf("created again later: %v", at)
	}

	if at := s.GroupCreatedAt("g", now); !at.Equal(goldenAt) {
		t.Errorf("a new group: %v", at)
	}
	// A group's deletion record holds no time: the request notes it.
	if err := s.Apply(Record{Kind: KindGroupDeleted, Name: "g"}); err != nil {
		t.Fatal(err)
	}
	if at := s.GroupCreatedAt("g", now); !at.Equal(goldenAt) {
		t.Errorf("applying a deletion noted a time: %v", at)
	}
	s.NoteGroupGone("g", now)
	if at := s.GroupCreatedAt("g", now); !at.Equal(goldenAt.Add(time.Millisecond)) {
		t.Errorf("created again in the deletion's millisecond: %v", at)
	}
	if at := s.GroupCreatedAt("h", now); !at.Equal(goldenAt) {
		t.Errorf("another name: %v", at)
	}
}

func TestRecordsMakeTheState(t *testing.T) {
	s := NewState()
	for _, rec := range goldenRecords() {
		if err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Apply(Record{Kind: KindTopic, Topic: &TopicConfig{Name: "t", Queues: 2}}); err != nil {
		t.Fatal(err)
	}
	recs := s.Records()
	kinds := make([]string, len(recs))
	for i, r := range recs {
		kinds[i] = r.Kind
	}
	slices.Sort(kinds)
	if want := []string{KindGroup, KindReceiptKey, KindTombstone, KindTopic}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	bodies, err := CarryBodies(recs)
	if err != nil || len(bodies) != 1 {
		t.Fatalf("%d bodies, %v", len(bodies), err)
	}
	c := NewState()
	decoded, err := DecodeBody(bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range decoded {
		if err := c.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, enc := range []func(*State, int64) ([]byte, error){(*State).EncodeTopics, (*State).EncodeGroups, (*State).EncodeReceiptKeys} {
		a, _ := enc(s, 3)
		b, _ := enc(c, 3)
		if string(a) != string(b) {
			t.Errorf("carried state differs:\n%s\n%s", a, b)
		}
	}
}

func TestCarryBodiesSplit(t *testing.T) {
	big := strings.Repeat("x", MaxCarryBytes/3)
	var recs []Record
	for i := range 7 {
		recs = append(recs, Record{Kind: KindTopic, Topic: &TopicConfig{Name: string(rune('a' + i)), Perm: big}})
	}
	bodies, err := CarryBodies(recs)
	if err != nil {
		t.Fatal(err)
	}
	// A record is over a third of the bound: two a body.
	if len(bodies) != 4 {
		t.Fatalf("%d bodies", len(bodies))
	}
	n := 0
	for _, b := range bodies {
		decoded, err := DecodeBody(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range decoded {
			if rec.Topic.Name != recs[n].Topic.Name {
				t.Fatalf("record %d is %s", n, rec.Topic.Name)
			}
			n++
		}
	}
	if n != len(recs) {
		t.Fatalf("%d records", n)
	}
}

func TestDecodeSnapshots(t *testing.T) {
	// A version 1 file is read but covers no record.
	topics, at, err := DecodeTopics([]byte(`{"old":{"Name":"old","Queues":3},"gone":{"Name":"gone","Deleted":{"CommitLogOffset":9}}}`))
	if err != nil || at != 0 || len(topics) != 2 {
		t.Fatalf("%v %d %v", topics, at, err)
	}
	s := NewState()
	s.InstallTopics(topics)
	if _, ok := s.Topic("gone"); ok {
		t.Error("a tombstone without queues made a topic")
	}
	if tomb, ok := s.Tombstone("gone"); !ok || tomb.CommitLogOffset != 9 {
		t.Errorf("tombstone: %+v %v", tomb, ok)
	}
	groups, at, err := DecodeGroups([]byte(`{"version":2,"metaOffset":7,"groups":{"g":{"Name":"g"}}}`))
	if err != nil || at != 7 || groups["g"].Name != "g" {
		t.Fatalf("%v %d %v", groups, at, err)
	}
	// What decoded before an error is kept; the file covers no record.
	groups, at, err = DecodeGroups([]byte(`{"version":2,"metaOffset":7,"groups":{"g":{"Name":7}}}`))
	if err == nil || at != 0 || len(groups) != 1 {
		t.Fatalf("%v %d %v", groups, at, err)
	}
	if _, _, err := DecodeTopics([]byte("{garbage")); err == nil {
		t.Error("garbage decodes")
	}
	// receipt-keys.json never had a version 1.
	keys, at, err := DecodeReceiptKeys([]byte(`[{"id":1,"secret":"c2hvcnQ=","createdMs":1}]`))
	if err != nil || at != 0 || len(keys) != 0 {
		t.Fatalf("%v %d %v", keys, at, err)
	}
	keys, at, err = DecodeReceiptKeys([]byte(`{"version":2,"metaOffset":4,"keys":[{"id":1,"secret":"c2hvcnQ=","createdMs":1}]}`))
	if err != nil || at != 4 || len(keys) != 1 {
		t.Fatalf("%v %d %v", keys, at, err)
	}
	if err := s.InstallKey(keys[0]); err == nil || s.Ring() != nil {
		t.Errorf("a short secret installed: %v", err)
	}
}
