package auth

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a request failed to authenticate (the reason label).
const (
	reasonMissing       = "missing"       // no Authorization header
	reasonMalformed     = "malformed"     // an Authorization header that does not parse
	reasonBadSecret     = "bad_secret"    // wrong secret key, or an unknown accessKey
	reasonBadSignature  = "bad_signature" // a SigV4 signature that does not verify, or an unknown access key id (SQS)
	reasonBadToken      = "bad_token"     // a bearer token that does not verify
	reasonUnknownClaim  = "unknown_claim" // a valid token naming no account
	reasonAddress       = "address"       // the address is outside a white list
	reasonNoBearer      = "bearer_off"    // a bearer token while none is accepted
	reasonUnknownCert   = "unknown_cert"  // a verified client certificate naming no account
	accountUnknownLabel = "_unknown"      // an accessKey not in the ACL
	accountNoneLabel    = "_none"         // no account named
	throttledAccount    = "account"       // scope label of throttling: an (account, address) pair
	reloadOK            = "ok"            // result labels of reloads and JWKS fetches
	reloadErr           = "error"
	jwksOK              = reloadOK
	jwksErr             = reloadErr
)

// Metrics are the authentication metrics; a nil *Metrics records nothing.
type Metrics struct {
	failures   *prometheus.CounterVec
	throttled  *prometheus.CounterVec
	reloads    *prometheus.CounterVec
	accounts   prometheus.Gauge
	lastReload prometheus.Gauge
	jwks       *prometheus.CounterVec
}

// NewMetrics returns the metrics; register them (a Collector) in the
// server's registry.
//
// Failures are counted per account (the accounts of the ACL, "_unknown"
// for any other accessKey, "_none" when none is named) and reason. They are
// not labelled by address: any host on the network could then mint series
// without bound. The failure limiter counts per (account, address)
// instead, and mqgate_auth_throttled_total{scope="account"} and a log
// line show a pair it slows.
func NewMetrics() *Metrics {
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqgate_auth_failures_total",
			Help: "Requests that failed to authenticate, by account (_unknown: an accessKey not in the ACL; _none: none named) and reason.",
		}, []string{"account", "reason"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqgate_auth_throttled_total",
			Help: "Failed authentications over the limit of their (account, address) pair: refused with 429 and answered late (scope account; correct credentials are never counted).",
		}, []string{"scope"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqgate_acl_reloads_total",
			Help: "ACL file reloads, by result (error: the last good version stays in force).",
		}, []string{"result"}),
		accounts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mqgate_acl_accounts",
			Help: "Accounts in the ACL in force.",
		}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mqgate_acl_loaded_timestamp_seconds",
			Help: "When the ACL in force was loaded (Unix time).",
		}),
		jwks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqgate_jwks_fetches_total",
			Help: "Fetches of the JWT key set (--jwt-jwks-url), by result.",
		}, []string{"result"}),
	}
	for _, r := range []string{reloadOK, reloadErr} {
		m.reloads.WithLabelValues(r)
	}
	return m
}

// collectors are the metrics' collectors.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.failures, m.throttled, m.reloads, m.accounts, m.lastReload, m.jwks}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *Metrics) failed(account, reason string) {
	if m != nil {
		m.failures.WithLabelValues(account, reason).Inc()
	}
}

func (m *Metrics) throttle(scope string) {
	if m != nil {
		m.throttled.WithLabelValues(scope).Inc()
	}
}

func (m *Metrics) reloaded(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues(reloadOK).Inc()
	} else {
		m.reloads.WithLabelValues(reloadErr).Inc()
	}
}

func (m *Metrics) loaded(acl *ACL, at time.Time) {
	if m != nil {
		m.accounts.Set(float64(len(acl.order)))
		m.lastReload.Set(float64(at.UnixNano()) / 1e9)
	}
}

func (m *Metrics) fetchedKeys(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.jwks.WithLabelValues(jwksOK).Inc()
	} else {
		m.jwks.WithLabelValues(jwksErr).Inc()
	}
}
