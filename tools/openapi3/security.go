package main

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mqgate/mqgate/api"
)

// Security scheme names (components/securitySchemes).
const (
	schemeBasic  = "basicAuth"
	schemeBearer = "bearerAuth"
)

// permissionExtension carries an operation's permission, machine-readable.
const permissionExtension = "x-mqgate-permission"

// addSecurity declares the authentication schemes and puts on every
// operation its security requirement and the permission its route needs
// (api.RoutePermissions, the table the server enforces). A TLS client
// certificate also signs in, but OpenAPI 3.0 has no scheme for mutual TLS
// (3.1's mutualTLS): it is the empty requirement, which also stands for a
// server without an ACL file, where every request is anonymous.
func addSecurity(doc *openapi3.T, _ wireTypes) error {
	if doc.Components.SecuritySchemes == nil {
		doc.Components.SecuritySchemes = openapi3.SecuritySchemes{}
	}
	doc.Components.SecuritySchemes[schemeBasic] = &openapi3.SecuritySchemeRef{Value: &openapi3.SecurityScheme{
		Type: "http", Scheme: "basic",
		Description: "An account of the ACL file (--acl-file): accessKey and secretKey as HTTP Basic credentials (curl -u).",
	}}
	doc.Components.SecuritySchemes[schemeBearer] = &openapi3.SecuritySchemeRef{Value: &openapi3.SecurityScheme{
		Type: "http", Scheme: "bearer", BearerFormat: "JWT",
		Description: "A JWT signed with --jwt-secret (HMAC) or a key of --jwt-jwks-url, with exp; its sub claim (or --jwt-account-claim) names an account of the ACL file.",
	}}
	perms := api.RoutePermissions()
	used := map[string]bool{}
	err := operations(doc, func(path, method string, op *openapi3.Operation) error {
		route := strings.ToUpper(method) + " " + path
		perm, ok := perms[route]
		if !ok {
			return fmt.Errorf("no permission rule for %s in api/auth.go", route)
		}
		used[route] = true
		op.Security = &openapi3.SecurityRequirements{
			{schemeBasic: []string{}},
			{schemeBearer: []string{}},
			{}, // a TLS client certificate, or no ACL file
		}
		if op.Extensions == nil {
			op.Extensions = map[string]any{}
		}
		op.Extensions[permissionExtension] = perm
		sentence := "Permission with an ACL file: " + perm + "."
		if op.Description == "" {
			op.Description = sentence
		} else {
			op.Description += "\n\n" + sentence
		}
		return nil
	})
	if err != nil {
		return err
	}
	for route := range perms {
		if !used[route] {
			return fmt.Errorf("route %s has a permission rule but no operation in the spec", route)
		}
	}
	return nil
}
