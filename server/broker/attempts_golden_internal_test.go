package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/retry"
)

// newAttempt is a failed delivery as the history keeps it, with the
// broker's bound on a client id (what package consume records of a nack
// and an expiry: retry.NewAttempt with Config.MaxClientBytes).
func newAttempt(at time.Time, outcome, client, reason string, level int) Attempt {
	return retry.NewAttempt(at, outcome, client, reason, level, MaxClientIDBytes)
}

// The attempt history (property ATTEMPTS), pinned with the code from
// before it moved to the retry family: an attempt as a nack or an expiry
// records it (reason and client cut to their stored sizes), the encoding
// of a short history, of one past the entry bound and of one past the
// byte bound (the older attempts folded into a leading "omitted" entry),
// folding again into an existing omitted entry, and a damaged history
// read as none.
func TestAttemptHistoryGolden(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.FixedZone("X", 3600))
	a := newAttempt(at, outcomeNack, strings.Repeat("c", MaxClientIDBytes+10), strings.Repeat("r", 600), 3)
	require.Equal(t, "2026-12-06 11:00:00 +0000 UTC", a.At.String())
	require.Len(t, a.Client, MaxClientIDBytes)
	require.Len(t, a.Reason, 512)
	require.True(t, strings.HasSuffix(a.Reason, "… [truncated: 600 bytes]"), a.Reason)

	short := []Attempt{newAttempt(at, outcomeNack, "c1", "bad", 3), newAttempt(at.Add(time.Second), outcomeExpired, "", "lease expired without ack", 0)}
	short[1].DelayMs = 250
	require.Equal(t, `[{"at":"2026-12-06T11:00:00Z","outcome":"nack","client":"c1","reason":"bad","delayLevel":3},`+
		`{"at":"2026-12-06T11:00:01Z","outcome":"expired","reason":"lease expired without ack","delayLevel":0,"delayMs":250}]`, boundAttempts(short))

	var many []Attempt
	for i := range 40 {
		many = append(many, newAttempt(at.Add(time.Duration(i)*time.Second), outcomeNack, "c", fmt.Sprintf("r%d", i), 1))
	}
	enc := boundAttempts(many)
	got := parseAttempts(enc)
	require.Len(t, got, 32)
	require.Equal(t, Attempt{At: at.UTC(), Outcome: outcomeOmitted, Reason: "9 earlier failures not kept", Count: 9}, got[0])
	require.Equal(t, "r9", got[1].Reason)
	require.Equal(t, "r39", got[31].Reason)

	// Folding again keeps the omitted entry's first time and adds to it.
	got = append(got, newAttempt(at.Add(time.Hour), outcomeExpired, "c", "r40", 0))
	again := parseAttempts(boundAttempts(got))
	require.Equal(t, Attempt{At: at.UTC(), Outcome: outcomeOmitted, Reason: "10 earlier failures not kept", Count: 10}, again[0])
	require.Equal(t, "r10", again[1].Reason)

	var big []Attempt
	for i := range 30 {
		big = append(big, newAttempt(at.Add(time.Duration(i)*time.Second), outcomeNack, "c", fmt.Sprintf("%03d%s", i, strings.Repeat("x", 600)), 1))
	}
	enc = boundAttempts(big)
	require.LessOrEqual(t, len(enc), 8<<10)
	got = parseAttempts(enc)
	require.Equal(t, outcomeOmitted, got[0].Outcome)
	require.Equal(t, 30, got[0].Count+len(got)-1, "every attempt kept or counted")
	require.Equal(t, fmt.Sprintf("%d earlier failures not kept", got[0].Count), got[0].Reason)
	require.True(t, strings.HasPrefix(got[len(got)-1].Reason, "029"))
	require.Len(t, got, 14)

	require.Nil(t, parseAttempts(`[{"at":`))
	require.Nil(t, parseAttempts(""))
}
