package broker

import "context"

// clientKey is the context key of the calling client's id.
type clientKey struct{}

// WithClient returns ctx carrying the calling client's id (the transport
// takes it from the X-Mqgate-Client-Id header); "" makes ctx carry none.
// Leases and failed attempts record it, so a dead letter's history says
// which consumer failed it, and in a broadcasting group it names the
// consumer instance a request acts for (broadcast.go).
func WithClient(ctx context.Context, id string) context.Context {
	if id == "" && ClientOf(ctx) == "" {
		return ctx
	}
	return context.WithValue(ctx, clientKey{}, id)
}

// ClientOf returns the client id carried by ctx ("" when none).
func ClientOf(ctx context.Context) string {
	id, _ := ctx.Value(clientKey{}).(string)
	return id
}

// clientOf is ClientOf.
func clientOf(ctx context.Context) string { return ClientOf(ctx) }
