package main

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

const schemaPath = "#/components/schemas/"

// addMergePatchSchemas gives every PATCH operation's body its own schema.
// A PATCH body is a JSON merge patch (RFC 7396) of the resource's PUT
// body: every member may be left out (it stays), null resets it, and an
// object member merges member by member, so none of the PUT schema's
// required members is required. An array replaces the whole list, so its
// items keep their schema. XRequest's patch schema is XPatch.
func addMergePatchSchemas(doc *openapi3.T, _ wireTypes) error {
	return operations(doc, func(path, method string, op *openapi3.Operation) error {
		if method != "PATCH" {
			return nil
		}
		if op.RequestBody == nil || op.RequestBody.Value == nil {
			return fmt.Errorf("a PATCH without a body")
		}
		for mt, media := range op.RequestBody.Value.Content {
			if media.Schema == nil || media.Schema.Ref == "" {
				return fmt.Errorf("the %s body is no schema reference", mt)
			}
			ref, err := patchSchema(doc, media.Schema.Ref, 0)
			if err != nil {
				return err
			}
			media.Schema = ref
		}
		return nil
	})
}

// patchSchema returns a reference to the merge-patch schema of the schema
// at ref, creating it (and those of its object members) on first use.
func patchSchema(doc *openapi3.T, ref string, depth int) (*openapi3.SchemaRef, error) {
	name, ok := strings.CutPrefix(ref, schemaPath)
	if !ok || doc.Components.Schemas[name] == nil {
		return nil, fmt.Errorf("no schema %s", ref)
	}
	if depth > 8 {
		return nil, fmt.Errorf("%s nests too deep", name)
	}
	patchName := strings.TrimSuffix(name, "Request") + "Patch"
	if existing := doc.Components.Schemas[patchName]; existing != nil {
		return openapi3.NewSchemaRef(schemaPath+patchName, existing.Value), nil
	}
	src := doc.Components.Schemas[name].Value
	if !src.Type.Is(openapi3.TypeObject) {
		return nil, fmt.Errorf("%s is no object", name)
	}
	patch := *src
	patch.Required = nil
	patch.Description = "A JSON merge patch (RFC 7396) of " + name + ": a member left out stays, null resets it to its default, an object member merges member by member."
	patch.Properties = make(openapi3.Schemas, len(src.Properties))
	doc.Components.Schemas[patchName] = &openapi3.SchemaRef{Value: &patch} // before recursing: a cycle ends here
	for prop, p := range src.Properties {
		var member *openapi3.Schema
		switch {
		case p.Ref != "":
			inner, err := patchMember(doc, p.Ref, depth)
			if err != nil {
				return nil, err
			}
			member = &openapi3.Schema{AllOf: openapi3.SchemaRefs{inner}}
		case len(p.Value.AllOf) == 1 && p.Value.AllOf[0].Ref != "":
			inner, err := patchMember(doc, p.Value.AllOf[0].Ref, depth)
			if err != nil {
				return nil, err
			}
			copied := *p.Value
			copied.AllOf = openapi3.SchemaRefs{inner}
			member = &copied
		default:
			copied := *p.Value
			member = &copied
		}
		member.Nullable = true
		if member.Type == nil && len(member.AllOf) == 1 && member.AllOf[0].Value.Type != nil {
			// nullable applies to the schema's own type (OpenAPI 3.0.3).
			t := member.AllOf[0].Value.Type.Clone()
			member.Type = &t
		}
		patch.Properties[prop] = &openapi3.SchemaRef{Value: member}
	}
	return openapi3.NewSchemaRef(schemaPath+patchName, &patch), nil
}

// patchMember is the schema of an object member inside a patch: the
// member's own patch schema when it is an object, else itself.
func patchMember(doc *openapi3.T, ref string, depth int) (*openapi3.SchemaRef, error) {
	name, _ := strings.CutPrefix(ref, schemaPath)
	target := doc.Components.Schemas[name]
	if target == nil {
		return nil, fmt.Errorf("no schema %s", ref)
	}
	if !target.Value.Type.Is(openapi3.TypeObject) {
		return openapi3.NewSchemaRef(ref, target.Value), nil
	}
	return patchSchema(doc, ref, depth+1)
}
