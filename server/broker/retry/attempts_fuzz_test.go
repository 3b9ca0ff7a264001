package retry

import (
	"strings"
	"testing"
	"time"
)

// FuzzAttempts: a stored attempt history is read back from a message's
// properties, which a damaged or foreign record can fill with anything.
// ParseAttempts never panics, and Bound of whatever it read stays within
// MaxAttemptsBytes and MaxAttemptsKept entries, counting every attempt it
// folds.
func FuzzAttempts(f *testing.F) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	f.Add(Bound([]Attempt{NewAttempt(at, OutcomeNack, "c", "bad", 3, 128)}))
	f.Add(`[{"at":"2026-12-06T11:00:00Z","outcome":"omitted","client":"` + strings.Repeat("x", 9000) + `","count":3}]`)
	f.Add(`[{"at":"2026-12-06T11:00:00Z","outcome":"nack","reason":"` + strings.Repeat("r", 9000) + `"}]`)
	f.Add(`[{"at":`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, s string) {
		h := ParseAttempts(s)
		out := ParseAttempts(Bound(h))
		if b := Bound(h); len(b) > MaxAttemptsBytes {
			t.Fatalf("%d bytes: %.200s", len(b), b)
		}
		if len(out) > MaxAttemptsKept {
			t.Fatalf("%d entries", len(out))
		}
	})
}
