package clustercheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/clustercheck"
)

// replica is one node of a three-node cluster of the real binary.
type replica struct {
	id               int
	dir, addr, peers string
	srv              *server
}

func (r *replica) start(t *testing.T, bin string) error {
	s := &server{done: make(chan struct{}), log: &lockedBuffer{}}
	s.cmd = exec.Command(bin, "serve", "--listen", r.addr, "--data-dir", r.dir, "--flush", "sync", "--segment-size", "64MiB",
		"--log-format", "json", "--log-level", "warn", "--shutdown-delay", "0s",
		"--node-id", fmt.Sprint(r.id), "--peers", r.peers, "--raft-tick", "50ms")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	r.srv = s
	return nil
}

// startThree builds the server and starts three replicas of one cluster
// on fresh directories and free ports (peer links direct).
func startThree(t *testing.T) (bin string, rs []*replica) {
	t.Helper()
	bin = buildServer(t)
	rs = make([]*replica, 3)
	var peers []string
	for i := range rs {
		rs[i] = &replica{id: i + 1, dir: t.TempDir(), addr: freeAddr(t)}
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, freeAddr(t)))
	}
	for _, r := range rs {
		r.peers = strings.Join(peers, ",")
		require.NoError(t, r.start(t, bin))
	}
	return bin, rs
}

// clusterView is the part of GET /v1/cluster the test reads.
type clusterView struct {
	NodeID  int  `json:"nodeId"`
	Leader  int  `json:"leader"`
	Serving bool `json:"serving"`
}

func view(addr string) (clusterView, error) {
	var v clusterView
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + addr + "/v1/cluster")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET /v1/cluster: %s", resp.Status)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// servingLeader waits for the replica that serves (leads, log applied).
func servingLeader(rs []*replica, timeout time.Duration) (*replica, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, r := range rs {
			if v, err := view(r.addr); err == nil && v.Serving {
				return r, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("no replica serves after %s", timeout)
}

// TestClusterKill9TheLeaderUnderLoad runs the workload against three
// replicas of the real binary (requests spread over all three: the
// followers forward them to the leader) while the test, in turn, kills
// the leader with SIGKILL and restarts it on its data directory and
// ports, or stops it (SIGSTOP) until the others elect another and then
// resumes it — a stale leader — each time to whichever replica leads. The history must show nothing
// acknowledged lost, no delivery after an ok ack, one message per
// position and per id; the report gives the write unavailability after
// each kill (from the kill to the first ok send). LONG=1 runs longer with
// more kills.
func TestClusterKill9TheLeaderUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns three servers")
	}
	runFor, kills := 7*time.Second, 2 // faults: kill -9 and SIGSTOP in turn
	if os.Getenv("LONG") != "" {
		runFor, kills = 120*time.Second, 40
	}
	bin, rs := startThree(t)
	_, err := servingLeader(rs, 30*time.Second)
	require.NoError(t, err)

	h := clustercheck.NewHistory()
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	start := time.Now()
	var (
		wg      sync.WaitGroup
		killErr error
	)
	wg.Go(func() {
		for i := range kills {
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * runFor / time.Duration(kills+1))))
			lead, err := servingLeader(rs, 20*time.Second)
			if err != nil {
				killErr = err
				cancel()
				return
			}
			if i%2 == 1 {
				// A stale leader: stopped long enough for the others to
				// elect another, then resumed. It must not deliver or
				// acknowledge anything on its own once it is back.
				_ = lead.srv.cmd.Process.Signal(syscall.SIGSTOP)
				h.Fault(fmt.Sprintf("SIGSTOP of leader %d for 1.5 s", lead.id), time.Now())
				time.Sleep(1500 * time.Millisecond)
				_ = lead.srv.cmd.Process.Signal(syscall.SIGCONT)
				continue
			}
			lead.srv.kill9()
			h.Fault(fmt.Sprintf("kill -9 of leader %d", lead.id), time.Now())
			if killErr = lead.start(t, bin); killErr != nil {
				cancel()
				return
			}
		}
	})
	runChecked(t, ctx, rs, h, "clustercheck", runFor, kills, func() error { wg.Wait(); return killErr })
}

// runChecked runs the workload against the replicas until ctx ends, waits
// for the test's fault injector (wait returns its error), then checks the
// history: no anomaly, at least 50 ok sends a second, and writes
// recovered after each of the faults.
func runChecked(t *testing.T, ctx context.Context, rs []*replica, h *clustercheck.History, topic string,
	runFor time.Duration, faults int, wait func() error) {
	t.Helper()
	urls := make([]string, len(rs))
	for i, r := range rs {
		urls[i] = "http://" + r.addr
	}
	hist, err := clustercheck.Run(ctx, clustercheck.Config{
		URLs:      urls,
		Topic:     topic,
		Groups:    []string{"g1", "g2"},
		Producers: 4,
		Consumers: 2,
		Rate:      300,
		History:   h,
		Logf:      t.Logf,
	})
	require.NoError(t, wait())
	require.NoError(t, err)
	r := clustercheck.Check(hist)
	t.Log("\n" + r.String())
	if !r.OK() {
		for _, rep := range rs {
			t.Logf("replica %d log tail:\n%s", rep.id, rep.srv.logTail(20))
		}
	}
	require.True(t, r.OK(), "the history shows an anomaly")
	require.Greater(t, r.SendsOK, int(runFor.Seconds())*50)
	require.Len(t, r.Unavailability, faults)
	for _, u := range r.Unavailability {
		require.True(t, u.Recovered, "no ok send after %s", u.Fault.Name)
	}
}
