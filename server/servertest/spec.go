package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/mqgate/mqgate/docs"
)

// Every response a test client of this package receives from the API
// (/v1/…) is validated against the OpenAPI spec the server serves
// (docs/openapi.json): its status must be documented for the operation,
// and its media type, body and headers must match. A mismatch fails the
// test at its end, listing each one. A request that is no operation of
// the spec (an unknown path or method) is not checked. A test that sends
// deliberately malformed HTTP through the client opts out with
// Server.WithoutSpecCheck.

// beforeRouting are the statuses the server answers before any route runs
// (the spec's default response on every operation): 417
// expectation-failed, 421 host-not-allowed, 431 header-too-large, 501 for
// a transfer coding, 505 http-version-not-supported.
var beforeRouting = map[int]bool{417: true, 421: true, 431: true, 501: true, 505: true}

// specHost is the host the spec's single server is given for routing.
const specHost = "http://mqgate.test"

// loadSpec parses and validates docs.OpenAPI, once.
var loadSpec = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load docs/openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("docs/openapi.json is invalid: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: specHost + "/v1"}}
	return doc, nil
})

// spec is the router of the spec's operations.
var spec = sync.OnceValues(func() (routers.Router, error) {
	doc, err := loadSpec()
	if err != nil {
		return nil, err
	}
	return legacy.NewRouter(doc)
})

// pushCallback is the spec's description of a push delivery: the POST of
// the putGroup operation's push callback.
const pushCallback = "push"

// ValidatePushRequest checks a request the gateway POSTed to a push
// endpoint (body already read) against the spec's push callback: its
// Standard Webhooks and X-Mqgate-* headers, media type and body.
func ValidatePushRequest(r *http.Request, body []byte) error {
	doc, err := loadSpec()
	if err != nil {
		return err
	}
	var cb *openapi3.CallbackRef
	if group := doc.Paths.Value("/groups/{group}"); group != nil && group.Put != nil {
		cb = group.Put.Callbacks[pushCallback]
	}
	if cb == nil || cb.Value == nil || cb.Value.Len() != 1 {
		return fmt.Errorf("docs/openapi.json has no %s callback of one path on putGroup", pushCallback)
	}
	var item *openapi3.PathItem
	for _, pi := range cb.Value.Map() {
		item = pi
	}
	if item.Post == nil || r.Method != http.MethodPost {
		return fmt.Errorf("a push is a POST (got %s), and the callback describes one", r.Method)
	}
	req := r.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(body))
	input := &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: doc, Path: r.URL.Path, PathItem: item, Method: http.MethodPost, Operation: item.Post},
		Options: &openapi3filter.Options{MultiError: true},
	}
	if err := openapi3filter.ValidateRequest(context.Background(), input); err != nil {
		return fmt.Errorf("push request to %s does not match the %s callback of docs/openapi.json: %w", r.URL.Path, pushCallback, err)
	}
	return nil
}

// ValidateResponse checks one response of the API against the spec: nil
// when it conforms or when method and path (with its query) are no
// operation of the spec.
func ValidateResponse(method, pathAndQuery string, status int, header http.Header, body []byte) error {
	router, err := spec()
	if err != nil {
		return err
	}
	req := httptest.NewRequest(method, specHost+pathAndQuery, nil)
	route, params, err := router.FindRoute(req)
	if err != nil {
		return nil // not an operation (404, 405): nothing to check against
	}
	if status >= 400 && route.Operation.Responses.Status(status) == nil && !beforeRouting[status] {
		// The spec's default response is a Problem, so the check below
		// would pass; an operation's own errors must be listed, though.
		return fmt.Errorf("%s %s -> %d: operation %s does not list status %d (only its default response covers it): add an @Failure",
			method, pathAndQuery, status, route.Operation.OperationID, status)
	}
	if alternative(route.Operation, status, header.Get("Content-Type")) {
		return nil // a rendering asked for with Accept: its format is the operation's description's
	}
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt == "text/event-stream" {
		if err := validateEventStream(route, status, body); err != nil {
			return fmt.Errorf("%s %s -> %d does not match docs/openapi.json (operation %s): %w", method, pathAndQuery, status, route.Operation.OperationID, err)
		}
		return nil
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 status,
		Header:                 header,
		Options:                opts,
	}
	input.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return fmt.Errorf("%s %s -> %d does not match docs/openapi.json (operation %s): %w", method, pathAndQuery, status, route.Operation.OperationID, err)
	}
	return nil
}

// alternative reports whether contentType is a media type the response
// of op for status lists in x-mqgate-alternative-media-types (a rendering
// the client asks for with Accept, documented in the operation's
// description but not as content, so that generated clients see JSON
// only).
func alternative(op *openapi3.Operation, status int, contentType string) bool {
	ref := op.Responses.Status(status)
	if ref == nil || ref.Value == nil || contentType == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	list, _ := ref.Value.Extensions["x-mqgate-alternative-media-types"].([]any)
	for _, v := range list {
		if s, ok := v.(string); ok && strings.EqualFold(s, mt) {
			return true
		}
	}
	return false
}

// specChecker collects the mismatches of one server's responses and
// reports them when the test ends.
type specChecker struct {
	mu       sync.Mutex
	failures []string
	checked  int
}

// report fails t with every mismatch seen (run by a cleanup, in t's own
// goroutine, after the server closed).
func (c *specChecker) report(t testing.TB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	const most = 10
	for i, f := range c.failures {
		if i == most {
			t.Errorf("… and %d more responses that do not match the spec", len(c.failures)-most)
			break
		}
		t.Error(f)
	}
}

func (c *specChecker) record(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked++
	if err != nil {
		c.failures = append(c.failures, err.Error())
	}
}

// specTransport validates each /v1 response it carries.
type specTransport struct {
	next    http.RoundTripper
	checker *specChecker
}

// RoundTrip passes req on and validates the response. It reads the whole
// body to do so (API responses are never streamed) and hands the caller
// the same bytes, or the same read error after them.
func (s *specTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/v1/") || req.Method == http.MethodHead {
		return resp, err
	}
	body, readErr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if readErr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{readErr}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	err = ValidateResponse(req.Method, req.URL.RequestURI(), resp.StatusCode, resp.Header, body)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		// Every problem any test meets speaks to the caller.
		var p struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &p) == nil {
			if derr := CheckDetail(p.Detail); derr != nil {
				err = fmt.Errorf("%s %s -> %d: %w", req.Method, req.URL.RequestURI(), resp.StatusCode, derr)
			}
		}
	}
	s.checker.record(err)
	return resp, nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// checkedClient returns a copy of c whose responses checker validates.
func checkedClient(c *http.Client, checker *specChecker) *http.Client {
	copied := *c
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	if st, ok := next.(*specTransport); ok {
		next = st.next
	}
	copied.Transport = &specTransport{next: next, checker: checker}
	return &copied
}

// uncheckedClient returns c without the spec check.
func uncheckedClient(c *http.Client) *http.Client {
	st, ok := c.Transport.(*specTransport)
	if !ok {
		return c
	}
	copied := *c
	copied.Transport = st.next
	return &copied
}

// WithoutSpecCheck returns a copy of e whose client does not validate
// responses against the spec: for a test that sends deliberately
// malformed requests the spec cannot describe. Like With, the copy shares
// the server.
func (e *Server) WithoutSpecCheck() *Server {
	copied := *e
	copied.Client = uncheckedClient(e.Client)
	copied.closed = true
	return &copied
}

// CloseIdleConnections closes the idle connections of the transport
// underneath (http.Client.CloseIdleConnections looks for it).
func (s *specTransport) CloseIdleConnections() {
	if c, ok := s.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// OperationID is the operationId of the spec's operation for method and
// path (with its query), "" when there is none.
func OperationID(method, pathAndQuery string) string {
	router, err := spec()
	if err != nil {
		return ""
	}
	route, _, err := router.FindRoute(httptest.NewRequest(method, specHost+pathAndQuery, nil))
	if err != nil {
		return ""
	}
	return route.Operation.OperationID
}

// OperationIDs lists the operationId of every operation of the spec.
func OperationIDs() []string {
	var ids []string
	doc, err := loadSpec()
	if err != nil {
		return nil
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			ids = append(ids, op.OperationID)
		}
	}
	sort.Strings(ids)
	return ids
}

// Operation is one operation of the spec: its method and path template
// (/v1/topics/{topic}).
type Operation struct {
	Method, Path string
}

// Operations lists every operation of the spec, sorted by path and method.
func Operations() []Operation {
	doc, err := loadSpec()
	if err != nil {
		return nil
	}
	var ops []Operation
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, Operation{Method: method, Path: "/v1" + path})
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Path != ops[j].Path {
			return ops[i].Path < ops[j].Path
		}
		return ops[i].Method < ops[j].Method
	})
	return ops
}

// validateEventStream checks server-sent events: the response lists
// text/event-stream and names its events' schema in x-mqgate-event-data;
// every event's data is JSON of that schema (a "problem" event's, a
// Problem).
func validateEventStream(route *routers.Route, status int, body []byte) error {
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil || ref.Value.Content.Get("text/event-stream") == nil {
		return fmt.Errorf("status %d lists no text/event-stream content", status)
	}
	name, _ := ref.Value.Extensions["x-mqgate-event-data"].(string)
	schemas := route.Spec.Components.Schemas
	data := schemas[strings.TrimPrefix(name, "#/components/schemas/")]
	if data == nil || data.Value == nil {
		return fmt.Errorf("x-mqgate-event-data %q names no schema", name)
	}
	events := 0
	for _, block := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n") {
		event, payload := "message", ""
		for _, line := range strings.Split(block, "\n") {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				payload += value
			}
		}
		if payload == "" {
			continue
		}
		events++
		schema := data.Value
		if event == "problem" {
			schema = schemas["Problem"].Value
		}
		var v any
		if err := json.Unmarshal([]byte(payload), &v); err != nil {
			return fmt.Errorf("event %d (%s): data is not JSON: %w", events, event, err)
		}
		if err := schema.VisitJSON(v); err != nil {
			return fmt.Errorf("event %d (%s): %w", events, event, err)
		}
	}
	if events == 0 {
		return fmt.Errorf("no event with data")
	}
	return nil
}
