package api

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
)

// TestEveryRouteHasARule: every route of the /v1 router has a permission
// rule, and every rule names a route (a new route without a rule is
// refused to everyone, admins included, and fails here first).
func TestEveryRouteHasARule(t *testing.T) {
	routes, ok := NewHandler(Deps{}).(chi.Routes)
	require.True(t, ok)
	seen := map[string]bool{}
	var missing []string
	require.NoError(t, chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		key := method + " " + strings.TrimSuffix(route, "/")
		seen[key] = true
		if _, ok := routeRules[key]; !ok {
			missing = append(missing, key)
		}
		return nil
	}))
	sort.Strings(missing)
	require.Empty(t, missing, "routes without a permission rule in auth.go's routeRules")
	for key := range routeRules {
		require.True(t, seen[key], "rule %q names no route", key)
	}
	for key, rule := range routeRules {
		method, pattern, _ := strings.Cut(key, " ")
		for _, param := range []string{rule.topicParam, rule.groupParam} {
			if param != "" {
				require.Contains(t, pattern, "{"+param+"}", "%s %s", method, pattern)
			}
		}
		require.True(t, rule.admin || rule.topicParam != "" || rule.groupParam != "" || rule.byHandler, "%s: a rule that allows any account", key)
	}
}

// TestRoutePermissions: the permissions the OpenAPI spec documents are
// the rules the authorization enforces, in the README's words.
func TestRoutePermissions(t *testing.T) {
	perms := RoutePermissions()
	require.Len(t, perms, len(routeRules))
	for route, want := range map[string]string{
		"POST /topics/{topic}/messages":                 "PUB on the topic",
		"POST /groups/{group}/topics/{topic}/pull":      "SUB on the topic and SUB on the group",
		"POST /groups/{group}/ack":                      "SUB on the group",
		"PUT /groups/{group}/offsets":                   "SUB on the group and SUB on every topic of the body",
		"GET /topics/{topic}/queues/{queueId}/messages": "SUB on the topic and SUB on the group of the query, when it names one",
		"GET /topics/{topic}":                           "PUB or SUB on the topic",
		"PUT /groups/{group}":                           "admin",
		"POST /groups/{group}/dlq/resend":               "admin",
	} {
		require.Equal(t, want, perms[route], route)
	}
	for route, perm := range perms {
		require.NotEmpty(t, perm, route)
	}
}
