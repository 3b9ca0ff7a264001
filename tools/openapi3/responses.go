package main

import (
	"fmt"
	"mime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Media types of the API.
const (
	mediaJSON    = "application/json"
	mediaProblem = "application/problem+json"
	mediaText    = "text/plain"
)

// problemRef is the schema of every error body.
const problemRef = "#/components/schemas/Problem"

// Reusable headers (components/headers) and what they say.
const (
	headerRequestID      = "X-Request-Id"
	headerRetryAfter     = "Retry-After"
	headerLocation       = "Location"
	headerAuthenticate   = "WWW-Authenticate"
	headerComponentsPath = "#/components/headers/"
)

// isJSONMedia reports whether a media type is JSON (application/json or
// application/*+json).
func isJSONMedia(mediaType string) bool {
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		return false
	}
	return mt == mediaJSON || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// alternativeMediaTypes is the response extension that lists the media
// types a client gets only by asking for them with Accept.
const alternativeMediaTypes = "x-mqgate-alternative-media-types"

// mediaEventStream is the media type of server-sent events, and
// eventDataSchema the response extension naming the schema of each
// event's JSON data.
const (
	mediaEventStream = "text/event-stream"
	eventDataSchema  = "x-mqgate-event-data"
)

// fixMediaTypes gives every response its media types: a 2xx body is
// application/json only (any non-JSON type the operation also produces
// goes to alternativeMediaTypes), an error body application/problem+json
// with the Problem schema (swag's @Produce lists both for every
// response). A request body of a non-JSON media type is bytes (format
// binary), or text for text/plain, not the JSON schema swag copies to
// every @Accept type.
func fixMediaTypes(doc *openapi3.T, _ wireTypes) error {
	return operations(doc, func(path, method string, op *openapi3.Operation) error {
		if rb := op.RequestBody; rb != nil && rb.Value != nil {
			for mt, media := range rb.Value.Content {
				switch {
				case isJSONMedia(mt):
				case mt == mediaText:
					media.Schema = openapi3.NewStringSchema().NewRef()
				default:
					media.Schema = openapi3.NewBytesSchema().NewRef()
					media.Schema.Value.Format = "binary"
				}
			}
		}
		for code, ref := range op.Responses.Map() {
			resp := ref.Value
			if resp == nil {
				return fmt.Errorf("response %s is a reference", code)
			}
			switch {
			case isErrorStatus(code):
				if len(resp.Content) == 0 {
					return fmt.Errorf("error response %s has no body: annotate it {object} Problem", code)
				}
				for mt, media := range resp.Content {
					if media.Schema == nil || media.Schema.Ref != problemRef {
						return fmt.Errorf("error response %s (%s) is not a Problem", code, mt)
					}
				}
				resp.Content = problemContent(doc)
			case resp.Content[mediaEventStream] != nil:
				// Server-sent events: the body is a text/event-stream whose
				// events carry the annotated schema as JSON data; OpenAPI 3.0
				// cannot say that, so the schema is named in an extension.
				data := resp.Content[mediaEventStream]
				if data.Schema == nil || data.Schema.Ref == "" {
					return fmt.Errorf("response %s: annotate the event data as {object} Type", code)
				}
				stream := openapi3.NewStringSchema()
				stream.Description = "Server-sent events; each event's data is a JSON " + strings.TrimPrefix(data.Schema.Ref, "#/components/schemas/") + "."
				resp.Content = openapi3.Content{mediaEventStream: &openapi3.MediaType{Schema: stream.NewRef()}}
				if resp.Extensions == nil {
					resp.Extensions = map[string]any{}
				}
				resp.Extensions[eventDataSchema] = data.Schema.Ref
			case len(resp.Content) > 0:
				media := resp.Content[mediaJSON]
				if media == nil {
					return fmt.Errorf("response %s has no %s body", code, mediaJSON)
				}
				// Another @Produce type (a binary rendering the client asks
				// for with Accept) is a negotiated alternative: listed in
				// x-mqgate-alternative-media-types, not as content, so that
				// generated clients type the answer as the JSON it is by
				// default instead of a union with a string. The operation's
				// description documents its format.
				var alternatives []string
				for mt := range resp.Content {
					if !isJSONMedia(mt) {
						alternatives = append(alternatives, mt)
					}
				}
				resp.Content = openapi3.Content{mediaJSON: media}
				if len(alternatives) > 0 {
					slices.Sort(alternatives)
					if resp.Extensions == nil {
						resp.Extensions = map[string]any{}
					}
					resp.Extensions[alternativeMediaTypes] = alternatives
				}
			}
		}
		return nil
	})
}

// isErrorStatus reports whether a response key is a 4xx or 5xx status (or
// default, which here is always an error).
func isErrorStatus(code string) bool {
	if code == "default" {
		return true
	}
	n, err := strconv.Atoi(code)
	return err == nil && n >= 400
}

// problemContent is the body of an error response.
func problemContent(doc *openapi3.T) openapi3.Content {
	return openapi3.Content{mediaProblem: &openapi3.MediaType{Schema: openapi3.NewSchemaRef(problemRef, doc.Components.Schemas["Problem"].Value)}}
}

// commonError is an error every operation can answer, whatever its
// handler does: the middleware in front of every route.
type commonError struct {
	status string
	// codes are the problem codes, as in the @Failure descriptions.
	codes []string
	// why explains them when the operation had no such response yet.
	why string
}

// commonErrors are the answers of the /v1 middleware (api/api.go's
// NewHandler: request scope, drain gate, authorization, rate limit,
// client identity) and of the server in front of it.
var commonErrors = []commonError{
	{"400", []string{"invalid-argument", "value-too-long"}, "a malformed X-Mqgate-Client-Id header"},
	{"401", []string{"unauthenticated"}, "with an ACL file: no or wrong credentials; WWW-Authenticate names the schemes"},
	{"403", []string{"forbidden", "origin-not-allowed"}, "the account lacks the operation's permission, the caller's address is outside a white list, or a cross-origin request comes from an origin not allowed"},
	{"429", []string{"rate-limited", "too-many-auth-failures"}, "the account's requestsPerSecond, or too many failed sign-ins from the address; Retry-After says when to come back"},
	{"500", []string{"internal"}, "the server log has the cause under the request id"},
	{"503", []string{"shutting-down"}, "the server is draining; retry on another instance or after Retry-After"},
}

// addCommonErrors adds the common errors to every operation (merging their
// codes into a response the operation already documents) and a default
// response for the rarer ones the server answers before any route.
func addCommonErrors(doc *openapi3.T, _ wireTypes) error {
	return operations(doc, func(path, method string, op *openapi3.Operation) error {
		for _, ce := range commonErrors {
			ref := op.Responses.Value(ce.status)
			if ref == nil {
				desc := strings.Join(ce.codes, ", ") + " (" + ce.why + ")"
				op.Responses.Set(ce.status, &openapi3.ResponseRef{Value: openapi3.NewResponse().WithDescription(desc).WithContent(problemContent(doc))})
				continue
			}
			desc := *ref.Value.Description
			var missing []string
			for _, code := range ce.codes {
				if !containsCode(desc, code) {
					missing = append(missing, code)
				}
			}
			if len(missing) > 0 {
				desc += "; " + strings.Join(missing, ", ") + " (" + ce.why + ")"
				ref.Value.Description = &desc
			}
		}
		if op.Responses.Default() == nil {
			op.Responses.Set("default", &openapi3.ResponseRef{Value: openapi3.NewResponse().
				WithDescription("Any other error, as a Problem: e.g. 421 host-not-allowed (a Host the server does not answer to), " +
					"431 header-too-large, 501 not-implemented (a transfer coding other than chunked), 504 timeout, 505 http-version-not-supported").
				WithContent(problemContent(doc))})
		}
		return nil
	})
}

// containsCode reports whether a response description lists a problem
// code (as a whole word).
func containsCode(desc, code string) bool {
	for i := 0; ; {
		j := strings.Index(desc[i:], code)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(code)
		before := start == 0 || !isCodeChar(desc[start-1])
		after := end == len(desc) || !isCodeChar(desc[end])
		if before && after {
			return true
		}
		i = end
	}
}

func isCodeChar(c byte) bool { return c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// addHeaders documents the response headers every operation shares, as
// components/headers: X-Request-Id on every answer of the API (on a
// success always; an error the server answers before the API's middleware,
// such as 421, has none), Retry-After on 409, 429, 503, 504 and 507 answers
// (when the server knows how long), WWW-Authenticate on 401 and Location
// on 201.
func addHeaders(doc *openapi3.T, _ wireTypes) error {
	if doc.Components.Headers == nil {
		doc.Components.Headers = openapi3.Headers{}
	}
	header := func(description string, schema *openapi3.Schema, example any) *openapi3.HeaderRef {
		return &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: description, Schema: schema.NewRef(), Example: example,
		}}}
	}
	seconds := openapi3.NewIntegerSchema()
	seconds.Min = new(float64)
	doc.Components.Headers[headerRequestID] = header("The request's id, also the requestId of a Problem and in the server's log lines of the request.",
		openapi3.NewStringSchema(), "d4m1c8sl0s73b0h3ds2g")
	doc.Components.Headers[headerRetryAfter] = header("Seconds to wait before retrying (RFC 9110).", seconds, 1)
	doc.Components.Headers[headerAuthenticate] = header("The authentication schemes the server accepts (absent for a request with X-Requested-With: XMLHttpRequest).",
		openapi3.NewStringSchema(), `Basic realm="mqgate", charset="UTF-8"`)
	doc.Components.Headers[headerLocation] = header("The path of the created resource.", openapi3.NewStringSchema(), "/v1/topics/orders")
	doc.Components.Headers[headerLocation].Value.Required = true // on every 201

	use := func(resp *openapi3.Response, name string, required bool) {
		if resp.Headers == nil {
			resp.Headers = openapi3.Headers{}
		}
		if required && !doc.Components.Headers[name].Value.Required {
			// A reference cannot change the component's required flag:
			// copy the component.
			h := *doc.Components.Headers[name].Value
			h.Required = true
			resp.Headers[name] = &openapi3.HeaderRef{Value: &h}
			return
		}
		resp.Headers[name] = &openapi3.HeaderRef{Ref: headerComponentsPath + name, Value: doc.Components.Headers[name].Value}
	}
	return operations(doc, func(path, method string, op *openapi3.Operation) error {
		codes := op.Responses.Keys()
		sort.Strings(codes)
		for _, code := range codes {
			resp := op.Responses.Value(code).Value
			use(resp, headerRequestID, strings.HasPrefix(code, "2"))
			switch code {
			case "201":
				use(resp, headerLocation, true)
			case "401":
				use(resp, headerAuthenticate, false)
			case "409", "429", "503", "504", "507":
				use(resp, headerRetryAfter, false)
			}
		}
		return nil
	})
}
