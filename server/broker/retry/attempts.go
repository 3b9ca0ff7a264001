package retry

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/quote"
)

// The attempt history: the property ATTEMPTS of a retry copy or a dead
// letter, a JSON array of Attempt, holds the newest failed deliveries,
// each reason cut to MaxStoredReasonBytes, in at most MaxAttemptsBytes;
// older attempts are folded into one leading OutcomeOmitted entry with
// their count and the time of the first failure (Bound). Cuts end in a
// marker that says how long the text was (TruncateText).
const (
	MaxAttemptsKept      = 32
	MaxAttemptsBytes     = 8 << 10
	MaxStoredReasonBytes = 512
)

// PropAttempts is the property holding a retry copy's or a dead
// letter's attempt history.
const PropAttempts = "ATTEMPTS"

// An Attempt's Outcome.
const (
	OutcomeNack    = "nack"
	OutcomeExpired = "expired"
	// OutcomeOmitted marks the leading history entry that stands for
	// attempts no longer kept: Count of them, the first at At.
	OutcomeOmitted = "omitted"
)

// Attempt is one failed delivery of a message (or, OutcomeOmitted, the
// ones no longer kept).
type Attempt struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`          // "nack", "expired", or "omitted" for the entry standing for older attempts
	Client  string    `json:"client,omitempty"` // the consumer (X-Mqgate-Client-Id) that failed it
	Reason  string    `json:"reason,omitempty"`
	Level   int       `json:"delayLevel"`        // the level asked for (-1 = straight to the DLQ, 0 = the group's policy)
	DelayMs int64     `json:"delayMs,omitempty"` // the timer delay the retry waited (a nack's delayMs, or the policy's)
	Count   int       `json:"count,omitempty"`   // for "omitted": how many attempts it stands for
}

// NewAttempt is a failed delivery as the history keeps it: reason cut to
// MaxStoredReasonBytes, client to maxClient bytes, the time in UTC. The
// request that records it chose at; nothing here reads the clock.
func NewAttempt(at time.Time, outcome, client, reason string, level, maxClient int) Attempt {
	return Attempt{At: at.UTC(), Outcome: outcome, Client: quote.CutUTF8(client, maxClient),
		Reason: TruncateText(reason, MaxStoredReasonBytes), Level: level}
}

// ParseAttempts reads a history; a damaged one reads as none (it is
// bookkeeping, never a reason to refuse a message).
func ParseAttempts(s string) []Attempt {
	var out []Attempt
	if s != "" {
		_ = json.Unmarshal([]byte(s), &out)
	}
	return out
}

// Bound keeps the newest attempts of history within MaxAttemptsKept
// entries and MaxAttemptsBytes of JSON, folding the older ones into a
// leading OutcomeOmitted entry, and returns the encoding.
func Bound(history []Attempt) string {
	var omitted *Attempt
	if len(history) > 0 && history[0].Outcome == OutcomeOmitted {
		// Of an omitted entry only its first time and count mean anything.
		o := Attempt{At: history[0].At, Outcome: OutcomeOmitted, Count: max(history[0].Count, 0)}
		omitted, history = &o, history[1:]
	}
	fold := func(n int) {
		if n == 0 {
			return
		}
		if omitted == nil {
			omitted = &Attempt{At: history[0].At, Outcome: OutcomeOmitted}
		}
		omitted.Count += n
		history = history[n:]
	}
	fold(max(len(history)-(MaxAttemptsKept-1), 0))
	for {
		out := history
		if omitted != nil {
			omitted.Reason = fmt.Sprintf("%d earlier failures not kept", omitted.Count)
			out = append([]Attempt{*omitted}, history...)
		}
		b, _ := json.Marshal(out)
		if len(b) <= MaxAttemptsBytes || len(history) == 0 {
			return string(b)
		}
		fold(1)
	}
}

// TruncateText cuts s to at most n bytes (never inside a UTF-8 sequence),
// ending in a marker that says how long it was.
func TruncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	marker := fmt.Sprintf("… [truncated: %d bytes]", len(s))
	return quote.CutUTF8(s, max(n-len(marker), 0)) + marker
}
