package filter

import (
	"math"
	"strconv"
	"strings"
)

// kind is the type of a runtime value.
type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kString
	// kError: the evaluation failed (a property that is not the number it
	// is compared with). It propagates to the top and never matches.
	kError
)

// value is what an expression evaluates to; it is passed by value, so
// evaluating allocates nothing.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	vNull  = value{k: kNull}
	vTrue  = value{k: kBool, b: true}
	vFalse = value{k: kBool}
	vErr   = value{k: kError}
)

func boolOf(b bool) value {
	if b {
		return vTrue
	}
	return vFalse
}

// parseLong reads s as Java's Long.parseLong does: an optional sign and
// ASCII digits, within int64.
func parseLong(s string) (int64, bool) {
	i, neg := 0, false
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		neg, i = s[0] == '-', 1
	}
	if i == len(s) {
		return 0, false
	}
	const limit = uint64(1) << 63
	var n uint64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if !neg && n == limit {
		return 0, false
	}
	if neg {
		return -int64(n), true // n == limit gives math.MinInt64
	}
	return int64(n), true
}

// parseDouble reads s as Java's Double.parseDouble does for decimal
// strings: surrounding white space (characters up to U+0020) ignored, an
// optional sign, "NaN", "Infinity", or digits with an optional fraction
// and exponent and an optional f, F, d or D suffix. Overflow is infinite,
// as in Java. (Java's hexadecimal floating literals are not read.)
func parseDouble(s string) (float64, bool) {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	t := s[i:j]
	body := t
	if len(body) > 0 && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	switch body {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if t[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if n := len(t); n > 0 && strings.IndexByte("fFdD", t[n-1]) >= 0 {
		t, body = t[:n-1], body[:len(body)-1]
	}
	if !decimalSyntax(body) {
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false // not reached: the syntax was checked
	}
	return f, true
}

// decimalSyntax reports whether s is digits [. digits] [exponent] with at
// least one digit before the exponent.
func decimalSyntax(s string) bool {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && isDigit(s[i]) {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// javaBool is Java's Boolean.valueOf(String).
func javaBool(s string) bool { return len(s) == 4 && strings.EqualFold(s, "true") }

// cmpInt compares two integers.
func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloat is Java's Double.compare: NaN is above everything (and equal
// to itself), -0.0 is below 0.0.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	sa, sb := math.Signbit(a), math.Signbit(b)
	switch {
	case sa == sb:
		return 0
	case sa:
		return -1
	}
	return 1
}

// holds applies a comparison operator to the result of a comparison.
func holds(op tokKind, c int) bool {
	switch op {
	case tEq:
		return c == 0
	case tNe:
		return c != 0
	case tLt:
		return c < 0
	case tLe:
		return c <= 0
	case tGt:
		return c > 0
	case tGe:
		return c >= 0
	}
	return false
}

// compareOrder compares two non-NULL operands of < <= > >= (numbers or
// property strings). ok is false when a string is not a number.
func compareOrder(l, r value) (c int, ok bool) {
	if l.k == kString && r.k == kString {
		a, ok1 := parseDouble(l.s)
		b, ok2 := parseDouble(r.s)
		if !ok1 || !ok2 {
			return 0, false
		}
		return cmpFloat(a, b), true
	}
	return compareMixed(l, r)
}

// compareMixed compares two non-NULL values of different or equal kinds
// the way RocketMQ converts them: a string takes the type of the number
// (or boolean) it meets, an integer meeting a double becomes a double.
// ok is false when a string is not such a number. A boolean and a number
// are never equal (c != 0); they are never ordered (the parser refuses
// it).
func compareMixed(l, r value) (c int, ok bool) {
	switch {
	case l.k == r.k:
		switch l.k {
		case kInt:
			return cmpInt(l.i, r.i), true
		case kFloat:
			return cmpFloat(l.f, r.f), true
		case kString:
			return strings.Compare(l.s, r.s), true
		case kBool:
			return cmpBool(l.b, r.b), true
		}
	case l.k == kString:
		c, ok := compareMixed(r, l)
		return -c, ok
	case r.k == kString:
		switch l.k {
		case kInt:
			n, ok := parseLong(r.s)
			return cmpInt(l.i, n), ok
		case kFloat:
			f, ok := parseDouble(r.s)
			return cmpFloat(l.f, f), ok
		case kBool:
			return cmpBool(l.b, javaBool(r.s)), true
		}
	case l.k == kInt && r.k == kFloat:
		return cmpFloat(float64(l.i), r.f), true
	case l.k == kFloat && r.k == kInt:
		return cmpFloat(l.f, float64(r.i)), true
	}
	return -1, true // a boolean and a number
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}
