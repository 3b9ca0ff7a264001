package mqgate

// The client is generated from the committed spec by oapi-codegen, pinned
// by the version below (`make clients` runs these); never edit *.gen.go by
// hand.

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config types.cfg.yaml ../../docs/openapi.json
//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config client.cfg.yaml ../../docs/openapi.json
