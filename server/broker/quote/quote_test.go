package quote

import (
	"strings"
	"testing"
)

func TestValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", `"abc"`},
		{strings.Repeat("x", 64), `"` + strings.Repeat("x", 64) + `"`},
		{strings.Repeat("x", 65), `"` + strings.Repeat("x", 64) + `"… (65 bytes)`},
		// A cut never splits a rune: the 3-byte "€" at bytes 63..65 goes whole.
		{strings.Repeat("x", 63) + "€", `"` + strings.Repeat("x", 63) + `"… (66 bytes)`},
	} {
		if got := Value(c.in); got != c.want {
			t.Errorf("Value(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
