package retention_test

import (
	"encoding/json"
	"testing"

	"github.com/mqgate/mqgate/server/broker/retention"
)

// FuzzDecode: cut records are read back from the CommitLog (at open, on a
// follower); decoding arbitrary bytes never panics, and what decodes
// encodes to a body that decodes to the same.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"cut":1048576,"reason":"expired","at":1700000000123}`))
	f.Add([]byte(`{"cut":-1,"reason":"disk-pressure"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"cut":1e30}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := retention.Decode(data)
		if err != nil {
			return
		}
		body, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, err := retention.Decode(body)
		if err != nil || again != rec {
			t.Fatalf("round trip: %+v, then %+v (%v)", rec, again, err)
		}
	})
}
