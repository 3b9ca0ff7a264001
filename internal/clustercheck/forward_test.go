package clustercheck_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// answer is what a request through a follower came back with, and when.
type answer struct {
	status int
	code   string
	body   string
	took   time.Duration
	err    error
}

func request(method, url, body string, header map[string]string) answer {
	start := time.Now()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct {
		Code string `json:"code"`
	}
	_ = json.NewDecoder(bytes.NewReader(b)).Decode(&p)
	return answer{status: resp.StatusCode, code: p.Code, body: string(b), took: time.Since(start)}
}

// TestForwardAbandonedWhenTheLeaderChanges: requests a follower forwarded
// to a leader that then froze (SIGSTOP: its connections stay open, and
// nothing answers on them) are abandoned the moment the follower learns
// of the next leader with 503 write-outcome-unknown — a long-polling pull
// (it writes leases: a message it leased comes back when the lease ends)
// and a send (it may have been written; the client retries with its
// Idempotency-Key) — instead of hanging until the old
// leader comes back or the connection's ping gives up (15 s).
func TestForwardAbandonedWhenTheLeaderChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns three servers")
	}
	_, rs := startThree(t)
	lead, err := servingLeader(rs, 30*time.Second)
	require.NoError(t, err)
	var f *replica
	for _, r := range rs {
		if r != lead {
			f = r
		}
	}
	base := "http://" + f.addr
	sent := request(http.MethodPost, base+"/v1/topics/idle/messages", `{"body":"first"}`, nil)
	require.Equal(t, http.StatusOK, sent.status, "%+v", sent)
	got := request(http.MethodPost, base+"/v1/groups/g/topics/idle/pull", `{"maxMessages":1,"waitMs":1000}`, nil)
	require.Equal(t, http.StatusOK, got.status, "%+v", got)

	pull := make(chan answer, 1)
	go func() {
		pull <- request(http.MethodPost, base+"/v1/groups/g/topics/idle/pull", `{"maxMessages":1,"waitMs":30000}`, nil)
	}()
	time.Sleep(300 * time.Millisecond) // the pull waits on the leader
	require.NoError(t, lead.srv.cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	defer func() { _ = lead.srv.cmd.Process.Signal(syscall.SIGCONT) }()
	send := make(chan answer, 1)
	go func() {
		send <- request(http.MethodPost, base+"/v1/topics/idle/messages", `{"body":"second"}`, map[string]string{"Idempotency-Key": "abandoned-1"})
	}()

	p := <-pull
	require.NoError(t, p.err)
	require.Equal(t, http.StatusServiceUnavailable, p.status, "%+v", p)
	require.Equal(t, "write-outcome-unknown", p.code, "a pull writes leases: it may have leased a message")
	require.Less(t, time.Since(frozen), 8*time.Second, "the pull was abandoned when the next leader was known, not at its 30 s wait")
	s := <-send
	require.NoError(t, s.err)
	require.Equal(t, http.StatusServiceUnavailable, s.status, "%+v", s)
	require.Contains(t, []string{"write-outcome-unknown", "no-leader"}, s.code)
	require.Less(t, time.Since(frozen), 8*time.Second, "the send was abandoned when the next leader was known")
	t.Logf("pull abandoned after %s (%s), send after %s (%s)", p.took, p.code, s.took, s.code)

	// The retries with the same key reach the next leader once it serves.
	var retry answer
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		retry = request(http.MethodPost, base+"/v1/topics/idle/messages", `{"body":"second"}`, map[string]string{"Idempotency-Key": "abandoned-1"})
		if retry.status != http.StatusServiceUnavailable {
			break
		}
	}
	require.Equal(t, http.StatusOK, retry.status, "%+v", retry)
}
