package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
	"github.com/mqgate/mqgate/storage/message"
)

// propEntry is what one property takes in a record: 6 bytes plus name and value.
func propEntry(name, value string) int { return 6 + len(name) + len(value) }

// fullMessage is a message whose producer-controlled part is exactly
// MaxUserPropertiesBytes: a maximal tag, sharding key and dedup id, some
// maximal keys, and properties filling the rest to the byte.
func fullMessage(t *testing.T, dedup string) broker.SendMessage {
	t.Helper()
	m := broker.SendMessage{
		Body:        []byte("payload"),
		Tag:         strings.Repeat("t", broker.MaxTagBytes),
		ShardingKey: strings.Repeat("s", broker.MaxShardingKeyBytes),
		DedupID:     dedup,
		Properties:  map[string]string{},
	}
	for i := 0; i < 8; i++ {
		m.Keys = append(m.Keys, fmt.Sprintf("%0*d", broker.MaxKeyBytes, i))
	}
	used := propEntry(message.PropertyTags, m.Tag) + propEntry(message.PropertyShardingKey, m.ShardingKey) +
		propEntry(message.PropertyKeys, strings.Join(m.Keys, " "))
	if dedup != "" {
		used += propEntry(message.PropertyDedupID, dedup)
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("p%03d", i)
		left := broker.MaxUserPropertiesBytes - used - propEntry(name, "")
		if left <= 1024 {
			m.Properties[name] = strings.Repeat("v", left)
			used += propEntry(name, m.Properties[name])
			break
		}
		m.Properties[name] = strings.Repeat("v", 1024)
		used += propEntry(name, m.Properties[name])
	}
	require.Equal(t, broker.MaxUserPropertiesBytes, used)
	return m
}

func requireLimit(t *testing.T, err error, kind error, field string, limit int) {
	t.Helper()
	require.ErrorIs(t, err, kind)
	var le *broker.LimitError
	require.True(t, errors.As(err, &le), "%v is a LimitError", err)
	require.Equal(t, field, le.Field)
	require.Equal(t, limit, le.Limit)
	require.Less(t, len(err.Error()), 300, "the error does not echo the value back: %s", err)
}

func TestSendLimits(t *testing.T) {
	bd := setup(t)
	send := func(m broker.SendMessage) error {
		_, err := bd.b.Send(bd.ctx, "limits", []broker.SendMessage{m})
		return err
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	body := []byte("b")

	// Exactly at every limit: stored, and read back equal.
	full := fullMessage(t, long(broker.MaxDedupIDBytes))
	require.NoError(t, send(full))
	got := bd.pull(t, "g", "limits", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	require.Equal(t, full.Tag, got[0].Tag)
	require.Equal(t, full.Keys, got[0].Keys)
	require.Equal(t, full.Properties, got[0].Properties)

	over := fullMessage(t, long(broker.MaxDedupIDBytes))
	for k := range over.Properties {
		over.Properties[k] += "v" // one byte too many
		break
	}
	requireLimit(t, send(over), broker.ErrPropertiesTooLarge, "properties", broker.MaxUserPropertiesBytes)

	tooMany := map[string]string{}
	for i := 0; i <= broker.MaxProperties; i++ {
		tooMany[fmt.Sprint("k", i)] = ""
	}
	requireLimit(t, send(broker.SendMessage{Body: body, Properties: tooMany}), broker.ErrPropertiesTooLarge, "properties", broker.MaxProperties)
	requireLimit(t, send(broker.SendMessage{Body: body, Tag: long(broker.MaxTagBytes + 1)}), broker.ErrValueTooLong, "tag", broker.MaxTagBytes)
	requireLimit(t, send(broker.SendMessage{Body: body, Keys: []string{"a", long(2048)}}), broker.ErrValueTooLong, "keys[1]", broker.MaxKeyBytes)
	requireLimit(t, send(broker.SendMessage{Body: body, Keys: make([]string, broker.MaxKeys+1)}), broker.ErrValueTooLong, "keys", broker.MaxKeys)
	requireLimit(t, send(broker.SendMessage{Body: body, ShardingKey: long(100_000)}), broker.ErrValueTooLong, "shardingKey", broker.MaxShardingKeyBytes)
	requireLimit(t, send(broker.SendMessage{Body: body, DedupID: long(broker.MaxDedupIDBytes + 1)}), broker.ErrValueTooLong, "dedupId", broker.MaxDedupIDBytes)
	requireLimit(t, send(broker.SendMessage{Body: body, Properties: map[string]string{long(300): "v"}}), broker.ErrValueTooLong,
		"property name "+broker.QuoteValue(long(300)), broker.MaxPropertyNameBytes)
	requireLimit(t, send(broker.SendMessage{Body: make([]byte, 64<<10+1)}), broker.ErrTooLarge, "body", 64<<10)

	// In a batch the field names the message.
	_, err := bd.b.Send(bd.ctx, "limits", []broker.SendMessage{{Body: body}, {Body: body, Tag: long(300)}})
	requireLimit(t, err, broker.ErrValueTooLong, "messages[1].tag", broker.MaxTagBytes)

	for name, m := range map[string]broker.SendMessage{
		"TagWithSpace":        {Body: body, Tag: "a b"},
		"TagWithBars":         {Body: body, Tag: "a||b"},
		"TagNotUTF8":          {Body: body, Tag: "a\xffb"},
		"KeyWithNewline":      {Body: body, Keys: []string{"a\nb"}},
		"EmptyKey":            {Body: body, Keys: []string{""}},
		"ShardingKeyControl":  {Body: body, ShardingKey: "a\x00b"},
		"PropertyNameEmpty":   {Body: body, Properties: map[string]string{"": "v"}},
		"PropertyNameControl": {Body: body, Properties: map[string]string{"a\tb": "v"}},
		"PropertyReserved":    {Body: body, Properties: map[string]string{"RETRY_TOPIC": "x"}},
		"PropertyValueBadUTF": {Body: body, Properties: map[string]string{"k": "\xc3"}},
		"DelayMsHuge":         {Body: body, DelayMs: 1<<63 - 1},
		"DelayLevelNegative":  {Body: body, DelayLevel: -1},
	} {
		err := send(m)
		require.ErrorIs(t, err, broker.ErrInvalidArgument, name)
		require.Less(t, len(err.Error()), 300, name)
	}
	// A sharding key may hold spaces; a dedup id too.
	require.NoError(t, send(broker.SendMessage{Body: body, ShardingKey: "customer 42", DedupID: "order 1"}))
	require.ErrorIs(t, send(broker.SendMessage{}), broker.ErrEmptyBody)
}

func TestNackReasonLimit(t *testing.T) {
	bd := setup(t)
	bd.send(t, "reasons", "m")
	got := bd.pull(t, "g", "reasons", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	_, err := bd.b.Nack(bd.ctx, "g", []broker.NackItem{{Receipt: got[0].Receipt, Reason: strings.Repeat("r", broker.MaxReasonBytes+1)}})
	requireLimit(t, err, broker.ErrValueTooLong, "items[0].reason", broker.MaxReasonBytes)
	_, err = bd.b.Nack(bd.ctx, "g", []broker.NackItem{{Receipt: got[0].Receipt, Reason: "\xff"}})
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
	// Refused before anything happened: the lease is still there.
	bd.nack(t, "g", got[0], 0, strings.Repeat("r", broker.MaxReasonBytes))
}

// fastLevels makes every delay level 1 ms, so a long ladder runs quickly.
func fastLevels(opts broker.Options) broker.Options {
	opts.DelayLevels = make([]time.Duration, 18)
	for i := range opts.DelayLevels {
		opts.DelayLevels[i] = time.Millisecond
	}
	return opts
}

// worstReason is a reason at MaxReasonBytes whose every byte JSON escapes
// to six (a control character).
var worstReason = strings.Repeat("\x01", broker.MaxReasonBytes)

// TestBrokerAdditionsFit walks the largest message a producer may send
// through the longest ladder a group may have (64 retries), failing it with
// the largest reasons from the longest client id, on the longest topic and
// group names, into the DLQ, resends it and dead-letters it again: every
// copy the broker writes fits the record format, the history stays bounded
// and a restart opens. Plain and orderly groups.
func TestBrokerAdditionsFit(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderly=%v", orderly), func(t *testing.T) {
			dir := t.TempDir()
			opts := fastLevels(brokertest.Options(dir))
			b := brokertest.Open(t, opts)
			topic := strings.Repeat("T", 127)
			group := strings.Repeat("G", 120)
			client := strings.Repeat("c", broker.MaxClientIDBytes)
			ctx := broker.WithClient(context.Background(), client)
			_, _, err := b.PutGroup(ctx, broker.GroupConfig{Name: group, RetryMaxTimes: 64, Orderly: orderly})
			require.NoError(t, err)
			full := fullMessage(t, strings.Repeat("d", broker.MaxDedupIDBytes))
			_, err = b.Send(ctx, topic, []broker.SendMessage{full})
			require.NoError(t, err)

			pullOne := func() broker.ReceivedMessage {
				t.Helper()
				var got []broker.ReceivedMessage
				require.Eventually(t, func() bool {
					got, err = b.Pull(ctx, broker.PullRequest{Group: group, Topic: topic, MaxMessages: 1, Wait: 50 * time.Millisecond, Invisible: time.Minute})
					require.NoError(t, err)
					return len(got) == 1
				}, 10*time.Second, time.Millisecond)
				return got[0]
			}
			failAll := func() {
				t.Helper()
				for attempt := 0; attempt <= 64; attempt++ {
					m := pullOne()
					require.Equal(t, full.Properties, m.Properties, "attempt %d", attempt)
					res, err := b.Nack(ctx, group, []broker.NackItem{{Receipt: m.Receipt, Reason: worstReason}})
					require.NoError(t, err, "attempt %d", attempt)
					require.Equal(t, broker.ReceiptOK, res[0].Status, "attempt %d", attempt)
				}
			}
			failAll()
			var dead []broker.DeadLetter
			require.Eventually(t, func() bool {
				dead, _, err = b.ListDeadLetters(ctx, group, broker.DLQFilter{}, "", 10)
				require.NoError(t, err)
				return len(dead) == 1
			}, 10*time.Second, time.Millisecond)
			d := dead[0]
			require.Equal(t, topic, d.OriginalTopic)
			require.LessOrEqual(t, len(d.Reason), 2<<10)
			require.Contains(t, d.Reason, "[truncated: 16384 bytes]")
			require.Equal(t, "omitted", d.Attempts[0].Outcome)
			total := d.Attempts[0].Count + len(d.Attempts) - 1
			require.Equal(t, 65, total, "the history counts every failure")
			for _, a := range d.Attempts[1:] {
				require.Equal(t, client, a.Client)
				require.LessOrEqual(t, len(a.Reason), 512)
			}

			// Resend, fail it all again: the copy of a copy fits too.
			rr, err := b.ResendDeadLetters(ctx, group, []string{d.MessageID}, nil)
			require.NoError(t, err)
			require.Len(t, rr.Resent, 1)
			failAll()
			require.Eventually(t, func() bool {
				dead, _, err = b.ListDeadLetters(ctx, group, broker.DLQFilter{Status: broker.DLQDead}, "", 10)
				require.NoError(t, err)
				return len(dead) == 1
			}, 10*time.Second, time.Millisecond)
			count, _ := b.Quarantined()
			require.Zero(t, count, "nothing the broker wrote was set aside")

			require.NoError(t, b.Close(ctx))
			b = brokertest.Open(t, opts)
			dead, _, err = b.ListDeadLetters(ctx, group, broker.DLQFilter{}, "", 10)
			require.NoError(t, err)
			require.Len(t, dead, 2)
		})
	}
}
