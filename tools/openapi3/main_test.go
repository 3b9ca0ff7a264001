package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
)

// loadSpec reads the committed docs/openapi.json.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../../docs/openapi.json")
	require.NoError(t, err)
	return doc
}

// TestRequiredFollowsOmitempty: in every schema of a Go type, a member
// is required exactly when the Go field has no omitempty (encoding/json
// always writes it), except the request members the server does not insist
// on (validate:"optional") and SendRequest's body (a batch has none). A
// nullable member is a pointer without omitempty; a number has its Go
// type's format.
func TestRequiredFollowsOmitempty(t *testing.T) {
	types, err := parseWireTypes("../../api")
	require.NoError(t, err)
	doc := loadSpec(t)
	optional := map[string]bool{"LeaseItem.invisibleMs": true, "SendRequest.body": true}
	checked := 0
	for name, ref := range doc.Components.Schemas {
		fields, ok := types[name]
		if !ok {
			require.True(t, strings.HasSuffix(name, "Patch"), "schema %s has no Go type", name)
			require.Empty(t, ref.Value.Required, "a merge patch requires nothing: %s", name)
			continue
		}
		for prop, p := range ref.Value.Properties {
			f := fields[prop]
			want := !f.omitempty && !optional[name+"."+prop]
			require.Equal(t, want, slices.Contains(ref.Value.Required, prop), "%s.%s required", name, prop)
			if p.Ref == "" {
				require.Equal(t, strings.HasPrefix(f.goType, "*") && !f.omitempty, p.Value.Nullable, "%s.%s nullable", name, prop)
				if p.Value.Type.Is(openapi3.TypeInteger) || p.Value.Type.Is(openapi3.TypeNumber) {
					require.Equal(t, numberFormat(f.goType), p.Value.Format, "%s.%s format (Go %s)", name, prop, f.goType)
				}
			}
			checked++
		}
	}
	require.Greater(t, checked, 200)
}

// runStep converts a Swagger 2.0 document given as JSON and runs one
// post-processing step on it.
func runStep(t *testing.T, v2 string, step func(*openapi3.T, wireTypes) error) error {
	t.Helper()
	types, err := parseWireTypes("../../api")
	require.NoError(t, err)
	var doc openapi2.T
	require.NoError(t, json.Unmarshal([]byte(v2), &doc))
	v3, err := openapi2conv.ToV3(&doc)
	require.NoError(t, err)
	return step(v3, types)
}

// minimal is a Swagger 2.0 document of one operation; op is its JSON.
func minimal(op string) string {
	return `{"swagger":"2.0","info":{"title":"t","version":"1"},"basePath":"/v1","paths":{"/topics/{topic}":{"get":` + op + `}},
	"definitions":{"Topic":{"type":"object","properties":{"name":{"type":"string"},"queues":{"type":"integer"}}},
	"Problem":{"type":"object","properties":{"code":{"type":"string"}}}}}`
}

// TestStepsRefuseWhatGeneratorsCannotUse: the conversion fails on an
// operation without a camelCase operationId, on an error response that is
// not a Problem and on a schema no Go type of the API package stands
// behind; it adds the Go types' formats.
func TestStepsRefuseWhatGeneratorsCannotUse(t *testing.T) {
	params := `"parameters":[{"name":"topic","in":"path","required":true,"type":"string"}]`
	ok := `{"operationId":"getTopic",` + params + `,"produces":["application/json","application/problem+json"],"responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/Topic"}},"404":{"description":"topic-not-found","schema":{"$ref":"#/definitions/Problem"}}}}`
	for _, step := range []func(*openapi3.T, wireTypes) error{checkOperationIDs, applyWireTypes, fixMediaTypes} {
		require.NoError(t, runStep(t, minimal(ok), step))
	}

	err := runStep(t, minimal(strings.Replace(ok, `"operationId":"getTopic",`, "", 1)), checkOperationIDs)
	require.ErrorContains(t, err, "no operationId")
	err = runStep(t, minimal(strings.Replace(ok, `"operationId":"getTopic"`, `"operationId":"get_topic"`, 1)), checkOperationIDs)
	require.ErrorContains(t, err, "camelCase")
	err = runStep(t, minimal(strings.Replace(ok, `"404":{"description":"topic-not-found","schema":{"$ref":"#/definitions/Problem"}}`, `"404":{"description":"topic-not-found","schema":{"$ref":"#/definitions/Topic"}}`, 1)), fixMediaTypes)
	require.ErrorContains(t, err, "is not a Problem")
	err = runStep(t, strings.Replace(minimal(ok), `"Topic":{`, `"Nope":{"type":"object"},"Topic":{`, 1), applyWireTypes)
	require.ErrorContains(t, err, "schema Nope: no struct type")
	err = runStep(t, strings.Replace(minimal(ok), `"queues":{"type":"integer"}`, `"queues":{"type":"integer"},"shards":{"type":"integer"}`, 1), applyWireTypes)
	require.ErrorContains(t, err, "property shards is no JSON member")
}

// TestEveryOperationIsComplete: what the post-processing promises holds for
// every operation of the committed spec.
func TestEveryOperationIsComplete(t *testing.T) {
	doc := loadSpec(t)
	ops := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops++
			what := method + " " + path
			require.NotEmpty(t, op.OperationID, what)
			require.NotNil(t, op.Security, what)
			require.NotEmpty(t, op.Extensions[permissionExtension], what)
			require.NotNil(t, op.Responses.Default(), what)
			for _, status := range []string{"400", "401", "403", "429", "500", "503"} {
				require.NotNil(t, op.Responses.Value(status), "%s: %s", what, status)
			}
			for code, resp := range op.Responses.Map() {
				require.NotNil(t, resp.Value.Headers[headerRequestID], "%s %s: X-Request-Id", what, code)
				for mt := range resp.Value.Content {
					if isErrorStatus(code) {
						require.Equal(t, mediaProblem, mt, "%s %s", what, code)
					} else if mt != mediaEventStream {
						// One media type, so that generated clients do not
						// type the answer as a union: a binary rendering asked
						// for with Accept is listed in an extension.
						require.Equal(t, mediaJSON, mt, "%s %s", what, code)
					} else {
						// Server-sent events name their data's schema.
						require.Len(t, resp.Value.Content, 1, "%s %s", what, code)
						require.Equal(t, "#/components/schemas/Stats", resp.Value.Extensions[eventDataSchema], "%s %s", what, code)
					}
				}
			}
		}
	}
	require.Equal(t, len(mustRead(t)), ops)
	send := doc.Paths.Value("/topics/{topic}/messages").Post.RequestBody.Value.Content
	for _, mt := range []string{"application/octet-stream", "application/vnd.mqgate.batch"} {
		require.Equal(t, "binary", send[mt].Schema.Value.Format, mt)
	}
	require.True(t, send["text/plain"].Schema.Value.Type.Is(openapi3.TypeString))
	require.Equal(t, "#/components/schemas/SendRequest", send["application/json"].Schema.Ref)
	push := doc.Paths.Value("/groups/{group}").Put.Callbacks["push"]
	require.NotNil(t, push)
	require.Empty(t, push.Ref, "the callback is inline: ogen refuses a $ref to components/callbacks")
	require.Empty(t, doc.Components.Callbacks)
	pull := doc.Paths.Value("/groups/{group}/topics/{topic}/pull").Post.Responses.Status(200).Value
	require.Equal(t, "#/components/schemas/PullResponse", pull.Content[mediaJSON].Schema.Ref)
	require.Len(t, pull.Content, 1)
	require.Equal(t, []any{"application/vnd.mqgate.batch"}, pull.Extensions[alternativeMediaTypes])
	pulled := doc.Components.Schemas["PulledMessage"].Value
	require.Subset(t, pulled.Required, []string{"receipt", "leaseUntil"}, "a pulled message always has its lease")
	require.NotContains(t, doc.Components.Schemas["Message"].Value.Properties, "receipt", "a looked-up message has no lease")
}

// mustRead lists the operations of docs/swagger.json (swag's own output).
func mustRead(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/swagger.json")
	require.NoError(t, err)
	var v2 struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &v2))
	var ops []string
	for path, methods := range v2.Paths {
		for method := range methods {
			ops = append(ops, method+" "+path)
		}
	}
	return ops
}
