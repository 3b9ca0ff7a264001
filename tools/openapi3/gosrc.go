package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
)

// wireField is what the Go source says about one JSON member of a wire
// type: what swag leaves out of the spec.
type wireField struct {
	// goType is the field's type as written ("int64", "*int64", "[]Message").
	goType string
	// omitempty: the member is left out when empty; without it the member
	// is always written (encoding/json), so it is required in responses.
	omitempty bool
}

// wireTypes maps a struct type name of the API package to its JSON
// members (embedded structs flattened, as encoding/json and swag do).
type wireTypes map[string]map[string]wireField

// parseWireTypes reads the struct types of the Go package in dir (test
// files excluded).
func parseWireTypes(dir string) (wireTypes, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	structs := map[string]*ast.StructType{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
		}
	}
	if len(structs) == 0 {
		return nil, fmt.Errorf("no struct types in %s", dir)
	}
	out := wireTypes{}
	var collect func(name string, depth int) (map[string]wireField, error)
	collect = func(name string, depth int) (map[string]wireField, error) {
		st, ok := structs[name]
		if !ok {
			return nil, fmt.Errorf("%s: no struct type %s", dir, name)
		}
		if depth > 8 {
			return nil, fmt.Errorf("%s: embedding of %s is too deep", dir, name)
		}
		fields := map[string]wireField{}
		for _, f := range st.Fields.List {
			tag := ""
			if f.Tag != nil {
				tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
			}
			if tag == "-" {
				continue
			}
			jsonName, opts, _ := strings.Cut(tag, ",")
			if len(f.Names) == 0 { // embedded
				if jsonName != "" {
					return nil, fmt.Errorf("%s.%s: a named embedded field is not supported", name, typeString(f.Type))
				}
				embedded, err := collect(typeString(f.Type), depth+1)
				if err != nil {
					return nil, err
				}
				for k, v := range embedded {
					if _, dup := fields[k]; !dup {
						fields[k] = v
					}
				}
				continue
			}
			for _, n := range f.Names {
				if !n.IsExported() {
					continue
				}
				member := jsonName
				if member == "" {
					member = n.Name
				}
				fields[member] = wireField{goType: typeString(f.Type), omitempty: hasOption(opts, "omitempty")}
			}
		}
		return fields, nil
	}
	for name := range structs {
		// A struct that embeds a type of another package is no wire type
		// (a response writer wrapper, say): left out.
		if fields, err := collect(name, 0); err == nil {
			out[name] = fields
		}
	}
	return out, nil
}

// hasOption reports whether the comma-separated tag options hold opt.
func hasOption(opts, opt string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// typeString renders a type expression as written.
func typeString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return "*" + typeString(t.X)
	case *ast.ArrayType:
		return "[]" + typeString(t.Elt)
	case *ast.MapType:
		return "map[" + typeString(t.Key) + "]" + typeString(t.Value)
	case *ast.SelectorExpr:
		return typeString(t.X) + "." + t.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

// numberFormat is the OpenAPI format of a Go number type ("" for int and
// non-numbers: Go's int is what generators make of a bare integer).
func numberFormat(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int64", "uint64":
		return "int64"
	case "int32", "uint32":
		return "int32"
	case "float64":
		return "double"
	case "float32":
		return "float"
	}
	return ""
}
