package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// postprocess completes the converted document with what swag cannot say
// in Swagger 2.0 or gets wrong. Each step is a rule over the whole
// document, not an edit of one operation, so that new operations follow it.
func postprocess(doc *openapi3.T, types wireTypes) error {
	steps := []struct {
		name string
		run  func(*openapi3.T, wireTypes) error
	}{
		{"operation ids", checkOperationIDs},
		{"wire types", applyWireTypes},
		{"send request", fixSendRequest},
		{"merge patches", addMergePatchSchemas},
		{"media types", fixMediaTypes},
		{"common errors", addCommonErrors},
		{"headers", addHeaders},
		{"security", addSecurity},
		{"push callback", addPushCallback},
	}
	for _, s := range steps {
		if err := s.run(doc, types); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// operations calls fn for every operation in path and method order.
func operations(doc *openapi3.T, fn func(path, method string, op *openapi3.Operation) error) error {
	paths := doc.Paths.Keys()
	sort.Strings(paths)
	for _, path := range paths {
		ops := doc.Paths.Value(path).Operations()
		methods := make([]string, 0, len(ops))
		for m := range ops {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		for _, m := range methods {
			if err := fn(path, m, ops[m]); err != nil {
				return fmt.Errorf("%s %s: %w", m, path, err)
			}
		}
	}
	return nil
}

var operationIDPattern = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// checkOperationIDs requires a camelCase operationId (swag's @ID) on every
// operation: generated clients name their methods after it, and without
// one they make up names from the path.
func checkOperationIDs(doc *openapi3.T, _ wireTypes) error {
	seen := map[string]string{}
	return operations(doc, func(path, method string, op *openapi3.Operation) error {
		switch {
		case op.OperationID == "":
			return fmt.Errorf("no operationId: add an @ID annotation")
		case !operationIDPattern.MatchString(op.OperationID):
			return fmt.Errorf("operationId %q is not camelCase", op.OperationID)
		case seen[op.OperationID] != "":
			return fmt.Errorf("operationId %q is also %s's", op.OperationID, seen[op.OperationID])
		}
		seen[op.OperationID] = method + " " + path
		return nil
	})
}

// applyWireTypes adds what the Go types say and swag drops: the format of
// fixed-size numbers (int64, int32, double; swag loses it on every field
// with a struct tag) and nullable for a pointer written without omitempty
// (encoding/json writes null). Every schema must be a struct of the API
// package, and every property one of its members.
func applyWireTypes(doc *openapi3.T, types wireTypes) error {
	names := make([]string, 0, len(doc.Components.Schemas))
	for name := range doc.Components.Schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fields, ok := types[name]
		if !ok {
			return fmt.Errorf("schema %s: no struct type %s in the API package", name, name)
		}
		schema := doc.Components.Schemas[name].Value
		for prop, ref := range schema.Properties {
			field, ok := fields[prop]
			if !ok {
				return fmt.Errorf("schema %s: property %s is no JSON member of the Go type", name, prop)
			}
			nullable := strings.HasPrefix(field.goType, "*") && !field.omitempty
			if ref.Ref != "" {
				if nullable {
					return fmt.Errorf("schema %s: %s is a nullable reference, which OpenAPI 3.0 cannot say", name, prop)
				}
				continue
			}
			s := ref.Value
			s.Nullable = s.Nullable || nullable
			target := s
			if s.Type.Is(openapi3.TypeArray) && s.Items != nil && s.Items.Ref == "" {
				target = s.Items.Value
			}
			if (target.Type.Is(openapi3.TypeInteger) || target.Type.Is(openapi3.TypeNumber)) && target.Format == "" {
				target.Format = numberFormat(strings.TrimPrefix(field.goType, "[]"))
			}
		}
	}
	return nil
}

// fixSendRequest: a send's JSON body is one message (body required) or a
// batch (only messages). Go embeds SendMessage in SendRequest, so swag
// copies SendMessage's required body into the batch form as well.
func fixSendRequest(doc *openapi3.T, _ wireTypes) error {
	ref := doc.Components.Schemas["SendRequest"]
	if ref == nil {
		return fmt.Errorf("no SendRequest schema")
	}
	s := ref.Value
	if _, ok := s.Properties["messages"]; !ok {
		return fmt.Errorf("SendRequest has no messages property")
	}
	s.Required = slices.DeleteFunc(s.Required, func(name string) bool { return name == "body" })
	if len(s.Required) == 0 {
		s.Required = nil
	}
	return nil
}
