package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// clock is a settable clock for the handler.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// topicExists reports whether the broker has topic.
func topicExists(t *testing.T, b *broker.Broker, topic string) bool {
	t.Helper()
	_, err := b.GetTopic(context.Background(), topic)
	if errors.Is(err, broker.ErrTopicNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// visibilityOf is the VisibilityTimeout a fresh handler on b reads for
// queue q (a restart's view of the table).
func visibilityOf(t *testing.T, b *broker.Broker, q string) string {
	t.Helper()
	h := New(Options{Broker: b, RedriveInterval: time.Hour})
	defer h.Close()
	w := serve(h, false, "GetQueueAttributes", `{"QueueUrl":"`+q+`","AttributeNames":["VisibilityTimeout"]}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var out struct{ Attributes map[string]string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
	return out.Attributes["VisibilityTimeout"]
}

// TestQueueTableRotates: the table moves between its two topics at a
// start and every metaRotateInterval, deleting the one it leaves (whose
// messages then hold no CommitLog segment back); a restart reads it
// from wherever it is, and after a crash between the write and the
// delete, the table with the higher sequence number is in force.
func TestQueueTableRotates(t *testing.T) {
	ctx := context.Background()
	b := brokertest.MustOpen(t, t.TempDir(), func(o *broker.Options) { o.AutoCreate = true })
	c := &clock{now: time.Now()}
	h := New(Options{Broker: b, RedriveInterval: time.Hour, Now: c.Now})
	defer h.Close()
	w := serve(h, false, "CreateQueue", `{"QueueName":"q","Attributes":{"VisibilityTimeout":"41"}}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.True(t, topicExists(t, b, metaTopic))
	require.False(t, topicExists(t, b, metaTopicAlt))

	moved, err := h.meta.rotateIfDue(ctx)
	require.NoError(t, err)
	require.True(t, moved, "the first check after a start moves the table")
	require.False(t, topicExists(t, b, metaTopic), "the topic left is deleted")
	require.True(t, topicExists(t, b, metaTopicAlt))
	require.Equal(t, "41", visibilityOf(t, b, "q"))

	moved, err = h.meta.rotateIfDue(ctx)
	require.NoError(t, err)
	require.False(t, moved, "not due yet")
	w = serve(h, false, "SetQueueAttributes", `{"QueueUrl":"q","Attributes":{"VisibilityTimeout":"42"}}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, "42", visibilityOf(t, b, "q"), "changes go to the topic in use")

	c.add(metaRotateInterval)
	moved, err = h.meta.rotateIfDue(ctx)
	require.NoError(t, err)
	require.True(t, moved)
	require.True(t, topicExists(t, b, metaTopic), "back to the first topic, created again")
	require.False(t, topicExists(t, b, metaTopicAlt))
	require.Equal(t, "42", visibilityOf(t, b, "q"))

	// A crash after the write to the other topic, before the delete: both
	// topics hold a table; the newer one is in force, whichever topic.
	h.meta.mu.Lock()
	newer := map[queueName]*queueMeta{"q": {Attrs: map[string]string{"VisibilityTimeout": "43"}}}
	require.NoError(t, h.meta.write(ctx, metaTopicAlt, newer, h.meta.seq+1))
	h.meta.mu.Unlock()
	require.Equal(t, "43", visibilityOf(t, b, "q"))
	// And a stale table left on the other topic loses to the one in use.
	h.meta.mu.Lock()
	stale := map[queueName]*queueMeta{"q": {Attrs: map[string]string{"VisibilityTimeout": "40"}}}
	require.NoError(t, h.meta.write(ctx, metaTopic, stale, 1))
	h.meta.mu.Unlock()
	require.Equal(t, "43", visibilityOf(t, b, "q"))
}

// TestQueueTableOfOlderVersion: a table without a sequence number on the
// first topic only (an older version's data dir) is read, and moves on.
func TestQueueTableOfOlderVersion(t *testing.T) {
	ctx := context.Background()
	b := brokertest.MustOpen(t, t.TempDir(), func(o *broker.Options) { o.AutoCreate = true })
	_, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: metaTopic, Queues: 1, RetentionHours: metaRetentionHours})
	require.NoError(t, err)
	_, _, err = b.PutTopic(ctx, broker.TopicConfig{Name: "sqs_old", Queues: queueQueues})
	require.NoError(t, err)
	_, err = b.Send(ctx, metaTopic, []broker.SendMessage{{Body: []byte(`{"v":1,"queues":{"old":{"attrs":{"VisibilityTimeout":"77"},"created":1,"modified":1}}}`)}})
	require.NoError(t, err)
	require.Equal(t, "77", visibilityOf(t, b, "old"))
	h := New(Options{Broker: b, RedriveInterval: time.Hour})
	defer h.Close()
	moved, err := h.meta.rotateIfDue(ctx)
	require.NoError(t, err)
	require.True(t, moved)
	require.False(t, topicExists(t, b, metaTopic))
	require.Equal(t, "77", visibilityOf(t, b, "old"))
}

// segments counts the CommitLog's segment files in dir.
func segments(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "commitlog"))
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if len(e.Name()) == 20 {
			n++
		}
	}
	return n
}

// TestQueueTableHoldsNoSegmentsBack: a topic's long retention keeps every
// CommitLog segment from its oldest message on. While the table's first
// message is on its topic, retention deletes no segment written after it;
// once the table moved and that topic was deleted, it deletes them.
func TestQueueTableHoldsNoSegmentsBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := brokertest.MustOpen(t, dir, func(o *broker.Options) {
		o.Storage.SegmentSize = 256 << 10
		o.Storage.FileReservedTime = 300 * time.Millisecond
		o.Storage.RetentionInterval = 20 * time.Millisecond
	})
	h := New(Options{Broker: b, RedriveInterval: time.Hour})
	defer h.Close()
	w := serve(h, false, "CreateQueue", `{"QueueName":"q","Attributes":{"VisibilityTimeout":"41"}}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	body := make([]byte, 16<<10)
	for range 128 { // 2 MiB: 8 segments, which nobody consumes
		_, err := b.Send(ctx, "filler", []broker.SendMessage{{Body: body}})
		require.NoError(t, err)
	}
	written := segments(t, dir)
	require.GreaterOrEqual(t, written, 8)
	time.Sleep(600 * time.Millisecond) // two retention windows: only the pin keeps them
	require.GreaterOrEqual(t, segments(t, dir), written-1, "the table's topic holds the segments back")

	moved, err := h.meta.rotateIfDue(ctx)
	require.NoError(t, err)
	require.True(t, moved)
	require.Eventually(t, func() bool { return segments(t, dir) <= 3 }, 10*time.Second, 20*time.Millisecond,
		"retention deletes the segments the old topic held back")
	require.Equal(t, "41", visibilityOf(t, b, "q"))
}
