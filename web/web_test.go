package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/docs"
	"github.com/mqgate/mqgate/web"
)

func serve(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	web.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// consoleScripts are the scripts index.html loads, in order, and their
// text joined: the console's whole program.
func consoleScripts(t *testing.T) ([]string, string) {
	t.Helper()
	index := serve(t, "/").Body.String()
	var names []string
	var all strings.Builder
	for _, m := range regexp.MustCompile(`<script (?:type="module" )?src="([^"]+)"(?: defer)?></script>`).FindAllStringSubmatch(index, -1) {
		rec := serve(t, "/"+m[1])
		require.Equal(t, http.StatusOK, rec.Code, m[1])
		names = append(names, m[1])
		all.WriteString(rec.Body.String()) // vendored libraries (vendor/README.md) too
	}
	require.NotEmpty(t, names, "index.html loads no script")
	// The modules api.js imports.
	for _, name := range []string{"vendor/mqgate-client.js", "vendor/openapi-fetch.mjs"} {
		rec := serve(t, "/"+name)
		require.Equal(t, http.StatusOK, rec.Code, name)
		all.WriteString(rec.Body.String())
	}
	return names, all.String()
}

func TestHandlerServesConsole(t *testing.T) {
	t.Parallel()
	for path, contentType := range map[string]string{
		"/":                             "text/html",
		"/app.js":                       "javascript",
		"/lib.js":                       "javascript",
		"/dlq-timers.js":                "javascript",
		"/app.css":                      "text/css",
		"/live.js":                      "javascript",
		"/sqs.js":                       "javascript",
		"/cluster.js":                   "javascript",
		"/api.js":                       "javascript",
		"/vendor/mqgate-client.js":      "javascript",
		"/vendor/openapi-fetch.mjs":     "javascript",
		"/vendor/openapi-fetch.LICENSE": "text/plain",
		"/vendor/uPlot.iife.min.js":     "javascript",
		"/vendor/uPlot.min.css":         "text/css",
		"/vendor/uPlot.LICENSE":         "text/plain",
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
	names, script := consoleScripts(t)
	require.Equal(t, []string{"api.js", "vendor/uPlot.iife.min.js", "lib.js", "dlq-timers.js", "live.js", "views.js", "sqs.js", "cluster.js", "app.js"}, names,
		"the API client (a module: deferred, run in document order) and the helpers load before the views")
	for name, text := range map[string]string{"index.html": index, "scripts": script} {
		require.NotRegexp(t, regexp.MustCompile(`(src|href)="(https?:)?//`), text, name)
		require.NotContains(t, text, "fetch(\"/", name)
	}
	require.True(t, strings.Contains(script, `const API = "../v1"`))
	require.NotContains(t, index, "<script>", "inline scripts are blocked by the CSP")
	require.NotContains(t, index, "style=", "inline styles are blocked by the CSP")
}

// TestConsoleNeverParsesHTML: message bodies, reasons and names are
// untrusted, so the console builds the DOM from text nodes only.
func TestConsoleNeverParsesHTML(t *testing.T) {
	t.Parallel()
	_, script := consoleScripts(t)
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		require.NotContains(t, script, sink)
	}
}

// TestConsoleMatchesAPI: the dead-letter view, the timers view, the SQS
// view, the cluster view and the delay scheduler table read fields and
// call paths that the API spec defines.
func TestConsoleMatchesAPI(t *testing.T) {
	t.Parallel()
	index := serve(t, "/").Body.String()
	_, script := consoleScripts(t)
	for _, id := range []string{`data-tab="dlq"`, `id="dlq-form"`, `id="dlq-list"`, `id="dlq-problem"`, `id="delay-levels"`, `id="scheduler"`,
		`data-tab="timers"`, `id="timers-form"`, `id="timer-list"`, `id="timers-problem"`,
		`data-tab="sqs"`, `id="sqs-form"`, `id="sqs-prefix"`, `id="sqs-result"`,
		`data-tab="cluster"`, `id="cluster-facts"`, `id="cluster-peers"`, `id="cluster-problem"`, `id="cluster-standalone"`} {
		require.Contains(t, index, id)
	}

	var spec struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(docs.OpenAPI, &spec))
	for schema, fields := range map[string][]string{
		"BrokerStatus": {"delayLevels", "scheduledTotal", "schedulerLatenessP50Ms", "schedulerLatenessP99Ms", "schedulerLatenessMaxMs",
			"timersPending", "nextTimerAt"},
		"DelayLevel":     {"level", "delayMs", "offset", "maxOffset", "backlog", "nextDueAt"},
		"DeadLetterList": {"items", "next"},
		"DeadLetter": {"messageId", "originMessageId", "originalTopic", "reconsumeTimes", "reason", "firstFailedAt", "deadAt",
			"status", "statusAt", "attempts", "tag", "keys", "properties", "body", "bodyEncoding"},
		"Attempt":        {"at", "outcome", "client", "reason", "delayLevel"},
		"ResendRequest":  {"messageIds", "filter"},
		"DLQFilter":      {"originalTopic", "from", "to", "reasonContains"},
		"ResendResponse": {"resent", "skipped"},
		"TimerList":      {"items", "next"},
		"Timer": {"id", "topic", "queueId", "deliverAt", "scheduledAt", "tag", "keys",
			"properties", "body", "bodyEncoding"},
		"RescheduleRequest": {"delayMs", "deliverAt"},
		"SQSQueueList":      {"enabled", "endpoint", "queues"},
		"SQSQueue": {"name", "fifo", "topic", "group", "url", "arn", "deadLetterQueue", "maxReceiveCount",
			"deadLetterSourceQueues", "attributes", "tags", "createdAt", "lastModifiedAt"},
		"Cluster":     {"nodeId", "role", "leader", "serving", "term", "commitIndex", "appliedIndex", "peers"},
		"ClusterPeer": {"id", "address", "role", "matchIndex", "lagBytes"},
	} {
		props := spec.Components.Schemas[schema].Properties
		for _, f := range fields {
			require.Contains(t, props, f, "%s.%s is not in the API spec", schema, f)
			require.Regexp(t, regexp.MustCompile(`\b`+f+`\b`), script, "the console does not use %s.%s", schema, f)
		}
	}
	for path, methods := range map[string][]string{
		"/broker/status":                  {"get"},
		"/groups/{group}/dlq":             {"get"},
		"/groups/{group}/dlq/{messageId}": {"get", "delete"},
		"/groups/{group}/dlq/resend":      {"post"},
		"/timers":                         {"get"},
		"/timers/{id}":                    {"get", "put", "delete"},
		"/sqs/queues":                     {"get"},
		"/cluster":                        {"get"},
	} {
		for _, method := range methods {
			require.Contains(t, spec.Paths[path], method, path)
		}
	}
	for _, call := range []string{`client.GET("/broker/status")`, `client.GET("/groups/{group}/dlq"`, `client.POST("/groups/{group}/dlq/resend"`,
		`client.DELETE("/groups/{group}/dlq/{messageId}"`, `client.GET("/groups/{group}/dlq/{messageId}"`,
		`client.GET("/timers"`, `client.GET("/timers/{id}"`, `client.PUT("/timers/{id}"`, `client.DELETE("/timers/{id}"`,
		`client.GET("/sqs/queues"`, `client.GET("/cluster")`} {
		require.Contains(t, script, call)
	}
	// Every call of api.js is an operation of the spec (tsc checks its
	// parameters and bodies: typecheck_test.go).
	calls := regexp.MustCompile(`client\.(GET|PUT|POST|PATCH|DELETE)\("([^"]+)"`).FindAllStringSubmatch(script, -1)
	require.Greater(t, len(calls), 30)
	for _, c := range calls {
		require.Contains(t, spec.Paths[c[2]], strings.ToLower(c[1]), "%s %s is not in the API spec", c[1], c[2])
	}
}
