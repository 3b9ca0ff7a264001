package server_test

// End-to-end tests of the defences against web pages (server/browser.go)
// with real requests carrying the headers browsers send: a Host of a
// rebound name gets 421, a state-changing request of a foreign Origin
// gets 403 and stores nothing, clients without Origin are unaffected, and
// the allowed origins get CORS (preflights answered before
// authentication).

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// browserRequest performs a request with the given Host (empty: the
// server's address) and extra headers.
func (e *e2eServer) browserRequest(t *testing.T, method, base, path, host, contentType, body string, header http.Header) servertest.Resp {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := e.Client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := servertest.Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if r.Status >= 400 {
		servertest.CheckProblem(t, method+" "+path, r)
	}
	return r
}

// TestE2EHostCheck: the text/plain POST of a page whose name was rebound
// to the server's address carries its own Host and is refused with 421,
// storing nothing; IP addresses, single-label and localhost names and
// --allowed-hosts are served; "*" serves any Host; the admin listener
// checks too.
func TestE2EHostCheck(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) {
		c.AllowedHosts = []string{"gw.example.com"}
		c.AdminListen = "127.0.0.1:0"
	})
	_, port, _ := strings.Cut(e.Srv.Addr(), ":")
	p := servertest.WantProblem(t, e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/rebound/messages", "evil.example:"+port, "text/plain", "stolen", nil),
		http.StatusMisdirectedRequest, "host-not-allowed")
	require.Contains(t, p.Detail, `host "evil.example:`+port+`" is not served here`)
	servertest.WantProblem(t, e.Get(t, "/v1/topics/rebound"), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.browserRequest(t, http.MethodGet, e.Base, "/livez", "evil.example", "", "", nil), http.StatusMisdirectedRequest, "host-not-allowed")
	servertest.WantProblem(t, e.browserRequest(t, http.MethodGet, "http://"+e.Srv.AdminAddr(), "/metrics", "evil.example", "", "", nil), http.StatusMisdirectedRequest, "host-not-allowed")

	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost", "[::1]:" + port, "10.1.2.3", "mqgate:" + port,
		"console.localhost", "gw.example.com", "GW.example.com.:" + port} {
		r := e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/hosts/messages", host, "text/plain", "ok", nil)
		require.Equal(t, http.StatusOK, r.Status, "Host %s: %s", host, r)
	}

	open := startE2E(t, func(c *server.Config) { c.AllowedHosts = []string{"*"} })
	r := open.browserRequest(t, http.MethodPost, open.Base, "/v1/topics/any/messages", "evil.example", "text/plain", "ok", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
}

// TestE2EOriginCheck: a state-changing request with a foreign Origin is
// refused (403) and stores nothing, while requests without Origin
// (curl, SDKs), of the server's own origin (the console), and reads are
// served — without CORS headers for the foreign origin.
func TestE2EOriginCheck(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	evil := http.Header{"Origin": {"https://evil.example"}}
	p := servertest.WantProblem(t, e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/csrf/messages", "", "text/plain", "forged", evil), http.StatusForbidden, "origin-not-allowed")
	require.Contains(t, p.Detail, `from origin "https://evil.example"`)
	for _, method := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete} {
		servertest.WantProblem(t, e.browserRequest(t, method, e.Base, "/v1/topics/csrf", "", "application/json", `{}`, evil), http.StatusForbidden, "origin-not-allowed")
	}
	servertest.WantProblem(t, e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/csrf/messages", "", "text/plain", "forged", http.Header{"Origin": {"null"}}), http.StatusForbidden, "origin-not-allowed")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/csrf"), http.StatusNotFound, "topic-not-found")

	servertest.Decode(t, e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/csrf/messages", "", "text/plain", "from curl", nil), http.StatusOK, nil)
	own := http.Header{"Origin": {e.Base}}
	servertest.Decode(t, e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/csrf/messages", "", "text/plain", "from the console", own), http.StatusOK, nil)
	r := e.browserRequest(t, http.MethodGet, e.Base, "/v1/topics/csrf", "", "", "", evil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"), "a foreign page cannot read the answer")
}

// TestE2ECORS: with --cors-allowed-origins a page of that origin gets its
// preflight answered before authentication and its requests served with
// Access-Control-Allow-Origin; other origins get neither.
func TestE2ECORS(t *testing.T) {
	t.Parallel()
	e := startAuthE2E(t, newACL(t, matrixACL(t)), func(c *server.Config) { c.CORSAllowedOrigins = []string{"https://app.example"} })
	app := "https://app.example"
	preflight := http.Header{
		"Origin":                         {app},
		"Access-Control-Request-Method":  {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type, x-mqgate-property-order-id"},
	}
	r := e.browserRequest(t, http.MethodOptions, e.Base, "/v1/topics/orders/messages", "", "", "", preflight)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r)
	require.Equal(t, app, r.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "POST", r.Header.Get("Access-Control-Allow-Methods"))
	require.Equal(t, "authorization, content-type, x-mqgate-property-order-id", r.Header.Get("Access-Control-Allow-Headers"))
	require.Equal(t, "600", r.Header.Get("Access-Control-Max-Age"))

	h := basic("producer", producerSecret)
	h.Set("Origin", app)
	r = e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/orders/messages", "", "application/json", `{"body":"from the app"}`, h)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	require.Equal(t, app, r.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, r.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id")
	// A 401 is readable too (the app can show it).
	r = e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/orders/messages", "", "application/json", `{"body":"x"}`, http.Header{"Origin": {app}})
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Equal(t, app, r.Header.Get("Access-Control-Allow-Origin"))

	preflight.Set("Origin", "https://evil.example")
	r = e.browserRequest(t, http.MethodOptions, e.Base, "/v1/topics/orders/messages", "", "", "", preflight)
	require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	h.Set("Origin", "https://evil.example")
	servertest.WantProblem(t, e.browserRequest(t, http.MethodPost, e.Base, "/v1/topics/orders/messages", "", "application/json", `{"body":"x"}`, h), http.StatusForbidden, "origin-not-allowed")
}
