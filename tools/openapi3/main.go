// Command openapi3 converts the Swagger 2.0 spec that swag v1 generates
// (docs/swagger.json) into OpenAPI 3.0 (docs/openapi.json), which the
// server embeds and serves at /openapi.json and SDK generators consume.
// It then completes the document with what Swagger 2.0 cannot say or swag
// gets wrong (postprocess.go), reading the API package's Go types (-src)
// for number formats and nullable members.
//
//	go run ./tools/openapi3 -in docs/swagger.json -out docs/openapi.json
//	go run ./tools/openapi3 -check    # exit 1 when docs/openapi.json is stale
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
)

func main() {
	in := flag.String("in", "docs/swagger.json", "Swagger 2.0 input")
	out := flag.String("out", "docs/openapi.json", "OpenAPI 3.0 output")
	src := flag.String("src", "api", "directory of the Go package whose types are the schemas")
	check := flag.Bool("check", false, "do not write; exit 1 when -out differs from the conversion")
	flag.Parse()
	if err := run(*in, *out, *src, *check); err != nil {
		fmt.Fprintln(os.Stderr, "openapi3:", err)
		os.Exit(1)
	}
}

func run(in, out, srcDir string, check bool) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	types, err := parseWireTypes(srcDir)
	if err != nil {
		return err
	}
	converted, err := convert(src, types)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if check {
		current, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if !bytes.Equal(current, converted) {
			return fmt.Errorf("%s is stale: regenerate it from %s", out, in)
		}
		return nil
	}
	return os.WriteFile(out, converted, 0o644)
}

// convert turns a Swagger 2.0 document into a completed, validated,
// indented OpenAPI 3.0 document.
func convert(src []byte, types wireTypes) ([]byte, error) {
	var v2 openapi2.T
	if err := json.Unmarshal(src, &v2); err != nil {
		return nil, fmt.Errorf("parse swagger 2.0: %w", err)
	}
	v3, err := openapi2conv.ToV3(&v2)
	if err != nil {
		return nil, fmt.Errorf("convert to openapi 3: %w", err)
	}
	if err := postprocess(v3, types); err != nil {
		return nil, err
	}
	if err := v3.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate openapi 3: %w", err)
	}
	body, err := json.MarshalIndent(v3, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(body, '\n'), nil
}
