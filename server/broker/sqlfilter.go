package broker

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mqgate/mqgate/server/broker/filter"
	"github.com/mqgate/mqgate/storage/message"
)

// SQL92 property filters (RocketMQ's MessageSelector.bySql): a group's
// subscription of a topic, or a pull, may carry one besides the tag
// expression. Pulls apply it in memory to every message the tag filter
// let through (consume.View.Accept), so a message that fails it is passed
// over and counts as consumed for the group, exactly like a message of
// another tag; the group's retries of the topic are filtered the same way.
// The language is package filter's; an expression is compiled once and
// kept in sqlCache, keyed by its text.

// MaxSQLBytes bounds an SQL92 filter, like a tag expression.
const MaxSQLBytes = filter.MaxBytes

// SQLError is an SQL92 filter that does not compile: the field that holds
// it ("subscriptions[1].sql", "sql"), the 1-based position (in characters)
// of the offending token and what was expected there. It unwraps to
// ErrInvalidSQL.
type SQLError struct {
	Field    string
	Position int
	Msg      string
}

func (e *SQLError) Error() string {
	return fmt.Sprintf("%v: %s at position %d: %s", ErrInvalidSQL, e.Field, e.Position, e.Msg)
}

// Unwrap returns ErrInvalidSQL.
func (e *SQLError) Unwrap() error { return ErrInvalidSQL }

// sqlCacheSize bounds the compiled expressions kept; the cache starts
// over when it is full.
const sqlCacheSize = 1024

// sqlCache holds compiled filters by their text. Compiled filters are
// immutable, so one serves every group and pull that uses the text.
var sqlCache = struct {
	sync.RWMutex
	m map[string]*filter.Expr
}{m: make(map[string]*filter.Expr)}

// compileSQL compiles the filter src held in field; "" is no filter (nil).
// The length limit is checked first; the filter may read the user
// properties and TAGS (the tag), never another property of the broker.
func compileSQL(field, src string) (*filter.Expr, error) {
	if src == "" {
		return nil, nil
	}
	if len(src) > MaxSQLBytes {
		return nil, limitErr(ErrValueTooLong, field, len(src), MaxSQLBytes)
	}
	sqlCache.RLock()
	e := sqlCache.m[src]
	sqlCache.RUnlock()
	if e != nil {
		return e, nil
	}
	e, err := filter.Compile(src)
	if err != nil {
		var fe *filter.Error
		if !errors.As(err, &fe) {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidSQL, field, err)
		}
		return nil, &SQLError{Field: field, Position: fe.Position, Msg: fe.Msg}
	}
	for _, ref := range e.Properties() {
		if _, sys := systemProperties[ref.Name]; sys && ref.Name != message.PropertyTags {
			return nil, &SQLError{Field: field, Position: ref.Position,
				Msg: fmt.Sprintf("%s is a property of the broker; a filter reads the message's own properties and TAGS (its tag)", ref.Name)}
		}
	}
	sqlCache.Lock()
	if len(sqlCache.m) >= sqlCacheSize {
		sqlCache.m = make(map[string]*filter.Expr)
	}
	sqlCache.m[src] = e
	sqlCache.Unlock()
	return e, nil
}

// tagMatcher compiles a tag expression ("", "*", "a", "a || b") into a
// tagsCode filter; nil accepts everything.
func tagMatcher(expr string) (func(int64) bool, error) {
	if len(expr) > MaxTagExpressionBytes {
		return nil, limitErr(ErrValueTooLong, "tagExpression", len(expr), MaxTagExpressionBytes)
	}
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return nil, nil
	}
	codes := map[int64]struct{}{}
	for _, part := range strings.Split(expr, "||") {
		tag := strings.TrimSpace(part)
		if tag == "" || strings.ContainsAny(tag, " \t") {
			return nil, fmt.Errorf("%w: tag expression %s: tags are separated by '||' and contain no white space", ErrInvalidArgument, QuoteValue(expr))
		}
		if tag == "*" {
			return nil, nil
		}
		codes[message.TagsCode(tag)] = struct{}{}
	}
	return func(code int64) bool { _, ok := codes[code]; return ok }, nil
}
