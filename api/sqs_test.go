package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

// fakeSQS is an api.SQSCatalog answering queues or err, recording the
// prefix asked.
type fakeSQS struct {
	queues []api.SQSQueue
	err    error
	prefix string
}

func (f *fakeSQS) SQSQueues(_ context.Context, prefix string) (string, []api.SQSQueue, error) {
	f.prefix = prefix
	return "http://127.0.0.1:9324", f.queues, f.err
}

func TestListSQSQueues(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		fake := &fakeSQS{queues: []api.SQSQueue{{Name: "orders.fifo", Fifo: true, Topic: "sqsfifo_orders", Group: "sqsfifo_orders"}}}
		b := setup(t, func(d *api.Deps) { d.SQS = fake })
		rec := b.do(t, http.MethodGet, "/v1/sqs/queues?prefix=orders.", "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var out api.SQSQueueList
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		require.True(t, out.Enabled)
		require.Equal(t, "http://127.0.0.1:9324", out.Endpoint)
		require.Equal(t, "sqsfifo_orders", out.Queues[0].Topic)
		require.Equal(t, "orders.", fake.prefix)
	})
	t.Run("Off", func(t *testing.T) {
		rec := setup(t).do(t, http.MethodGet, "/v1/sqs/queues", "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"enabled":false,"queues":[]}`, rec.Body.String())
	})
	t.Run("ErrInvalidArgument", func(t *testing.T) {
		b := setup(t, func(d *api.Deps) { d.SQS = &fakeSQS{} })
		for _, q := range []string{"prefix=a%2Fb", "prefix=%00", "prefix=" + strings.Repeat("a", 81)} {
			rec := b.do(t, http.MethodGet, "/v1/sqs/queues?"+q, "")
			require.Equal(t, http.StatusBadRequest, rec.Code, q)
		}
	})
	t.Run("ErrShuttingDown", func(t *testing.T) {
		b := setup(t, func(d *api.Deps) { d.SQS = &fakeSQS{err: broker.ErrShuttingDown} })
		rec := b.do(t, http.MethodGet, "/v1/sqs/queues", "")
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	})
}
