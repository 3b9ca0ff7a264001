package pgmirror

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
	"github.com/mqgate/mqgate/storage/offset"
)

// brokerOptions are brokertest's options on dir with the given flush mode.
func brokerOptions(dir, flush string) broker.Options {
	o := brokertest.Options(dir)
	o.FlushMode = flush
	return o
}

func mustOpenBroker(t testing.TB, dir, flush string) *broker.Broker {
	t.Helper()
	return brokertest.Open(t, brokerOptions(dir, flush))
}

// mustOpenMirror opens a mirror of src on url, closed when the test ends.
func mustOpenMirror(t testing.TB, url string, src Source, tweak ...func(*Config)) *Mirror {
	t.Helper()
	cfg := Config{DatabaseURL: url, PollInterval: 50 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, PassTimeout: 5 * time.Second, ConnectTimeout: time.Second}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := Open(context.Background(), cfg, src)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// bundle is one test's broker, schema and mirror.
type bundle struct {
	ctx context.Context
	dir string
	url string
	b   *broker.Broker
	m   *Mirror
}

func setup(t *testing.T) *bundle {
	t.Helper()
	url := pgtest.URL(t)
	bd := &bundle{ctx: context.Background(), dir: t.TempDir(), url: url}
	bd.b = mustOpenBroker(t, bd.dir, "sync")
	bd.m = mustOpenMirror(t, url, bd.b)
	return bd
}

// drain runs passes until one is not cut by the batch size.
func drain(t testing.TB, m *Mirror) Result {
	t.Helper()
	var total Result
	for i := 0; ; i++ {
		require.Less(t, i, 10000, "the mirror never caught up")
		res, err := m.runOnce(context.Background())
		require.NoError(t, err)
		total.Records += res.Records
		total.Offsets += res.Offsets
		total.DeadLetters += res.DeadLetters
		total.StatusChanges += res.StatusChanges
		if !res.More {
			return total
		}
	}
}

func send(t testing.TB, b *broker.Broker, topic string, n int) {
	t.Helper()
	msgs := make([]broker.SendMessage, n)
	for i := range msgs {
		msgs[i] = broker.SendMessage{Body: []byte("m"), Keys: []string{"k"}, Tag: "t"}
	}
	_, err := b.Send(context.Background(), topic, msgs)
	require.NoError(t, err)
}

func pull(t testing.TB, b *broker.Broker, group, topic string, n int) []broker.ReceivedMessage {
	t.Helper()
	msgs, err := b.Pull(context.Background(), broker.PullRequest{Group: group, Topic: topic, MaxMessages: n, Invisible: time.Minute})
	require.NoError(t, err)
	return msgs
}

// ackEach acks msgs one receipt per call (one progress record each).
func ackEach(t testing.TB, b *broker.Broker, group string, msgs []broker.ReceivedMessage) {
	t.Helper()
	for _, m := range msgs {
		res, err := b.Ack(context.Background(), group, []string{m.Receipt})
		require.NoError(t, err)
		require.Equal(t, broker.ReceiptOK, res[0].Status)
	}
}

// consume pulls and acks n messages of topic for group.
func consume(t testing.TB, b *broker.Broker, group, topic string, n int) {
	t.Helper()
	for n > 0 {
		msgs := pull(t, b, group, topic, min(n, 32))
		require.NotEmpty(t, msgs)
		ackEach(t, b, group, msgs)
		n -= len(msgs)
	}
}

// mirrored reads consumer_offsets of group straight from PostgreSQL (its
// own rows; mirroredInstance reads a consumer instance's).
func mirrored(t testing.TB, url, group string) map[offset.Key]int64 {
	t.Helper()
	return mirroredInstance(t, url, group, "")
}

// mirroredInstance reads the rows of one consumer instance of a
// broadcasting group (client "": the group's own), keyed as the broker
// keys them.
func mirroredInstance(t testing.TB, url, group, client string) map[offset.Key]int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT topic, queue_id, committed_offset FROM consumer_offsets WHERE group_name = $1 AND client_id = $2`, group, client)
	require.NoError(t, err)
	out := map[offset.Key]int64{}
	k := offset.Key{Group: group}
	if client != "" {
		k.Group += offset.InstanceSep + client
	}
	var c int64
	_, err = pgx.ForEachRow(rows, []any{&k.Topic, &k.QueueID, &c}, func() error { out[k] = c; return nil })
	require.NoError(t, err)
	return out
}

// live is the broker's committed offsets of group.
func live(t testing.TB, b *broker.Broker, group string) map[offset.Key]int64 {
	t.Helper()
	return liveInstance(t, b, group, "")
}

// liveInstance is the broker's committed offsets of one consumer instance
// of a broadcasting group (client "": the group's own).
func liveInstance(t testing.TB, b *broker.Broker, group, client string) map[offset.Key]int64 {
	t.Helper()
	qs, err := b.Progress(broker.WithClient(context.Background(), client), group)
	require.NoError(t, err)
	name := group
	if client != "" {
		name += offset.InstanceSep + client
	}
	out := map[offset.Key]int64{}
	for _, q := range qs {
		out[offset.Key{Group: name, Topic: q.Topic, QueueID: q.QueueID}] = q.ConsumerOffset
	}
	return out
}

// diff lists the keys where the mirror differs from live (a missing row
// counts as offset 0).
func diff(mirror, live map[offset.Key]int64) map[offset.Key][2]int64 {
	out := map[offset.Key][2]int64{}
	for k, v := range live {
		if mirror[k] != v {
			out[k] = [2]int64{mirror[k], v}
		}
	}
	for k, v := range mirror {
		if _, ok := live[k]; !ok && v != 0 {
			out[k] = [2]int64{v, 0}
		}
	}
	return out
}

func count(t testing.TB, url, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func execSQL(t testing.TB, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), sql)
	require.NoError(t, err)
}

// copyDir copies a closed broker's data dir (a "backup").
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	out, err := exec.Command("cp", "-a", from, to).CombinedOutput()
	require.NoError(t, err, string(out))
}

// TestMain fails the binary when a test leaves goroutines running.
func TestMain(m *testing.M) { brokertest.VerifyNoLeaks(m) }
