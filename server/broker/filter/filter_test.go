package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// props builds a property map from "k=v" pairs.
func props(kv ...string) map[string]string {
	m := make(map[string]string, len(kv))
	for _, p := range kv {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	return m
}

// outcome names what an evaluation gave: T (TRUE: a match), F (FALSE),
// N (UNKNOWN) or E (the evaluation failed).
func outcome(v value) string {
	switch {
	case v.k == kBool && v.b:
		return "T"
	case v.k == kBool:
		return "F"
	case v.k == kNull:
		return "N"
	case v.k == kError:
		return "E"
	}
	return "?" + string(rune('0'+v.k))
}

func TestLanguage(t *testing.T) {
	type c struct {
		props map[string]string
		want  string // T F N E
	}
	none := props()
	cases := []struct {
		expr  string
		cases []c
	}{
		// Strings: = and <> only, exact.
		{`a = 'x'`, []c{{props("a=x"), "T"}, {props("a=y"), "F"}, {props("a=X"), "F"}, {none, "N"}, {props("b=x"), "N"}}},
		{`a <> 'x'`, []c{{props("a=y"), "T"}, {props("a=x"), "F"}, {none, "N"}}},
		{`a = ''`, []c{{props("a="), "T"}, {props("a= "), "F"}, {none, "N"}}},
		{`a = 'it''s'`, []c{{props("a=it's"), "T"}, {props("a=it''s"), "F"}}},
		{`TAGS is not null and TAGS='''''tag'''''`, []c{{props("TAGS=''tag''"), "T"}, {props("TAGS=tag"), "F"}}},
		{`a = 'ünï cödé'`, []c{{props("a=ünï cödé"), "T"}}},
		{"a = 'two\nlines'", []c{{props("a=two\nlines"), "T"}}},
		{`'x' = a`, []c{{props("a=x"), "T"}, {none, "N"}}},
		// A property against an integer: read as a Java long.
		{`a = 3`, []c{{props("a=3"), "T"}, {props("a=03"), "T"}, {props("a=+3"), "T"}, {props("a=4"), "F"},
			{props("a=3.0"), "E"}, {props("a= 3"), "E"}, {props("a=abc"), "E"}, {props("a="), "E"}, {none, "N"}}},
		{`a <> 3`, []c{{props("a=4"), "T"}, {props("a=3"), "F"}, {props("a=x"), "E"}, {none, "N"}}},
		{`a > 5`, []c{{props("a=6"), "T"}, {props("a=5"), "F"}, {props("a=-6"), "F"}, {props("a=5.5"), "E"}, {props("a=x"), "E"}, {none, "N"}}},
		{`a >= -2`, []c{{props("a=-2"), "T"}, {props("a=-3"), "F"}, {props("a=0"), "T"}}},
		{`a < 0`, []c{{props("a=-1"), "T"}, {props("a=0"), "F"}}},
		{`a <= 10`, []c{{props("a=10"), "T"}, {props("a=11"), "F"}}},
		{`a > 5L`, []c{{props("a=6"), "T"}}},
		{`a > 3000000000`, []c{{props("a=3000000001"), "T"}, {props("a=2"), "F"}}},
		{`a = 9223372036854775807`, []c{{props("a=9223372036854775807"), "T"}, {props("a=9223372036854775808"), "E"}}},
		{`a = -9223372036854775807`, []c{{props("a=-9223372036854775807"), "T"}, {props("a=-9223372036854775808"), "F"}, {props("a=-9223372036854775809"), "E"}}},
		// ... against a decimal: read as a Java double.
		{`a > 5.0`, []c{{props("a=5.5"), "T"}, {props("a=6"), "T"}, {props("a=5"), "F"}, {props("a= 6 "), "T"}, {props("a=6f"), "T"},
			{props("a=6d"), "T"}, {props("a=1e1"), "T"}, {props("a=.6e1"), "T"}, {props("a=x"), "E"}, {props("a=1e"), "E"}, {props("a=."), "E"}, {none, "N"}}},
		{`a = 3.0`, []c{{props("a=3"), "T"}, {props("a=3.000"), "T"}, {props("a=3e0"), "T"}, {props("a=+3."), "T"}, {props("a=3.1"), "F"}}},
		{`a < -1.5`, []c{{props("a=-2"), "T"}, {props("a=-1.5"), "F"}}},
		{`a > 1e3`, []c{{props("a=1001"), "T"}, {props("a=999.9"), "F"}}},
		{`a > .5`, []c{{props("a=0.6"), "T"}, {props("a=0.4"), "F"}}},
		{`a >= 0.0`, []c{{props("a=0"), "T"}, {props("a=-0.0"), "F"}, {props("a=1e-400"), "T"}}},
		{`a > 1.0`, []c{{props("a=NaN"), "T"}, {props("a=Infinity"), "T"}, {props("a=-Infinity"), "F"}, {props("a=nan"), "E"}, {props("a=inf"), "E"}}},
		{`a = 1.0`, []c{{props("a=NaN"), "F"}, {props("a=1e999"), "F"}}},
		{`a > 3.1E10`, []c{{props("a=31415000000.000004"), "T"}}},
		{`5 < a`, []c{{props("a=6"), "T"}, {props("a=5"), "F"}, {none, "N"}}},
		{`3 = a`, []c{{props("a=3"), "T"}, {none, "N"}}},
		{`a = +5`, []c{{props("a=5"), "T"}}},
		{`a = - -5`, []c{{props("a=5"), "T"}}},
		{`a = -(-5)`, []c{{props("a=5"), "T"}}},
		{`a = -(5.5)`, []c{{props("a=-5.5"), "T"}}},
		// Two properties: = compares strings, < reads both as doubles.
		{`a > b`, []c{{props("a=20", "b=10"), "T"}, {props("a=10", "b=20"), "F"}, {props("a=2.5", "b=2"), "T"}, {props("a=x", "b=1"), "E"}, {props("a=1"), "N"}}},
		{`a = b`, []c{{props("a=3.14", "b=3.14"), "T"}, {props("a=3.14", "b=3.140"), "F"}, {none, "N"}, {props("a=1"), "N"}}},
		{`a <> b`, []c{{props("a=3.14", "b=3.141"), "T"}, {props("a=x", "b=x"), "F"}}},
		// BETWEEN is >= AND <=, NOT BETWEEN is < OR >, bound by bound.
		{`a BETWEEN 2 AND 10`, []c{{props("a=2"), "T"}, {props("a=10"), "T"}, {props("a=3"), "T"}, {props("a=1"), "F"}, {props("a=11"), "F"},
			{none, "N"}, {props("a=x"), "E"}, {props("a=2.5"), "E"}}},
		{`a between 2.0 and 10`, []c{{props("a=2.5"), "E"}, {props("a=1.5"), "F"}, {props("a=3"), "T"}}},
		{`a BETWEEN -1.5 AND 1.5`, []c{{props("a=0"), "T"}, {props("a=-1.5"), "T"}, {props("a=2"), "F"}}},
		{`a BETWEEN b AND c`, []c{{props("a=2", "b=1", "c=3"), "T"}, {props("a=2", "b=3", "c=1"), "F"}, {props("a=2", "c=3"), "N"}}},
		{`a NOT BETWEEN 2 AND 10`, []c{{props("a=1"), "T"}, {props("a=11"), "T"}, {props("a=2"), "F"}, {props("a=10"), "F"}, {props("a=5"), "F"}, {none, "N"}}},
		{`2 BETWEEN 1 AND 3`, []c{{none, "T"}}},
		// IN: string literals.
		{`a IN ('3', '4', '5')`, []c{{props("a=3"), "T"}, {props("a=5"), "T"}, {props("a=8"), "F"}, {props("a=3.0"), "F"}, {none, "N"}}},
		{`a NOT IN ('3', '4', '5')`, []c{{props("a=8"), "T"}, {props("a=3"), "F"}, {none, "N"}}},
		{`a in ('a','b','c','d','e','f','g','h','i','j')`, []c{{props("a=j"), "T"}, {props("a=k"), "F"}, {none, "N"}}},
		{`a not in ('a','b','c','d','e','f','g','h','i','j')`, []c{{props("a=j"), "F"}, {props("a=k"), "T"}, {none, "N"}}},
		// IS [NOT] NULL.
		{`a IS NULL`, []c{{none, "T"}, {props("a="), "F"}, {props("abc=2"), "T"}}},
		{`a IS NOT NULL`, []c{{props("a="), "T"}, {none, "F"}}},
		{`NULL IS NULL`, []c{{none, "T"}}},
		{`1 IS NULL`, []c{{none, "F"}}},
		{`(a = 1) IS NULL`, []c{{none, "T"}, {props("a=1"), "F"}, {props("a=x"), "E"}}},
		// Booleans: a property is true when it is "true" in any case.
		{`a = TRUE`, []c{{props("a=true"), "T"}, {props("a=TRUE"), "T"}, {props("a=yes"), "F"}, {props("a=1"), "F"}, {none, "N"}}},
		{`a = FALSE`, []c{{props("a=false"), "T"}, {props("a=no"), "T"}, {props("a=True"), "F"}}},
		{`a=TRUE OR b=FALSE`, []c{{props("a=true", "b=false"), "T"}, {props("a=false", "b=true"), "F"}}},
		{`TRUE`, []c{{none, "T"}}},
		{`FALSE`, []c{{none, "F"}}},
		{`NULL`, []c{{none, "N"}}},
		{`NOT TRUE`, []c{{none, "F"}}},
		{`NOT NULL`, []c{{none, "N"}}},
		{`(b = 'y') = a`, []c{{props("a=true", "b=y"), "T"}, {props("a=false", "b=y"), "F"}, {props("a=true"), "N"}}},
		{`(a = 1) = TRUE`, []c{{props("a=1"), "T"}, {props("a=2"), "F"}, {none, "N"}, {props("a=x"), "E"}}},
		// Constants.
		{`1 = 1`, []c{{none, "T"}}},
		{`1 = 1.0`, []c{{none, "T"}}},
		{`1 = 1.5`, []c{{none, "F"}}},
		{`2 > 1.5`, []c{{none, "T"}}},
		{`'a' = 'a'`, []c{{none, "T"}}},
		{`TRUE = TRUE`, []c{{none, "T"}}},
		{`(1=1) <> (2=2)`, []c{{none, "F"}}},
		// Three-valued logic (a is missing: a = 1 is UNKNOWN).
		{`a = 1 AND FALSE`, []c{{none, "F"}}},
		{`a = 1 AND TRUE`, []c{{none, "N"}}},
		{`a = 1 OR TRUE`, []c{{none, "T"}}},
		{`a = 1 OR FALSE`, []c{{none, "N"}}},
		{`NOT (a = 1)`, []c{{none, "N"}, {props("a=2"), "T"}, {props("a=1"), "F"}}},
		{`NOT (a = 1) OR b IS NULL`, []c{{none, "T"}, {props("b=1"), "N"}}},
		{`a = 1 AND b = 1 AND c = 1`, []c{{props("a=1", "b=1", "c=1"), "T"}, {props("a=1", "c=1"), "N"}, {props("b=2"), "F"}}},
		{`a = 1 OR b = 1 OR c = 1`, []c{{props("c=1"), "T"}, {props("a=2"), "N"}, {props("a=2", "b=2", "c=2"), "F"}}},
		// A failed comparison fails the whole evaluation unless an
		// operand before it decided (a = "abc" is no number).
		{`a > 5 OR TRUE`, []c{{props("a=abc"), "E"}}},
		{`TRUE OR a > 5`, []c{{props("a=abc"), "T"}}},
		{`FALSE AND a > 5`, []c{{props("a=abc"), "F"}}},
		{`a > 5 AND FALSE`, []c{{props("a=abc"), "E"}}},
		{`NOT (a > 5)`, []c{{props("a=abc"), "E"}, {props("a=4"), "T"}}},
		{`b = 1 OR a > 5 OR c = 1`, []c{{props("a=abc", "c=1"), "E"}, {props("a=abc", "b=1"), "T"}}},
		// Precedence: AND over OR, comparisons over equality, NOT tightest.
		{`a = 1 OR b = 2 AND c = 3`, []c{{props("a=1", "b=0", "c=0"), "T"}}},
		{`(a = 1 OR b = 2) AND c = 3`, []c{{props("a=1", "b=0", "c=0"), "F"}}},
		{`a = 1 AND b = 2 OR c = 3`, []c{{props("c=3"), "T"}, {props("a=1", "b=2"), "T"}, {props("a=1"), "N"}}},
		{`NOT (a = 1) AND b = 2`, []c{{props("a=2", "b=2"), "T"}, {props("a=1", "b=2"), "F"}}},
		{`NOT NULL IS NULL`, []c{{none, "T"}}},
		{`NOT (NULL IS NULL)`, []c{{none, "F"}}},
		{`a > 1 = TRUE`, []c{{props("a=2"), "T"}, {props("a=0"), "F"}, {none, "N"}}},
		{`a IS NULL = TRUE`, []c{{none, "T"}, {props("a=1"), "F"}}},
		{`NOT NOT (a = 1)`, []c{{props("a=1"), "T"}}},
		// Names: case-sensitive properties, case-insensitive keywords,
		// quoted names, comments.
		{`A = 1`, []c{{props("a=1"), "N"}, {props("A=1"), "T"}}},
		{`a between 1 and 2 or a is null`, []c{{none, "T"}, {props("a=2"), "T"}, {props("a=3"), "F"}}},
		{`$x_1 = 'y'`, []c{{props("$x_1=y"), "T"}}},
		{`"order-id" = '7'`, []c{{props("order-id=7"), "T"}}},
		{`"a""b" = 'x'`, []c{{props(`a"b=x`), "T"}}},
		{`"NULL" IS NULL`, []c{{none, "T"}, {props("NULL=x"), "F"}}},
		{"a = 1 -- the rest is a comment", []c{{props("a=1"), "T"}}},
		{"a = 1 -- comment\nOR b = 1", []c{{props("b=1"), "T"}}},
		{"/* lead */ a /* mid\n */ = 1", []c{{props("a=1"), "T"}}},
		{"\ta\r\n=\f1 ", []c{{props("a=1"), "T"}}},
	}
	for _, tc := range cases {
		e, err := Compile(tc.expr)
		require.NoError(t, err, "%s", tc.expr)
		for _, c := range tc.cases {
			got := outcome(e.eval(c.props))
			require.Equal(t, c.want, got, "%s over %v", tc.expr, c.props)
			require.Equal(t, c.want == "T", e.Match(c.props), "%s over %v", tc.expr, c.props)
		}
	}
}

func TestInvalid(t *testing.T) {
	deep := strings.Repeat("(", MaxDepth+1) + "a = 1" + strings.Repeat(")", MaxDepth+1)
	ok := strings.Repeat("(", MaxDepth) + "a = 1" + strings.Repeat(")", MaxDepth)
	_, err := Compile(ok)
	require.NoError(t, err, "%d levels are allowed", MaxDepth)
	_, err = Compile(strings.Repeat("NOT ", MaxDepth) + "TRUE")
	require.NoError(t, err)
	long := "a = '" + strings.Repeat("x", MaxBytes) + "'"
	cases := []struct {
		expr string
		pos  int
		msg  string // a part of the message
	}{
		{``, 1, "empty"},
		{`   `, 1, "empty"},
		{`a`, 1, "found the property a alone"},
		{`a =`, 4, "expected a property, a literal"},
		{`a = `, 5, "found the end of the expression"},
		{`AND a = 1`, 1, "found 'AND'"},
		{`a = 'x`, 5, "string starting here is not closed"},
		{`a = 1 AND`, 10, "expected a property"},
		{`a > 'x'`, 5, "a string compares with = <> or IN only"},
		{`'x' < a`, 1, "string"},
		{`a > TRUE`, 5, "cannot compare a condition"},
		{`a > NULL`, 5, "cannot compare NULL"},
		{`NOT a = 'x'`, 5, "NOT needs a condition, found the property a"},
		{`NOT a IS NULL`, 5, "NOT needs a condition"},
		{`NOT 'x'`, 5, "NOT needs a condition, found a string"},
		{`a = NULL`, 5, "test it with IS NULL"},
		{`NULL <> a`, 1, "NULL cannot be compared"},
		{`a IN ()`, 7, "expected a string in the IN list, found ')'"},
		{`a IN (1)`, 7, "expected a string in the IN list, found the number 1"},
		{`a IN 'x'`, 6, "expected ( after IN"},
		{`'x' IN ('a')`, 1, "IN applies to a property"},
		{`a IN ('x' 'y')`, 11, "expected , or ) in the IN list"},
		{`a BETWEEN 1`, 12, "expected AND between the bounds"},
		{`a BETWEEN 5 AND 1`, 11, "lower bound of BETWEEN is above its upper bound"},
		{`a BETWEEN 1.5 AND 1`, 11, "lower bound"},
		{`a BETWEEN 'a' AND 'b'`, 11, "BETWEEN compares numbers"},
		{`'a' BETWEEN 1 AND 2`, 1, "BETWEEN compares numbers"},
		{`(a = 1`, 7, "the ) closing the ( at position 1"},
		{`a = 1)`, 6, "expected AND, OR or the end of the expression, found ')'"},
		{`a == 1`, 4, "found '='"},
		{`a != 1`, 3, "not-equal is written <>"},
		{`a = 007`, 5, "leading zero"},
		{`a = 99999999999999999999`, 5, "out of range"},
		{`a = 9223372036854775808`, 5, "out of range"},
		{`a = 1e999`, 5, "out of range"},
		{`a = -'x'`, 6, "'-' applies to a number, found a string"},
		{`a = -b`, 6, "applies to a number, found a property"},
		{`a > 1 > 2`, 1, "cannot compare a condition"},
		{`a = 1 AND b`, 11, "right side of AND needs a condition, found the property b alone"},
		{`b OR a = 1`, 1, "left side of OR needs a condition"},
		{`a = 1 OR 5`, 10, "found a number"},
		{`1 = 'x'`, 5, "cannot compare a number with a string"},
		{`TRUE = 1`, 8, "cannot compare a condition with a number"},
		{`(a = 1) = 'true'`, 11, "cannot compare a condition with a string"},
		{`a NOT LIKE 'x'`, 7, "expected BETWEEN or IN after NOT"},
		{`(a NOT LIKE 'x')`, 8, "expected BETWEEN or IN after NOT"},
		{`a IS 5`, 6, "expected NULL or NOT NULL after IS"},
		{`a IS NOT 5`, 10, "expected NULL after IS NOT"},
		{`a = 1 /* open`, 7, "comment starting here is not closed"},
		{`a = #`, 5, "unexpected character '#'"},
		{`a = 1.2.3`, 8, "found the number .3"},
		{`"" = 'x'`, 1, "quoted property name is empty"},
		{`"a = 'x'`, 1, "property name starting here is not closed"},
		{`é = 1`, 1, "unexpected character 'é'"},
		{`'ééé' = a AND`, 14, "found the end of the expression"},
		{"a = '\xff'", 6, "not valid UTF-8"},
		{"a = 1 AND \xff", 11, "not valid UTF-8"},
		{deep, MaxDepth + 1, "nests more than 32 levels"},
		{strings.Repeat("NOT ", MaxDepth+1) + "TRUE", MaxDepth*4 + 1, "nests more than"},
		{strings.Repeat("- ", MaxDepth+1) + "1 = a", MaxDepth*2 + 1, "nests more than"},
		{"a = --5", 8, "found the end of the expression"}, // -- starts a comment, as in SQL
		{long, MaxBytes + 1, "longer than 4096 bytes"},
	}
	for _, tc := range cases {
		_, err := Compile(tc.expr)
		var fe *Error
		require.True(t, errors.As(err, &fe), "%q: %v", tc.expr, err)
		require.Equal(t, tc.pos, fe.Position, "%q: %v", tc.expr, err)
		require.Contains(t, fe.Msg, tc.msg, "%q", tc.expr)
		require.Contains(t, err.Error(), "at position ")
	}
}

func TestProperties(t *testing.T) {
	_, err := Compile(`TAGS = 'a' AND (é_not_allowed IS NULL)`)
	require.Error(t, err)
	e, err := Compile(`TAGS = 'a' AND ("é" IS NULL OR b BETWEEN 1 AND 2)`)
	require.NoError(t, err)
	require.Equal(t, []Ref{{"TAGS", 1}, {"é", 17}, {"b", 32}}, e.Properties())
	require.Equal(t, `TAGS = 'a' AND ("é" IS NULL OR b BETWEEN 1 AND 2)`, e.String())
}

// TestMatchAllocatesNothing: evaluating never allocates, whatever the
// outcome.
func TestMatchAllocatesNothing(t *testing.T) {
	exprs := []string{
		`a = 'x' AND b > 5 OR c BETWEEN 1.5 AND 2.5`,
		`TAGS IN ('a','b','c','d','e','f','g','h','i') AND a <> b`,
		`NOT (a > 5) OR d IS NULL AND (a = 1) = TRUE`,
		`a > b`,
	}
	maps := []map[string]string{props("a=x", "b=7", "c=2", "TAGS=i"), props("a=abc", "b=1"), props(), props("a=1.5e3", "b=NaN")}
	for _, src := range exprs {
		e, err := Compile(src)
		require.NoError(t, err)
		for _, m := range maps {
			require.Zero(t, testing.AllocsPerRun(100, func() { e.Match(m) }), "%s over %v", src, m)
		}
	}
}
