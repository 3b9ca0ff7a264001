package filter

import (
	"fmt"
	"unicode/utf8"
)

// typ is the static type of an expression, which decides where it may
// stand.
type typ uint8

const (
	yCond typ = iota // a condition: comparison, logic, TRUE, FALSE
	yNull            // the NULL literal
	yNum             // a number literal
	yStr             // a string literal
	yProp            // a property: a string or NULL at run time
)

type nodeKind uint8

const (
	nLit    nodeKind = iota // val
	nProp                   // name
	nAnd                    // kids, evaluated in order
	nOr                     // kids, evaluated in order
	nNot                    // kids[0]
	nCmp                    // op over kids[0], kids[1]
	nIn                     // kids[0] (a property) [NOT] IN set
	nIsNull                 // kids[0] IS [NOT] NULL
)

// node is a checked syntax tree node.
type node struct {
	kind nodeKind
	typ  typ
	pos  int // byte offset of its first token
	op   tokKind
	not  bool
	val  value
	name string
	set  []string
	kids []*node
}

// parser is a recursive-descent parser over the tokens of one expression.
type parser struct {
	src   string
	toks  []token
	at    int
	depth int
	props []Ref
}

func (p *parser) peek() token { return p.toks[p.at] }

func (p *parser) peek2() token { return p.toks[min(p.at+1, len(p.toks)-1)] }

func (p *parser) take() token {
	t := p.toks[p.at]
	if t.kind != tEOF {
		p.at++
	}
	return t
}

func (p *parser) errAt(off int, format string, args ...any) *Error {
	return errAt(p.src, off, format, args...)
}

// expected is the error at the current token: what was wanted instead.
func (p *parser) expected(what string) *Error {
	t := p.peek()
	return p.errAt(t.pos, "expected %s, found %s", what, t.describe())
}

// enter counts one level of nesting at the token at off.
func (p *parser) enter(off int) *Error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(off, "the expression nests more than %d levels deep", MaxDepth)
	}
	return nil
}

// parse parses the whole expression.
func (p *parser) parse() (*node, *Error) {
	if p.peek().kind == tEOF {
		return nil, p.errAt(0, "the expression is empty")
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		what := "AND, OR or the end of the expression"
		if t.kind == tNot {
			what = "BETWEEN or IN after NOT (NOT before a condition is written NOT (…))"
			t = p.peek2()
		}
		return nil, p.errAt(t.pos, "expected %s, found %s", what, t.describe())
	}
	if err := p.condition(n, "the expression"); err != nil {
		return nil, err
	}
	return n, nil
}

// condition checks that n can stand where a condition is needed.
func (p *parser) condition(n *node, where string) *Error {
	switch n.typ {
	case yCond, yNull:
		return nil
	case yProp:
		return p.errAt(n.pos, "%s needs a condition, found the property %s alone (compare it: %s = 'x', %s IS NOT NULL)", where, cut(n.name), cut(n.name), cut(n.name))
	case yNum:
		return p.errAt(n.pos, "%s needs a condition, found a number", where)
	default:
		return p.errAt(n.pos, "%s needs a condition, found a string", where)
	}
}

func (p *parser) or() (*node, *Error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tOr {
		op := p.take()
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		if left, err = p.logic(nOr, op, left, right); err != nil {
			return nil, err
		}
	}
	return left, nil
}

func (p *parser) and() (*node, *Error) {
	left, err := p.equality()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tAnd {
		op := p.take()
		right, err := p.equality()
		if err != nil {
			return nil, err
		}
		if left, err = p.logic(nAnd, op, left, right); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// logic joins left and right with AND or OR, flattening chains (both are
// associative with left-to-right evaluation).
func (p *parser) logic(kind nodeKind, op token, left, right *node) (*node, *Error) {
	word := "OR"
	if kind == nAnd {
		word = "AND"
	}
	if err := p.condition(left, "the left side of "+word); err != nil {
		return nil, err
	}
	if err := p.condition(right, "the right side of "+word); err != nil {
		return nil, err
	}
	n := left // nodes are not shared yet: a chain grows in place
	if left.kind != kind {
		n = &node{kind: kind, typ: yCond, pos: left.pos, kids: []*node{left}}
	}
	if right.kind == kind {
		n.kids = append(n.kids, right.kids...)
	} else {
		n.kids = append(n.kids, right)
	}
	return n, nil
}

func (p *parser) equality() (*node, *Error) {
	left, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for {
		switch t := p.peek(); t.kind {
		case tEq, tNe:
			p.take()
			right, err := p.comparison()
			if err != nil {
				return nil, err
			}
			if left, err = p.cmp(t, left, right); err != nil {
				return nil, err
			}
		case tIs:
			p.take()
			not := false
			if p.peek().kind == tNot {
				p.take()
				not = true
			}
			if p.peek().kind != tNull {
				what := "NULL or NOT NULL after IS"
				if not {
					what = "NULL after IS NOT"
				}
				return nil, p.expected(what)
			}
			p.take()
			left = &node{kind: nIsNull, typ: yCond, pos: left.pos, not: not, kids: []*node{left}}
		default:
			return left, nil
		}
	}
}

func (p *parser) comparison() (*node, *Error) {
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		not := false
		if t.kind == tNot && (p.peek2().kind == tBetween || p.peek2().kind == tIn) {
			p.take()
			t, not = p.peek(), true
		}
		switch t.kind {
		case tLt, tLe, tGt, tGe:
			p.take()
			right, err := p.unary()
			if err != nil {
				return nil, err
			}
			if left, err = p.cmp(t, left, right); err != nil {
				return nil, err
			}
		case tBetween:
			p.take()
			if left, err = p.between(t, left, not); err != nil {
				return nil, err
			}
		case tIn:
			p.take()
			if left, err = p.in(left, not); err != nil {
				return nil, err
			}
		default:
			return left, nil
		}
	}
}

// between parses "low AND high" after [NOT] BETWEEN: x BETWEEN a AND b is
// x >= a AND x <= b, x NOT BETWEEN a AND b is x < a OR x > b (RocketMQ's
// definition).
func (p *parser) between(op token, x *node, not bool) (*node, *Error) {
	low, err := p.unary()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tAnd {
		return nil, p.expected("AND between the bounds of BETWEEN")
	}
	p.take()
	high, err := p.unary()
	if err != nil {
		return nil, err
	}
	for _, k := range []*node{x, low, high} {
		if err := p.orderable(k, "BETWEEN"); err != nil {
			return nil, err
		}
	}
	if low.kind == nLit && high.kind == nLit {
		if c, _ := compareMixed(low.val, high.val); c > 0 {
			return nil, p.errAt(low.pos, "the lower bound of BETWEEN is above its upper bound")
		}
	}
	at := func(k tokKind) token { return token{kind: k, pos: op.pos} }
	if not {
		a, _ := p.cmp(at(tLt), x, low)
		b, _ := p.cmp(at(tGt), x, high)
		return &node{kind: nOr, typ: yCond, pos: x.pos, kids: []*node{a, b}}, nil
	}
	a, _ := p.cmp(at(tGe), x, low)
	b, _ := p.cmp(at(tLe), x, high)
	return &node{kind: nAnd, typ: yCond, pos: x.pos, kids: []*node{a, b}}, nil
}

// in parses the list after [NOT] IN.
func (p *parser) in(x *node, not bool) (*node, *Error) {
	if x.typ != yProp {
		return nil, p.errAt(x.pos, "IN applies to a property")
	}
	if p.peek().kind != tLParen {
		return nil, p.expected("( after IN")
	}
	p.take()
	n := &node{kind: nIn, typ: yCond, pos: x.pos, not: not, kids: []*node{x}}
	for {
		if p.peek().kind != tString {
			return nil, p.expected("a string in the IN list")
		}
		n.set = append(n.set, p.take().text)
		switch p.peek().kind {
		case tComma:
			p.take()
		case tRParen:
			p.take()
			return n, nil
		default:
			return nil, p.expected(", or ) in the IN list")
		}
	}
}

// orderable checks an operand of < <= > >= or BETWEEN.
func (p *parser) orderable(n *node, op string) *Error {
	switch n.typ {
	case yNum, yProp:
		return nil
	case yStr:
		return p.errAt(n.pos, "%s compares numbers; a string compares with = <> or IN only", op)
	case yNull:
		return p.errAt(n.pos, "%s cannot compare NULL (test it with IS NULL)", op)
	}
	return p.errAt(n.pos, "%s cannot compare a condition", op)
}

var typeNames = [...]string{yCond: "a condition", yNull: "NULL", yNum: "a number", yStr: "a string", yProp: "a property"}

// cmp builds the comparison op of left and right, checking their types.
func (p *parser) cmp(op token, left, right *node) (*node, *Error) {
	switch op.kind {
	case tLt, tLe, tGt, tGe:
		for _, k := range []*node{left, right} {
			if err := p.orderable(k, quoteToken(op.text)); err != nil {
				return nil, err
			}
		}
	default: // = <>
		for _, k := range []*node{left, right} {
			if k.typ == yNull {
				return nil, p.errAt(k.pos, "NULL cannot be compared with %s: test it with IS NULL or IS NOT NULL", quoteToken(op.text))
			}
		}
		if left.typ != yProp && right.typ != yProp && left.typ != right.typ {
			return nil, p.errAt(right.pos, "%s cannot compare %s with %s", quoteToken(op.text), typeNames[left.typ], typeNames[right.typ])
		}
	}
	return &node{kind: nCmp, typ: yCond, pos: left.pos, op: op.kind, kids: []*node{left, right}}, nil
}

func (p *parser) unary() (*node, *Error) {
	t := p.peek()
	switch t.kind {
	case tNot, tMinus, tPlus:
		p.take()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		x, err := p.unary()
		p.depth--
		if err != nil {
			return nil, err
		}
		if t.kind == tNot {
			if x.typ == yProp {
				return nil, p.errAt(x.pos, "NOT needs a condition, found the property %s: NOT binds to the operand right after it (write NOT (%s = …) or %s <> …)", cut(x.name), cut(x.name), cut(x.name))
			}
			if err := p.condition(x, "NOT"); err != nil {
				return nil, err
			}
			return &node{kind: nNot, typ: yCond, pos: t.pos, kids: []*node{x}}, nil
		}
		if x.typ != yNum {
			return nil, p.errAt(x.pos, "%s applies to a number, found %s", quoteToken(t.text), typeNames[x.typ])
		}
		if t.kind == tMinus {
			x.val.i, x.val.f = -x.val.i, -x.val.f
		}
		x.pos = t.pos
		return x, nil
	}
	return p.primary()
}

func (p *parser) primary() (*node, *Error) {
	t := p.peek()
	switch t.kind {
	case tString:
		p.take()
		return &node{kind: nLit, typ: yStr, pos: t.pos, val: value{k: kString, s: t.text}}, nil
	case tInt:
		p.take()
		return &node{kind: nLit, typ: yNum, pos: t.pos, val: value{k: kInt, i: t.i}}, nil
	case tFloat:
		p.take()
		return &node{kind: nLit, typ: yNum, pos: t.pos, val: value{k: kFloat, f: t.f}}, nil
	case tTrue, tFalse:
		p.take()
		return &node{kind: nLit, typ: yCond, pos: t.pos, val: boolOf(t.kind == tTrue)}, nil
	case tNull:
		p.take()
		return &node{kind: nLit, typ: yNull, pos: t.pos, val: vNull}, nil
	case tIdent:
		p.take()
		p.props = append(p.props, Ref{Name: t.text, Position: t.pos}) // a byte offset until Compile converts it
		return &node{kind: nProp, typ: yProp, pos: t.pos, name: t.text}, nil
	case tLParen:
		p.take()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		n, err := p.or()
		p.depth--
		if err != nil {
			return nil, err
		}
		if p.peek().kind != tRParen {
			if p.peek().kind == tNot {
				return nil, p.errAt(p.peek2().pos, "expected BETWEEN or IN after NOT, found %s", p.peek2().describe())
			}
			return nil, p.expected(fmt.Sprintf("an operator or the ) closing the ( at position %d", utf8.RuneCountInString(p.src[:t.pos])+1))
		}
		p.take()
		n.pos = t.pos
		return n, nil
	}
	return nil, p.expected("a property, a literal ('text', a number, TRUE, FALSE, NULL) or (")
}
