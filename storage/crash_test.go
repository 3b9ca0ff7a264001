package storage_test

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The crash test is real: a child process (this test binary, re-executed)
// appends in sync mode and prints every acknowledged record; the parent
// kill -9s it at a random moment, reopens the store, and checks that every
// acknowledged record is there with the right bytes and that the
// ConsumeQueues agree with the CommitLog. Rounds reuse the directory, so
// each child also recovers from the previous kill.

const crashChildEnv = "MQGATE_CRASH_CHILD_DIR"

func crashOptions(dir string) storage.Options {
	o := storagetest.SmallOptions(dir)
	o.SegmentSize = 256 << 10
	o.FlushMode = commitlog.FlushSync
	o.CheckpointInterval = 20 * time.Millisecond
	return o
}

// TestCrashChild is the child's body; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestCrashKill9")
	}
	seed, _ := strconv.ParseUint(os.Getenv("MQGATE_CRASH_SEED"), 10, 64)
	s, err := storage.Open(crashOptions(dir))
	if err != nil {
		fmt.Printf("openerr %v\n", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	var mu sync.Mutex
	out := os.Stdout
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for seq := 0; ; seq++ {
				n := 1
				if rng.IntN(4) == 0 {
					n = 1 + rng.IntN(8)
				}
				msgs := make([]*message.Message, n)
				for i := range msgs {
					body := fmt.Sprintf("s%d-g%d-q%d-%d-%s", seed, g, seq, i, strings.Repeat("x", rng.IntN(3000)))
					m := storagetest.NewMessage(fmt.Sprintf("crash%d", rng.IntN(3)), int32(rng.IntN(4)), body, "tag", fmt.Sprintf("k%d-%d-%d", g, seq, i))
					msgs[i] = m
				}
				res := make([]storage.PutResult, n)
				if err := s.PutBatch(msgs, res); err != nil {
					fmt.Printf("puterr %v\n", err)
					return
				}
				mu.Lock()
				for i, m := range msgs {
					fmt.Fprintf(out, "ack %d %s %d %d %d %d\n", res[i].PhysicalOffset, m.Topic, m.QueueID,
						res[i].QueueOffset, crc32.ChecksumIEEE(m.Body), len(m.Body))
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	os.Exit(0)
}

type ackedRecord struct {
	phy, queueOffset int64
	topic            string
	queueID          int32
	crc              uint32
	size             int
}

func parseAck(line string) (ackedRecord, bool) {
	f := strings.Fields(line)
	if len(f) != 7 || f[0] != "ack" {
		return ackedRecord{}, false
	}
	var a ackedRecord
	var err error
	nums := make([]int64, 0, 5)
	for _, i := range []int{1, 3, 4, 5, 6} {
		v, e := strconv.ParseInt(f[i], 10, 64)
		err = errors.Join(err, e)
		nums = append(nums, v)
	}
	if err != nil {
		return a, false
	}
	a.phy, a.topic, a.queueID, a.queueOffset, a.crc, a.size = nums[0], f[2], int32(nums[1]), nums[2], uint32(nums[3]), int(nums[4])
	return a, true
}

func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	rounds := 6
	if os.Getenv("LONG") != "" {
		rounds = 40
	}
	dir := t.TempDir()
	var acked []ackedRecord
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "MQGATE_CRASH_SEED="+strconv.Itoa(round+1))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := bufio.NewReader(stdout)
		first, err := lines.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready\n", first, "child failed to open the store")
		delay := time.Duration(50+rand.IntN(250)) * time.Millisecond
		killed := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		roundAcks := 0
		for {
			line, err := lines.ReadString('\n')
			if err == io.EOF {
				break // a partial last line is not an acknowledgement
			}
			require.NoError(t, err)
			if strings.HasPrefix(line, "puterr") {
				t.Fatalf("child put failed: %s", line)
			}
			if a, ok := parseAck(line); ok {
				acked = append(acked, a)
				roundAcks++
			}
		}
		killed.Stop()
		_ = cmd.Wait()
		t.Logf("round %d: killed after %v, %d acknowledged records", round, delay, roundAcks)

		s, err := storage.Open(crashOptions(dir))
		require.NoError(t, err, "recovery after kill -9, round %d", round)
		rec := s.Recovery()
		require.True(t, rec.Abnormal, "the abort marker must survive kill -9")
		verifyAcked(t, s, acked)
		verifyQueuesMatchLog(t, s)
		require.NoError(t, s.Close())
	}
	require.NotEmpty(t, acked)
}

func verifyAcked(t *testing.T, s *storage.Store, acked []ackedRecord) {
	t.Helper()
	for _, a := range acked {
		m, err := s.Lookup(a.phy)
		require.NoError(t, err, "acknowledged record at %d lost", a.phy)
		require.Equal(t, a.topic, m.Topic)
		require.Equal(t, a.queueID, m.QueueID)
		require.Equal(t, a.queueOffset, m.QueueOffset)
		require.Equal(t, a.size, len(m.Body))
		require.Equal(t, a.crc, crc32.ChecksumIEEE(m.Body), "body of record at %d", a.phy)
		res, err := s.ReadQueue(a.topic, a.queueID, a.queueOffset, 1, nil)
		require.NoError(t, err)
		require.Len(t, res.Messages, 1)
		require.Equal(t, a.phy, res.Messages[0].PhysicalOffset, "consume queue entry %s/%d@%d", a.topic, a.queueID, a.queueOffset)
	}
}

// verifyQueuesMatchLog walks every ConsumeQueue: entries are dense, each
// points at a record of that topic/queue carrying that queue offset.
func verifyQueuesMatchLog(t *testing.T, s *storage.Store) {
	t.Helper()
	for _, topic := range s.Topics() {
		for _, id := range s.QueueIDs(topic) {
			next := s.MinOffset(topic, id)
			max := s.MaxOffset(topic, id)
			for next < max {
				res, err := s.ReadQueue(topic, id, next, 32, nil)
				require.NoError(t, err)
				require.NotEmpty(t, res.Messages)
				for _, m := range res.Messages {
					require.Equal(t, topic, m.Topic)
					require.Equal(t, id, m.QueueID)
					require.Equal(t, next, m.QueueOffset)
					next++
				}
			}
		}
	}
}
