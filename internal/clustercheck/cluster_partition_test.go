package clustercheck_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/clustercheck"
)

// partition is one fault of TestClusterPartitionsUnderLoad: which
// directed links (from, to) around the leader it cuts.
type partition struct {
	name string
	cut  func(lead int, others []int) [][2]int
}

var partitions = []partition{
	{"leader isolated (both ways)", func(l int, o []int) [][2]int {
		return [][2]int{{l, o[0]}, {l, o[1]}, {o[0], l}, {o[1], l}}
	}},
	{"leader cannot reach the others (one way: it still hears them)", func(l int, o []int) [][2]int {
		return [][2]int{{l, o[0]}, {l, o[1]}}
	}},
	{"the others cannot reach the leader (one way: it still reaches them)", func(l int, o []int) [][2]int {
		return [][2]int{{o[0], l}, {o[1], l}}
	}},
	{"one follower cut from the leader (one way)", func(l int, o []int) [][2]int {
		return [][2]int{{l, o[0]}}
	}},
}

// TestClusterPartitionsUnderLoad runs the workload against three replicas
// of the real binary whose peer links each go through a fault proxy (a
// replica dials every other one through its own proxy, so each direction
// of each pair can be cut alone). In turn, around whichever replica
// leads, the test cuts: the leader off both ways; the leader's outgoing
// links only (it hears the others, they do not hear it); its incoming
// links only (CheckQuorum must depose it: it hears no answers); one
// follower's link from the leader only. Each cut lasts 2 s, then heals.
// The history must show nothing acknowledged lost, no delivery after an
// ok ack, one message per position and per id, and writes recovering
// after every cut. LONG=1 runs longer, cycling through the cuts.
func TestClusterPartitionsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns three servers")
	}
	runFor, faults, hold := 11*time.Second, len(partitions), 2*time.Second
	if os.Getenv("LONG") != "" {
		runFor, faults = 150*time.Second, 24
	}
	bin := buildServer(t)
	const n = 3
	rs := make([]*replica, n)
	peerAddr := make([]string, n)
	for i := range rs {
		rs[i] = &replica{id: i + 1, dir: t.TempDir(), addr: freeAddr(t)}
		peerAddr[i] = freeAddr(t)
	}
	// proxies[from][to] carries from's traffic to to's peer port.
	proxies := make([][]*clustercheck.Proxy, n)
	for from := range n {
		proxies[from] = make([]*clustercheck.Proxy, n)
		var peers []string
		for to := range n {
			addr := peerAddr[to]
			if to != from {
				p, err := clustercheck.NewProxy(peerAddr[to])
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				proxies[from][to], addr = p, p.Addr()
			}
			peers = append(peers, fmt.Sprintf("%d=%s", to+1, addr))
		}
		rs[from].peers = strings.Join(peers, ",")
	}
	for _, r := range rs {
		require.NoError(t, r.start(t, bin))
	}
	_, err := servingLeader(rs, 30*time.Second)
	require.NoError(t, err)

	h := clustercheck.NewHistory()
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	start := time.Now()
	var (
		wg       sync.WaitGroup
		faultErr error
	)
	wg.Go(func() {
		for i := range faults {
			time.Sleep(time.Until(start.Add(time.Duration(i)*runFor/time.Duration(faults+1) + runFor/time.Duration(2*(faults+1)))))
			lead, err := servingLeader(rs, 20*time.Second)
			if err != nil {
				faultErr = fmt.Errorf("before cut %d: %w", i+1, err)
				cancel()
				return
			}
			l := lead.id - 1
			var others []int
			for j := range n {
				if j != l {
					others = append(others, j)
				}
			}
			pt := partitions[i%len(partitions)]
			links := pt.cut(l, others)
			for _, ln := range links {
				proxies[ln[0]][ln[1]].Block()
			}
			h.Fault(fmt.Sprintf("%s (leader %d)", pt.name, lead.id), time.Now())
			time.Sleep(hold)
			for _, ln := range links {
				proxies[ln[0]][ln[1]].Heal()
			}
		}
	})
	runChecked(t, ctx, rs, h, "partitioned", runFor, faults, func() error { wg.Wait(); return faultErr })
}
