package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// damageStoredBody flips a bit in the middle of the stored body of the
// message with id, in the data dir of a stopped server, and returns the
// message's CommitLog offset.
func damageStoredBody(t *testing.T, dataDir, id, body string) int64 {
	t.Helper()
	mid, err := message.ParseID(id)
	require.NoError(t, err)
	path, off := storagetest.BodyOffset(t, dataDir, mid.Offset(), []byte(body))
	storagetest.FlipBit(t, path, off, 5)
	return mid.Offset()
}

// TestE2EDamagedMessageIsNotDelivered: a byte of a stored message body
// flips while the server is stopped. After a restart a consumer that pulls
// everything gets every other message and never the damaged one; reading
// it by id is a 404; the broker status lists it in the quarantine with the
// CRC mismatch and its offset, and /readyz reports the server degraded.
func TestE2EDamagedMessageIsNotDelivered(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	var ids []string
	var bodies []string
	for i := range 6 {
		body := fmt.Sprintf("integrity-%d-%s", i, strings.Repeat("b", 200))
		ids = append(ids, e.Send(t, "integrity", api.SendMessage{Body: body, Keys: []string{fmt.Sprintf("k%d", i)}}).MessageID)
		bodies = append(bodies, body)
	}
	e.Close(t)
	offset := damageStoredBody(t, e.Cfg.DataDir, ids[2], bodies[2])

	e = openE2E(t, e.Cfg)
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+ids[2]), http.StatusNotFound, "message-not-found")
	got := e.PullN(t, "g", "integrity", 5, 60_000, 10*time.Second)
	var gotBodies []string
	for _, m := range got {
		gotBodies = append(gotBodies, m.Body)
	}
	require.ElementsMatch(t, append(append([]string(nil), bodies[:2]...), bodies[3:]...), gotBodies)
	require.Empty(t, e.Pull(t, "g", "integrity", api.PullRequest{MaxMessages: 32, WaitMs: 300}), "nothing else is delivered")
	require.Empty(t, e.ByKey(t, "integrity", "k2"))
	require.Len(t, e.ByKey(t, "integrity", "k3"), 1)

	var status api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &status)
	require.EqualValues(t, 1, status.Quarantine.Count)
	require.Len(t, status.Quarantine.Records, 1)
	q := status.Quarantine.Records[0]
	require.Equal(t, offset, q.Offset)
	// The pulls' read or the background scrubber, whichever reaches the
	// record first, quarantines it (under load the scrubber sometimes
	// does).
	require.Contains(t, []string{"read", "scrub"}, q.Stage)
	require.Contains(t, q.Reason, "CRC-32C mismatch")
	require.Contains(t, q.Reason, fmt.Sprintf("record at %d", offset))
	require.True(t, status.Scrub.Enabled)
	require.Equal(t, int64(16<<20), status.Scrub.RateBytesPerSecond)

	ready := e.Get(t, "/readyz")
	require.Equal(t, http.StatusOK, ready.Status)
	require.Contains(t, string(ready.Body), "ok (")
	require.Contains(t, string(ready.Body), "1 records quarantined")
	require.Contains(t, string(ready.Body), fmt.Sprintf("offset %d", offset))
	v, ok := e.MetricValue(t, "mqgate_store_quarantined_records")
	require.True(t, ok)
	require.EqualValues(t, 1, v)
}

// TestE2EScrubberFindsDamagedOldMessage: with small segments, a message in
// an old, sealed segment is damaged while the server is stopped and no
// consumer reads it. After a restart the scrubber's first pass finds it:
// the broker status shows the pass and the quarantined record (stage
// scrub), /metrics the scrubber's counters, /readyz the degradation.
func TestE2EScrubberFindsDamagedOldMessage(t *testing.T) {
	t.Parallel()
	small := func(c *server.Config) {
		c.SegmentSize = 512 << 10
		c.MaxMessageSize = 64 << 10
		c.ScrubRate = 0 // off for the first run: its pass must not happen before the damage
	}
	e := startE2E(t, small)
	var ids []string
	for i := range 40 {
		body := fmt.Sprintf("old-%02d-%s", i, strings.Repeat("o", 30_000))
		ids = append(ids, e.Send(t, "old", api.SendMessage{Body: body}).MessageID)
	}
	var status api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &status)
	require.False(t, status.Scrub.Enabled)
	require.Greater(t, status.CommitLogMaxOffset, int64(2*512<<10), "several segments")
	e.Close(t)
	offset := damageStoredBody(t, e.Cfg.DataDir, ids[1], fmt.Sprintf("old-01-%s", strings.Repeat("o", 30_000)))
	require.Less(t, offset, int64(512<<10), "in the first segment")

	e.Cfg.ScrubRate = 16 << 20
	e = openE2E(t, e.Cfg)
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		status = api.BrokerStatus{}
		servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &status)
		return status.Scrub.Passes >= 1, fmt.Sprintf("scrub status %+v", status.Scrub)
	})
	sc := status.Scrub
	require.True(t, sc.Enabled)
	require.NotEmpty(t, sc.LastPassAt)
	require.NotEmpty(t, sc.NextPassAt)
	require.GreaterOrEqual(t, sc.BytesVerified, int64(2*512<<10))
	require.EqualValues(t, 1, sc.BadFrames)
	require.EqualValues(t, 1, status.Quarantine.Count)
	q := status.Quarantine.Records[0]
	require.Equal(t, offset, q.Offset)
	require.Equal(t, "scrub", q.Stage)
	require.Contains(t, q.Reason, "CRC-32C mismatch")

	for series, min := range map[string]float64{
		"mqgate_store_scrub_bad_frames_total":            1,
		"mqgate_store_scrub_passes_total":                1,
		"mqgate_store_scrub_verified_bytes_total":        2 * 512 << 10,
		"mqgate_store_scrub_last_pass_timestamp_seconds": float64(time.Now().Add(-time.Hour).Unix()),
		"mqgate_store_scrub_verified_records_total":      20,
		"mqgate_store_quarantined_records":               1,
	} {
		v, ok := e.MetricValue(t, series)
		require.True(t, ok, series)
		require.GreaterOrEqual(t, v, min, series)
	}
	require.Contains(t, string(e.Get(t, "/readyz").Body), "scrub")
}
