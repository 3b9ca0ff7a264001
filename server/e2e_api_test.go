package server_test

// End-to-end tests of the HTTP API over real HTTP against the real broker:
// every endpoint's success and error paths (TestE2EEndpoints, its
// subtests in e2e_api_admin_test.go and e2e_api_messages_test.go), topic
// permissions, key lookups. Names and body limits are in
// e2e_names_test.go, long polls in e2e_longpoll_test.go, state across a
// restart in e2e_restart_test.go; the retry, receipt and dead-letter
// semantics in e2e_retry_test.go.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

var messageIDPattern = regexp.MustCompile(`^[0-9A-F]{32}$`)

// TestE2EEndpoints walks every route of the API, its success and its error
// answers, against one real server. The last subtest checks from the
// server's own request metrics that every operation of docs/openapi.json
// was called and answered both 2xx and 4xx.
func TestE2EEndpoints(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	startedAt := time.Now().Add(-time.Second)

	// In order, on one server: later subtests see what earlier ones made.
	t.Run("Topics", func(t *testing.T) { endpointsTopics(t, e) })
	t.Run("Groups", func(t *testing.T) { endpointsGroups(t, e) })
	t.Run("Send", func(t *testing.T) { endpointsSend(t, e) })
	t.Run("IdempotencyKey", func(t *testing.T) { endpointsIdempotencyKey(t, e) })
	t.Run("PullAckNackLeases", func(t *testing.T) { endpointsPullAckNackLeases(t, e) })
	t.Run("QueueReadOffsetsProgressReset", func(t *testing.T) { endpointsQueueReadOffsetsProgressReset(t, e, startedAt) })
	t.Run("Lookups", func(t *testing.T) { endpointsLookups(t, e) })
	t.Run("BrokerStatus", func(t *testing.T) { endpointsBrokerStatus(t, e) })
	t.Run("DeadLetters", func(t *testing.T) { endpointsDeadLetters(t, e) })
	t.Run("Timers", func(t *testing.T) { endpointsTimers(t, e) })
	t.Run("Transactions", func(t *testing.T) { endpointsTransactions(t, e) })
	t.Run("Operations", func(t *testing.T) { endpointsOperations(t, e) })
	t.Run("EveryOperationCalledWithSuccessAndError", func(t *testing.T) {
		var spec struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(e.Get(t, "/openapi.json").Body, &spec))
		metrics := string(e.Get(t, "/metrics").Body)
		// Operations that cannot fail on a healthy server but with 5xx.
		noClientError := map[string]bool{"GET /v1/topics": true, "GET /v1/groups": true, "GET /v1/broker/status": true,
			"POST /v1/broker/receipt-keys/rotate": true, "GET /v1/stats": true,
			"GET /v1/cluster": true}
		// Membership changes answer 2xx on a cluster only (409
		// not-a-cluster here; TestClusterReplacesADeadNode calls them).
		clusterOnly := map[string]bool{"POST /v1/cluster/learners": true, "POST /v1/cluster/members/{id}/promote": true,
			"DELETE /v1/cluster/members/{id}": true}
		ops := 0
		for path, methods := range spec.Paths {
			for method := range methods {
				ops++
				route := "/v1" + path
				op := strings.ToUpper(method) + " " + route
				series := regexp.MustCompile(`mqgate_http_requests_total\{code="(\d+)",method="` + strings.ToUpper(method) + `",route="` + regexp.QuoteMeta(route) + `"\} (\d+)`)
				var success, clientError bool
				for _, m := range series.FindAllStringSubmatch(metrics, -1) {
					success = success || m[1][0] == '2'
					clientError = clientError || m[1][0] == '4'
				}
				require.True(t, success || clusterOnly[op], "%s was never answered 2xx", op)
				require.True(t, clientError || noClientError[op], "%s was never answered 4xx", op)
			}
		}
		require.Equal(t, 47, ops, "operations in docs/openapi.json: a new one needs its calls above")
	})
}

// TestE2ETopicPermissions: perm "r" refuses sends; perm "w" is documented
// as "no consumption" (api.TopicRequest) and must refuse pulls and reads.
func TestE2ETopicPermissions(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/readonly", api.TopicRequest{Perm: "r"}), http.StatusCreated, nil)
	p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/readonly/messages", api.SendMessage{Body: "x"}), http.StatusBadRequest, "invalid-argument")
	require.Contains(t, p.Detail, "read-only")
	var tp api.Topic
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/readonly", api.TopicRequest{Perm: "rw"}), http.StatusOK, &tp)
	require.Equal(t, "rw", tp.Perm)
	e.Send(t, "readonly", api.SendMessage{Body: "x"})

	t.Run("WriteOnlyRefusesConsumption", func(t *testing.T) {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/writeonly", api.TopicRequest{Perm: "w"}), http.StatusCreated, nil)
		e.Send(t, "writeonly", api.SendMessage{Body: "x", ShardingKey: "k"})
		r := e.JSON(t, http.MethodPost, "/v1/groups/g/topics/writeonly/pull", api.PullRequest{WaitMs: 200})
		require.GreaterOrEqual(t, r.Status, 400, "pull of a write-only topic: %s", r)
		require.Less(t, r.Status, 500, "%s", r)
		for q := 0; q < 4; q++ {
			r = e.Get(t, fmt.Sprintf("/v1/topics/writeonly/queues/%d/messages", q))
			require.GreaterOrEqual(t, r.Status, 400, "offset read of a write-only topic: %s", r)
		}
	})
}

// TestE2EKeyLookupReadYourWrites: a message whose send answered 200 is
// found by its key at once, as it is by id, by a queue read and by a pull.
func TestE2EKeyLookupReadYourWrites(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	for i := 0; i < 100; i++ {
		key := fmt.Sprintf("key-%d", i)
		sent := e.Send(t, "keys", api.SendMessage{Body: "x", Keys: []string{key}})
		var found api.MessageList
		servertest.Decode(t, e.Get(t, "/v1/messages?topic=keys&key="+key), http.StatusOK, &found)
		require.Len(t, found.Messages, 1, "lookup %d right after its send", i)
		require.Equal(t, sent.MessageID, found.Messages[0].MessageID)
	}
}
