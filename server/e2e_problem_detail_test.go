package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestProblemDetailsSpeakToTheCaller sweeps bad requests over real HTTP —
// every operation of the spec with path parameters that exist, do not
// exist or are not valid names, with hostile bodies and queries, plus
// requests that name what was wrong — and requires each problem's detail
// to speak to the caller about the request: never a package prefix
// (^[a-z]+: ), never a layer of the server (broker:, api:, auth:,
// storage:, commitlog: …), never Go's words (servertest.CheckDetail).
func TestProblemDetailsSpeakToTheCaller(t *testing.T) {
	t.Parallel()
	srv := startE2E(t).WithoutSpecCheck()
	srv.Send(t, "orders", api.SendMessage{Body: "a", Keys: []string{"k"}})
	servertest.Decode(t, srv.JSON(t, http.MethodPut, "/v1/groups/billing", map[string]any{
		"subscriptions": []map[string]any{{"topic": "orders"}}}), http.StatusCreated, nil)

	client := &http.Client{Timeout: 10 * time.Second}
	problems, codes := 0, map[string]bool{}
	do := func(method, path, contentType string, body []byte) (int, api.Problem) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, srv.Base+path, bytes.NewReader(body))
		require.NoError(t, err)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, api.Problem{} // a long poll that outlived the timeout
		}
		defer resp.Body.Close()
		if resp.StatusCode < 400 {
			// Not a problem: the body is not read (the stats stream's never
			// ends).
			return resp.StatusCode, api.Problem{}
		}
		raw, _ := io.ReadAll(resp.Body)
		r := servertest.Resp{Status: resp.StatusCode, Header: resp.Header, Body: raw}
		p := servertest.CheckProblem(t, method+" "+path+" "+string(body), r)
		problems++
		codes[p.Code] = true
		return resp.StatusCode, p
	}

	// Every operation, every kind of path parameter, hostile bodies.
	params := []string{"orders", "billing", "nope", "bad%20name%21", "%25RETRY%25billing", "-1",
		"7F00000100001F9000000000FFFFFFFF", strings.Repeat("x", 300)}
	bodies := []string{"", "{}", "[]", "null", `"x"`, "{", `{"x":1}`, `{"body":1}`, `{"body":"a","delayLevel":99}`,
		`{"receipts":["forged"]}`, `{"items":[{"receipt":"forged","delayLevel":1,"delayMs":5}]}`,
		`{"maxMessages":1000,"waitMs":-5}`, `{"queues":-1}`, `{"subscriptions":[{"topic":"orders","sql":"a >"}]}`,
		`{"push":{"url":"http://169.254.169.254/latest"}}`, `{"timestamp":"yesterday"}`,
		`{"offsets":[{"topic":"orders","queueId":99,"offset":-4}]}`, `{"deliverAt":"2020-01-01T00:00:00Z","delayMs":5}`}
	queries := []string{"", "?limit=-1", "?limit=abc&cursor=%00", "?key=&topic=nope", "?from=yesterday&to=2020"}
	param := regexp.MustCompile(`\{[^}]+\}`)
	ops := servertest.Operations()
	require.NotEmpty(t, ops)
	for _, op := range ops {
		for _, pv := range params {
			path := param.ReplaceAllString(op.Path, pv)
			switch op.Method {
			case http.MethodGet, http.MethodDelete:
				for _, q := range queries {
					do(op.Method, path+q, "", nil)
				}
			default:
				for _, b := range bodies {
					do(op.Method, path, "application/json", []byte(b))
				}
				do(op.Method, path, "text/plain", []byte("x"))
				do(op.Method, path, "application/merge-patch+json", []byte(`{"queues":"four"}`))
			}
		}
	}
	for _, path := range []string{"/v1/nope", "/v1/topics/orders/nope", "/v2/topics"} {
		do(http.MethodGet, path, "", nil)
	}
	do(http.MethodTrace, "/v1/topics", "", nil)

	// Requests whose detail must say what was wrong, in the caller's terms.
	send := func(body string) api.Problem {
		t.Helper()
		status, p := do(http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(body))
		require.Equal(t, http.StatusBadRequest, status, body)
		return p
	}
	p := send(`{"body":"a","delayLevel":99}`)
	require.Equal(t, "invalid-argument", p.Code)
	require.Contains(t, p.Detail, "delayLevel")
	p = send(`{"transactional":true,"producerGroup":"pg","messages":[{"body":"a"},{"body":"b"}]}`)
	require.Contains(t, p.Detail, "a transactional send carries one message")
	require.NotContains(t, p.Detail, "not both")
	p = send(`{"tag":"t","messages":[{"body":"a"}]}`)
	require.Contains(t, p.Detail, "tag")
	require.Contains(t, p.Detail, "{messages:[…]}")
	_, p = do(http.MethodGet, "/v1/topics/never-made", "", nil)
	require.Equal(t, "topic-not-found", p.Code)
	require.True(t, strings.HasPrefix(p.Detail, "topic not found"), p.Detail)

	t.Logf("%d problems, %d codes", problems, len(codes))
	for _, code := range []string{"invalid-name", "invalid-argument", "invalid-sql", "malformed-request", "topic-not-found",
		"group-not-found", "message-not-found", "not-found", "method-not-allowed", "unsupported-media-type"} {
		require.True(t, codes[code], "the sweep met no %s problem: %s", code, fmt.Sprint(codes))
	}
}
