package dlq

import (
	"strconv"
	"strings"
	"time"
)

// Filter selects dead letters; zero fields match everything.
type Filter struct {
	OriginalTopic  string
	From, To       time.Time // DeadAt range, inclusive
	ReasonContains string    // case-insensitive
	Status         string    // "" = any
}

// Match reports whether a dead letter of original topic originalTopic,
// dead at deadAt for reason, now in status, is selected by f.
func (f Filter) Match(originalTopic string, deadAt time.Time, reason, status string) bool {
	switch {
	case f.OriginalTopic != "" && originalTopic != f.OriginalTopic:
	case !f.From.IsZero() && deadAt.Before(f.From):
	case !f.To.IsZero() && deadAt.After(f.To):
	case f.ReasonContains != "" && !strings.Contains(strings.ToLower(reason), strings.ToLower(f.ReasonContains)):
	case f.Status != "" && status != f.Status:
	default:
		return true
	}
	return false
}

// The size of a listing's page.
const (
	MaxPage     = 500
	DefaultPage = 100
)

// PageLimit is the page size a listing asked for limit gets: DefaultPage
// when limit is not in 1..MaxPage.
func PageLimit(limit int) int {
	if limit <= 0 || limit > MaxPage {
		return DefaultPage
	}
	return limit
}

// A listing's cursor is the queue offset in the group's dead-letter topic
// to go on from, in decimal; "" is the beginning on the way in and the
// end on the way out.

// ParseCursor decodes a cursor other than "" (ok false: not one).
func ParseCursor(s string) (offset int64, ok bool) {
	c, err := strconv.ParseInt(s, 10, 64)
	if err != nil || c < 0 {
		return 0, false
	}
	return c, true
}

// FormatCursor is the cursor of queue offset offset.
func FormatCursor(offset int64) string { return strconv.FormatInt(offset, 10) }
