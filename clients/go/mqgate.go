package mqgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// APIPrefix is the path every operation of the spec is under.
const APIPrefix = "/v1"

// New returns a client of the mqgate server at server, its base URL
// (http://127.0.0.1:8080; "/v1" is appended unless the URL ends with it).
// opts are the generated ClientOptions (WithHTTPClient,
// WithRequestEditorFn) and WithBasicAuth, WithBearerToken.
func New(server string, opts ...ClientOption) (*ClientWithResponses, error) {
	if server == "" {
		return nil, errors.New("mqgate: no server URL")
	}
	base := strings.TrimRight(server, "/")
	if !strings.HasSuffix(base, APIPrefix) {
		base += APIPrefix
	}
	return NewClientWithResponses(base, opts...)
}

// WithBasicAuth authenticates every request with HTTP Basic: an ACL
// file's accessKey and secretKey.
func WithBasicAuth(user, password string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.SetBasicAuth(user, password)
		return nil
	})
}

// WithBearerToken authenticates every request with a bearer token (a JWT
// the server's --jwt-secret or --jwt-jwks-url verifies).
func WithBearerToken(token string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
}

// WithProperty is a RequestEditorFn that sets the message property name
// of a raw send (octet-stream, text/plain or a binary batch) through its
// X-Mqgate-Property-<name> header. Header names are case-insensitive, so
// the server lower-cases the property name.
func WithProperty(name, value string) RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("X-Mqgate-Property-"+name, value)
		return nil
	}
}

// Response is what every generated *…Response has: its status and its
// raw body.
type Response interface {
	StatusCode() int
	Bytes() []byte
}

// Error is an answer other than 2xx: the RFC 9457 problem the server sent
// (application/problem+json), with its stable Code.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is the problem's stable code (topic-not-found,
	// invalid-argument, …); "" when the body was not a problem.
	Code string
	// Detail is the problem's human-readable explanation, if any.
	Detail string
	// Problem is the whole problem document (field, limit, position,
	// requestId, …); zero when the body was not a problem.
	Problem Problem
	// RetryAfter is the answer's Retry-After (429, 503), 0 without one.
	RetryAfter time.Duration
	// RequestID is the answer's X-Request-Id.
	RequestID string
	// Body is the raw body of the answer.
	Body []byte
}

// Error says the status, the code and the detail.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mqgate: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	} else if text := http.StatusText(e.Status); text != "" {
		b.WriteString(" " + strings.ToLower(text))
	}
	switch {
	case e.Detail != "":
		b.WriteString(": " + e.Detail)
	case e.Code == "" && len(e.Body) > 0:
		body := strings.TrimSpace(string(e.Body))
		if len(body) > 200 {
			body = body[:200] + "…"
		}
		b.WriteString(": " + body)
	}
	return b.String()
}

// Check passes a generated *…WithResponse call through: it returns resp
// and err as they are when err is set or the status is 2xx, and resp with
// an *Error otherwise.
//
//	res, err := mqgate.Check(c.GetTopicWithResponse(ctx, "orders"))
func Check[R Response](resp R, err error) (R, error) {
	if err != nil {
		return resp, err
	}
	if s := resp.StatusCode(); s >= 200 && s < 300 {
		return resp, nil
	}
	return resp, errorOf(resp)
}

// errorOf builds the *Error of a non-2xx response.
func errorOf(resp Response) *Error {
	e := &Error{Status: resp.StatusCode(), Body: resp.Bytes()}
	var p Problem
	if json.Unmarshal(e.Body, &p) == nil && p.Code != "" {
		e.Problem, e.Code = p, p.Code
		if p.Detail != nil {
			e.Detail = *p.Detail
		}
		if p.RequestId != nil {
			e.RequestID = *p.RequestId
		}
	}
	if h := httpResponse(resp); h != nil {
		if id := h.Header.Get("X-Request-Id"); id != "" {
			e.RequestID = id
		}
		e.RetryAfter = retryAfter(h.Header.Get("Retry-After"), time.Now())
	}
	return e
}

// httpResponse is the HTTPResponse field every generated response struct
// has (not reachable through a method of theirs).
func httpResponse(resp any) *http.Response {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("HTTPResponse")
	if !f.IsValid() {
		return nil
	}
	h, _ := f.Interface().(*http.Response)
	return h
}

// retryAfter reads a Retry-After value: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// ProblemCode is the problem code of err when it is (or wraps) an *Error,
// else "".
func ProblemCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsCode reports whether err is (or wraps) an *Error with problem code code.
func IsCode(err error, code string) bool { return err != nil && ProblemCode(err) == code }

// Ptr returns a pointer to v: the optional members of the generated
// request types are pointers (mqgate.Ptr("paid"), mqgate.Ptr(int64(5000))).
func Ptr[T any](v T) *T { return &v }
