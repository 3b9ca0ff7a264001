package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

func TestAck(t *testing.T) {
	t.Parallel()

	t.Run("OKPerReceiptResults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := decode[api.ReceiptResponse](t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/ack", `{"receipts":["r1","old-r2"]}`), http.StatusOK)
		require.Equal(t, []api.ReceiptResult{
			{Receipt: "r1", Status: "ok"},
			{Receipt: "old-r2", Status: "expired", Error: "lease expired"},
		}, resp.Results)
		require.Equal(t, "billing", b.broker.group)
		require.Equal(t, []string{"r1", "old-r2"}, b.broker.receipts)
	})
	for _, tc := range []struct {
		name, body, code string
	}{
		{"NoReceipts", `{"receipts":[]}`, "invalid-argument"},
		{"MissingReceipts", `{}`, "invalid-argument"},
		{"EmptyReceipt", `{"receipts":["r1",""]}`, "invalid-argument"},
		{"NoBody", ``, "malformed-request"},
		{"NotJSON", `receipts=r1`, "malformed-request"},
		{"TooMany", `{"receipts":[` + strings.Repeat(`"r",`, api.MaxBatchItems) + `"r"]}`, "invalid-argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/ack", tc.body), http.StatusBadRequest, tc.code)
			require.Nil(t, b.broker.receipts)
		})
	}
	t.Run("WrongContentType", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, setup(t).do(t, http.MethodPost, "/v1/groups/billing/ack", `{"receipts":["r"]}`, "Content-Type", "text/plain"),
			http.StatusUnsupportedMediaType, "unsupported-media-type")
	})
}

func TestNack(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := decode[api.ReceiptResponse](t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/nack",
			`{"items":[{"receipt":"r1","delayLevel":-1,"reason":"poison"},{"receipt":"r2"},{"receipt":"r3","delayMs":1500}]}`), http.StatusOK)
		require.Len(t, resp.Results, 3)
		require.Equal(t, []broker.NackItem{{Receipt: "r1", DelayLevel: -1, Reason: "poison"}, {Receipt: "r2"},
			{Receipt: "r3", Delay: 1500 * time.Millisecond}}, b.broker.nacks)
	})
	for _, tc := range []struct {
		name, body string
	}{
		{"DelayLevelBelowDLQ", `{"items":[{"receipt":"r1","delayLevel":-2}]}`},
		{"DelayMsAndLevel", `{"items":[{"receipt":"r1","delayLevel":2,"delayMs":100}]}`},
		{"DelayMsNegative", `{"items":[{"receipt":"r1","delayMs":-100}]}`},
		{"DelayMsOverMax", `{"items":[{"receipt":"r1","delayMs":7200001}]}`},
		{"EmptyReceipt", `{"items":[{"receipt":""}]}`},
		{"NoItems", `{"items":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/nack", tc.body), http.StatusBadRequest, "invalid-argument")
			require.Nil(t, b.broker.nacks)
		})
	}
	t.Run("ReasonTooLong", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"items":[{"receipt":"r","reason":"` + strings.Repeat("x", broker.MaxReasonBytes+1) + `"}]}`
		requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/nack", body), http.StatusBadRequest, "value-too-long")
		require.Nil(t, b.broker.nacks)
	})
}

func TestLeases(t *testing.T) {
	t.Parallel()

	t.Run("OKNewReceipt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := decode[api.ReceiptResponse](t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/leases",
			`{"items":[{"receipt":"r1","invisibleMs":60000},{"receipt":"old","invisibleMs":0}]}`), http.StatusOK)
		require.Equal(t, []api.ReceiptResult{
			{Receipt: "r1", Status: "ok", NewReceipt: "new-r1"},
			{Receipt: "old", Status: "expired", Error: "lease expired"},
		}, resp.Results)
		require.Equal(t, []broker.LeaseItem{{Receipt: "r1", Invisible: time.Minute}, {Receipt: "old"}}, b.broker.leases)
	})
	for _, ms := range []int64{-1, api.MaxInvisibleMs + 1} {
		t.Run(fmt.Sprintf("InvisibleMs%d", ms), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/leases",
				fmt.Sprintf(`{"items":[{"receipt":"r1","invisibleMs":%d}]}`, ms)), http.StatusBadRequest, "invalid-argument")
			require.Nil(t, b.broker.leases)
		})
	}
}
