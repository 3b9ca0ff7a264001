package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of an expression.
const (
	// MaxBytes bounds an expression's length (the broker's limit on a tag
	// expression).
	MaxBytes = 4096
	// MaxDepth bounds the nesting of parentheses and unary operators.
	MaxDepth = 32
)

// Error is a compile error: where in the expression and what is wrong.
type Error struct {
	// Position is the 1-based position, in characters, of the token the
	// error is about (the expression's length + 1 for its end).
	Position int
	// Msg says what was expected or why the token is refused.
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("at position %d: %s", e.Position, e.Msg) }

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tInt
	tFloat
	tLParen
	tRParen
	tComma
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	tPlus
	tMinus
	tAnd
	tOr
	tNot
	tBetween
	tIn
	tIs
	tNull
	tTrue
	tFalse
)

// keywords are the reserved words (matched case-insensitively).
var keywords = map[string]tokKind{
	"AND": tAnd, "OR": tOr, "NOT": tNot, "BETWEEN": tBetween, "IN": tIn,
	"IS": tIs, "NULL": tNull, "TRUE": tTrue, "FALSE": tFalse,
}

// token is one lexeme; pos is its byte offset in the expression.
type token struct {
	kind tokKind
	pos  int
	text string // tIdent: the name; tString: the value; keywords and operators: as written
	i    int64
	f    float64
}

// describe names a token for an error message.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "the end of the expression"
	case tIdent:
		return "the property " + cut(t.text)
	case tString:
		return "the string '" + strings.ReplaceAll(cut(t.text), "'", "''") + "'"
	case tInt, tFloat:
		return "the number " + cut(t.text)
	default:
		return quoteToken(t.text)
	}
}

// cut shortens s to 32 characters for an error message.
func cut(s string) string {
	const max = 32
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max]) + "…"
}

func quoteToken(s string) string {
	if s == "" {
		return "nothing"
	}
	if strings.ContainsRune(s, '\'') {
		return "\"" + s + "\""
	}
	return "'" + s + "'"
}

// lexer splits an expression into tokens.
type lexer struct {
	src string
	off int
}

// errAt builds an Error at byte offset off of src.
func errAt(src string, off int, format string, args ...any) *Error {
	off = min(max(off, 0), len(src))
	return &Error{Position: utf8.RuneCountInString(src[:off]) + 1, Msg: fmt.Sprintf(format, args...)}
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex returns every token of src, ending with tEOF.
func lex(src string) ([]token, *Error) {
	l := &lexer{src: src}
	var out []token
	for {
		t, err := l.next()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if t.kind == tEOF {
			return out, nil
		}
	}
}

// skip passes white space and comments.
func (l *lexer) skip() *Error {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			l.off++
		case strings.HasPrefix(l.src[l.off:], "--"):
			end := strings.IndexAny(l.src[l.off:], "\r\n")
			if end < 0 {
				l.off = len(l.src)
			} else {
				l.off += end
			}
		case strings.HasPrefix(l.src[l.off:], "/*"):
			end := strings.Index(l.src[l.off+2:], "*/")
			if end < 0 {
				return errAt(l.src, l.off, "the comment starting here is not closed with */")
			}
			l.off += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

func (l *lexer) next() (token, *Error) {
	if err := l.skip(); err != nil {
		return token{}, err
	}
	start := l.off
	if start == len(l.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := l.src[start]
	op := func(k tokKind, n int) (token, *Error) {
		l.off += n
		return token{kind: k, pos: start, text: l.src[start:l.off]}, nil
	}
	switch {
	case c == '(':
		return op(tLParen, 1)
	case c == ')':
		return op(tRParen, 1)
	case c == ',':
		return op(tComma, 1)
	case c == '=':
		return op(tEq, 1)
	case c == '+':
		return op(tPlus, 1)
	case c == '-':
		return op(tMinus, 1)
	case c == '<':
		if strings.HasPrefix(l.src[start:], "<>") {
			return op(tNe, 2)
		}
		if strings.HasPrefix(l.src[start:], "<=") {
			return op(tLe, 2)
		}
		return op(tLt, 1)
	case c == '>':
		if strings.HasPrefix(l.src[start:], ">=") {
			return op(tGe, 2)
		}
		return op(tGt, 1)
	case c == '!':
		return token{}, errAt(l.src, start, "unexpected '!': not-equal is written <>, negation NOT")
	case c == '\'':
		s, err := l.quoted('\'', "string")
		return token{kind: tString, pos: start, text: s}, err
	case c == '"':
		s, err := l.quoted('"', "property name")
		if err == nil && s == "" {
			err = errAt(l.src, start, "a quoted property name is empty")
		}
		return token{kind: tIdent, pos: start, text: s}, err
	case isDigit(c) || c == '.' && start+1 < len(l.src) && isDigit(l.src[start+1]):
		return l.number()
	case isIdentStart(c):
		for l.off++; l.off < len(l.src) && isIdentPart(l.src[l.off]); l.off++ {
		}
		word := l.src[start:l.off]
		if k, ok := keywords[strings.ToUpper(word)]; ok {
			return token{kind: k, pos: start, text: word}, nil
		}
		return token{kind: tIdent, pos: start, text: word}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[start:])
	if r == utf8.RuneError {
		return token{}, errAt(l.src, start, "the expression is not valid UTF-8")
	}
	return token{}, errAt(l.src, start, "unexpected character %q", r)
}

// quoted reads a string or a quoted name (the quote doubled inside).
func (l *lexer) quoted(q byte, what string) (string, *Error) {
	start := l.off
	var b strings.Builder
	plain := true // no doubled quote: the value is a substring of src
	for i := start + 1; i < len(l.src); i++ {
		if l.src[i] != q {
			if !plain {
				b.WriteByte(l.src[i])
			}
			continue
		}
		if i+1 < len(l.src) && l.src[i+1] == q {
			if plain {
				plain = false
				b.WriteString(l.src[start+1 : i])
			}
			b.WriteByte(q)
			i++
			continue
		}
		l.off = i + 1
		s := l.src[start+1 : i]
		if !plain {
			s = b.String()
		}
		if !utf8.ValidString(s) {
			return "", errAt(l.src, start, "the %s starting here is not valid UTF-8", what)
		}
		return s, nil
	}
	return "", errAt(l.src, start, "the %s starting here is not closed (a %c inside it is written %c%c)", what, q, q, q)
}

// number reads an integer or a decimal literal.
func (l *lexer) number() (token, *Error) {
	src, start := l.src, l.off
	i := start
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	intEnd := i
	float := false
	if i < len(src) && src[i] == '.' {
		float = true
		for i++; i < len(src) && isDigit(src[i]); i++ {
		}
	}
	// An exponent only when it is complete ("1e" is 1 followed by e).
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			i, float = j, true
		}
	}
	if float {
		l.off = i
		text := src[start:i]
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(f, 0) {
			return token{}, errAt(src, start, "the number %s is out of range", cut(text))
		}
		return token{kind: tFloat, pos: start, text: text, f: f}, nil
	}
	text := src[start:intEnd]
	l.off = intEnd
	if intEnd < len(src) && (src[intEnd] == 'l' || src[intEnd] == 'L') {
		l.off++ // Java's long suffix
	}
	if len(text) > 1 && text[0] == '0' {
		return token{}, errAt(src, start, "the integer %s has a leading zero", cut(text))
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return token{}, errAt(src, start, "the integer %s is out of range (at most %d)", cut(text), int64(math.MaxInt64))
	}
	return token{kind: tInt, pos: start, text: src[start:l.off], i: n}, nil
}
