package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/web"
)

func serve(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	web.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestHandlerServesConsole(t *testing.T) {
	t.Parallel()
	for path, contentType := range map[string]string{
		"/":        "text/html",
		"/app.js":  "javascript",
		"/app.css": "text/css",
	} {
		rec := serve(t, path)
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.Contains(t, rec.Header().Get("Content-Type"), contentType, path)
		require.Contains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'none'", path)
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), path)
	}
	require.Equal(t, http.StatusNotFound, serve(t, "/missing.js").Code)
}

// TestConsoleIsSelfContained: no CDN, no absolute URLs, and the API is
// reached relative to the console (../v1), so it works behind a prefix.
func TestConsoleIsSelfContained(t *testing.T) {
	t.Parallel()
	index := serve(t, "/").Body.String()
	script, err := io.ReadAll(serve(t, "/app.js").Body)
	require.NoError(t, err)
	for name, text := range map[string]string{"index.html": index, "app.js": string(script)} {
		require.NotRegexp(t, regexp.MustCompile(`(src|href)="(https?:)?//`), text, name)
		require.NotContains(t, text, "fetch(\"/", name)
	}
	require.True(t, strings.Contains(string(script), `const API = "../v1"`))
	require.NotContains(t, index, "<script>", "inline scripts are blocked by the CSP")
	require.NotContains(t, index, "style=", "inline styles are blocked by the CSP")
}
