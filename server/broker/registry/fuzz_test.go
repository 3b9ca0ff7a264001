package registry

import (
	"testing"
)

// FuzzDecodeBody: META records are read back from the CommitLog (at open,
// on a follower); decoding arbitrary bytes never panics, applying what
// decodes never panics, and decoded records encode to a body that decodes
// and encodes to the same text.
func FuzzDecodeBody(f *testing.F) {
	for _, rec := range goldenRecords() {
		body, err := EncodeBody(rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Add([]byte(`[{"kind":"topic"},{"kind":"nonsense"},{"kind":"group","group":{"Name":"late","CreatedAt":"2023-11-14T22:13:21+01:00"}}]`))
	f.Add([]byte(`[{"kind":"receipt-key","key":{"id":3,"secret":"c2hvcnQ=","createdMs":1}}]`))
	f.Add([]byte(`{"kind":"group","group":{"Name":"x"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		recs, err := DecodeBody(body)
		if err != nil {
			return
		}
		s := NewState()
		for _, rec := range recs {
			_ = s.Apply(rec)
		}
		once, err := EncodeBody(recs...)
		if err != nil {
			t.Fatalf("decoded records do not encode: %v", err)
		}
		again, err := DecodeBody(once)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded records do not decode: %v (%d of %d)", err, len(again), len(recs))
		}
		twice, err := EncodeBody(again...)
		if err != nil || string(twice) != string(once) {
			t.Fatalf("round trip changed the records:\n%s\n%s (%v)", once, twice, err)
		}
	})
}

// FuzzDecodeSnapshots: the snapshot files are read back from disk
// (damaged, truncated, from another version); decoding arbitrary bytes as
// any of the three never panics, whatever decodes can be installed, and
// the installed state encodes to a file that decodes to the same offset
// and installs to a state that encodes to the same file.
func FuzzDecodeSnapshots(f *testing.F) {
	s := NewState()
	for _, rec := range goldenRecords() {
		if err := s.Apply(rec); err != nil {
			f.Fatal(err)
		}
	}
	for _, enc := range []func(*State, int64) ([]byte, error){(*State).EncodeTopics, (*State).EncodeGroups, (*State).EncodeReceiptKeys} {
		b, err := enc(s, 12)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"old":{"Name":"old","Queues":3},"gone":{"Name":"","Queues":1,"Deleted":{"CommitLogOffset":9}}}`))
	f.Add([]byte(`{"g1":{"Name":"g1","ConsumeMode":"clustering","RetryMaxTimes":16}}`))
	f.Add([]byte(`{"version":2,"metaOffset":5,"groups":{"g":{"Name":7}}}`))
	f.Add([]byte(`[{"id":1,"secret":"c2hvcnQ=","createdMs":1}]`))
	f.Add([]byte(`{"version":"2"}`))
	f.Add([]byte("{garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		type file struct {
			name    string
			install func([]byte) (*State, int64, error)
			encode  func(*State, int64) ([]byte, error)
		}
		files := []file{
			{TopicsFile, func(b []byte) (*State, int64, error) {
				v, at, err := DecodeTopics(b)
				s := NewState()
				s.InstallTopics(v)
				return s, at, err
			}, (*State).EncodeTopics},
			{GroupsFile, func(b []byte) (*State, int64, error) {
				v, at, err := DecodeGroups(b)
				s := NewState()
				s.InstallGroups(v)
				return s, at, err
			}, (*State).EncodeGroups},
			{ReceiptKeysFile, func(b []byte) (*State, int64, error) {
				v, at, err := DecodeReceiptKeys(b)
				s := NewState()
				for _, k := range v {
					_ = s.InstallKey(k)
				}
				return s, at, err
			}, (*State).EncodeReceiptKeys},
		}
		for _, fl := range files {
			s, at, err := fl.install(data) // what decoded is installed even on an error
			if err != nil && at != 0 {
				t.Fatalf("%s: an unreadable file covers offset %d", fl.name, at)
			}
			once, err := fl.encode(s, at)
			if err != nil {
				t.Fatalf("%s: an installed state does not encode: %v", fl.name, err)
			}
			s2, at2, err := fl.install(once)
			if err != nil || at2 != at {
				t.Fatalf("%s: an encoded state decodes to offset %d of %d: %v\n%s", fl.name, at2, at, err, once)
			}
			twice, err := fl.encode(s2, at)
			if err != nil || string(twice) != string(once) {
				t.Fatalf("%s: round trip changed the file:\n%s\n%s", fl.name, once, twice)
			}
		}
	})
}
