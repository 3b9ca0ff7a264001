package filter

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCompile: no expression makes Compile or Match panic (nor recurse
// without bound: the depth limit), an expression over the limits is
// refused, every error names a position inside the expression (or just
// after it), and evaluation with any property value gives one of the four
// outcomes, Match agreeing with it.
func FuzzCompile(f *testing.F) {
	seeds := []string{
		`a = 'x'`, `a <> 3`, `a > 5.0 AND b < -2`, `a BETWEEN 1 AND 10`, `a NOT BETWEEN -1.5 AND 2e3`,
		`a IN ('x', 'y''z')`, `a NOT IN ('1')`, `a IS NULL OR b IS NOT NULL`, `NOT (a = 1) OR TRUE`,
		`TAGS = 'tag' AND "order-id" = '7'`, `(a = 1) = FALSE`, `NULL IS NULL`, `a > b`, `5L < a`,
		"a = 1 -- c\nOR b = 2 /* d */", `a = 9223372036854775807`, `.5e-3 > a`, `((((a = 1))))`,
		`NOT NOT NOT TRUE`, `- - 5 = a`, ``, `a`, `a =`, `NOT a = 'x'`, `a = 'x`, `a IN ()`, `a != 1`,
		`a BETWEEN 5 AND 1`, `"`, `/*`, `'`, "\xff", `a = 007`, `a = 1e999`, `(a = 1`,
		strings.Repeat("(", MaxDepth+1) + "a=1" + strings.Repeat(")", MaxDepth+1),
		strings.Repeat("NOT ", MaxDepth+1) + "TRUE",
	}
	values := []string{"1", "-7", "3.5", "abc", "NaN", "", " 2 ", "true", "9223372036854775808", "1e999"}
	for i, s := range seeds {
		f.Add(s, values[i%len(values)])
	}
	f.Fuzz(func(t *testing.T, src, val string) {
		e, err := Compile(src)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("%q: error %T %v is not an *Error", src, err, err)
			}
			if fe.Position < 1 || fe.Position > utf8.RuneCountInString(src)+1 || fe.Msg == "" {
				t.Fatalf("%q: position %d of %d characters, message %q", src, fe.Position, utf8.RuneCountInString(src), fe.Msg)
			}
			return
		}
		if len(src) > MaxBytes || !utf8.ValidString(src) {
			t.Fatalf("%q: compiled, but over the limit or not UTF-8", src)
		}
		m := map[string]string{}
		for _, r := range e.Properties() {
			if r.Position < 1 || r.Position > utf8.RuneCountInString(src) {
				t.Fatalf("%q: property %q at position %d", src, r.Name, r.Position)
			}
			m[r.Name] = val
		}
		for _, props := range []map[string]string{m, nil} {
			v := e.eval(props)
			switch v.k {
			case kBool, kNull, kError:
			default:
				t.Fatalf("%q over %v: the expression evaluated to a value of kind %d", src, props, v.k)
			}
			if e.Match(props) != (v.k == kBool && v.b) {
				t.Fatalf("%q over %v: Match disagrees with the evaluation", src, props)
			}
		}
		// The integer reading is Java's Long.parseLong, which for decimal
		// strings is strconv's.
		n, ok := parseLong(val)
		want, werr := strconv.ParseInt(val, 10, 64)
		if ok != (werr == nil) || ok && n != want {
			t.Fatalf("parseLong(%q) = %d, %v; strconv says %d, %v", val, n, ok, want, werr)
		}
	})
}
