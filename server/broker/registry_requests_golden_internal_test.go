package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/offset"
)

// The registry family's requests, pinned with the code from before they
// moved to server/broker/registry: what each topic and group request
// answers (its result, the sentinel and the text of each refusal, in the
// order the checks run), the rmq_sys_META records it writes (none for a
// refusal, nor for a topic put unchanged), the quotas' refusals, the
// receipt key rotation, retention's carry of the registry, and
// concurrent changes (a patch never loses another's, a quota is never
// passed). It goes through the facade only, so it passes as written
// after the move.

// regGoldenBroker is a broker on a clock that does not move (the
// records' born times are goldenRegAt, as metaBodies checks).
func regGoldenBroker(t *testing.T, q Quotas) *Broker {
	t.Helper()
	opts := replicaOptions(clockwork.NewFakeClockAt(goldenRegAt), false)
	opts.Quotas = q
	return openReplica(t, opts)
}

// regErr is how a refusal reads: the sentinels it is, then its text.
func regErr(err error) string {
	if err == nil {
		return "ok"
	}
	var kinds []string
	for _, s := range []struct {
		name string
		err  error
	}{
		{"invalid-name", ErrInvalidName}, {"reserved", ErrReservedName}, {"invalid", ErrInvalidArgument},
		{"shrink", ErrQueueShrink}, {"topic-not-found", ErrTopicNotFound}, {"group-not-found", ErrGroupNotFound},
		{"quota", ErrQuotaExceeded}, {"too-long", ErrValueTooLong}, {"sql", ErrInvalidSQL},
	} {
		if errors.Is(err, s.err) {
			kinds = append(kinds, s.name)
		}
	}
	return fmt.Sprintf("%v | %s", kinds, err.Error())
}

const regAt = "2023-11-14T22:13:20.123Z"

func TestGoldenRegistryTopicRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := regGoldenBroker(t, Quotas{})
	start := len(metaBodies(t, b)) // the receipt key
	require.Equal(t, 1, start)
	created := goldenRegAt.UTC()

	list, err := b.ListTopics(ctx)
	require.NoError(t, err)
	require.NotNil(t, list)
	require.Empty(t, list)

	// Defaults: the broker's queue count, perm rw; CreatedAt is the
	// clock's, whatever the request said.
	got, isNew, err := b.PutTopic(ctx, TopicConfig{Name: "orders", CreatedAt: time.Unix(5, 0)})
	require.NoError(t, err)
	require.True(t, isNew)
	require.Equal(t, TopicConfig{Name: "orders", Queues: 4, Perm: "rw", CreatedAt: created}, got)
	// The same again: not new, nothing written.
	got, isNew, err = b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 4, Perm: "rw"})
	require.NoError(t, err)
	require.False(t, isNew)
	require.Equal(t, TopicConfig{Name: "orders", Queues: 4, Perm: "rw", CreatedAt: created}, got)
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "wide", Queues: 8, RetentionHours: 2, Perm: "w"})
	require.NoError(t, err)

	// Refusals, each in the order the checks run; none writes a record.
	refusals := []struct {
		t    TopicConfig
		want string
	}{
		{TopicConfig{}, "[invalid-name] | invalid name: topic name is empty"},
		{TopicConfig{Name: "rmq_sys_x", Queues: -1}, "[reserved] | reserved name: topic name \"rmq_sys_x\" uses a reserved prefix (%, rmq_sys_) or name"},
		{TopicConfig{Name: "a b"}, "[invalid-name] | invalid name: topic name \"a b\" may only contain letters, digits, '_' and '-'"},
		{TopicConfig{Name: "x", Queues: 1025, RetentionHours: -1}, "[invalid] | invalid argument: queues must be 1..1024"},
		{TopicConfig{Name: "x", Queues: -1}, "[invalid] | invalid argument: queues must be 1..1024"},
		{TopicConfig{Name: "x", RetentionHours: -1, Perm: "x"}, "[invalid] | invalid argument: retentionHours must be >= 0"},
		{TopicConfig{Name: "x", Perm: "x"}, "[invalid] | invalid argument: perm must be rw, r or w"},
		{TopicConfig{Name: "orders", Queues: 2}, "[invalid shrink] | invalid argument: a topic's queue count cannot shrink (4 -> 2)"},
		// Queues left out of a replace: the default, which may shrink.
		{TopicConfig{Name: "wide"}, "[invalid shrink] | invalid argument: PUT replaces the whole topic: queues defaults to 4 when omitted and a topic's queue count cannot shrink (8 -> 4)"},
	}
	for _, r := range refusals {
		_, isNew, err := b.PutTopic(ctx, r.t)
		require.Equal(t, r.want, regErr(err), "%+v", r.t)
		require.False(t, isNew)
	}

	// A replace keeps the name's CreatedAt.
	got, isNew, err = b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 6, Perm: "r"})
	require.NoError(t, err)
	require.False(t, isNew)
	require.Equal(t, TopicConfig{Name: "orders", Queues: 6, Perm: "r", CreatedAt: created}, got)

	// Patches: the current configuration in, validated like a put; the
	// name and CreatedAt are kept; a queue count left at 0 is the default
	// (no "defaulted" wording: a patch is not a full replace).
	got, err = b.PatchTopic(ctx, "orders", func(c TopicConfig) (TopicConfig, error) {
		require.Equal(t, TopicConfig{Name: "orders", Queues: 6, Perm: "r", CreatedAt: created}, c)
		c.Name, c.CreatedAt, c.RetentionHours, c.Perm = "renamed", time.Unix(9, 0), 12, ""
		return c, nil
	})
	require.NoError(t, err)
	require.Equal(t, TopicConfig{Name: "orders", Queues: 6, RetentionHours: 12, Perm: "rw", CreatedAt: created}, got)
	for _, p := range []struct {
		name  string
		patch func(TopicConfig) (TopicConfig, error)
		want  string
	}{
		{"", nil, "[invalid-name] | invalid name: topic name is empty"},
		{"%x", nil, "[reserved] | reserved name: topic name \"%x\" uses a reserved prefix (%, rmq_sys_) or name"},
		{"nope", nil, "[topic-not-found] | topic not found: nope"},
		{"orders", func(c TopicConfig) (TopicConfig, error) { return c, fmt.Errorf("%w: mine", ErrInvalidArgument) }, "[invalid] | invalid argument: mine"},
		{"orders", func(c TopicConfig) (TopicConfig, error) { c.Queues = 0; return c, nil }, "[invalid shrink] | invalid argument: a topic's queue count cannot shrink (6 -> 4)"},
		{"orders", func(c TopicConfig) (TopicConfig, error) { c.Perm = "rwx"; return c, nil }, "[invalid] | invalid argument: perm must be rw, r or w"},
	} {
		got, err := b.PatchTopic(ctx, p.name, p.patch)
		require.Equal(t, p.want, regErr(err), p.name)
		if p.name == "orders" {
			require.Equal(t, TopicConfig{Name: "orders", Queues: 6, RetentionHours: 12, Perm: "rw", CreatedAt: created}, got, "the old configuration")
		} else {
			require.Equal(t, TopicConfig{}, got)
		}
	}
	// A patch that changes nothing writes nothing.
	_, err = b.PatchTopic(ctx, "orders", func(c TopicConfig) (TopicConfig, error) { return c, nil })
	require.NoError(t, err)

	// Gets and the list.
	for name, want := range map[string]string{"": "[invalid-name] | invalid name: topic name is empty", "nope": "[topic-not-found] | topic not found: nope",
		"rmq_sys_META": "[reserved] | reserved name: topic name \"rmq_sys_META\" uses a reserved prefix (%, rmq_sys_) or name", "orders": "ok"} {
		_, err := b.GetTopic(ctx, name)
		require.Equal(t, want, regErr(err), name)
	}
	list, err = b.ListTopics(ctx)
	require.NoError(t, err)
	require.Equal(t, []TopicConfig{
		{Name: "orders", Queues: 6, RetentionHours: 12, Perm: "rw", CreatedAt: created},
		{Name: "wide", Queues: 8, RetentionHours: 2, Perm: "w", CreatedAt: created},
	}, list)

	at := `"CreatedAt":"` + regAt + `"`
	require.Equal(t, []string{
		`[{"kind":"topic","topic":{"Name":"orders","Queues":4,"RetentionHours":0,"Perm":"rw",` + at + `}}]`,
		`[{"kind":"topic","topic":{"Name":"wide","Queues":8,"RetentionHours":2,"Perm":"w",` + at + `}}]`,
		`[{"kind":"topic","topic":{"Name":"orders","Queues":6,"RetentionHours":0,"Perm":"r",` + at + `}}]`,
		`[{"kind":"topic","topic":{"Name":"orders","Queues":6,"RetentionHours":12,"Perm":"rw",` + at + `}}]`,
	}, metaBodies(t, b)[start:])
}

func TestGoldenRegistryGroupRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := regGoldenBroker(t, Quotas{})
	start := len(metaBodies(t, b))
	created := goldenRegAt.UTC()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 1})
	require.NoError(t, err)

	list, err := b.ListGroups(ctx)
	require.NoError(t, err)
	require.NotNil(t, list)
	require.Empty(t, list)

	got, isNew, err := b.PutGroup(ctx, GroupConfig{Name: "g", CreatedAt: time.Unix(5, 0), Subscriptions: []Subscription{{Topic: "orders"}}})
	require.NoError(t, err)
	require.True(t, isNew)
	want := GroupConfig{Name: "g", ConsumeMode: "clustering", RetryMaxTimes: 16, Subscriptions: []Subscription{{Topic: "orders"}}, CreatedAt: created}
	require.Equal(t, want, got)
	// The same again: not new, but written again.
	got, isNew, err = b.PutGroup(ctx, GroupConfig{Name: "g", Subscriptions: []Subscription{{Topic: "orders"}}})
	require.NoError(t, err)
	require.False(t, isNew)
	require.Equal(t, want, got)
	got, isNew, err = b.PutGroup(ctx, GroupConfig{Name: "b", ConsumeMode: "broadcasting", Orderly: true, RetryMaxTimes: 64, Invisible: 12 * time.Hour,
		ConsumeFrom: "2023-11-14T23:13:20+01:00", InstanceIdle: time.Hour})
	require.NoError(t, err)
	require.True(t, isNew)
	require.Equal(t, GroupConfig{Name: "b", ConsumeMode: "broadcasting", Orderly: true, RetryMaxTimes: 64, Invisible: 12 * time.Hour,
		ConsumeFrom: "2023-11-14T22:13:20Z", InstanceIdle: time.Hour, CreatedAt: created}, got)

	refusals := []struct {
		g    GroupConfig
		want string
	}{
		{GroupConfig{ConsumeMode: "x"}, "[invalid-name] | invalid name: group name is empty"},
		{GroupConfig{Name: "%RETRY%g"}, "[reserved] | reserved name: group name \"%RETRY%g\" uses a reserved prefix (%, rmq_sys_) or name"},
		{GroupConfig{Name: "x", ConsumeMode: "x", RetryMaxTimes: 99}, "[invalid] | invalid argument: consumeMode must be clustering or broadcasting"},
		{GroupConfig{Name: "x", RetryMaxTimes: 65, Invisible: -1}, "[invalid] | invalid argument: retryMaxTimes must be 1..64"},
		{GroupConfig{Name: "x", RetryMaxTimes: -1}, "[invalid] | invalid argument: retryMaxTimes must be 1..64"},
		{GroupConfig{Name: "x", Invisible: -1, InstanceIdle: -1}, "[invalid] | invalid argument: invisibility must be 0..12h0m0s"},
		{GroupConfig{Name: "x", Invisible: 12*time.Hour + 1}, "[invalid] | invalid argument: invisibility must be 0..12h0m0s"},
		{GroupConfig{Name: "x", InstanceIdle: -1, ConsumeFrom: "bogus"}, "[invalid] | invalid argument: instanceIdle must be 1s..8784h0m0s"},
		{GroupConfig{Name: "x", ConsumeFrom: "bogus", RetryPolicy: &RetryPolicy{Backoff: "x"}}, "[invalid] | invalid argument: consumeFrom \"bogus\" must be \"first\", \"last\" or an RFC 3339 time"},
		{GroupConfig{Name: "x", RetryPolicy: &RetryPolicy{Backoff: "x"}, Subscriptions: []Subscription{{}}}, "[invalid] | invalid argument: retryPolicy.backoff \"x\" must be \"levels\", \"exponential\" or \"fixed\""},
		{GroupConfig{Name: "x", Subscriptions: []Subscription{{Topic: "a"}, {Topic: "rmq_sys_x"}}}, "[reserved] | subscription 1: reserved name: topic name \"rmq_sys_x\" uses a reserved prefix (%, rmq_sys_) or name"},
		{GroupConfig{Name: "x", Subscriptions: []Subscription{{Topic: "a", TagExpression: "a b", SQL: "("}}}, "[invalid] | subscription 0: invalid argument: tag expression \"a b\": tags are separated by '||' and contain no white space"},
		{GroupConfig{Name: "x", Subscriptions: []Subscription{{Topic: "a", SQL: "a >"}}}, "[sql] | invalid SQL filter: subscriptions[0].sql at position 4: expected a property, a literal ('text', a number, TRUE, FALSE, NULL) or (, found the end of the expression"},
	}
	for _, r := range refusals {
		_, isNew, err := b.PutGroup(ctx, r.g)
		require.Equal(t, r.want, regErr(err), "%+v", r.g)
		require.False(t, isNew)
	}

	// Patches: validated like a put; the name and CreatedAt kept.
	got, err = b.PatchGroup(ctx, "g", func(c GroupConfig) (GroupConfig, error) {
		require.Equal(t, want, c)
		c.Name, c.CreatedAt, c.RetryMaxTimes, c.ConsumeMode = "other", time.Unix(9, 0), 3, ""
		return c, nil
	})
	require.NoError(t, err)
	want.RetryMaxTimes = 3
	require.Equal(t, want, got)
	for _, p := range []struct {
		name  string
		patch func(GroupConfig) (GroupConfig, error)
		want  string
	}{
		{"", nil, "[invalid-name] | invalid name: group name is empty"},
		{"nope", nil, "[group-not-found] | group not found: nope"},
		{"g", func(c GroupConfig) (GroupConfig, error) { return c, fmt.Errorf("%w: mine", ErrInvalidArgument) }, "[invalid] | invalid argument: mine"},
		{"g", func(c GroupConfig) (GroupConfig, error) { c.RetryMaxTimes = 100; return c, nil }, "[invalid] | invalid argument: retryMaxTimes must be 1..64"},
	} {
		got, err := b.PatchGroup(ctx, p.name, p.patch)
		require.Equal(t, p.want, regErr(err), p.name)
		if p.name == "g" {
			require.Equal(t, want, got, "the old configuration")
		} else {
			require.Equal(t, GroupConfig{}, got)
		}
	}

	for name, w := range map[string]string{"": "[invalid-name] | invalid name: group name is empty", "nope": "[group-not-found] | group not found: nope", "g": "ok"} {
		_, err := b.GetGroup(ctx, name)
		require.Equal(t, w, regErr(err), name)
	}
	list, err = b.ListGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "g"}, []string{list[0].Name, list[1].Name})
	require.Len(t, list, 2)

	// A deletion: its record, the group's progress forgotten (a forget
	// record in rmq_sys_OFFSET); unknown and invalid names refused.
	offsetsBefore := len(offsetRecords(t, b, 0))
	for name, w := range map[string]string{"": "[invalid-name] | invalid name: group name is empty", "nope": "[group-not-found] | group not found: nope", "g": "ok"} {
		require.Equal(t, w, regErr(b.DeleteGroup(ctx, name)), name)
	}
	require.Equal(t, "[group-not-found] | group not found: g", regErr(b.DeleteGroup(ctx, "g")))
	_, err = b.GetGroup(ctx, "g")
	require.Equal(t, "[group-not-found] | group not found: g", regErr(err))
	require.Equal(t, []string{fmt.Sprintf("%d %d g//0 gen=0 off=0 offs=[]", goldenRegAt.UnixMilli(), offset.KindForget)}, offsetRecords(t, b, 0)[offsetsBefore:])

	at := `"CreatedAt":"` + regAt + `"`
	g := `{"Name":"g","ConsumeMode":"clustering","Orderly":false,"RetryMaxTimes":%d,"Invisible":0,"Subscriptions":[{"Topic":"orders","TagExpression":""}],` + at + `}`
	require.Equal(t, []string{
		`[{"kind":"topic","topic":{"Name":"orders","Queues":1,"RetentionHours":0,"Perm":"rw",` + at + `}}]`,
		`[{"kind":"group","group":` + fmt.Sprintf(g, 16) + `}]`,
		`[{"kind":"group","group":` + fmt.Sprintf(g, 16) + `}]`,
		`[{"kind":"group","group":{"Name":"b","ConsumeMode":"broadcasting","Orderly":true,"RetryMaxTimes":64,"Invisible":43200000000000,"Subscriptions":null,` +
			`"ConsumeFrom":"2023-11-14T22:13:20Z","InstanceIdle":3600000000000,` + at + `}}]`,
		`[{"kind":"group","group":` + fmt.Sprintf(g, 3) + `}]`,
		`[{"kind":"group-deleted","name":"g"}]`,
	}, metaBodies(t, b)[start:])
}

func TestGoldenRegistryQuotas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := regGoldenBroker(t, Quotas{MaxTopics: 2, MaxQueuesPerTopic: 8, MaxQueues: 12, MaxGroups: 2, MaxPushEndpoints: 1})
	start := len(metaBodies(t, b))
	push := &PushConfig{URL: "https://example.com/hook", Secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", Mode: "json", MaxConcurrency: 8, Timeout: 15 * time.Second}

	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "a", Queues: 4})
	require.NoError(t, err)
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "b", Queues: 8})
	require.NoError(t, err)
	quota := func(err error) QuotaError {
		var q *QuotaError
		require.ErrorAs(t, err, &q)
		return *q
	}
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "c", Queues: 1})
	require.Equal(t, "[quota] | quota exceeded: topics: the request would make 3 topics where the limit is 2 (--max-topics; 2 exist)", regErr(err))
	require.Equal(t, QuotaError{Quota: "topics", Limit: 2, Unit: "topics", Flag: "--max-topics", Have: 2, Want: 3}, quota(err))
	_, err = b.PatchTopic(ctx, "a", func(c TopicConfig) (TopicConfig, error) { c.Queues = 9; return c, nil })
	require.Equal(t, "[quota] | quota exceeded: queuesPerTopic: the request would make 9 queues where the limit is 8 (--max-queues-per-topic; 4 exist)", regErr(err))
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "a", Queues: 5})
	require.Equal(t, "[quota] | quota exceeded: queues: the request would make 13 queues where the limit is 12 (--max-queues; 12 exist)", regErr(err))
	require.Equal(t, QuotaError{Quota: "queues", Limit: 12, Unit: "queues", Flag: "--max-queues", Have: 12, Want: 13}, quota(err))
	// What does not grow passes: a replace at the same count.
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "a", Queues: 4, RetentionHours: 1})
	require.NoError(t, err)

	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g1", Push: push})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g2", Push: push})
	require.Equal(t, "[quota] | quota exceeded: pushEndpoints: the request would make 2 push endpoints where the limit is 1 (--max-push-endpoints; 1 exist)", regErr(err))
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g2"})
	require.NoError(t, err)
	_, err = b.PatchGroup(ctx, "g2", func(c GroupConfig) (GroupConfig, error) { c.Push = push; return c, nil })
	require.Equal(t, "[quota] | quota exceeded: pushEndpoints: the request would make 2 push endpoints where the limit is 1 (--max-push-endpoints; 1 exist)", regErr(err))
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g3"})
	require.Equal(t, "[quota] | quota exceeded: groups: the request would make 3 groups where the limit is 2 (--max-groups; 2 exist)", regErr(err))
	// A group that has its endpoint keeps it through a replace.
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g1", Push: push, RetryMaxTimes: 2})
	require.NoError(t, err)
	// A deletion makes room.
	require.NoError(t, b.DeleteGroup(ctx, "g1"))
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g3", Push: push})
	require.NoError(t, err)

	var kinds []string
	for _, body := range metaBodies(t, b)[start:] {
		var recs []struct {
			Kind, Name   string
			Topic, Group *struct{ Name string }
		}
		require.NoError(t, json.Unmarshal([]byte(body), &recs))
		for _, r := range recs {
			switch {
			case r.Topic != nil:
				r.Name = r.Topic.Name
			case r.Group != nil:
				r.Name = r.Group.Name
			}
			kinds = append(kinds, r.Kind+" "+r.Name)
		}
	}
	require.Equal(t, []string{
		"topic a", "topic b", "topic a", "group g1", "group g2", "group g1", "group-deleted g1", "group g3",
	}, kinds, "a refusal writes nothing")
}

func TestGoldenRegistryConcurrentChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := regGoldenBroker(t, Quotas{MaxGroups: 10})
	start := len(metaBodies(t, b))
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "t", Queues: 1})
	require.NoError(t, err)

	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, errs[i] = b.PatchTopic(ctx, "t", func(c TopicConfig) (TopicConfig, error) { c.RetentionHours++; return c, nil })
		}()
		go func() {
			defer wg.Done()
			_, _, errs[n+i] = b.PutGroup(ctx, GroupConfig{Name: fmt.Sprintf("g%02d", i)})
		}()
	}
	wg.Wait()
	for _, err := range errs[:n] {
		require.NoError(t, err)
	}
	refused := 0
	for _, err := range errs[n:] {
		if err != nil {
			require.ErrorIs(t, err, ErrQuotaExceeded)
			require.Equal(t, "[quota] | quota exceeded: groups: the request would make 11 groups where the limit is 10 (--max-groups; 10 exist)", regErr(err))
			refused++
		}
	}
	require.Equal(t, n-10, refused)
	topic, err := b.GetTopic(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, n, topic.RetentionHours, "no patch lost another's")
	groups, err := b.ListGroups(ctx)
	require.NoError(t, err)
	require.Len(t, groups, 10)
	require.True(t, sort.SliceIsSorted(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name }))

	// One record per change, in the order they were applied: the
	// retention hours count up.
	hours := 0
	bodies := metaBodies(t, b)[start+1:]
	require.Len(t, bodies, n+10)
	for _, body := range bodies {
		var h int
		if _, err := fmt.Sscanf(body, `[{"kind":"topic","topic":{"Name":"t","Queues":1,"RetentionHours":%d,`, &h); err == nil {
			hours++
			require.Equal(t, hours, h)
		}
	}
	require.Equal(t, n, hours)
}

func TestGoldenRegistryReceiptKeysAndCarry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := regGoldenBroker(t, Quotas{})
	require.Equal(t, []int{1}, b.ReceiptKeys())
	for _, want := range []int{2, 3} {
		id, err := b.RotateReceiptKey(ctx)
		require.NoError(t, err)
		require.Equal(t, want, id)
	}
	require.Equal(t, []int{1, 2, 3}, b.ReceiptKeys())
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "t", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g"})
	require.NoError(t, err)
	require.NoError(t, b.DeleteTopic(ctx, "t"))
	before := metaBodies(t, b)
	require.Len(t, before, 6)

	// Retention's carry: nothing while no META record lies below the cut.
	require.NoError(t, b.carryMeta(0))
	require.Equal(t, before, metaBodies(t, b))
	// With one there, the whole registry again, in one message: the group,
	// the tombstone and the keys (the topic is deleted).
	require.NoError(t, b.carryMeta(b.store.WriteOffset()))
	after := metaBodies(t, b)
	require.Len(t, after, 7)
	require.Equal(t, before, after[:6])
	carried := after[6]
	for _, part := range []string{`{"kind":"group","group":{"Name":"g",`, `{"kind":"tombstone","name":"t","tomb":{"DeletedAt":"` + regAt + `"`,
		`{"kind":"receipt-key","key":{"id":1,`, `{"kind":"receipt-key","key":{"id":2,`, `{"kind":"receipt-key","key":{"id":3,`} {
		require.Contains(t, carried, part)
	}
	require.NotContains(t, carried, `"kind":"topic"`)

}
