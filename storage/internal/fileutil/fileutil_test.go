package fileutil

import (
	"math"
	"testing"
)

func TestNumberedNames(t *testing.T) {
	for _, n := range []int64{0, 1, 1 << 30, math.MaxInt64} {
		name := NumberedName(n)
		if len(name) != NumberedNameWidth {
			t.Fatalf("NumberedName(%d) = %q: not %d digits", n, name, NumberedNameWidth)
		}
		if got, ok := ParseNumberedName(name); !ok || got != n {
			t.Fatalf("ParseNumberedName(%q) = %d, %v", name, got, ok)
		}
	}
	for _, bad := range []string{"", "1", "0000000000000000000a", "-0000000000000000001", "+0000000000000000001",
		"99999999999999999999", "000000000000000000001", "00000000000000000000.tmp"} {
		if n, ok := ParseNumberedName(bad); ok {
			t.Fatalf("ParseNumberedName(%q) = %d, accepted", bad, n)
		}
	}
}
