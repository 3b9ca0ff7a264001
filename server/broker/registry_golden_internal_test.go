package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The registry family's formats, pinned byte for byte with the code from
// before the family moved to server/broker/registry: the rmq_sys_META
// record bodies of every kind, what applying them makes (tombstones, and a
// topic and a group deleted and created again in one millisecond), that an
// undecodable record is skipped, and the snapshot files written and read.

var goldenRegAt = time.UnixMilli(1_700_000_000_123)

// metaBodies reads rmq_sys_META's record bodies as stored.
func metaBodies(t *testing.T, b *Broker) []string {
	t.Helper()
	awaitLogged(t, b)
	res, err := b.store.ReadQueue(metaTopic, 0, 0, 100, nil)
	require.NoError(t, err)
	out := make([]string, len(res.Messages))
	for i, m := range res.Messages {
		if m.QueueID != 0 || len(m.Properties) != 0 || m.BornTimestamp != goldenRegAt.UnixMilli() {
			t.Errorf("meta record %d: queue %d properties %v born %d", i, m.QueueID, m.Properties, m.BornTimestamp)
		}
		out[i] = string(m.Body)
	}
	return out
}

// goldenRegistryBroker writes one record of every kind on a clock that
// does not move, and returns the broker and its receipt keys' secrets
// (base64, as the records hold them).
func goldenRegistryBroker(t *testing.T) (b *Broker, secrets []string, floor int64) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(goldenRegAt)
	opts := replicaOptions(fc, false)
	opts.DelayLevels = []time.Duration{time.Second, 5 * time.Second}
	b = openReplica(t, opts)
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 2})
	require.NoError(t, err)
	_, err = b.PatchTopic(ctx, "orders", func(c TopicConfig) (TopicConfig, error) { c.Queues, c.RetentionHours = 4, 48; return c, nil })
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", RetryMaxTimes: 5, Invisible: 30 * time.Second,
		Subscriptions: []Subscription{{Topic: "orders", TagExpression: "a || b"}, {Topic: "audit", SQL: "x > 1"}},
		RetryPolicy:   &RetryPolicy{Backoff: "exponential", Initial: time.Second, Max: time.Minute, Jitter: 0.25}})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "hook", Push: &PushConfig{URL: "https://example.com/hook", Secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0",
		Mode: "json", MaxConcurrency: 8, Timeout: 15 * time.Second}})
	require.NoError(t, err)
	require.NoError(t, b.DeleteGroup(ctx, "g"))
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g"})
	require.NoError(t, err)
	_, err = b.Send(ctx, "orders", []SendMessage{{Body: []byte("old")}})
	require.NoError(t, err)
	require.NoError(t, b.store.AwaitDispatch(ctx))
	floor = b.store.WriteOffset()
	require.NoError(t, b.DeleteTopic(ctx, "orders"))
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 1, Perm: "r"})
	require.NoError(t, err)
	tomb, ok := b.registry.Tombstone("orders")
	require.True(t, ok)
	tomb.CommitLogOffset = 100
	require.NoError(t, b.registry.SetTombstone("orders", &tomb))
	require.NoError(t, b.registry.SetTombstone("never", nil))
	_, err = b.RotateReceiptKey(ctx)
	require.NoError(t, err)
	for _, k := range b.receipts().Keys() {
		secrets = append(secrets, base64.StdEncoding.EncodeToString(k.Secret))
	}
	require.Len(t, secrets, 2)
	return b, secrets, floor
}

// goldenRegistryView is what applying records made: the topics, the
// tombstones, the groups and the receipt keys.
func goldenRegistryView(r *registry.Service) (topics map[string]TopicConfig, tombs map[string]topicTombstone, groups map[string]GroupConfig, keys []receipt.Key) {
	r.View(func(st *registry.State) {
		topics, tombs, groups, keys = st.Topics(), st.Tombstones(), st.Groups(), st.Ring().Keys()
	})
	return topics, tombs, groups, keys
}

func TestGoldenRegistryRecords(t *testing.T) {
	b, secrets, floor := goldenRegistryBroker(t)
	const at, after = `"2023-11-14T22:13:20.123Z"`, `"2023-11-14T22:13:20.124Z"`
	want := []string{
		`[{"kind":"receipt-key","key":{"id":1,"secret":"` + secrets[0] + `","createdMs":1700000000123}}]`,
		`[{"kind":"topic","topic":{"Name":"orders","Queues":2,"RetentionHours":0,"Perm":"rw","CreatedAt":` + at + `}}]`,
		`[{"kind":"topic","topic":{"Name":"orders","Queues":4,"RetentionHours":48,"Perm":"rw","CreatedAt":` + at + `}}]`,
		`[{"kind":"group","group":{"Name":"g","ConsumeMode":"clustering","Orderly":false,"RetryMaxTimes":5,"Invisible":30000000000,` +
			`"Subscriptions":[{"Topic":"orders","TagExpression":"a || b"},{"Topic":"audit","TagExpression":"","SQL":"x \u003e 1"}],` +
			`"RetryPolicy":{"Backoff":"exponential","Initial":1000000000,"Max":60000000000,"Jitter":0.25},"CreatedAt":` + at + `}}]`,
		`[{"kind":"group","group":{"Name":"hook","ConsumeMode":"clustering","Orderly":false,"RetryMaxTimes":16,"Invisible":0,"Subscriptions":null,` +
			`"Push":{"URL":"https://example.com/hook","Secret":"whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0","Mode":"json","MaxConcurrency":8,"Timeout":15000000000,"Disabled":false},` +
			`"CreatedAt":` + at + `}}]`,
		`[{"kind":"group-deleted","name":"g"}]`,
		// Created again in the millisecond it was deleted: after it.
		`[{"kind":"group","group":{"Name":"g","ConsumeMode":"clustering","Orderly":false,"RetryMaxTimes":16,"Invisible":0,"Subscriptions":null,"CreatedAt":` + after + `}}]`,
		`[{"kind":"topic-deleted","name":"orders","tomb":{"DeletedAt":` + at + `,"CommitLogOffset":TOMB,"ScheduleOffsets":[0,0]}}]`,
		`[{"kind":"topic","topic":{"Name":"orders","Queues":1,"RetentionHours":0,"Perm":"r","CreatedAt":` + after + `}}]`,
		`[{"kind":"tombstone","name":"orders","tomb":{"DeletedAt":` + at + `,"CommitLogOffset":100,"ScheduleOffsets":[0,0]}}]`,
		`[{"kind":"tombstone","name":"never"}]`,
		`[{"kind":"receipt-key","key":{"id":2,"secret":"` + secrets[1] + `","createdMs":1700000000123}}]`,
	}
	got := metaBodies(t, b)
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		w = strings.Replace(w, "TOMB", strconv.FormatInt(floor, 10), 1)
		if g != w {
			t.Errorf("meta record %d:\n got %s\nwant %s", i, g, w)
		}
	}

	// The snapshot files the last change wrote.
	sched := `[
          0,
          0
        ]`
	wantFiles := map[string]string{
		registry.TopicsFile: `{
  "version": 2,
  "metaOffset": 12,
  "topics": {
    "orders": {
      "Name": "orders",
      "Queues": 1,
      "RetentionHours": 0,
      "Perm": "r",
      "CreatedAt": ` + after + `,
      "Deleted": {
        "DeletedAt": ` + at + `,
        "CommitLogOffset": 100,
        "ScheduleOffsets": ` + sched + `
      }
    }
  }
}`,
		registry.GroupsFile: `{
  "version": 2,
  "metaOffset": 12,
  "groups": {
    "g": {
      "Name": "g",
      "ConsumeMode": "clustering",
      "Orderly": false,
      "RetryMaxTimes": 16,
      "Invisible": 0,
      "Subscriptions": null,
      "CreatedAt": ` + after + `
    },
    "hook": {
      "Name": "hook",
      "ConsumeMode": "clustering",
      "Orderly": false,
      "RetryMaxTimes": 16,
      "Invisible": 0,
      "Subscriptions": null,
      "Push": {
        "URL": "https://example.com/hook",
        "Secret": "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0",
        "Mode": "json",
        "MaxConcurrency": 8,
        "Timeout": 15000000000,
        "Disabled": false
      },
      "CreatedAt": ` + at + `
    }
  }
}`,
		registry.ReceiptKeysFile: `{
  "version": 2,
  "metaOffset": 12,
  "keys": [
    {
      "id": 1,
      "secret": "` + secrets[0] + `",
      "createdMs": 1700000000123
    },
    {
      "id": 2,
      "secret": "` + secrets[1] + `",
      "createdMs": 1700000000123
    }
  ]
}`,
	}
	for _, n := range []string{registry.TopicsFile, registry.GroupsFile, registry.ReceiptKeysFile} {
		data, err := b.store.ReadMeta(n)
		require.NoError(t, err)
		if string(data) != wantFiles[n] {
			t.Errorf("%s:\n got %s\nwant %s", n, data, wantFiles[n])
		}
	}

	// Applying the records (as at open, and on a follower) makes the
	// registry the broker has; an undecodable body is skipped whole, an
	// unusable record of a body alone.
	log := &goldenMetaStore{files: goldenMetaFiles{}, bodies: append(slices.Clone(got),
		`{"kind":"group","group":{"Name":"x"}}`,
		`[{"kind":"topic","topic":{"Name":"y","Queues":"many"}}]`)}
	r := log.open(t)
	topics, tombs, groups, keys := goldenRegistryView(r)
	wantTopics, wantTombs, wantGroups, wantKeys := goldenRegistryView(b.registry)
	require.Equal(t, wantTopics, topics)
	require.Equal(t, wantTombs, tombs)
	require.Equal(t, wantGroups, groups)
	require.Equal(t, wantKeys, keys)
	deleted := time.UnixMilli(1_700_000_000_123).UTC()
	created := deleted.Add(time.Millisecond)
	require.Equal(t, map[string]TopicConfig{"orders": {Name: "orders", Queues: 1, Perm: "r", CreatedAt: created}}, topics)
	require.Equal(t, map[string]topicTombstone{"orders": {DeletedAt: deleted, CommitLogOffset: 100, ScheduleOffsets: []int64{0, 0}}}, tombs)
	require.Equal(t, []string{"g", "hook"}, slices.Sorted(maps.Keys(groups)))
	require.Equal(t, created, groups["g"].CreatedAt, "the group created again after its deletion, in the same millisecond")
	require.Equal(t, GroupConfig{Name: "g", ConsumeMode: "clustering", RetryMaxTimes: 16, CreatedAt: created}, groups["g"])
	require.Len(t, keys, 2)

	log.bodies = append(log.bodies, `[{"kind":"topic"},{"kind":"group"},{"kind":"receipt-key"},{"kind":"receipt-key","key":{"id":3,"secret":"c2hvcnQ=","createdMs":1}},`+
		`{"kind":"nonsense","name":"orders"},{"kind":"group","group":{"Name":"late","CreatedAt":"2023-11-14T22:13:21Z"}},`+
		`{"kind":"topic-deleted","name":"orders"},{"kind":"group-deleted","name":"hook"},{"kind":"tombstone","name":"gone","tomb":{"DeletedAt":"2023-11-14T22:13:22Z","CommitLogOffset":7}}]`)
	require.NoError(t, r.Follow(context.Background()))
	topics, tombs, groups, keys = goldenRegistryView(r)
	require.Empty(t, topics)
	require.Equal(t, map[string]topicTombstone{"gone": {DeletedAt: time.UnixMilli(1_700_000_002_000).UTC(), CommitLogOffset: 7}}, tombs,
		"a topic-deleted record without a tombstone drops the tombstone")
	require.Equal(t, map[string]GroupConfig{"g": wantGroups["g"], "late": {Name: "late", CreatedAt: time.UnixMilli(1_700_000_001_000).UTC()}}, groups)
	require.Equal(t, wantKeys, keys)
}

// goldenMetaFiles is a metaFiles in memory.
type goldenMetaFiles map[string][]byte

func (f goldenMetaFiles) ReadMeta(name string) ([]byte, error) {
	b, ok := f[name]
	if !ok {
		return nil, os.ErrNotExist
	}
	return b, nil
}

func (f goldenMetaFiles) WriteMeta(name string, data []byte) error {
	f[name] = data
	return nil
}

// goldenMetaStore is the registry's store in memory: the snapshot files,
// and rmq_sys_META as bodies at queue offsets 0, 1, ..., which a scan
// replays; what the registry appends is kept apart.
type goldenMetaStore struct {
	files    goldenMetaFiles
	bodies   []string
	appended []string
	from     int64 // where the last scan started
}

func (m *goldenMetaStore) ReadMeta(name string) ([]byte, error) { return m.files.ReadMeta(name) }
func (m *goldenMetaStore) WriteMeta(name string, data []byte) error {
	return m.files.WriteMeta(name, data)
}
func (m *goldenMetaStore) MinOffset(string, int32) int64 { return 0 }
func (m *goldenMetaStore) MaxOffset(string, int32) int64 { return int64(len(m.bodies)) }
func (m *goldenMetaStore) ReadQueue(string, int32, int64, int, func(int64) bool) (storage.ReadResult, error) {
	return storage.ReadResult{}, nil
}

func (m *goldenMetaStore) PutClass(_ storage.Class, ms []*message.Message, res []storage.PutResult) error {
	for i, msg := range ms {
		m.appended = append(m.appended, string(msg.Body))
		res[i].QueueOffset = int64(len(m.bodies) + len(m.appended) - 1)
	}
	return nil
}

func (m *goldenMetaStore) scan(_ context.Context, start int64, fn func(int64, []byte)) (int64, error) {
	m.from = start
	for i := start; i < int64(len(m.bodies)); i++ {
		fn(i, []byte(m.bodies[i]))
	}
	return int64(len(m.bodies)), nil
}

// open opens a registry over m.
func (m *goldenMetaStore) open(t *testing.T) *registry.Service {
	t.Helper()
	m.from = -1
	r, err := registry.Open(context.Background(), registry.Config{Store: m, Scan: m.scan,
		Clock: clockwork.NewFakeClockAt(goldenRegAt), Log: zerolog.Nop(), StoreError: mapStoreErr})
	require.NoError(t, err)
	return r
}

// goldenOpen opens a registry from files and the records bodies (at
// queue offsets 0, 1, ...), returning the offset it replayed from and
// the bodies it appended.
func goldenOpen(t *testing.T, files goldenMetaFiles, bodies ...string) (r *registry.Service, from int64, appended []string) {
	t.Helper()
	m := &goldenMetaStore{files: files, bodies: bodies}
	r = m.open(t)
	return r, m.from, m.appended
}

func TestGoldenRegistrySnapshotsRead(t *testing.T) {
	b, _, _ := goldenRegistryBroker(t)
	wantTopics, wantTombs, wantGroups, wantKeys := goldenRegistryView(b.registry)
	files := goldenMetaFiles{}
	for _, n := range []string{registry.TopicsFile, registry.GroupsFile, registry.ReceiptKeysFile} {
		data, err := b.store.ReadMeta(n)
		require.NoError(t, err)
		files[n] = data
	}
	written := maps.Clone(files)

	// The files a broker wrote: the records below their offset are not
	// read again, and the files are not rewritten.
	r, from, appended := goldenOpen(t, files, slices.Repeat([]string{"not read"}, 12)...)
	require.Equal(t, int64(12), from)
	require.Empty(t, appended)
	topics, tombs, groups, keys := goldenRegistryView(r)
	require.Equal(t, wantTopics, topics)
	require.Equal(t, wantTombs, tombs)
	require.Equal(t, wantGroups, groups)
	require.Equal(t, wantKeys, keys)
	require.Equal(t, written, files)

	// One file behind, or unreadable: every record from its offset on is
	// applied again, and the snapshots are rewritten.
	files[registry.GroupsFile] = []byte(strings.Replace(string(written[registry.GroupsFile]), `"metaOffset": 12`, `"metaOffset": 11`, 1))
	records := slices.Repeat([]string{"[]"}, 11)
	records = append(records, `[{"kind":"group","group":{"Name":"new","CreatedAt":"2023-11-14T22:13:21Z"}}]`)
	r, from, _ = goldenOpen(t, files, records...)
	require.Equal(t, int64(11), from)
	_, _, groups, _ = goldenRegistryView(r)
	require.Equal(t, []string{"g", "hook", "new"}, slices.Sorted(maps.Keys(groups)))
	require.Contains(t, string(files[registry.GroupsFile]), `"new": {`)
	require.Contains(t, string(files[registry.TopicsFile]), `"metaOffset": 12,`)
	files[registry.ReceiptKeysFile] = []byte("{garbage")
	r, from, _ = goldenOpen(t, files, records...)
	require.Equal(t, int64(0), from)
	_, _, _, keys = goldenRegistryView(r)
	require.Empty(t, keys, "the keys are in the records, not in the unreadable file")
	require.Equal(t, "{\n  \"version\": 2,\n  \"metaOffset\": 12,\n  \"keys\": null\n}", string(files[registry.ReceiptKeysFile]), "rewritten")

	// A key the ring refuses: skipped, and the records read from 0.
	files = maps.Clone(written)
	files[registry.ReceiptKeysFile] = []byte(`{"version":2,"metaOffset":12,"keys":[{"id":1,"secret":"c2hvcnQ=","createdMs":1}]}`)
	_, from, _ = goldenOpen(t, files, slices.Repeat([]string{"[]"}, 12)...)
	require.Equal(t, int64(0), from)

	// Version 1 files (bare maps) are read, but cover no record: the
	// registry is carried into the log when it holds none (a data dir
	// from before the records).
	files = goldenMetaFiles{
		registry.TopicsFile: []byte(`{"old":{"Name":"old","Queues":3,"RetentionHours":0,"Perm":"rw","CreatedAt":"2023-11-14T22:13:00Z"},` +
			`"again":{"Name":"again","Queues":2,"RetentionHours":0,"Perm":"rw","CreatedAt":"2023-11-14T22:13:02Z","Deleted":{"DeletedAt":"2023-11-14T22:13:01Z","CommitLogOffset":5,"ScheduleOffsets":null}},` +
			`"gone":{"Name":"gone","Queues":0,"RetentionHours":0,"Perm":"","CreatedAt":"0001-01-01T00:00:00Z","Deleted":{"DeletedAt":"2023-11-14T22:13:01Z","CommitLogOffset":9,"ScheduleOffsets":[1]}}}`),
		registry.GroupsFile: []byte(`{"g1":{"Name":"g1","ConsumeMode":"clustering","RetryMaxTimes":16,"CreatedAt":"2023-11-14T22:13:00Z"}}`),
	}
	r, from, appended = goldenOpen(t, files)
	require.Equal(t, int64(0), from)
	topics, tombs, groups, _ = goldenRegistryView(r)
	require.Equal(t, []string{"again", "old"}, slices.Sorted(maps.Keys(topics)))
	require.Equal(t, []string{"again", "gone"}, slices.Sorted(maps.Keys(tombs)))
	require.Equal(t, []string{"g1"}, slices.Sorted(maps.Keys(groups)))
	require.Len(t, appended, 1, "carried in one message")
	var carried []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(appended[0]), &carried))
	var recs []string
	for _, rec := range carried {
		recs = append(recs, string(rec))
	}
	slices.Sort(recs)
	require.Equal(t, []string{
		`{"kind":"group","group":{"Name":"g1","ConsumeMode":"clustering","Orderly":false,"RetryMaxTimes":16,"Invisible":0,"Subscriptions":null,"CreatedAt":"2023-11-14T22:13:00Z"}}`,
		`{"kind":"tombstone","name":"again","tomb":{"DeletedAt":"2023-11-14T22:13:01Z","CommitLogOffset":5,"ScheduleOffsets":null}}`,
		`{"kind":"tombstone","name":"gone","tomb":{"DeletedAt":"2023-11-14T22:13:01Z","CommitLogOffset":9,"ScheduleOffsets":[1]}}`,
		`{"kind":"topic","topic":{"Name":"again","Queues":2,"RetentionHours":0,"Perm":"rw","CreatedAt":"2023-11-14T22:13:02Z"}}`,
		`{"kind":"topic","topic":{"Name":"old","Queues":3,"RetentionHours":0,"Perm":"rw","CreatedAt":"2023-11-14T22:13:00Z"}}`,
	}, recs)
	require.Equal(t, `{
  "version": 2,
  "metaOffset": 1,
  "groups": {
    "g1": {
      "Name": "g1",
      "ConsumeMode": "clustering",
      "Orderly": false,
      "RetryMaxTimes": 16,
      "Invisible": 0,
      "Subscriptions": null,
      "CreatedAt": "2023-11-14T22:13:00Z"
    }
  }
}`, string(files[registry.GroupsFile]))
	require.Equal(t, `{
  "version": 2,
  "metaOffset": 1,
  "keys": null
}`, string(files[registry.ReceiptKeysFile]))

	// An unreadable file counts as empty. One that decodes in part keeps
	// what decoded (as json.Unmarshal leaves it), covering no record.
	files = goldenMetaFiles{registry.TopicsFile: []byte("{garbage"), registry.GroupsFile: []byte(`{"version":2,"metaOffset":5,"groups":{"g":{"Name":7}}}`)}
	r, from, appended = goldenOpen(t, files)
	require.Equal(t, int64(0), from)
	topics, tombs, groups, _ = goldenRegistryView(r)
	require.Empty(t, topics)
	require.Empty(t, tombs)
	require.Equal(t, map[string]GroupConfig{"g": {}}, groups)
	require.Equal(t, []string{`[{"kind":"group","group":{"Name":"","ConsumeMode":"","Orderly":false,"RetryMaxTimes":0,"Invisible":0,"Subscriptions":null,"CreatedAt":"0001-01-01T00:00:00Z"}}]`}, appended)
	files = goldenMetaFiles{registry.TopicsFile: []byte("{garbage"), registry.GroupsFile: []byte("[]")}
	r, from, appended = goldenOpen(t, files)
	require.Equal(t, int64(0), from)
	require.Empty(t, appended)
	topics, tombs, groups, _ = goldenRegistryView(r)
	require.Empty(t, topics)
	require.Empty(t, tombs)
	require.Empty(t, groups)
}
