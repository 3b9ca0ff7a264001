package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestServerEndpoints: the real server serves its probes, the OpenAPI
// documents, the console, problems for unknown routes, no pprof by
// default, a message through the real broker, and its metrics.
func TestServerEndpoints(t *testing.T) {
	t.Parallel()
	b := servertest.Start(t, func(c *server.Config) {
		c.SegmentSize = 8 << 20
		c.MaxMessageSize = 64 << 10
		c.MaxRequestSize = 128 << 10
	})

	for _, path := range []string{"/livez", "/healthz", "/readyz"} {
		status, _, body := get(t, b, path)
		require.Equal(t, http.StatusOK, status, path)
		require.Equal(t, "ok\n", body, path)
	}

	status, contentType, body := get(t, b, "/openapi.json")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "application/json", contentType)
	var spec struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &spec))
	require.Equal(t, "3.0.3", spec.OpenAPI)
	require.Contains(t, spec.Paths, "/topics/{topic}/messages")
	require.Contains(t, spec.Paths, "/groups/{group}/topics/{topic}/pull")

	// The Swagger UI shows the OpenAPI 3.0 spec, and the handler's own
	// doc.json is that spec too (never swag's Swagger 2.0 document).
	status, _, body = get(t, b, "/swagger/index.html")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "swagger-ui")
	require.Contains(t, body, `url: "..\/openapi.json"`, "the UI loads /openapi.json") // JS-escaped slash
	status, _, body = get(t, b, "/swagger/doc.json")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"openapi": "3.0.3"`)
	require.NotContains(t, body, `"swagger": "2.0"`)

	status, contentType, body = get(t, b, "/ui/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, contentType, "text/html")
	require.Contains(t, body, "mqgate console")
	for _, asset := range []string{"/ui/app.js", "/ui/lib.js", "/ui/dlq-timers.js", "/ui/app.css"} {
		status, _, _ = get(t, b, asset)
		require.Equal(t, http.StatusOK, status, asset)
	}
	status, _, body = get(t, b, "/") // redirected to the console
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "mqgate console")

	status, contentType, _ = get(t, b, "/nope")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "application/problem+json", contentType)
	status, _, _ = get(t, b, "/debug/pprof/")
	require.Equal(t, http.StatusNotFound, status, "pprof is off by default")

	// A message through the real broker: the wiring, not the semantics.
	resp, err := http.Post(b.Base+"/v1/topics/smoke/messages", "application/json", strings.NewReader(`{"body":"hello"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Post(b.Base+"/v1/groups/g/topics/smoke/pull", "application/json", strings.NewReader(`{"waitMs":2000}`))
	require.NoError(t, err)
	var pulled api.PullResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&pulled))
	resp.Body.Close()
	require.Len(t, pulled.Messages, 1)
	require.Equal(t, "hello", pulled.Messages[0].Body)
	resp, err = http.Post(b.Base+"/v1/topics/smoke/messages", "text/plain", strings.NewReader(strings.Repeat("x", 64<<10+1)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "max-message-size reaches the API")

	_, _, body = get(t, b, "/metrics")
	require.Contains(t, body, `mqgate_http_requests_total{code="200",method="GET",route="/livez"} 1`)
	require.Contains(t, body, `mqgate_http_requests_total{code="200",method="POST",route="/v1/topics/{topic}/messages"} 1`)
	require.Contains(t, body, `mqgate_http_request_duration_seconds_bucket{method="POST",route="/v1/groups/{group}/topics/{topic}/pull"`)
	require.Contains(t, body, "mqgate_build_info{")
	require.Contains(t, body, "go_goroutines")

	require.NoError(t, server.HealthCheck(context.Background(), b.Srv.Addr()))
}
