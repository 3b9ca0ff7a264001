package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
)

// TestSendRefusesPushedRequests: a send carrying the push hop header —
// whatever its value, in either body form — is 508 push-loop and stores
// nothing; without it the same send is stored.
func TestSendRefusesPushedRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, contentType, body, hop string }{
		{"JSON", "application/json", `{"body":"x"}`, "1"},
		{"Raw", "application/octet-stream", "x", "1"},
		{"AnyValue", "application/json", `{"body":"x"}`, "7"},
		{"EmptyValue", "text/plain", "x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rec := b.do(t, http.MethodPost, "/v1/topics/orders/messages", tc.body, "Content-Type", tc.contentType, api.HeaderPushHop, tc.hop)
			p := requireProblem(t, rec, http.StatusLoopDetected, "push-loop")
			require.Contains(t, p.Detail, api.HeaderPushHop)
			require.Empty(t, b.broker.sent, "nothing was stored")

			rec = b.do(t, http.MethodPost, "/v1/topics/orders/messages", tc.body, "Content-Type", tc.contentType)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			require.Len(t, b.broker.sent, 1)
		})
	}
}
