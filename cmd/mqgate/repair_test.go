package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// `mqgate repair` through the real binary: a data dir of many small
// segments is damaged while the server is stopped, serve refuses and names
// the command, the dry run prints the plan and changes no byte, --apply
// repairs, and the server then delivers every intact message exactly once,
// none of the lost ones, and gives out no queue offset twice; the report's
// loss is the true loss.

// repairServeArgs make segments of 256 KiB.
var repairServeArgs = []string{"--segment-size", "256KiB", "--max-message-size", "4KiB"}

type qoff struct {
	queue  int32
	offset int64
}

// logFrames walks the segment files of dir and returns each record
// frame's end by its start.
func logFrames(t *testing.T, dir string) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	files, err := filepath.Glob(filepath.Join(dir, "commitlog", "[0-9]*[0-9]"))
	require.NoError(t, err)
	for _, f := range files {
		var base int64
		_, err := fmt.Sscanf(filepath.Base(f), "%d", &base)
		require.NoError(t, err)
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for pos := 0; pos+commitlog.HeaderSize <= len(b); {
			size := int(binary.BigEndian.Uint32(b[pos:]))
			if size == 0 || binary.BigEndian.Uint32(b[pos+4:]) != commitlog.RecordMagic {
				break
			}
			out[base+int64(pos)] = base + int64(pos+size)
			pos += size
		}
	}
	return out
}

func TestRepairCommandKeepsIntactMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the server")
	}
	segBase := func(t *testing.T, path string) int64 {
		var b int64
		_, err := fmt.Sscanf(filepath.Base(path), "%d", &b)
		require.NoError(t, err)
		return b
	}
	// Each damage returns the damaged log range [from, to).
	damages := map[string]func(t *testing.T, segs []string, lastPhys int64) (int64, int64){
		"MiddleSegmentDeleted": func(t *testing.T, segs []string, _ int64) (int64, int64) {
			require.NoError(t, os.Remove(segs[2]))
			return segBase(t, segs[2]), segBase(t, segs[3])
		},
		"OldSegmentTruncated": func(t *testing.T, segs []string, _ int64) (int64, int64) {
			require.NoError(t, os.Truncate(segs[1], 100_000))
			return segBase(t, segs[1]) + 100_000, segBase(t, segs[2])
		},
		"TailZeroed": func(t *testing.T, segs []string, lastPhys int64) (int64, int64) {
			var seg string
			for _, s := range segs {
				if segBase(t, s) <= lastPhys {
					seg = s
				}
			}
			at := (lastPhys - segBase(t, seg)) / 2
			f, err := os.OpenFile(seg, os.O_RDWR, 0)
			require.NoError(t, err)
			st, err := f.Stat()
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, st.Size()-at), at)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			return segBase(t, seg) + at, 1 << 62
		},
	}
	for _, name := range []string{"MiddleSegmentDeleted", "OldSegmentTruncated", "TailZeroed"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "data")
			p := startServer(t, dir, freeAddr(t), repairServeArgs...)
			_, err := call(ctx, http.MethodPut, p.url("/v1/topics/rep"), api.TopicRequest{Queues: 4}, nil)
			require.NoError(t, err)
			_, err = call(ctx, http.MethodPut, p.url("/v1/groups/fixers"), api.GroupRequest{InvisibleMs: 60_000,
				Subscriptions: []api.Subscription{{Topic: "rep"}}}, nil)
			require.NoError(t, err)
			const batches, per = 30, 100
			bodies := map[qoff]string{}
			physOf := map[qoff]int64{}
			top := map[int32]int64{} // next offset per queue before the damage
			var lastPhys int64
			for b := 0; b < batches; b++ {
				msgs := make([]api.SendMessage, per)
				for i := range msgs {
					msgs[i] = api.SendMessage{Body: fmt.Sprintf("msg-%05d-%s", b*per+i, strings.Repeat("r", 300))}
				}
				var res api.SendResponse
				_, err := call(ctx, http.MethodPost, p.url("/v1/topics/rep/messages"), api.SendRequest{Messages: &msgs}, &res)
				require.NoError(t, err)
				require.Len(t, res.Results, per)
				for i, r := range res.Results {
					id, err := message.ParseID(r.MessageID)
					require.NoError(t, err)
					k := qoff{r.QueueID, r.QueueOffset}
					bodies[k], physOf[k] = msgs[i].Body, id.Offset()
					top[r.QueueID] = max(top[r.QueueID], r.QueueOffset+1)
					lastPhys = max(lastPhys, id.Offset())
				}
			}
			r := runCLI(t, nil, "", "repair", "--data-dir", dir)
			require.Equal(t, 1, r.code, "repair beside a running server\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, "stop the server first")
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, <-p.done)

			frames := logFrames(t, dir)
			segs, err := filepath.Glob(filepath.Join(dir, "commitlog", "[0-9]*[0-9]"))
			require.NoError(t, err)
			sort.Strings(segs)
			require.GreaterOrEqual(t, len(segs), 5, "several segments")
			from, to := damages[name](t, segs, lastPhys)
			trulyLost := map[qoff]bool{}
			for k, phys := range physOf {
				end, ok := frames[phys]
				require.True(t, ok, "no frame at %d", phys)
				if end > from && phys < to {
					trulyLost[k] = true
				}
			}
			require.NotEmpty(t, trulyLost)
			require.Less(t, len(trulyLost), len(bodies))

			// serve refuses and names the command.
			r = runCLI(t, nil, "", append([]string{"serve", "--listen", freeAddr(t), "--data-dir", dir, "--log-format", "json"}, repairServeArgs...)...)
			require.Equal(t, 1, r.code, "serve on a damaged data dir\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, "corrupt data")
			require.Contains(t, r.stderr, "run 'mqgate repair --data-dir "+dir+"'")

			// The dry run prints the plan and changes nothing.
			before := storagetest.DirDigest(t, dir)
			r = runCLI(t, nil, "", "repair", "--data-dir", dir)
			require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			t.Log(r.stdout)
			require.Contains(t, r.stdout, fmt.Sprintf("lost messages: %d ", len(trulyLost)))
			require.Contains(t, r.stdout, fmt.Sprintf("  rep: %d\n", len(trulyLost)))
			require.Contains(t, r.stdout, "dry run: nothing was changed")
			r = runCLI(t, nil, "", "repair", "--data-dir", dir, "-o", "json")
			require.Equal(t, 0, r.code, r.stderr)
			var plan struct {
				LostMessages int64
				Lost         []struct {
					Topic    string
					QueueID  int32
					From, To int64
				}
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &plan), r.stdout)
			require.EqualValues(t, len(trulyLost), plan.LostMessages, "the report's loss is the true loss")
			reported := map[qoff]bool{}
			for _, l := range plan.Lost {
				require.Equal(t, "rep", l.Topic)
				for o := l.From; o < l.To; o++ {
					reported[qoff{l.QueueID, o}] = true
				}
			}
			require.Equal(t, trulyLost, reported)
			require.Equal(t, before, storagetest.DirDigest(t, dir), "the dry run changed the data dir")

			r = runCLI(t, nil, "", "repair", "--data-dir", dir, "--apply")
			require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, "repaired")
			segs, err = filepath.Glob(filepath.Join(dir, "commitlog", "[0-9]*[0-9]"))
			require.NoError(t, err)
			for _, s := range segs {
				st, err := os.Stat(s)
				require.NoError(t, err)
				require.LessOrEqual(t, st.Size(), int64(256<<10), "%s: segments keep the log's size", s)
			}
			broken, err := filepath.Glob(filepath.Join(dir, "commitlog", "*.broken*"))
			require.NoError(t, err)
			if name != "MiddleSegmentDeleted" {
				require.NotEmpty(t, broken, "the damaged bytes are kept in .broken files")
			}

			// serve starts; the group gets every intact message once.
			p = startServer(t, dir, freeAddr(t), repairServeArgs...)
			got := map[qoff]bool{}
			for idle := 0; idle < 3; {
				var pulled struct{ Messages []api.PulledMessage }
				_, err := call(ctx, http.MethodPost, p.url("/v1/groups/fixers/topics/rep/pull"), api.PullRequest{MaxMessages: 32, WaitMs: 200}, &pulled)
				require.NoError(t, err)
				if len(pulled.Messages) == 0 {
					idle++
					continue
				}
				var receipts []string
				for _, m := range pulled.Messages {
					k := qoff{m.QueueID, m.QueueOffset}
					require.False(t, got[k], "%v delivered twice", k)
					require.False(t, trulyLost[k], "%v was lost, yet delivered", k)
					require.Equal(t, bodies[k], m.Body, "%v", k)
					got[k] = true
					receipts = append(receipts, m.Receipt)
				}
				_, err = call(ctx, http.MethodPost, p.url("/v1/groups/fixers/ack"), map[string]any{"receipts": receipts}, nil)
				require.NoError(t, err)
			}
			require.Equal(t, len(bodies)-len(trulyLost), len(got), "every intact message is delivered")

			// New sends get offsets above every one given out before.
			for i := 0; i < 8; i++ {
				var res api.SendResponse
				_, err := call(ctx, http.MethodPost, p.url("/v1/topics/rep/messages"), api.SendMessage{Body: fmt.Sprintf("after-%d", i)}, &res)
				require.NoError(t, err)
				sr := res.Results[0]
				require.GreaterOrEqual(t, sr.QueueOffset, top[sr.QueueID], "queue %d offset %d given out again", sr.QueueID, sr.QueueOffset)
			}
			deadline := time.Now().Add(10 * time.Second)
			after := 0
			for after < 8 && time.Now().Before(deadline) {
				var pulled struct{ Messages []api.PulledMessage }
				_, err := call(ctx, http.MethodPost, p.url("/v1/groups/fixers/topics/rep/pull"), api.PullRequest{MaxMessages: 32, WaitMs: 500}, &pulled)
				require.NoError(t, err)
				for _, m := range pulled.Messages {
					require.True(t, strings.HasPrefix(m.Body, "after-"), m.Body)
					after++
				}
			}
			require.Equal(t, 8, after, "the new messages are delivered")
		})
	}
}
