package filter

import (
	"fmt"
	"unicode/utf8"
)

// Expr is a compiled filter. It is immutable and safe for concurrent use.
type Expr struct {
	src   string
	eval  evalFn
	props []Ref
}

// Ref is one use of a property in an expression.
type Ref struct {
	// Name is the property's name.
	Name string
	// Position is the 1-based position (in characters) of the use.
	Position int
}

// evalFn evaluates a compiled node against a message's properties.
type evalFn func(props map[string]string) value

// Compile parses and checks an SQL92 filter expression. A refused
// expression returns an *Error.
func Compile(src string) (*Expr, error) {
	if len(src) > MaxBytes {
		return nil, &Error{Position: utf8.RuneCountInString(src[:MaxBytes]) + 1, Msg: fmt.Sprintf("the expression is longer than %d bytes", MaxBytes)}
	}
	if !utf8.ValidString(src) {
		for i, r := range src {
			if r == utf8.RuneError {
				return nil, errAt(src, i, "the expression is not valid UTF-8")
			}
		}
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	n, err := p.parse()
	if err != nil {
		return nil, err
	}
	// The uses' byte offsets (ascending) become character positions.
	chars, last := 0, 0
	for i := range p.props {
		chars += utf8.RuneCountInString(src[last:p.props[i].Position])
		last = p.props[i].Position
		p.props[i].Position = chars + 1
	}
	return &Expr{src: src, eval: compile(n), props: p.props}, nil
}

// String returns the expression as it was compiled.
func (e *Expr) String() string { return e.src }

// Properties lists the property uses of the expression, in order.
func (e *Expr) Properties() []Ref { return e.props }

// Match reports whether a message with these properties matches: the
// expression is TRUE (not FALSE, not UNKNOWN, and its evaluation did not
// fail).
func (e *Expr) Match(props map[string]string) bool {
	v := e.eval(props)
	return v.k == kBool && v.b
}

// compile turns a checked node into its evaluation closure.
func compile(n *node) evalFn {
	switch n.kind {
	case nLit:
		v := n.val
		return func(map[string]string) value { return v }
	case nProp:
		name := n.name
		return func(p map[string]string) value {
			s, ok := p[name]
			if !ok {
				return vNull
			}
			return value{k: kString, s: s}
		}
	case nAnd, nOr:
		return compileLogic(n)
	case nNot:
		x := compile(n.kids[0])
		return func(p map[string]string) value {
			v := x(p)
			if v.k == kBool {
				v.b = !v.b
			}
			return v
		}
	case nIsNull:
		return compileIsNull(n)
	case nIn:
		return compileIn(n)
	case nCmp:
		return compileCmp(n)
	}
	panic("filter: unknown node kind")
}

// compileLogic is AND / OR over n.kids: the first operand that decides
// (FALSE for AND, TRUE for OR) or fails ends the evaluation; otherwise the
// result is UNKNOWN if an operand was, else the other truth value.
func compileLogic(n *node) evalFn {
	kids := make([]evalFn, len(n.kids))
	for i, k := range n.kids {
		kids[i] = compile(k)
	}
	decides := n.kind == nOr // the truth value that ends the evaluation
	if len(kids) == 2 {
		a, b := kids[0], kids[1]
		return func(p map[string]string) value {
			x := a(p)
			if x.k == kError || x.k == kBool && x.b == decides {
				return x
			}
			y := b(p)
			if y.k == kError || y.k == kBool && y.b == decides {
				return y
			}
			if x.k == kNull || y.k == kNull {
				return vNull
			}
			return boolOf(!decides)
		}
	}
	return func(p map[string]string) value {
		unknown := false
		for _, k := range kids {
			v := k(p)
			if v.k == kError || v.k == kBool && v.b == decides {
				return v
			}
			if v.k == kNull {
				unknown = true
			}
		}
		if unknown {
			return vNull
		}
		return boolOf(!decides)
	}
}

func compileIsNull(n *node) evalFn {
	not := n.not
	if x := n.kids[0]; x.kind == nProp {
		name := x.name
		return func(p map[string]string) value {
			_, ok := p[name]
			return boolOf(ok == not)
		}
	}
	x := compile(n.kids[0])
	return func(p map[string]string) value {
		v := x(p)
		if v.k == kError {
			return v
		}
		return boolOf((v.k == kNull) != not)
	}
}

func compileIn(n *node) evalFn {
	name, not := n.kids[0].name, n.not
	if len(n.set) <= 8 {
		set := n.set
		return func(p map[string]string) value {
			s, ok := p[name]
			if !ok {
				return vNull
			}
			for _, e := range set {
				if e == s {
					return boolOf(!not)
				}
			}
			return boolOf(not)
		}
	}
	set := make(map[string]struct{}, len(n.set))
	for _, e := range n.set {
		set[e] = struct{}{}
	}
	return func(p map[string]string) value {
		s, ok := p[name]
		if !ok {
			return vNull
		}
		_, in := set[s]
		return boolOf(in != not)
	}
}

// flip mirrors an operator for swapped operands (a < b is b > a).
func flip(op tokKind) tokKind {
	switch op {
	case tLt:
		return tGt
	case tLe:
		return tGe
	case tGt:
		return tLt
	case tGe:
		return tLe
	}
	return op
}

// compileCmp compiles a comparison; a property against a literal (the
// usual case) gets a closure of its own.
func compileCmp(n *node) evalFn {
	op, l, r := n.op, n.kids[0], n.kids[1]
	if l.kind == nLit && r.kind == nProp {
		l, r, op = r, l, flip(op)
	}
	if l.kind == nProp && r.kind == nLit {
		name, lit := l.name, r.val
		switch lit.k {
		case kInt:
			return func(p map[string]string) value {
				s, ok := p[name]
				if !ok {
					return vNull
				}
				x, ok := parseLong(s)
				if !ok {
					return vErr
				}
				return boolOf(holds(op, cmpInt(x, lit.i)))
			}
		case kFloat:
			return func(p map[string]string) value {
				s, ok := p[name]
				if !ok {
					return vNull
				}
				x, ok := parseDouble(s)
				if !ok {
					return vErr
				}
				return boolOf(holds(op, cmpFloat(x, lit.f)))
			}
		case kString: // = and <> only
			return func(p map[string]string) value {
				s, ok := p[name]
				if !ok {
					return vNull
				}
				return boolOf((s == lit.s) == (op == tEq))
			}
		}
	}
	a, b := compile(l), compile(r)
	if op == tEq || op == tNe {
		return func(p map[string]string) value {
			x := a(p)
			if x.k == kError {
				return x
			}
			y := b(p)
			if y.k == kError {
				return y
			}
			if x.k == kNull || y.k == kNull {
				return vNull
			}
			c, ok := compareMixed(x, y)
			if !ok {
				return vErr
			}
			return boolOf(holds(op, c))
		}
	}
	return func(p map[string]string) value {
		x := a(p)
		if x.k == kError || x.k == kNull {
			return x
		}
		y := b(p)
		if y.k == kError || y.k == kNull {
			return y
		}
		c, ok := compareOrder(x, y)
		if !ok {
			return vErr
		}
		return boolOf(holds(op, c))
	}
}
