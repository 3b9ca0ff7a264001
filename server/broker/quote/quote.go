// Package quote quotes a client's value for an error message, cut so that
// a huge value is never echoed back whole. It is the broker's rule
// (broker.QuoteValue) in a leaf that the broker's family packages (retry,
// txn), which import nothing of the broker, can share.
package quote

import (
	"fmt"
	"unicode/utf8"
)

// Max is how many bytes of a value an error message shows.
const Max = 64

// Value quotes s, cut to Max bytes (at a rune boundary) with its length
// said when it was longer.
func Value(s string) string {
	if len(s) <= Max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", CutUTF8(s, Max), len(s))
}

// CutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
