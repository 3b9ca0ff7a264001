// Package matrix proves that docs/openapi.json generates working clients
// with the generators people use, beyond the two clients this repository
// ships (clients/go, oapi-codegen with an overlay; clients/ts,
// openapi-typescript and openapi-fetch): ogen (ogen/, a Go module of its
// own pinning ogen v1.25.0 in go.mod and go.sum), oapi-codegen on the
// spec as it is, without clients/go's overlay (oapicodegen/, pinning
// v2.8.2), and @hey-api/openapi-ts (heyapi/, pinned in
// package-lock.json).
//
// matrix_test.go, part of `go test ./...` and so of `make test`
// (the ogen row and the oapi-codegen row without the overlay only with
// LONG=1: building either from a cold module cache takes minutes of the
// quick tier; clients/go runs oapi-codegen and the @hey-api row runs in
// every run), generates each client from the spec as it is into a temporary copy
// (generated code is never committed), builds it with a small program,
// and runs the program against a real server on loopback: it sends a
// message, pulls it (receipt and leaseUntil must be there), extends the
// lease (leaseUntil must move) and acks it, through a proxy that checks
// every answer against the spec. A generator that refuses the spec, code
// that does not compile, or a step that fails fails the test. Without
// node/npm, or without the Go module proxy and a module cache that holds
// the generator, a row skips with the reason, except under CI (CI set),
// where it fails.
package matrix
