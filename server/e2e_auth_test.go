package server_test

// End-to-end tests of authentication and authorization over real HTTP
// against the real server with an ACL file (server/auth/doc.go): the
// principal × operation matrix over every route of docs/openapi.json,
// offset commits naming other topics, the admin routes, the open routes.
// Reloads, key rotation, JWTs, logs and defaults are in
// e2e_auth_reload_test.go.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// writeACL writes an ACL file (mode 0600) and returns its path; rewriting
// an existing path replaces the file by a rename, as editors and
// configuration tools do.
func writeACL(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// newACL writes content to a fresh ACL file and returns its path.
func newACL(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeACL(t, path, content)
	return path
}

// startAuthE2E starts a server with the ACL file at path, polled every
// 10 ms, with a failure limit high enough for the tests that fail on
// purpose.
func startAuthE2E(t *testing.T, path string, opts ...func(*server.Config)) *e2eServer {
	t.Helper()
	return startE2E(t, append([]func(*server.Config){func(c *server.Config) {
		c.ACLFile = path
		c.ACLPollInterval = 10 * time.Millisecond
		c.AuthFailuresPerMinute = 100_000
	}}, opts...)...)
}

// basic is the Authorization header of HTTP Basic.
func basic(accessKey, secretKey string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(accessKey+":"+secretKey))}}
}

// bcryptHash hashes secret at bcrypt's lowest cost (tests only).
func bcryptHash(t *testing.T, secret string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
	require.NoError(t, err)
	return string(h)
}

// argon2Hash hashes secret with small argon2id parameters (tests only).
func argon2Hash(t *testing.T, secret string) string {
	t.Helper()
	salt := make([]byte, 16)
	_, err := rand.Read(salt)
	require.NoError(t, err)
	key := argon2.IDKey([]byte(secret), salt, 1, 8<<10, 1, 32)
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=1,p=1$%s$%s", 8<<10,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// from returns a copy of e whose requests leave from the source address
// ip (any address of 127.0.0.0/8 works on Linux's loopback).
func (e *e2eServer) from(t *testing.T, ip string) *e2eServer {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = dialer.DialContext
	t.Cleanup(transport.CloseIdleConnections)
	return &e2eServer{e.With(e.Base, &http.Client{Transport: transport, Timeout: 60 * time.Second})}
}

// The secrets of the matrix.
const (
	producerSecret = "producer-secret-1"
	consumerSecret = "consumer-secret-1"
	adminSecret    = "admin-secret-0001"
)

// matrixACL has one producer (PUB on orders and on the producer group
// order-service), one consumer (SUB on orders and billing), an admin
// usable from 127.0.0.1 only, and a global white list of 127.0.0.1 and
// 127.0.0.2.
func matrixACL(t *testing.T) string {
	return `
globalWhiteRemoteAddresses: ["127.0.0.1", "127.0.0.2"]
accounts:
  - accessKey: producer
    secretKey: ` + producerSecret + `
    topicPerms: ["orders=PUB"]
    groupPerms: ["order-service=PUB"]
  - accessKey: consumer
    secretKeyHash: "` + argon2Hash(t, consumerSecret) + `"
    topicPerms: ["orders=SUB"]
    groupPerms: ["billing=SUB"]
  - accessKey: admin
    secretKeyHash: "` + bcryptHash(t, adminSecret) + `"
    whiteRemoteAddress: "127.0.0.1"
    admin: true
`
}

// principal is one row of the matrix: who calls, from where.
type principal struct {
	name   string
	header http.Header
	from   string // source address
}

// matrixCall is one route's request: the path with its parameters filled
// in, a body, and which principals it allows.
type matrixCall struct {
	path, contentType, body string
	allowed                 []string // of producer, consumer, admin, anonymous
}

// matrixCalls is the expected matrix: every operation of
// docs/openapi.json (the test fails when the spec has one more) and the
// routes outside /v1.
func matrixCalls(messageID, txnID string) map[string]matrixCall {
	const js = "application/json"
	admin := []string{"admin"}
	consumer := []string{"consumer", "admin"}
	producer := []string{"producer", "admin"}
	everyone := []string{"anonymous", "producer", "consumer", "admin"}
	return map[string]matrixCall{
		"POST /topics/{topic}/messages":                 {"/v1/topics/orders/messages", js, `{"body":"m"}`, []string{"producer", "admin"}},
		"GET /topics":                                   {"/v1/topics", "", "", admin},
		"GET /topics/{topic}":                           {"/v1/topics/orders", "", "", []string{"producer", "consumer", "admin"}},
		"GET /topics/{topic}/status":                    {"/v1/topics/orders/status", "", "", []string{"producer", "consumer", "admin"}},
		"PUT /topics/{topic}":                           {"/v1/topics/orders", js, `{"queues":4}`, admin},
		"PATCH /topics/{topic}":                         {"/v1/topics/orders", "application/merge-patch+json", `{}`, admin},
		"DELETE /topics/{topic}":                        {"/v1/topics/doomed", "", "", admin},
		"GET /topics/{topic}/queues/{queueId}/messages": {"/v1/topics/orders/queues/0/messages", "", "", consumer},
		"POST /groups/{group}/topics/{topic}/pull":      {"/v1/groups/billing/topics/orders/pull", js, `{"waitMs":0,"maxMessages":1}`, consumer},
		"POST /groups/{group}/ack":                      {"/v1/groups/billing/ack", js, `{"receipts":["x"]}`, consumer},
		"POST /groups/{group}/nack":                     {"/v1/groups/billing/nack", js, `{"items":[{"receipt":"x"}]}`, consumer},
		"POST /groups/{group}/leases":                   {"/v1/groups/billing/leases", js, `{"items":[{"receipt":"x","invisibleMs":1000}]}`, consumer},
		"GET /groups/{group}/offsets":                   {"/v1/groups/billing/offsets", "", "", consumer},
		"PUT /groups/{group}/offsets":                   {"/v1/groups/billing/offsets", js, `{"offsets":[{"topic":"orders","queueId":0,"offset":0}]}`, consumer},
		"GET /groups/{group}/progress":                  {"/v1/groups/billing/progress", "", "", consumer},
		"GET /groups/{group}":                           {"/v1/groups/billing", "", "", consumer},
		"GET /groups":                                   {"/v1/groups", "", "", admin},
		"PUT /groups/{group}":                           {"/v1/groups/billing", js, `{"subscriptions":[{"topic":"orders"}]}`, admin},
		"PATCH /groups/{group}":                         {"/v1/groups/billing", "application/merge-patch+json", `{}`, admin},
		"DELETE /groups/{group}":                        {"/v1/groups/doomed", "", "", admin},
		"POST /groups/{group}/reset-offset":             {"/v1/groups/billing/reset-offset", js, `{"timestamp":"2020-01-01T00:00:00Z","topic":"orders"}`, admin},
		"GET /groups/{group}/dlq":                       {"/v1/groups/billing/dlq", "", "", consumer},
		"GET /groups/{group}/dlq/{messageId}":           {"/v1/groups/billing/dlq/" + messageID, "", "", consumer},
		"DELETE /groups/{group}/dlq/{messageId}":        {"/v1/groups/billing/dlq/" + messageID, "", "", admin},
		"POST /groups/{group}/dlq/resend":               {"/v1/groups/billing/dlq/resend", js, `{"messageIds":["` + messageID + `"]}`, admin},
		"GET /messages":                                 {"/v1/messages?topic=orders&key=k", "", "", admin},
		"GET /messages/{messageId}":                     {"/v1/messages/" + messageID, "", "", admin},
		"GET /messages/{messageId}/trace":               {"/v1/messages/" + messageID + "/trace", "", "", admin},
		"GET /broker/status":                            {"/v1/broker/status", "", "", admin},
		"POST /broker/receipt-keys/rotate":              {"/v1/broker/receipt-keys/rotate", "", "", admin},
		"GET /stats":                                    {"/v1/stats", "", "", admin},
		"GET /cluster":                                  {"/v1/cluster", "", "", admin},
		"POST /cluster/learners":                        {"/v1/cluster/learners", js, `{"id":4,"address":"127.0.0.1:7104"}`, admin},
		"POST /cluster/members/{id}/promote":            {"/v1/cluster/members/4/promote", "", "", admin},
		"DELETE /cluster/members/{id}":                  {"/v1/cluster/members/4", "", "", admin},
		"GET /sqs/queues":                               {"/v1/sqs/queues", "", "", admin},
		// An interval out of range: the handler answers 400 at once
		// instead of streaming, after the permission check.
		"GET /stats/stream":                 {"/v1/stats/stream?intervalMs=1", "", "", admin},
		"GET /topics/{topic}/messages":      {"/v1/topics/orders/messages?from=2020-01-01T00:00:00Z&to=2100-01-01T00:00:00Z", "", "", admin},
		"POST /groups/{group}/skip-backlog": {"/v1/groups/billing/skip-backlog", js, `{"topic":"orders"}`, admin},
		"GET /timers":                       {"/v1/timers", "", "", admin},
		"GET /timers/{id}":                  {"/v1/timers/nope", "", "", admin},
		"PUT /timers/{id}":                  {"/v1/timers/nope", js, `{"delayMs":1000}`, admin},
		"DELETE /timers/{id}":               {"/v1/timers/nope", "", "", admin},
		// Transactions: PUB on the transaction's topic (commit, rollback,
		// read) or on the producer group (checks).
		"POST /transactions/{transactionId}/commit":               {"/v1/transactions/" + txnID + "/commit", "", "", producer},
		"POST /transactions/{transactionId}/rollback":             {"/v1/transactions/" + txnID + "/rollback", "", "", producer},
		"GET /transactions/{transactionId}":                       {"/v1/transactions/" + txnID, "", "", producer},
		"POST /producer-groups/{producerGroup}/transactions/pull": {"/v1/producer-groups/order-service/transactions/pull", js, `{}`, producer},
		// Outside /v1: operator routes for admins, probes and static files
		// for everyone.
		"GET metrics":     {"/metrics", "", "", admin},
		"GET pprof":       {"/debug/pprof/", "", "", admin},
		"GET livez":       {"/livez", "", "", everyone},
		"GET readyz":      {"/readyz", "", "", everyone},
		"GET openapi":     {"/openapi.json", "", "", everyone},
		"GET swagger":     {"/swagger/index.html", "", "", everyone},
		"GET ui":          {"/ui/", "", "", everyone},
		"GET ui-app":      {"/ui/app.js", "", "", everyone},
		"GET not-a-route": {"/v1/nothing-here", "", "", nil}, // 404 for everyone, no credentials asked
	}
}

// TestE2EAuthMatrix calls every route as every principal — anonymous, a
// wrong secret, a producer (PUB on one topic), a consumer (SUB on a topic
// and a group), an admin, the admin from an address outside its
// whiteRemoteAddress and from one outside globalWhiteRemoteAddresses — and
// checks each answer: 401 with WWW-Authenticate without valid credentials,
// 403 for an account without the permission or from a refused address,
// and for an allowed one anything but 401/403 (the handler ran: 2xx, or
// its own 4xx such as a 404 for a name that does not exist).
func TestE2EAuthMatrix(t *testing.T) {
	t.Parallel()
	e := startAuthE2E(t, newACL(t, matrixACL(t)), func(c *server.Config) { c.Pprof = true })
	adminH := basic("admin", adminSecret)
	servertest.Decode(t, e.Do(t, http.MethodPut, "/v1/topics/orders", "application/json", []byte(`{"queues":2}`), adminH), http.StatusCreated, nil)
	servertest.Decode(t, e.Do(t, http.MethodPut, "/v1/groups/billing", "application/json", []byte(`{"subscriptions":[{"topic":"orders"}]}`), adminH), http.StatusCreated, nil)
	var sent api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(`{"body":"first","keys":["k"]}`), basic("producer", producerSecret)), http.StatusOK, &sent)
	messageID := sent.Results[0].MessageID
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json",
		[]byte(`{"body":"half","transactional":true,"producerGroup":"order-service","checkAfterMs":60000}`), basic("producer", producerSecret)), http.StatusOK, &sent)
	txnID := sent.Results[0].TransactionID
	// A transactional send needs PUB on the producer group too.
	r := e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json",
		[]byte(`{"body":"half","transactional":true,"producerGroup":"billing"}`), basic("producer", producerSecret))
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r)
	require.Contains(t, servertest.CheckProblem(t, "send", r).Detail, "PUB on group")

	principals := []principal{
		{"anonymous", nil, "127.0.0.1"},
		{"wrong-secret", basic("producer", "not-the-secret"), "127.0.0.1"},
		{"unknown-key", basic("nobody", producerSecret), "127.0.0.1"},
		{"producer", basic("producer", producerSecret), "127.0.0.1"},
		{"consumer", basic("consumer", consumerSecret), "127.0.0.1"},
		{"admin", adminH, "127.0.0.1"},
		{"admin-outside-white", adminH, "127.0.0.2"},
		{"producer-outside-global", basic("producer", producerSecret), "127.0.0.3"},
	}
	clients := map[string]*e2eServer{}
	for _, p := range principals {
		if clients[p.from] == nil {
			clients[p.from] = e.from(t, p.from)
		}
	}

	calls := matrixCalls(messageID, txnID)
	var spec struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(e.Get(t, "/openapi.json").Body, &spec))
	inSpec := 0
	for path, methods := range spec.Paths {
		for method := range methods {
			inSpec++
			_, ok := calls[strings.ToUpper(method)+" "+path]
			require.True(t, ok, "%s %s of docs/openapi.json has no row in the matrix (and needs a rule in api/auth.go)", strings.ToUpper(method), path)
		}
	}
	require.Equal(t, 47, inSpec, "operations in docs/openapi.json")

	keys := make([]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	table := []string{"| operation | " + strings.Join(principalNames(principals), " | ") + " |",
		"|---" + strings.Repeat("|---", len(principals)) + "|"}
	for _, op := range keys {
		call := calls[op]
		method, _, _ := strings.Cut(op, " ")
		row := "| " + op + " |"
		for _, p := range principals {
			var body []byte
			if call.body != "" {
				body = []byte(call.body)
			}
			r := clients[p.from].Do(t, method, call.path, call.contentType, body, p.header)
			what := fmt.Sprintf("%s as %s from %s: %s", op, p.name, p.from, r)
			want := expectedStatus(call, p)
			switch want {
			case 0:
				require.NotContains(t, []int{401, 403, 429}, r.Status, what)
				require.Less(t, r.Status, 500, what)
			default:
				require.Equal(t, want, r.Status, what)
			}
			switch r.Status {
			case http.StatusUnauthorized:
				require.Equal(t, "unauthenticated", servertest.CheckProblem(t, what, r).Code)
				require.Equal(t, `Basic realm="mqgate", charset="UTF-8"`, r.Header.Get("WWW-Authenticate"), what)
			case http.StatusForbidden:
				require.Equal(t, "forbidden", servertest.CheckProblem(t, what, r).Code)
				require.Empty(t, r.Header.Get("WWW-Authenticate"), what)
			}
			row += fmt.Sprintf(" %d |", r.Status)
		}
		table = append(table, row)
	}
	t.Logf("status per operation and principal:\n%s", strings.Join(table, "\n"))
}

func principalNames(ps []principal) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return out
}

// expectedStatus is the status p must get for call: 0 for "allowed"
// (anything but 401/403/429/5xx), else 401 or 403 (or 404 for a path
// that is no route).
func expectedStatus(call matrixCall, p principal) int {
	if call.allowed == nil {
		return http.StatusNotFound
	}
	allowed := func(name string) bool {
		for _, a := range call.allowed {
			if a == name {
				return true
			}
		}
		return false
	}
	if allowed("anonymous") {
		return 0
	}
	switch p.name {
	case "anonymous", "wrong-secret", "unknown-key":
		return http.StatusUnauthorized
	case "admin-outside-white", "producer-outside-global":
		return http.StatusForbidden
	}
	if allowed(p.name) {
		return 0
	}
	return http.StatusForbidden
}

// TestE2EAuthBodyAndPathNames: an offset commit naming a topic the
// consumer lacks SUB on is refused, and escaped path names are checked as
// the names the handler uses.
func TestE2EAuthBodyAndPathNames(t *testing.T) {
	t.Parallel()
	e := startAuthE2E(t, newACL(t, matrixACL(t)))
	adminH, consumerH := basic("admin", adminSecret), basic("consumer", consumerSecret)
	servertest.Decode(t, e.Do(t, http.MethodPut, "/v1/topics/orders", "application/json", []byte(`{"queues":1}`), adminH), http.StatusCreated, nil)
	servertest.Decode(t, e.Do(t, http.MethodPut, "/v1/groups/billing", "application/json", []byte(`{"subscriptions":[{"topic":"orders"}]}`), adminH), http.StatusCreated, nil)

	p := servertest.WantProblem(t, e.Do(t, http.MethodPut, "/v1/groups/billing/offsets", "application/json",
		[]byte(`{"offsets":[{"topic":"orders","queueId":0,"offset":0},{"topic":"audit","queueId":0,"offset":0}]}`), consumerH), http.StatusForbidden, "forbidden")
	require.Contains(t, p.Detail, `account "consumer" lacks SUB on topic "audit"`)

	// %6Frders is "orders": allowed; %61udit is "audit": refused.
	r := e.Do(t, http.MethodPost, "/v1/groups/billing/topics/%6Frders/pull", "application/json", []byte(`{"waitMs":0}`), consumerH)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/groups/billing/topics/%61udit/pull", "application/json", []byte(`{"waitMs":0}`), consumerH), http.StatusForbidden, "forbidden")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/groups/%62illing/topics/audit/pull", "application/json", []byte(`{"waitMs":0}`), consumerH), http.StatusForbidden, "forbidden")

	// Auto-creation follows the permissions: the producer may not create
	// topics it has no PUB on; the consumer's pull creates nothing it
	// may not consume.
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/fresh/messages", "application/json", []byte(`{"body":"x"}`), basic("producer", producerSecret)), http.StatusForbidden, "forbidden")
	servertest.WantProblem(t, e.Do(t, http.MethodGet, "/v1/topics/fresh", "", nil, adminH), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/groups/fresh/topics/orders/pull", "application/json", []byte(`{"waitMs":0}`), consumerH), http.StatusForbidden, "forbidden")
	servertest.WantProblem(t, e.Do(t, http.MethodGet, "/v1/groups/fresh", "", nil, adminH), http.StatusNotFound, "group-not-found")
}

// TestE2EAuthAdminListen: with --admin-listen, /metrics and /debug/pprof
// leave the API port and are served, without credentials, on the admin
// address (with /livez and /readyz).
func TestE2EAuthAdminListen(t *testing.T) {
	t.Parallel()
	e := startAuthE2E(t, newACL(t, matrixACL(t)), func(c *server.Config) {
		c.AdminListen = "127.0.0.1:0"
		c.Pprof = true
	})
	servertest.WantProblem(t, e.Do(t, http.MethodGet, "/metrics", "", nil, basic("admin", adminSecret)), http.StatusNotFound, "not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodGet, "/debug/pprof/", "", nil, basic("admin", adminSecret)), http.StatusNotFound, "not-found")

	adminBase := "http://" + e.Srv.AdminAddr()
	for path, want := range map[string]string{"/metrics": "mqgate_acl_accounts 3", "/debug/pprof/": "goroutine", "/livez": "ok", "/readyz": "ok"} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, adminBase+path, nil)
		require.NoError(t, err)
		resp, err := e.Client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Contains(t, string(body), want, path)
	}
}
