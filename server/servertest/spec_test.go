package servertest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpecCheckCatchesMismatches: the check refuses what the spec does
// not say — an undocumented status, a missing required member or header,
// the wrong media type — and lets a request that is no operation pass.
func TestSpecCheckCatchesMismatches(t *testing.T) {
	okHeader := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}}
	topic := []byte(`{"name":"orders","queues":4,"retentionHours":72,"perm":"rw"}` + "\n")
	require.NoError(t, ValidateResponse("GET", "/v1/topics/orders", 200, okHeader, topic))

	require.Error(t, ValidateResponse("GET", "/v1/topics/orders", 200, okHeader, []byte(`{"name":"orders","queues":4,"perm":"rw"}`)), "retentionHours is required")
	require.Error(t, ValidateResponse("GET", "/v1/topics/orders", 200, okHeader, []byte(`{"name":"orders","queues":4,"retentionHours":72,"perm":"x"}`)), "perm is an enum")
	require.Error(t, ValidateResponse("GET", "/v1/topics/orders", 200, http.Header{"Content-Type": {"application/json"}}, topic), "X-Request-Id is required on a success")
	require.Error(t, ValidateResponse("GET", "/v1/topics/orders", 200, http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"r1"}}, topic), "a success is application/json")
	require.Error(t, ValidateResponse("GET", "/v1/topics/orders", 202, okHeader, topic), "202 is not documented")
	require.Error(t, ValidateResponse("PUT", "/v1/topics/orders", 201, okHeader, topic), "a 201 has Location")

	problem := []byte(`{"type":"urn:mqgate:problem:topic-not-found","title":"Topic not found","status":404,"code":"topic-not-found"}`)
	require.NoError(t, ValidateResponse("GET", "/v1/topics/orders", 404, http.Header{"Content-Type": {"application/problem+json"}}, problem))
	require.Error(t, ValidateResponse("GET", "/v1/topics/orders", 404, http.Header{"Content-Type": {"application/json"}}, problem), "an error is application/problem+json")
	require.NoError(t, ValidateResponse("GET", "/v1/no-such-route", 404, http.Header{"Content-Type": {"application/problem+json"}}, problem), "no operation: not checked")
}

// TestSpecCheckRunsOnEveryResponse: the test client's responses are
// checked (and the checked copy survives With and WithoutSpecCheck).
func TestSpecCheckRunsOnEveryResponse(t *testing.T) {
	e := Start(t)
	Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", nil), http.StatusCreated, nil)
	WantProblem(t, e.Get(t, "/v1/topics/nope"), http.StatusNotFound, "topic-not-found")
	e.With(e.Base, &http.Client{}).Get(t, "/v1/topics")
	e.WithoutSpecCheck().Get(t, "/v1/topics")
	e.checker.mu.Lock()
	defer e.checker.mu.Unlock()
	require.Equal(t, 3, e.checker.checked)
	require.Empty(t, e.checker.failures)
}

// TestPushRequestCheck: a push request must carry the Standard Webhooks
// headers and a Message (json mode) or bytes (binary mode).
func TestPushRequestCheck(t *testing.T) {
	msg := []byte(`{"messageId":"7F00000100001F9000000000000004D2","topic":"orders","queueId":1,"queueOffset":4,"reconsumeTimes":0,"body":"hi","bodyEncoding":"utf8"}`)
	req := func(contentType string, body []byte, drop string) *http.Request {
		r, err := http.NewRequest(http.MethodPost, "http://hooks.test/mqgate", nil)
		require.NoError(t, err)
		for k, v := range map[string]string{"Content-Type": contentType, "webhook-id": "7F00000100001F9000000000000004D2",
			"webhook-timestamp": "1796119200", "webhook-signature": "v1,abc=", "X-Mqgate-Group": "billing",
			"X-Mqgate-Push-Hop": "1", "User-Agent": "mqgate-push/1"} {
			if k != drop {
				r.Header.Set(k, v)
			}
		}
		return r
	}
	require.NoError(t, ValidatePushRequest(req("application/json", msg, ""), msg))
	require.NoError(t, ValidatePushRequest(req("application/octet-stream", []byte{0xff, 0}, ""), []byte{0xff, 0}))
	require.Error(t, ValidatePushRequest(req("application/json", msg, "webhook-signature"), msg), "the signature is required")
	require.Error(t, ValidatePushRequest(req("application/json", msg, "X-Mqgate-Push-Hop"), msg), "the hop header is required")
	require.Error(t, ValidatePushRequest(req("application/json", []byte(`{"topic":"orders"}`), ""), []byte(`{"topic":"orders"}`)), "a Message has a messageId")
	require.Error(t, ValidatePushRequest(req("text/plain", msg, ""), msg), "json or binary only")
}
