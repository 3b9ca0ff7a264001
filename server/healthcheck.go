package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// ErrUnhealthy is wrapped by HealthCheck when the server answers but not 200.
var ErrUnhealthy = errors.New("server: unhealthy")

// HealthCheck GETs /livez of the server listening on listen (the --listen
// value; an empty or unspecified host means the loopback address) and
// returns nil on 200. It is the Docker HEALTHCHECK (mqgate healthcheck),
// which must not need curl in a distroless image.
func HealthCheck(ctx context.Context, listen string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("healthcheck: listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	url := "http://" + net.JoinHostPort(host, port) + "/livez"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", ErrUnhealthy, url, resp.Status)
	}
	return nil
}
