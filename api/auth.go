package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
)

// Authenticator identifies the caller of a request; *auth.Guard
// satisfies it. Deps.Auth nil turns authentication off.
type Authenticator interface {
	// Authenticate returns the caller, or an error wrapping
	// auth.ErrUnauthenticated, auth.ErrForbidden or auth.ErrThrottled.
	Authenticate(r *http.Request) (*auth.Principal, error)
	// Challenge is the WWW-Authenticate value of a 401.
	Challenge() string
}

// routeRule is the permission one route needs. Deny by default: a route
// without a rule in routeRules is refused to everyone (TestEveryRouteHasARule
// keeps the table complete).
type routeRule struct {
	// admin: only admin accounts.
	admin bool
	// topicParam names the path parameter holding a topic, which the
	// caller must hold topicPerm on.
	topicParam string
	topicPerm  auth.Perm
	// groupParam names the path parameter holding a group, which the
	// caller must hold groupPerm on.
	groupParam string
	groupPerm  auth.Perm
	// bodyTopics says that the handler also checks a permission on every
	// topic the request body names (documentation: RoutePermissions).
	bodyTopics string
	// queryGroup says that the handler also checks this permission on the
	// group the query names, when it names one (documentation).
	queryGroup string
	// byHandler: the handler checks the permission on a resource the
	// path does not name (a transaction's topic); the rule only needs an
	// account.
	byHandler bool
}

var (
	adminOnly = routeRule{admin: true}
	// subGroup: SUB on the group of the path.
	subGroup = routeRule{groupParam: "group", groupPerm: auth.PermSub}
	// pubTxnTopic: PUB on the topic of the transaction the path names,
	// checked by the handler once it has looked the transaction up.
	pubTxnTopic = routeRule{byHandler: true}
)

// routeRules maps "METHOD pattern" (the /v1 router's patterns) to its
// rule. The choices, also in the README:
//
//   - Sending needs PUB on the topic; pull needs SUB on the topic and on
//     the group; reading a queue by offset needs SUB on the topic, and on
//     the group when the query names one (its filters and offsets apply).
//   - ack, nack, lease changes name only the group: they need SUB on the
//     group. Their receipts are unforgeable (HMAC) handles bound to that
//     group and were handed out by a pull, which needed SUB on the topic;
//     taking SUB on a topic away stops new pulls, and leases already out
//     expire.
//   - Offset commits need SUB on the group and on every topic the body
//     names (checked by the handler, which has decoded it); reading a
//     group's offsets, progress and configuration needs SUB on the group.
//   - A group's dead letters may be read (list, one) with SUB on the
//     group: they are that group's own undeliverable messages. Resending
//     and discarding them need admin.
//   - Transactions: a transactional send needs PUB on the topic and on
//     its producer group (a group of the file); committing, rolling back
//     and reading a transaction need PUB on its topic (checked by the
//     handler, which looks the transaction up); pulling a producer
//     group's checks needs PUB on that group.
//   - A topic's configuration may be read with PUB or SUB on it; listing
//     topics or groups, creating, changing or deleting them, push
//     configuration (part of a group's configuration), reset-offset,
//     skip-backlog, timers, broker status, stats, message lookups (by id,
//     key or store time) and the SQS endpoint's queues need admin.
//
// Admin accounts hold every permission. Auto-creation follows from these
// rules: only a PUB holder can send to (and so create) a topic, only a
// holder of SUB on topic and group can pull (and so create the group).
var routeRules = map[string]routeRule{
	"POST /topics/{topic}/messages":                 {topicParam: "topic", topicPerm: auth.PermPub},
	"GET /topics":                                   adminOnly,
	"GET /topics/{topic}":                           {topicParam: "topic", topicPerm: auth.PermAny},
	"GET /topics/{topic}/status":                    {topicParam: "topic", topicPerm: auth.PermAny},
	"PUT /topics/{topic}":                           adminOnly,
	"PATCH /topics/{topic}":                         adminOnly,
	"DELETE /topics/{topic}":                        adminOnly,
	"GET /topics/{topic}/queues/{queueId}/messages": {topicParam: "topic", topicPerm: auth.PermSub, queryGroup: "SUB"},

	"POST /groups/{group}/topics/{topic}/pull": {topicParam: "topic", topicPerm: auth.PermSub, groupParam: "group", groupPerm: auth.PermSub},
	"POST /groups/{group}/ack":                 subGroup,
	"POST /groups/{group}/nack":                subGroup,
	"POST /groups/{group}/leases":              subGroup,
	"GET /groups/{group}/offsets":              subGroup,
	"PUT /groups/{group}/offsets":              {groupParam: "group", groupPerm: auth.PermSub, bodyTopics: "SUB"},
	"GET /groups/{group}/progress":             subGroup,
	"GET /groups/{group}":                      subGroup,
	"GET /groups":                              adminOnly,
	"PUT /groups/{group}":                      adminOnly,
	"PATCH /groups/{group}":                    adminOnly,
	"DELETE /groups/{group}":                   adminOnly,
	"POST /groups/{group}/reset-offset":        adminOnly,
	"POST /groups/{group}/skip-backlog":        adminOnly,

	"GET /groups/{group}/dlq":                subGroup,
	"GET /groups/{group}/dlq/{messageId}":    subGroup,
	"DELETE /groups/{group}/dlq/{messageId}": adminOnly,
	"POST /groups/{group}/dlq/resend":        adminOnly,
	"GET /messages":                          adminOnly,
	"GET /topics/{topic}/messages":           adminOnly,
	"GET /messages/{messageId}":              adminOnly,
	"GET /messages/{messageId}/trace":        adminOnly,
	"GET /broker/status":                     adminOnly,
	"POST /broker/receipt-keys/rotate":       adminOnly,
	"GET /stats":                             adminOnly,
	"GET /cluster":                           adminOnly,
	"POST /cluster/learners":                 adminOnly,
	"POST /cluster/members/{id}/promote":     adminOnly,
	"DELETE /cluster/members/{id}":           adminOnly,
	"GET /sqs/queues":                        adminOnly,
	"GET /stats/stream":                      adminOnly,
	"GET /timers":                            adminOnly,
	"GET /timers/{id}":                       adminOnly,
	"PUT /timers/{id}":                       adminOnly,
	"DELETE /timers/{id}":                    adminOnly,

	"POST /transactions/{transactionId}/commit":               pubTxnTopic,
	"POST /transactions/{transactionId}/rollback":             pubTxnTopic,
	"GET /transactions/{transactionId}":                       pubTxnTopic,
	"POST /producer-groups/{producerGroup}/transactions/pull": {groupParam: "producerGroup", groupPerm: auth.PermPub},
}

// RoutePermissions returns, per route of the /v1 router ("METHOD
// pattern", as in "POST /topics/{topic}/messages"), the permission the
// route needs once an ACL file is given, in the README's words: "admin",
// or the permissions on the topic and group of the path ("SUB on the topic
// and SUB on the group"). tools/openapi3 writes them into the OpenAPI spec.
func RoutePermissions() map[string]string {
	out := make(map[string]string, len(routeRules))
	for route, rule := range routeRules {
		if rule.admin {
			out[route] = "admin"
			continue
		}
		var parts []string
		if rule.topicParam != "" {
			parts = append(parts, rule.topicPerm.String()+" on the topic")
		}
		if rule.groupParam != "" {
			parts = append(parts, rule.groupPerm.String()+" on the group")
		}
		if rule.bodyTopics != "" {
			parts = append(parts, rule.bodyTopics+" on every topic of the body")
		}
		if rule.queryGroup != "" {
			parts = append(parts, rule.queryGroup+" on the group of the query, when it names one")
		}
		if rule.byHandler {
			parts = append(parts, "PUB on the transaction's topic")
		}
		out[route] = strings.Join(parts, " and ")
	}
	return out
}

// principalKey is the context key of the authenticated caller outside a
// request scope (the API keeps it in the scope).
type principalKey struct{}

// principalFrom returns the authenticated caller of r.
func principalFrom(r *http.Request) (*auth.Principal, bool) {
	if s := scopeOf(r); s != nil && s.principal != nil {
		return s.principal, true
	}
	p, ok := r.Context().Value(principalKey{}).(*auth.Principal)
	return p, ok
}

// authorize authenticates every request that matches a route of routes
// and checks its rule; a request matching no route goes on to the 404 or
// 405 answer (no handler runs). With Deps.Auth nil it does nothing.
func (h *handler) authorize(routes chi.Routes) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			guard := h.deps.Auth
			if guard == nil {
				next.ServeHTTP(w, r)
				return
			}
			path := r.URL.Path
			if r.URL.RawPath != "" {
				path = r.URL.RawPath
			}
			if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath != "" {
				path = rctx.RoutePath
			}
			match := chi.NewRouteContext()
			pattern := routes.Find(match, r.Method, path)
			if pattern == "" {
				next.ServeHTTP(w, r)
				return
			}
			p, ok := authenticate(w, r, guard)
			if !ok {
				return
			}
			rule, ok := routeRules[r.Method+" "+pattern]
			if !ok {
				if ev := logEvent(r, zerolog.ErrorLevel); ev != nil {
					ev.Str("route", r.Method+" "+pattern).Msg("route has no permission rule: refused")
				}
				WriteError(w, r, fmt.Errorf("%w: %s %s has no permission rule", auth.ErrForbidden, r.Method, pattern))
				return
			}
			if err := rule.check(p, r, match); err != nil {
				WriteError(w, r, err)
				return
			}
			if s := scopeOf(r); s != nil {
				s.principal = p
			} else {
				r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// authenticate runs guard on r; on failure it answers (401 with
// WWW-Authenticate, 403 or 429) and returns false. The account goes into
// the request's access-log line.
//
// A 401 to a script's request (X-Requested-With: XMLHttpRequest, as the
// console sends) has no WWW-Authenticate: with a Basic challenge the
// browser would put up its own password dialog over the page, which asks
// for credentials itself. Every other client (curl, SDKs) gets the
// challenge RFC 9110 asks for.
func authenticate(w http.ResponseWriter, r *http.Request, guard Authenticator) (*auth.Principal, bool) {
	p, err := guard.Authenticate(r)
	if err != nil {
		if errors.Is(err, auth.ErrUnauthenticated) && r.Header.Get("X-Requested-With") != "XMLHttpRequest" {
			w.Header().Set("WWW-Authenticate", guard.Challenge())
		}
		WriteError(w, r, err)
		return nil, false
	}
	return p, true
}

// check applies the rule to p with the path parameters of match.
func (rule routeRule) check(p *auth.Principal, r *http.Request, match *chi.Context) error {
	if rule.admin && !p.Admin() {
		return fmt.Errorf("%w: account %q is not an admin; %s %s needs admin", auth.ErrForbidden, p.Name(), r.Method, r.URL.EscapedPath())
	}
	for _, need := range []struct {
		kind  auth.Kind
		param string
		perm  auth.Perm
	}{{auth.Topic, rule.topicParam, rule.topicPerm}, {auth.Group, rule.groupParam, rule.groupPerm}} {
		if need.param == "" {
			continue
		}
		name := match.URLParam(need.param)
		if r.URL.RawPath != "" {
			// Routed on the escaped path: unescape as nameParam does, so
			// that the name checked is the name the handler uses.
			unescaped, err := url.PathUnescape(name)
			if err != nil {
				return fmt.Errorf("%w: %s %s is not a valid path segment", auth.ErrForbidden, need.kind, broker.QuoteValue(name))
			}
			name = unescaped
		}
		if !p.Can(need.kind, name, need.perm) {
			return forbidden(p, need.kind, name, need.perm)
		}
	}
	return nil
}

// forbidden is the error of a missing permission.
func forbidden(p *auth.Principal, kind auth.Kind, name string, perm auth.Perm) error {
	return fmt.Errorf("%w: account %q lacks %s on %s %s", auth.ErrForbidden, p.Name(), perm, kind, broker.QuoteValue(name))
}

// requireTopic checks, for a handler, a permission on a topic named in a
// request body (the route's rule covered the path). Without
// authentication it allows everything.
func requireTopic(r *http.Request, topic string, perm auth.Perm) error {
	p, ok := principalFrom(r)
	if !ok || p.Can(auth.Topic, topic, perm) {
		return nil
	}
	return forbidden(p, auth.Topic, topic, perm)
}

// requireGroup is requireTopic for a group a handler finds outside the
// path (a query parameter).
func requireGroup(r *http.Request, group string, perm auth.Perm) error {
	p, ok := principalFrom(r)
	if !ok || p.Can(auth.Group, group, perm) {
		return nil
	}
	return forbidden(p, auth.Group, group, perm)
}

// RequireAdmin lets only admin accounts through (the server guards
// /metrics and /debug/pprof with it). With guard nil it lets everything
// through.
func RequireAdmin(guard Authenticator) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if guard == nil {
				next.ServeHTTP(w, r)
				return
			}
			p, ok := authenticate(w, r, guard)
			if !ok {
				return
			}
			if !p.Admin() {
				WriteError(w, r, fmt.Errorf("%w: account %q is not an admin; %s needs admin", auth.ErrForbidden, p.Name(), r.URL.EscapedPath()))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
