package server_test

// End-to-end test of a dead-letter resend over real HTTP: the letter goes
// back to the group whose DLQ it is — through that group's retry path,
// original topic restored — and to no other group of the topic; pull,
// orderly and push groups alike.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// deadLetters waits until group's DLQ holds n letters and returns them.
func (e *e2eServer) deadLetters(t *testing.T, group string, n int) []api.DeadLetter {
	t.Helper()
	var list api.DeadLetterList
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		list = fresh[api.DeadLetterList](t, e.Get(t, "/v1/groups/"+group+"/dlq"), http.StatusOK)
		return len(list.Items) == n, "waiting for dead letters"
	})
	return list.Items
}

// resend resends one dead letter of group and requires it resent.
func (e *e2eServer) resend(t *testing.T, group, id string) {
	t.Helper()
	res := fresh[api.ResendResponse](t, e.JSON(t, http.MethodPost, "/v1/groups/"+group+"/dlq/resend", api.ResendRequest{MessageIDs: []string{id}}), http.StatusOK)
	require.Equal(t, []string{id}, res.Resent)
}

func TestE2EResendGoesToTheGroupOnly(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/shared", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	sent := e.Send(t, "shared", api.SendMessage{Body: "poison", Tag: "t", Keys: []string{"k"}, Properties: map[string]string{"p": "v"}})

	// G2 consumes the message fine; G1 dead-letters it.
	m2 := e.PullN(t, "g2", "shared", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, []string{"ok"}, e.Ack(t, "g2", m2.Receipt))
	m1 := e.PullN(t, "g1", "shared", 1, 30_000, 10*time.Second)[0]
	e.Nack(t, "g1", m1.Receipt, -1, "cannot parse")
	letter := e.deadLetters(t, "g1", 1)[0]
	require.Equal(t, "shared", letter.OriginalTopic)

	e.resend(t, "g1", letter.MessageID)
	back := e.PullN(t, "g1", "shared", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, "poison", back.Body)
	require.Equal(t, "shared", back.Topic, "the original topic is restored")
	require.Zero(t, back.ReconsumeTimes, "a fresh attempt count")
	require.Equal(t, sent.MessageID, back.OriginMessageID, "ORIGIN_MESSAGE_ID is kept")
	require.Equal(t, "t", back.Tag)
	require.Equal(t, []string{"k"}, back.Keys)
	require.Equal(t, map[string]string{"p": "v"}, back.Properties)
	require.NotEqual(t, sent.MessageID, back.MessageID, "a new copy")
	require.Equal(t, []string{"ok"}, e.Ack(t, "g1", back.Receipt))
	require.Empty(t, e.Pull(t, "g1", "shared", api.PullRequest{WaitMs: 200}), "delivered once")
	require.Empty(t, e.Pull(t, "g2", "shared", api.PullRequest{WaitMs: 300}), "the other group never sees it again")

	progress := fresh[api.Progress](t, e.Get(t, "/v1/groups/g2/progress"), http.StatusOK)
	require.Zero(t, progress.TotalLag, "nothing new for g2: %s", progress.Queues)
	for _, q := range progress.Queues {
		require.NotEqual(t, int32(-1), q.QueueID, "g2 has no retries")
	}
	progress = fresh[api.Progress](t, e.Get(t, "/v1/groups/g1/progress"), http.StatusOK)
	require.Zero(t, progress.TotalLag)

	// No copy went to the topic's queues, where every group reads.
	for q := 0; q < 2; q++ {
		read := fresh[api.QueueMessages](t, e.Get(t, fmt.Sprintf("/v1/topics/shared/queues/%d/messages", q)), http.StatusOK)
		for _, m := range read.Messages {
			require.Equal(t, sent.MessageID, m.MessageID, "queue %d holds only the original", q)
		}
	}
}

func TestE2EResendOrderlyAndPush(t *testing.T) {
	t.Parallel()
	e := startE2E(t)

	t.Run("Orderly", func(t *testing.T) {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/fifo", api.GroupRequest{Orderly: true}), http.StatusCreated, nil)
		e.Send(t, "ordered", api.SendMessage{Body: "first", ShardingKey: "c1"})
		e.Send(t, "ordered", api.SendMessage{Body: "second", ShardingKey: "c1"})
		m := e.PullN(t, "fifo", "ordered", 1, 30_000, 10*time.Second)[0]
		require.Equal(t, "first", m.Body)
		e.Nack(t, "fifo", m.Receipt, -1, "poison")
		next := e.PullN(t, "fifo", "ordered", 1, 30_000, 10*time.Second)[0]
		require.Equal(t, "second", next.Body)
		require.Equal(t, []string{"ok"}, e.Ack(t, "fifo", next.Receipt))
		letter := e.deadLetters(t, "fifo", 1)[0]

		e.resend(t, "fifo", letter.MessageID)
		back := e.PullN(t, "fifo", "ordered", 1, 30_000, 10*time.Second)[0]
		require.Equal(t, "first", back.Body)
		require.Equal(t, "ordered", back.Topic)
		require.Zero(t, back.ReconsumeTimes)
		require.Equal(t, []string{"ok"}, e.Ack(t, "fifo", back.Receipt))
		require.Empty(t, e.Pull(t, "fifo", "ordered", api.PullRequest{WaitMs: 200}))
	})

	t.Run("Push", func(t *testing.T) {
		wh := newWebhook(t)
		wh.answer = func(n int, w http.ResponseWriter) {
			if n == 0 {
				w.Header().Set("X-Mqgate-Delay-Level", "-1") // dead-letter it now
				w.WriteHeader(http.StatusUnprocessableEntity)
			}
		}
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/hook", api.GroupRequest{
			Subscriptions: []api.Subscription{{Topic: "pushed"}}, Push: &api.PushRequest{URL: wh.url},
		}), http.StatusCreated, nil)
		sent := e.Send(t, "pushed", api.SendMessage{Body: "hooked"})
		wh.wait(t, 1)
		letter := e.deadLetters(t, "hook", 1)[0]
		require.Equal(t, 1, wh.count())

		e.resend(t, "hook", letter.MessageID)
		hit := wh.wait(t, 2)
		var got struct {
			Topic           string `json:"topic"`
			Body            string `json:"body"`
			ReconsumeTimes  int32  `json:"reconsumeTimes"`
			OriginMessageID string `json:"originMessageId"`
		}
		require.NoError(t, json.Unmarshal(hit.body, &got))
		require.Equal(t, "pushed", got.Topic)
		require.Equal(t, "hooked", got.Body)
		require.Zero(t, got.ReconsumeTimes)
		require.Equal(t, sent.MessageID, got.OriginMessageID)
		require.Equal(t, sent.MessageID, hit.header.Get("webhook-id"), "the same webhook-id as the first delivery")
	})
}
