package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"pgregory.net/rapid"
)

// TestPullBatchRoundTrip: the binary pull response carries, per message,
// exactly the JSON response's metadata (a Message without body and
// bodyEncoding, after the same JSON round trip) and the body's bytes as
// stored, whatever they hold; DecodePullBatch reads it back.
func TestPullBatchRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		msgs := drawMessages(t)
		rec := httptest.NewRecorder()
		writePullBatch(rec, msgs)
		if ct := rec.Header().Get("Content-Type"); ct != ContentTypeBatch {
			t.Fatalf("Content-Type %q", ct)
		}
		got, err := DecodePullBatch(rec.Body.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(msgs) {
			t.Fatalf("%d messages, want %d", len(got), len(msgs))
		}
		for i, m := range msgs {
			b, err := json.Marshal(ToPulledMessage(m))
			if err != nil {
				t.Fatal(err)
			}
			var want PulledMessage
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			want.Body, want.BodyEncoding = "", ""
			if !jsonEqual(got[i].Message, want) {
				t.Fatalf("message %d: metadata %+v, want %+v", i, got[i].Message, want)
			}
			if !bytes.Equal(got[i].Body, m.Body) {
				t.Fatalf("message %d: body %q, want %q", i, got[i].Body, m.Body)
			}
		}
	})
}

func jsonEqual(a, b PulledMessage) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestDecodePullBatchRefusesBadFraming: truncated, padded and
// over-announcing responses are errors, not panics or short reads.
func TestDecodePullBatchRefusesBadFraming(t *testing.T) {
	rec := httptest.NewRecorder()
	writePullBatch(rec, nil)
	empty := rec.Body.Bytes()
	if got, err := DecodePullBatch(empty); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v %v", got, err)
	}
	one := binary.BigEndian.AppendUint32(nil, 1)
	one = binary.BigEndian.AppendUint32(one, 2)
	one = append(one, "{}"...)
	one = binary.BigEndian.AppendUint32(one, 3)
	one = append(one, "abc"...)
	if got, err := DecodePullBatch(one); err != nil || string(got[0].Body) != "abc" {
		t.Fatalf("one message: %v %v", got, err)
	}
	for name, b := range map[string][]byte{
		"no count":            nil,
		"short count":         {0, 0},
		"more announced":      binary.BigEndian.AppendUint32(nil, 1<<30),
		"truncated body":      one[:len(one)-1],
		"trailing bytes":      append(append([]byte(nil), one...), 0),
		"metadata not JSON":   append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), 2), "{x\x00\x00\x00\x00"...),
		"length past the end": append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), 1<<31), make([]byte, 8)...),
	} {
		if _, err := DecodePullBatch(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodePullBatch: any bytes decode or fail without panicking; what
// decodes holds bodies that lie inside the input.
func FuzzDecodePullBatch(f *testing.F) {
	rec := httptest.NewRecorder()
	writePullBatch(rec, nil)
	f.Add(rec.Body.Bytes())
	f.Add([]byte("\x00\x00\x00\x01\x00\x00\x00\x02{}\x00\x00\x00\x03abc"))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodePullBatch(b)
		if err != nil {
			return
		}
		total := 4
		for _, m := range msgs {
			total += 8 + len(m.Body)
		}
		if total > len(b) {
			t.Fatalf("decoded %d bytes of bodies and frames from %d", total, len(b))
		}
	})
}
