package server_test

// End-to-end tests of the consume-failure path over real HTTP: receipts and
// lease expiry, the retry ladder through the delay levels into the
// dead-letter queue, and the dead-letter administration.

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestE2EReceipts over HTTP: a lease that runs out without an ack
// is redelivered as a retry copy; the receipt of the expired delivery
// cannot ack the new one; acks are idempotent; forged and foreign
// receipts are invalid.
func TestE2EReceipts(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	sent := e.Send(t, "leases", api.SendMessage{Body: "lease me", Tag: "t1", Keys: []string{"k1"}})

	pulledAt := time.Now()
	first := e.Pull(t, "ga", "leases", api.PullRequest{MaxMessages: 1, WaitMs: 2000, InvisibleMs: 200})
	require.Len(t, first, 1)
	require.Equal(t, sent.MessageID, first[0].MessageID)
	require.Zero(t, first[0].ReconsumeTimes)

	// No ack: after 200 ms the lease expires, the failure path writes a
	// retry copy at level 3 (60 ms), and a waiting pull gets it.
	second := e.PullN(t, "ga", "leases", 1, 30_000, 10*time.Second)[0]
	waited := time.Since(pulledAt)
	require.GreaterOrEqual(t, waited, 200*time.Millisecond+servertest.LevelDelay(t, e.Cfg, 3), "redelivered after the lease and the level-3 delay")
	t.Logf("redelivery %v after the pull (lease 200ms + level 3 %v)", waited, servertest.LevelDelay(t, e.Cfg, 3))
	require.Equal(t, "lease me", second.Body)
	require.Equal(t, "leases", second.Topic)
	require.Equal(t, "t1", second.Tag)
	require.Equal(t, []string{"k1"}, second.Keys)
	require.EqualValues(t, 1, second.ReconsumeTimes, "an expired lease is a failed attempt")
	require.Equal(t, first[0].MessageID, second.OriginMessageID)
	require.NotEqual(t, first[0].MessageID, second.MessageID, "a retry is a new copy")
	require.NotEqual(t, first[0].Receipt, second.Receipt)

	// The first receipt is expired and does not touch the new lease.
	res := e.Receipts(t, "ga", "ack", api.AckRequest{Receipts: []string{first[0].Receipt}})
	require.Equal(t, "expired", res[0].Status)
	require.NotEmpty(t, res[0].Error)
	require.Equal(t, []string{"expired"}, e.receipts2(t, "ga", "leases", first[0].Receipt), "nor can it change the new lease")
	require.Equal(t, []string{"expired"}, e.receipts2(t, "ga", "nack", first[0].Receipt), "nor nack it")
	var progress api.Progress
	servertest.Decode(t, e.Get(t, "/v1/groups/ga/progress"), http.StatusOK, &progress)
	inFlight := 0
	for _, q := range progress.Queues {
		inFlight += q.InFlight
	}
	require.Equal(t, 1, inFlight, "the new lease is still held")

	// Tampered, garbage and foreign receipts are invalid (and change nothing).
	tampered := []byte(second.Receipt)
	i := len(tampered) / 2
	if tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	other := e.Pull(t, "gb", "leases", api.PullRequest{MaxMessages: 1, WaitMs: 2000})
	require.Len(t, other, 1, "each group gets every message")
	require.Equal(t, sent.MessageID, other[0].MessageID)
	require.Equal(t, []string{"invalid", "invalid", "invalid", "invalid"},
		e.Ack(t, "ga", string(tampered), second.Receipt[:len(second.Receipt)-2], "garbage", other[0].Receipt))
	require.Equal(t, []string{"invalid"}, e.Ack(t, "gb", second.Receipt), "ga's receipt is foreign to gb")

	// The new lease acks fine, and a repeated ack is ok too (the same
	// receipt twice in one request: TestE2EDoubleAckInOneRequest).
	require.Equal(t, []string{"ok"}, e.Ack(t, "ga", second.Receipt))
	require.Equal(t, []string{"ok"}, e.Ack(t, "ga", second.Receipt))
	require.Equal(t, []string{"ok"}, e.Ack(t, "gb", other[0].Receipt))
	require.Equal(t, []string{"expired"}, e.Ack(t, "ga", first[0].Receipt), "still expired after the new delivery was acked")
	require.Empty(t, e.Pull(t, "ga", "leases", api.PullRequest{WaitMs: 500}), "an acked message is not delivered again")
	require.Empty(t, e.Pull(t, "gb", "leases", api.PullRequest{WaitMs: 100}))

	// A lease shortened to 0 makes the message visible again at once, as
	// the same message and without counting an attempt; the receipt of
	// the given-up lease is spent.
	e.Send(t, "leases", api.SendMessage{Body: "postpone me"})
	held := e.PullN(t, "ga", "leases", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, []string{"ok"}, e.receipts2(t, "ga", "leases0", held.Receipt))
	again := e.PullN(t, "ga", "leases", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, held.MessageID, again.MessageID, "not a retry copy")
	require.Zero(t, again.ReconsumeTimes, "a postponement is not a failed attempt")
	require.Equal(t, []string{"expired", "ok"}, e.Ack(t, "ga", held.Receipt, again.Receipt))

	// A nacked delivery's receipt is spent too: it cannot ack its retry.
	e.Send(t, "leases", api.SendMessage{Body: "nack me"})
	m := e.PullN(t, "ga", "leases", 1, 30_000, 10*time.Second)[0]
	e.Nack(t, "ga", m.Receipt, 1, "once more")
	retry := e.PullN(t, "ga", "leases", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, m.MessageID, retry.OriginMessageID)
	require.Equal(t, []string{"expired"}, e.Ack(t, "ga", m.Receipt))
	require.Equal(t, []string{"ok"}, e.Ack(t, "ga", retry.Receipt))
}

// TestE2EDoubleAckInOneRequest: the same valid receipt twice in one ack
// request must be ok twice (a repeated ack is idempotent, as the README says).
func TestE2EDoubleAckInOneRequest(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	e.Send(t, "dup", api.SendMessage{Body: "x"})
	m := e.PullN(t, "g", "dup", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, []string{"ok", "ok"}, e.Ack(t, "g", m.Receipt, m.Receipt))
	require.Empty(t, e.Pull(t, "g", "dup", api.PullRequest{WaitMs: 200}))

	// Concurrently: a client retrying an ack whose answer it did not see.
	for i := 0; i < 10; i++ {
		e.Send(t, "dup", api.SendMessage{Body: fmt.Sprintf("c%d", i)})
		m := e.PullN(t, "g", "dup", 1, 30_000, 10*time.Second)[0]
		var wg sync.WaitGroup
		statuses := make([][]string, 2)
		for j := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[j] = e.Ack(t, "g", m.Receipt)
			}()
		}
		wg.Wait()
		require.Equal(t, [][]string{{"ok"}, {"ok"}}, statuses, "round %d", i)
	}
}

// receipts2 posts one receipt to ack, nack (level 0), leases (30 s) or
// leases0 (a lease of 0: visible again) and returns the status.
func (e *e2eServer) receipts2(t *testing.T, group, op, receipt string) []string {
	t.Helper()
	var body any
	switch op {
	case "ack":
		body = api.AckRequest{Receipts: []string{receipt}}
	case "nack":
		body = api.NackRequest{Items: []api.NackItem{{Receipt: receipt}}}
	case "leases":
		body = api.LeaseRequest{Items: []api.LeaseItem{{Receipt: receipt, InvisibleMs: 30_000}}}
	case "leases0":
		op, body = "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: receipt, InvisibleMs: 0}}}
	}
	res := e.Receipts(t, group, op, body)
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.Status
	}
	return out
}

// TestE2ERetryLadder over HTTP with millisecond delay levels: a
// consumer that nacks every delivery sees the message again after level
// 3 + reconsumeTimes each time; after retryMaxTimes (16) retries, i.e. on
// the 17th failed delivery, the message is a dead letter with its 17
// attempts. Beside it: a nack with level -1 dead-letters at once, a nack
// with level 5 waits level 5, and lease extensions count no attempt. Then
// the dead-letter filters, resend and discard.
func TestE2ERetryLadder(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	var group api.Group
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/ladder", api.GroupRequest{RetryMaxTimes: 16, InvisibleMs: 30_000}), http.StatusCreated, &group)
	require.Equal(t, 16, group.RetryMaxTimes)
	for _, topic := range []string{"ladder-a", "ladder-b", "ladder-c", "ladder-d"} {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/"+topic, api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	}
	pullOne := func(t *testing.T, topic string) api.PulledMessage {
		t.Helper()
		return e.PullN(t, "ladder", topic, 1, 30_000, 10*time.Second)[0]
	}

	origins := map[string]string{} // topic -> first message id
	var originsMu sync.Mutex
	t.Run("Scenarios", func(t *testing.T) {
		t.Run("Ladder", func(t *testing.T) {
			t.Parallel()
			sent := e.Send(t, "ladder-a", api.SendMessage{Body: "doomed", Tag: "created", Keys: []string{"order-9"},
				Properties: map[string]string{"trace": "abc"}})
			originsMu.Lock()
			origins["ladder-a"] = sent.MessageID
			originsMu.Unlock()
			m := pullOne(t, "ladder-a")
			require.Equal(t, sent.MessageID, m.MessageID)
			var lateness []time.Duration
			for i := 0; i <= 16; i++ {
				require.EqualValues(t, i, m.ReconsumeTimes, "delivery %d", i+1)
				require.Equal(t, "doomed", m.Body)
				require.Equal(t, "ladder-a", m.Topic)
				require.Equal(t, "created", m.Tag)
				require.Equal(t, []string{"order-9"}, m.Keys)
				require.Equal(t, map[string]string{"trace": "abc"}, m.Properties)
				if i > 0 {
					require.Equal(t, sent.MessageID, m.OriginMessageID, "delivery %d", i+1)
				}
				nackAt := time.Now()
				e.Nack(t, "ladder", m.Receipt, 0, fmt.Sprintf("attempt %d: downstream TIMEOUT", i+1))
				if i == 16 {
					break
				}
				m = pullOne(t, "ladder-a")
				waited := time.Since(nackAt)
				delay := servertest.LevelDelay(t, e.Cfg, min(3+i, len(e.Cfg.DelayLevels)))
				require.GreaterOrEqual(t, waited, delay, "retry %d came back before level %d", i+1, 3+i)
				lateness = append(lateness, waited-delay)
			}
			require.Empty(t, e.Pull(t, "ladder", "ladder-a", api.PullRequest{WaitMs: 500}), "after the 17th failure nothing is redelivered")
			t.Logf("ladder: 16 retries at levels 3..18 (%v..%v); redelivery later than the level's delay by p50 %v, p99 %v, max %v (nack start -> pull return)",
				servertest.LevelDelay(t, e.Cfg, 3), servertest.LevelDelay(t, e.Cfg, 18), percentile(lateness, 0.5), percentile(lateness, 0.99), percentile(lateness, 1))
		})
		t.Run("DelayLevelMinusOneIsDeadAtOnce", func(t *testing.T) {
			t.Parallel()
			sent := e.Send(t, "ladder-b", api.SendMessage{Body: "poison"})
			originsMu.Lock()
			origins["ladder-b"] = sent.MessageID
			originsMu.Unlock()
			m := pullOne(t, "ladder-b")
			e.Nack(t, "ladder", m.Receipt, -1, "poison pill: cannot parse")
			require.Empty(t, e.Pull(t, "ladder", "ladder-b", api.PullRequest{WaitMs: 300}), "a dead letter is not delivered")
		})
		t.Run("DelayLevelFive", func(t *testing.T) {
			t.Parallel()
			e.Send(t, "ladder-c", api.SendMessage{Body: "later"})
			m := pullOne(t, "ladder-c")
			nackAt := time.Now()
			e.Nack(t, "ladder", m.Receipt, 5, "busy, come back at level 5")
			retry := pullOne(t, "ladder-c")
			waited := time.Since(nackAt)
			require.GreaterOrEqual(t, waited, servertest.LevelDelay(t, e.Cfg, 5))
			require.EqualValues(t, 1, retry.ReconsumeTimes)
			require.Equal(t, m.MessageID, retry.OriginMessageID)
			t.Logf("delayLevel 5 (%v): redelivered after %v", servertest.LevelDelay(t, e.Cfg, 5), waited)
			require.Equal(t, []string{"ok"}, e.Ack(t, "ladder", retry.Receipt))
		})
		t.Run("LeaseExtensionsCountNoAttempt", func(t *testing.T) {
			t.Parallel()
			sent := e.Send(t, "ladder-d", api.SendMessage{Body: "slow work"})
			originsMu.Lock()
			origins["ladder-d"] = sent.MessageID
			originsMu.Unlock()
			const leaseMs, pollMs = 1000, 300
			pulledAt := time.Now()
			m := e.PullN(t, "ladder", "ladder-d", 1, leaseMs, 10*time.Second)[0]
			receipt := m.Receipt
			for i := 0; i < 5; i++ {
				res := e.Receipts(t, "ladder", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: receipt, InvisibleMs: leaseMs}}})
				require.Equal(t, "ok", res[0].Status, "extension %d: %+v", i+1, res[0])
				if res[0].NewReceipt != "" {
					receipt = res[0].NewReceipt
				}
				// The wait of an empty long poll is the time that passes;
				// the lease holds, so it gets nothing.
				require.Empty(t, e.Pull(t, "ladder", "ladder-d", api.PullRequest{WaitMs: pollMs}), "extension %d", i+1)
			}
			require.Greater(t, time.Since(pulledAt), time.Duration(leaseMs)*time.Millisecond, "the first lease alone would have run out")
			e.Nack(t, "ladder", receipt, -1, "gave up after extensions")
		})
	})

	// The dead-letter queue: the three letters, filters, resend, discard.
	var all api.DeadLetterList
	servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq"), http.StatusOK, &all)
	require.Len(t, all.Items, 3)
	byTopic := map[string]api.DeadLetter{}
	for _, d := range all.Items {
		byTopic[d.OriginalTopic] = d
		require.Equal(t, "dead", d.Status)
		require.Regexp(t, messageIDPattern, d.MessageID)
		require.NotEmpty(t, d.DeadAt)
		require.NotEmpty(t, d.FirstFailedAt)
		require.Equal(t, origins[d.OriginalTopic], d.OriginMessageID, "%s", d.OriginalTopic)
	}
	ladder, poison, slow := byTopic["ladder-a"], byTopic["ladder-b"], byTopic["ladder-d"]

	require.EqualValues(t, 17, ladder.ReconsumeTimes)
	require.Len(t, ladder.Attempts, 17, "one attempt per failed delivery")
	for i, a := range ladder.Attempts {
		require.Equal(t, "nack", a.Outcome)
		require.Equal(t, 0, a.DelayLevel)
		require.Equal(t, fmt.Sprintf("attempt %d: downstream TIMEOUT", i+1), a.Reason)
		if i > 0 {
			require.GreaterOrEqual(t, a.At, ladder.Attempts[i-1].At)
		}
	}
	require.Equal(t, "attempt 17: downstream TIMEOUT", ladder.Reason)
	require.Equal(t, ladder.Attempts[0].At, ladder.FirstFailedAt)
	require.Equal(t, "created", ladder.Tag)
	require.Equal(t, []string{"order-9"}, ladder.Keys)
	require.Equal(t, "abc", ladder.Properties["trace"])

	require.EqualValues(t, 1, poison.ReconsumeTimes)
	require.Len(t, poison.Attempts, 1)
	require.Equal(t, -1, poison.Attempts[0].DelayLevel)
	require.Equal(t, "poison pill: cannot parse", poison.Reason)

	require.EqualValues(t, 1, slow.ReconsumeTimes, "five lease extensions counted no attempt")
	require.Len(t, slow.Attempts, 1)
	require.Equal(t, "gave up after extensions", slow.Reason)

	var one api.DeadLetter
	servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq/"+ladder.MessageID), http.StatusOK, &one)
	require.Equal(t, "doomed", one.Body)
	require.Equal(t, "utf8", one.BodyEncoding)
	require.Len(t, one.Attempts, 17)

	t.Run("Filters", func(t *testing.T) {
		list := func(t *testing.T, query url.Values) []string {
			t.Helper()
			var out api.DeadLetterList
			servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq?"+query.Encode()), http.StatusOK, &out)
			ids := make([]string, 0, len(out.Items))
			for _, d := range out.Items {
				ids = append(ids, d.MessageID)
			}
			return ids
		}
		q := func(kv ...string) url.Values {
			v := url.Values{}
			for i := 0; i < len(kv); i += 2 {
				v.Set(kv[i], kv[i+1])
			}
			return v
		}
		require.Equal(t, []string{ladder.MessageID}, list(t, q("originalTopic", "ladder-a")))
		require.Equal(t, []string{poison.MessageID}, list(t, q("originalTopic", "ladder-b")))
		require.Empty(t, list(t, q("originalTopic", "ladder-c")), "ladder-c was acked in the end")
		require.Equal(t, []string{ladder.MessageID}, list(t, q("reasonContains", "timeout")), "case-insensitive")
		require.Equal(t, []string{poison.MessageID}, list(t, q("reasonContains", "POISON")))
		require.Equal(t, []string{poison.MessageID}, list(t, q("originalTopic", "ladder-b", "reasonContains", "parse")))
		require.Empty(t, list(t, q("originalTopic", "ladder-b", "reasonContains", "timeout")))

		// Time range on deadAt (inclusive), checked against every letter.
		for _, pivot := range all.Items {
			var from, to []string
			for _, d := range all.Items {
				if d.DeadAt >= pivot.DeadAt {
					from = append(from, d.MessageID)
				}
				if d.DeadAt <= pivot.DeadAt {
					to = append(to, d.MessageID)
				}
			}
			require.ElementsMatch(t, from, list(t, q("from", pivot.DeadAt)), "from %s", pivot.DeadAt)
			require.ElementsMatch(t, to, list(t, q("to", pivot.DeadAt)), "to %s", pivot.DeadAt)
			require.Equal(t, []string{pivot.MessageID}, list(t, q("from", pivot.DeadAt, "to", pivot.DeadAt)))
		}
		require.Empty(t, list(t, q("from", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))))
		require.Len(t, list(t, q("to", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))), 3)

		// Pages of one follow the cursor through all three.
		var seen []string
		cursor := ""
		for page := 0; page < 5; page++ {
			query := q("limit", "1")
			if cursor != "" {
				query.Set("cursor", cursor)
			}
			var out api.DeadLetterList
			servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq?"+query.Encode()), http.StatusOK, &out)
			for _, d := range out.Items {
				seen = append(seen, d.MessageID)
			}
			if cursor = out.Next; cursor == "" {
				break
			}
		}
		want := make([]string, 0, len(all.Items))
		for _, d := range all.Items {
			want = append(want, d.MessageID)
		}
		require.Equal(t, want, seen)
	})

	t.Run("Resend", func(t *testing.T) {
		var res api.ResendResponse
		servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/ladder/dlq/resend", api.ResendRequest{MessageIDs: []string{ladder.MessageID}}), http.StatusOK, &res)
		require.Equal(t, []string{ladder.MessageID}, res.Resent)
		require.Empty(t, res.Skipped)
		back := e.PullN(t, "ladder", "ladder-a", 1, 30_000, 10*time.Second)[0]
		require.Equal(t, "doomed", back.Body)
		require.Equal(t, "ladder-a", back.Topic)
		require.Zero(t, back.ReconsumeTimes, "a resent letter starts a fresh attempt count")
		require.Equal(t, ladder.OriginMessageID, back.OriginMessageID, "ORIGIN_MESSAGE_ID is kept")
		require.Equal(t, "created", back.Tag)
		require.Equal(t, map[string]string{"trace": "abc"}, back.Properties)
		require.Equal(t, []string{"ok"}, e.Ack(t, "ladder", back.Receipt))

		servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/ladder/dlq/resend", api.ResendRequest{MessageIDs: []string{ladder.MessageID}}), http.StatusOK, &res)
		require.Empty(t, res.Resent)
		require.Equal(t, []string{ladder.MessageID}, res.Skipped, "a letter is resent once")
		var d api.DeadLetter
		servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq/"+ladder.MessageID), http.StatusOK, &d)
		require.Equal(t, "resent", d.Status)
		require.NotEmpty(t, d.StatusAt)

		// By filter: only the dead letters that match.
		servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/ladder/dlq/resend", api.ResendRequest{Filter: &api.DLQFilter{ReasonContains: "extensions"}}), http.StatusOK, &res)
		require.Equal(t, []string{slow.MessageID}, res.Resent)
		back = e.PullN(t, "ladder", "ladder-d", 1, 30_000, 10*time.Second)[0]
		require.Equal(t, "slow work", back.Body)
		require.Zero(t, back.ReconsumeTimes)
		require.Equal(t, slow.OriginMessageID, back.OriginMessageID)
		require.Equal(t, []string{"ok"}, e.Ack(t, "ladder", back.Receipt))
	})

	t.Run("Discard", func(t *testing.T) {
		r := e.Do(t, http.MethodDelete, "/v1/groups/ladder/dlq/"+poison.MessageID, "", nil, nil)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r)
		var d api.DeadLetter
		servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq/"+poison.MessageID), http.StatusOK, &d)
		require.Equal(t, "discarded", d.Status)
		var res api.ResendResponse
		servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/ladder/dlq/resend", api.ResendRequest{Filter: &api.DLQFilter{OriginalTopic: "ladder-b"}}), http.StatusOK, &res)
		require.Empty(t, res.Resent, "a discarded letter is not resent by filter")
		servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/ladder/dlq/resend", api.ResendRequest{MessageIDs: []string{poison.MessageID}}), http.StatusOK, &res)
		require.Equal(t, []string{poison.MessageID}, res.Skipped)
		require.Empty(t, e.Pull(t, "ladder", "ladder-b", api.PullRequest{WaitMs: 200}))

		statuses := map[string]string{}
		var list api.DeadLetterList
		servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq"), http.StatusOK, &list)
		for _, d := range list.Items {
			statuses[d.OriginalTopic] = d.Status
		}
		require.Equal(t, map[string]string{"ladder-a": "resent", "ladder-b": "discarded", "ladder-d": "resent"}, statuses)
		servertest.Decode(t, e.Get(t, "/v1/groups/ladder/dlq?status=dead"), http.StatusOK, &list)
		require.Empty(t, list.Items)
	})

	t.Run("Metrics", func(t *testing.T) {
		metrics := string(e.Get(t, "/metrics").Body)
		require.Contains(t, metrics, `mqgate_messages_dlq_total{group="ladder"} 3`)
		for level := 3; level <= 18; level++ {
			require.Contains(t, metrics, fmt.Sprintf(`mqgate_messages_retried_total{group="ladder",level="%d"}`, level))
		}
		var st api.BrokerStatus
		servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &st)
		require.GreaterOrEqual(t, st.ScheduledTotal, uint64(17))
		for _, l := range st.Levels {
			require.Zero(t, l.Backlog, "level %d", l.Level)
		}
		t.Logf("scheduler lateness (broker status): p50 %.1fms, p99 %.1fms, max %.1fms", st.LatenessP50Ms, st.LatenessP99Ms, st.LatenessMaxMs)
	})
}

// TestE2ENackRefusesADelayLevelOffTheLadder: a nack whose delayLevel is
// neither -1 (DLQ), 0 (the retry policy) nor a level of the ladder is a
// 400 invalid-argument, as a send with that level is, and the whole
// request is refused before any write: a valid item beside it keeps its
// lease, and the message is not retried.
func TestE2ENackRefusesADelayLevelOffTheLadder(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	levels := len(e.Cfg.DelayLevels)
	require.Equal(t, 18, levels, "the default ladder")
	e.Send(t, "ladder", api.SendMessage{Body: "a"})
	e.Send(t, "ladder", api.SendMessage{Body: "b"})
	held := e.PullN(t, "g", "ladder", 2, 30_000, 10*time.Second)
	for _, level := range []int{levels + 1, 99, 1 << 30, -2} {
		body := api.NackRequest{Items: []api.NackItem{{Receipt: held[0].Receipt, DelayLevel: 1}, {Receipt: held[1].Receipt, DelayLevel: level}}}
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/g/nack", body), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "items[1]", "level %d", level)
		if level > 0 {
			require.Contains(t, p.Detail, fmt.Sprintf("1..%d", levels), "level %d", level)
		}
	}
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/ladder/messages", api.SendMessage{Body: "c", DelayLevel: levels + 1}), http.StatusBadRequest, "invalid-argument")
	require.Empty(t, e.Pull(t, "g", "ladder", api.PullRequest{WaitMs: 500}), "nothing was nacked: no retry at level 1 (%v)", servertest.LevelDelay(t, e.Cfg, 1))
	// The edges of the ladder are accepted.
	e.Nack(t, "g", held[0].Receipt, levels, "the last level")
	e.Nack(t, "g", held[1].Receipt, -1, "to the DLQ")
}
