package broker

import "context"

// clientKey is the context key of the calling client's id.
type clientKey struct{}

// WithClient returns ctx carrying the calling client's id (the transport
// takes it from the X-Mqgate-Client-Id header). Leases and failed
// attempts record it, so a dead letter's history says which consumer
// failed it.
func WithClient(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, clientKey{}, id)
}

// clientOf returns the client id carried by ctx ("" when none).
func clientOf(ctx context.Context) string {
	id, _ := ctx.Value(clientKey{}).(string)
	return id
}
