package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/rs/cors"

	"github.com/mqgate/mqgate/api"
)

// Defences against web pages (the browser as a confused deputy):
//
//   - DNS rebinding. A page of evil.example whose name is made to resolve
//     to 127.0.0.1 sends its requests to this server with "Host:
//     evil.example". Every request's Host must be an IP address (a page
//     can only be served from an address by that address: no rebinding),
//     a single-label name (localhost, a container's or Compose service's
//     name: no public DNS serves those) or a name under .localhost, the
//     host of --listen, --admin-listen or --advertise-addr, or one of
//     --allowed-hosts (the names clients and proxies use); other hosts get
//     421 host-not-allowed. "*" in --allowed-hosts turns the check off.
//   - Cross-site requests. A page may POST text/plain (a "simple" request,
//     sent without a CORS preflight) to the send endpoint of any server
//     the browser reaches. A state-changing request (POST, PUT, PATCH,
//     DELETE) whose Origin header is present must come from the server's
//     own origin (the console) or from an origin of --cors-allowed-origins,
//     else it gets 403 origin-not-allowed and nothing happens. Clients
//     that are no browser (curl, SDKs) send no Origin and are not
//     affected.
//   - CORS for the allowed origins: preflights are answered (rs/cors)
//     before authentication, and answers carry Access-Control-Allow-Origin
//     for them, so that a web app of an allowed origin can call the API
//     with its own Authorization header (no cookies are used).
//
// X-Forwarded-Host and the like are never read: the Host a proxy sends
// must itself be allowed (a proxy that forwards the client's Host needs
// that name in --allowed-hosts).

// hostPolicy decides which Host headers are served.
type hostPolicy struct {
	// any turns the check off ("*").
	any bool
	// names are the allowed host names, lower case, without port.
	names []string
}

// newHostPolicy builds the policy: allowed plus the hosts of listen and
// advertise when they are names.
func newHostPolicy(allowed []string, listen, advertise string) hostPolicy {
	var p hostPolicy
	for _, h := range allowed {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "*" {
			p.any = true
		}
		if h != "" {
			p.names = append(p.names, strings.TrimSuffix(h, "."))
		}
	}
	for _, addr := range []string{listen, advertise} {
		if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
			p.names = append(p.names, strings.ToLower(strings.TrimSuffix(host, ".")))
		}
	}
	return p
}

// allows reports whether a request for host (a Host header, with or
// without port) may be served.
func (p hostPolicy) allows(hostport string) bool {
	if p.any {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if !strings.Contains(host, ".") || strings.HasSuffix(host, ".localhost") {
		// localhost, and single-label names (a container's or a
		// Compose service's name): no public DNS answers for those, so no
		// page can rebind one.
		return true
	}
	return slices.Contains(p.names, host)
}

// check refuses a request whose Host is not allowed with 421.
func (p hostPolicy) check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.allows(r.Host) {
			api.WriteError(w, r, fmt.Errorf("%w: host %s is not served here; add it to --allowed-hosts if clients use that name", api.ErrHostNotAllowed, quoteHost(r.Host)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// quoteHost quotes a Host header for a detail, cut to 64 bytes.
func quoteHost(h string) string {
	if len(h) > 64 {
		h = h[:64] + "…"
	}
	return fmt.Sprintf("%q", h)
}

// originPolicy checks the Origin of state-changing requests and answers
// CORS for the allowed origins.
type originPolicy struct {
	// cors is nil without allowed origins.
	cors *cors.Cors
}

// newOriginPolicy builds the policy of the allowed origins
// ("https://app.example", or "*" for any).
func newOriginPolicy(origins []string) originPolicy {
	var list []string
	for _, o := range origins {
		if o = strings.TrimSpace(o); o != "" {
			list = append(list, strings.TrimSuffix(o, "/"))
		}
	}
	if len(list) == 0 {
		return originPolicy{}
	}
	return originPolicy{cors: cors.New(cors.Options{
		AllowedOrigins: list,
		AllowedMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete},
		// Any request header: the origins are trusted ones, and message
		// properties travel in X-Mqgate-Property-<name> headers.
		AllowedHeaders: []string{"*"},
		ExposedHeaders: []string{"X-Request-Id", "Retry-After", "Location", "WWW-Authenticate", "Idempotent-Replayed"},
		MaxAge:         600,
	})}
}

// stateChanging are the methods the Origin check applies to.
var stateChanging = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// sameOrigin reports whether origin is the request's own (the console
// served by this server): the Origin's host and port equal the Host.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Host
	if port := u.Port(); (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		host = u.Hostname()
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return strings.EqualFold(host, r.Host)
}

// handler answers preflights, adds CORS headers for allowed origins, and
// refuses state-changing requests of other origins.
func (p originPolicy) handler(next http.Handler) http.Handler {
	gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin, present := r.Header["Origin"]
		if present && slices.Contains(stateChanging, r.Method) && !sameOrigin(origin[0], r) &&
			(p.cors == nil || !p.cors.OriginAllowed(r)) {
			api.WriteError(w, r, fmt.Errorf("%w: %s %s from origin %s: a web page of another origin may not change anything here (allow it with --cors-allowed-origins)",
				api.ErrOriginNotAllowed, r.Method, r.URL.EscapedPath(), quoteHost(origin[0])))
			return
		}
		next.ServeHTTP(w, r)
	})
	if p.cors == nil {
		return gate
	}
	return p.cors.Handler(gate)
}
