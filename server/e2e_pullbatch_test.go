package server_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestE2EBinaryPull: a pull with Accept: application/vnd.mqgate.batch
// answers the binary rendering (responses checked against the spec like
// every other): the same metadata as a JSON pull of the same messages by
// another group, the bodies byte for byte (binary ones included), and
// receipts that ack. An empty wait is a batch of 0, Accept lists and
// parameters are understood, and errors stay problem+json.
func TestE2EBinaryPull(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	require.Equal(t, http.StatusCreated, e.JSON(t, http.MethodPut, "/v1/topics/bp", api.TopicRequest{Queues: 1}).Status)
	bodies := [][]byte{[]byte(`{"id":1}`), {0x00, 0xff, '\n', '"', 0x80}, []byte("plain text"), make([]byte, 64<<10)}
	bodies[3][100] = 7
	for i, b := range bodies {
		r := e.Do(t, http.MethodPost, "/v1/topics/bp/messages", "application/octet-stream", b, http.Header{
			"X-Mqgate-Tag": {"t"}, "X-Mqgate-Keys": {"k" + string(rune('0'+i))}, "X-Mqgate-Property-Origin": {"web"},
		})
		require.Equal(t, http.StatusOK, r.Status, r.String())
	}

	pullBatch := func(group string, accept string, req api.PullRequest) ([]api.BatchedMessage, servertest.Resp) {
		t.Helper()
		in, err := json.Marshal(req)
		require.NoError(t, err)
		r := e.Do(t, http.MethodPost, "/v1/groups/"+group+"/topics/bp/pull", "application/json", in, http.Header{"Accept": {accept}})
		if r.Status != http.StatusOK {
			return nil, r
		}
		require.Equal(t, api.ContentTypeBatch, r.Header.Get("Content-Type"))
		msgs, err := api.DecodePullBatch(r.Body)
		require.NoError(t, err)
		return msgs, r
	}

	got, _ := pullBatch("bin", "application/json;q=0.5, application/vnd.mqgate.batch; v=1", api.PullRequest{MaxMessages: 32, WaitMs: 2000})
	require.Len(t, got, len(bodies))
	want := e.PullN(t, "json", "bp", len(bodies), 30_000, 10*time.Second)
	for i, m := range got {
		require.Equal(t, bodies[i], m.Body, "message %d", i)
		j := want[i]
		body := []byte(j.Body)
		if j.BodyEncoding == "base64" {
			var err error
			body, err = base64.StdEncoding.DecodeString(j.Body)
			require.NoError(t, err)
		}
		require.Equal(t, bodies[i], body, "the JSON pull of message %d", i)
		require.NotEmpty(t, m.Message.Receipt)
		require.NotEmpty(t, m.Message.LeaseUntil, "the binary batch's metadata has the lease's end too")
		require.Empty(t, m.Message.Body)
		require.Empty(t, m.Message.BodyEncoding)
		j.Receipt, m.Message.Receipt = "", ""
		j.LeaseUntil, m.Message.LeaseUntil = "", ""
		j.Body, j.BodyEncoding = "", ""
		require.Equal(t, j, m.Message, "metadata of message %d", i)
	}

	require.Equal(t, []string{"ok", "ok", "ok", "ok"}, e.Ack(t, "bin", pullBatchReceipts(got)...), "every receipt of the binary pull acks")

	empty, _ := pullBatch("bin", api.ContentTypeBatch, api.PullRequest{MaxMessages: 32, WaitMs: 100})
	require.Empty(t, empty, "the wait ran out: a batch of 0")

	_, r := pullBatch("bin", api.ContentTypeBatch, api.PullRequest{MaxMessages: 100_000})
	servertest.WantProblem(t, r, http.StatusBadRequest, "invalid-argument")
	in := []byte(`{"waitMs":0}`)
	r = e.Do(t, http.MethodPost, "/v1/groups/bin/topics/nope/pull", "application/json", in, http.Header{"Accept": {api.ContentTypeBatch}})
	servertest.WantProblem(t, r, http.StatusNotFound, "topic-not-found")

	// Without the Accept type the answer is JSON, as before.
	r = e.Do(t, http.MethodPost, "/v1/groups/bin/topics/bp/pull", "application/json", in, http.Header{"Accept": {"*/*"}})
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
}

func pullBatchReceipts(msgs []api.BatchedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Message.Receipt
	}
	return out
}
