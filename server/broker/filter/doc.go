// Package filter compiles and evaluates SQL92 property filters: the
// language of RocketMQ's MessageSelector.bySql, evaluated against the
// properties of one message (their values are strings; a property the
// message lacks is NULL). Compile parses an expression once into a tree of
// closures; Expr.Match evaluates it without allocating. The package knows
// nothing of messages or of the broker (a leaf): the broker hands Match a
// message's property map, in which the tag is the property TAGS.
//
// # Grammar
//
// Keywords are case-insensitive; property names are case-sensitive.
// Precedence, loosest first: OR, AND, the equality operators (= <> IS),
// the ordering operators (< <= > >= BETWEEN IN), then the unary operators
// NOT, - and +. As in RocketMQ, NOT is unary: it binds to the operand right
// after it, so `NOT a = 'x'` reads `(NOT a) = 'x'`, which is refused here
// (write `NOT (a = 'x')` or `a <> 'x'`).
//
//	expr       = or
//	or         = and { OR and }
//	and        = equality { AND equality }
//	equality   = comparison { ("=" | "<>") comparison | IS [NOT] NULL }
//	comparison = unary { ("<" | "<=" | ">" | ">=") unary
//	                   | [NOT] BETWEEN unary AND unary
//	                   | [NOT] IN "(" string { "," string } ")" }
//	unary      = (NOT | "-" | "+") unary | primary
//	primary    = literal | property | "(" or ")"
//	literal    = string | integer | decimal | TRUE | FALSE | NULL
//	string     = "'" { any character but "'" | "''" } "'"
//	integer    = "0" | digit1-9 { digit } [ "L" ]      (fits in int64)
//	decimal    = digits "." [digits] [exponent] | "." digits [exponent]
//	           | digits exponent
//	exponent   = ("e" | "E") ["+" | "-"] digits
//	property   = (letter | "_" | "$") { letter | digit | "_" | "$" }
//	           | '"' { any character but '"' | '""' } '"'
//
// White space separates tokens; `-- comment` runs to the end of the line
// and `/* comment */` may span lines. The double-quoted property name is
// SQL92's delimited identifier, an addition to RocketMQ's grammar for
// property names that are not identifiers ("order-id").
//
// # Semantics
//
// Values are NULL, booleans, 64-bit integers, doubles and strings; a
// property's value is a string. Conditions have SQL's three values: TRUE,
// FALSE and UNKNOWN (NULL), and a message matches only when the whole
// expression is TRUE. AND, OR and NOT follow RocketMQ (Kleene logic):
// FALSE AND x is FALSE, TRUE OR x is TRUE, NOT UNKNOWN is UNKNOWN, and any
// other combination with UNKNOWN is UNKNOWN. Operands are evaluated left to
// right and AND / OR stop at the first operand that decides them.
//
//   - A comparison with NULL (a missing property) is UNKNOWN; IS NULL and
//     IS NOT NULL test for it.
//   - A property compared with an integer is read as a Java long (an
//     optional sign and digits: "42", "-7"); compared with a decimal, as a
//     Java double ("3.14", "1e3", " 2 ", "NaN"). Doubles order as Java's
//     Double.compare does (NaN above everything, -0.0 below 0.0). So
//     `a > 5` does not accept a = "5.5"; `a > 5.0` does.
//   - < <= > >= and BETWEEN compare numbers only: a string literal there
//     is refused, and two properties are both read as doubles.
//   - = and <> compare strings exactly, or a property with a number as
//     above, or a property with TRUE / FALSE (the property is true when it
//     is "true" in any case). IN compares a property with string literals.
//   - A property that cannot be read as the number it is compared with
//     ("abc" > 5) makes the evaluation fail, and a failed evaluation never
//     matches, whatever surrounds the comparison (NOT (a > 5) does not
//     match a = "abc" either) — what RocketMQ's broker does with the
//     exception its evaluation throws.
//
// Differences from RocketMQ, each one refusing an expression RocketMQ
// accepts but could never evaluate usefully, or repairing a corner case:
// a property alone is not a condition (`a AND b = 1`: RocketMQ casts it to
// FALSE or UNKNOWN); unary minus applies to numbers only; comparisons of
// mismatched literals (1 = 'x', TRUE = 1) and NOT of a non-condition are
// refused; integer literals compare as int64 (RocketMQ reads a property as
// a Java int when the literal fits one, failing on "3000000000");
// `literal = missing` is UNKNOWN (RocketMQ: FALSE) and `missing = missing`
// UNKNOWN (RocketMQ: TRUE); 0.0 is a valid literal; a comparison of a
// condition with a property is symmetric; CONTAINS, STARTSWITH and
// ENDSWITH are not supported.
//
// # Limits
//
// An expression is at most MaxBytes bytes of UTF-8 and nests at most
// MaxDepth levels (parentheses and unary operators). Compile checks both,
// so no input makes it recurse deeply, and what it allocates is
// proportional to the expression's length. Errors are *Error values: the
// 1-based position (in characters) of the offending token and what was
// expected there.
package filter
