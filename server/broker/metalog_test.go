package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// registryState is what the registry serves, for comparisons.
func registryState(t *testing.T, b *broker.Broker) ([]broker.TopicConfig, []broker.GroupConfig) {
	t.Helper()
	ctx := context.Background()
	topics, err := b.ListTopics(ctx)
	require.NoError(t, err)
	groups, err := b.ListGroups(ctx)
	require.NoError(t, err)
	return topics, groups
}

func removeConfig(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, os.Remove(filepath.Join(dir, "config", n)))
	}
}

// TestRegistrySurvivesLosingItsFiles: topics, groups, a deleted topic's
// tombstone and the consumer offsets of groups come back from the
// CommitLog when config/topics.json and config/groups.json are deleted,
// or damaged, while the broker is stopped.
func TestRegistrySurvivesLosingItsFiles(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "kept", Queues: 8, Perm: "rw"})
	require.NoError(t, err)
	_, _, err = bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "gone", Queues: 2})
	require.NoError(t, err)
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "billing", RetryMaxTimes: 5, Subscriptions: []broker.Subscription{{Topic: "kept"}, {Topic: "other", TagExpression: "a || b"}}})
	require.NoError(t, err)
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "temp"})
	require.NoError(t, err)
	require.NoError(t, bd.b.DeleteGroup(bd.ctx, "temp"))
	bd.send(t, "gone", "old")
	require.NoError(t, bd.b.DeleteTopic(bd.ctx, "gone"))
	_, err = bd.b.PatchTopic(bd.ctx, "kept", func(c broker.TopicConfig) (broker.TopicConfig, error) { c.Perm = "w"; return c, nil })
	require.NoError(t, err)
	_, err = bd.b.PatchTopic(bd.ctx, "kept", func(c broker.TopicConfig) (broker.TopicConfig, error) { c.Perm = "rw"; return c, nil })
	require.NoError(t, err)

	// Three messages; billing acks two of them.
	bd.send(t, "kept", "m1", "m2", "m3")
	got := bd.pull(t, "billing", "kept", 2, time.Second, time.Minute)
	require.Len(t, got, 2)
	_, err = bd.b.Ack(bd.ctx, "billing", receipts(got))
	require.NoError(t, err)
	topics, groups := registryState(t, bd.b)

	for _, damage := range []func(){
		func() { removeConfig(t, bd.dir, "topics.json", "groups.json") },
		func() {
			for _, n := range []string{"topics.json", "groups.json"} {
				require.NoError(t, os.WriteFile(filepath.Join(bd.dir, "config", n), []byte("{garbage"), 0o600))
			}
		},
		func() { removeConfig(t, bd.dir, "groups.json") },
	} {
		require.NoError(t, bd.b.Close(bd.ctx))
		damage()
		bd.b = brokertest.MustOpen(t, bd.dir)
		gotTopics, gotGroups := registryState(t, bd.b)
		require.Equal(t, topics, gotTopics)
		require.Equal(t, groups, gotGroups)
		// The deletion is remembered: the old message stays gone.
		_, _, err = bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "gone", Queues: 2})
		require.NoError(t, err)
		require.Empty(t, bd.pull(t, "fresh", "gone", 10, 0, time.Minute))
		require.NoError(t, bd.b.DeleteTopic(bd.ctx, "gone"))
		topics, groups = registryState(t, bd.b)
		// The offsets did not depend on groups.json: only m3 is left.
		left := bd.pull(t, "billing", "kept", 10, 2*time.Second, 50*time.Millisecond) // the last round's lease ends first (its retry comes back)
		require.Len(t, left, 1)
	}
	// The snapshots were written again.
	for _, n := range []string{"topics.json", "groups.json"} {
		_, err := os.Stat(filepath.Join(bd.dir, "config", n))
		require.NoError(t, err)
	}
}

// TestRegistryFromVersion1Files: a data dir whose registry is only in the
// old bare-map files is read, and its registry is put in the CommitLog,
// so that losing the files afterwards loses nothing.
func TestRegistryFromVersion1Files(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "config"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config", "topics.json"),
		[]byte(`{"orders":{"Name":"orders","Queues":3,"RetentionHours":0,"Perm":"rw","CreatedAt":"2026-11-01T00:00:00Z"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config", "groups.json"),
		[]byte(`{"billing":{"Name":"billing","ConsumeMode":"clustering","RetryMaxTimes":7,"CreatedAt":"2026-11-01T00:00:00Z"}}`), 0o644))
	b := brokertest.MustOpen(t, dir)
	topics, groups := registryState(t, b)
	require.Len(t, topics, 1)
	require.Equal(t, 3, topics[0].Queues)
	require.Len(t, groups, 1)
	require.Equal(t, 7, groups[0].RetryMaxTimes)
	require.NoError(t, b.Close(context.Background()))

	removeConfig(t, dir, "topics.json", "groups.json")
	b = brokertest.MustOpen(t, dir)
	again, groupsAgain := registryState(t, b)
	require.Equal(t, topics, again)
	require.Equal(t, groups, groupsAgain)
}

// TestRegistryOutlivesRetention: the segments holding the registry's
// records are deleted by retention; the registry was carried forward, so
// it still comes back without its files.
func TestRegistryOutlivesRetention(t *testing.T) {
	opts := retentionOptions(t)
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "durable", Queues: 5})
	require.NoError(t, err)
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 9})
	require.NoError(t, err)
	topics, groups := registryState(t, bd.b)
	bd.rollAndExpire(t, 10*time.Second)
	require.NoError(t, bd.b.Close(bd.ctx))
	removeConfig(t, bd.dir, "topics.json", "groups.json")
	bd.b = brokertest.Open(t, opts)
	gotTopics, gotGroups := registryState(t, bd.b)
	require.Equal(t, groups, gotGroups)
	// The filler topic was auto-created meanwhile; durable is there as it was.
	require.Contains(t, gotTopics, topics[0])
}
