package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/message"
)

// The send family's rules, pinned with the code from before the family
// moved to server/broker/send: every per-message limit's largest allowed
// and smallest refused input (the error's exact text, its sentinel and
// whether it is a *LimitError with which field, size, limit and unit), the
// property rules, the queue a sharding key picks, and the dedup window's
// decisions.

var goldenSendAt = time.UnixMilli(1_700_000_000_123)

// goldenSendBroker opens a broker with a clock that moves only when the
// test moves it (MaxMessageSize 16 KiB, auto-create on).
func goldenSendBroker(t *testing.T) (*Broker, *clockwork.FakeClock) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(goldenSendAt)
	return openReplica(t, replicaOptions(fc, false)), fc
}

// describeSendErr is err as the golden texts pin it: its text, the
// sentinels it matches and, for a *LimitError, its fields.
func describeSendErr(err error) string {
	if err == nil {
		return "ok"
	}
	var kinds []string
	for _, k := range []struct {
		name string
		err  error
	}{
		{"ErrInvalidArgument", ErrInvalidArgument}, {"ErrValueTooLong", ErrValueTooLong},
		{"ErrPropertiesTooLarge", ErrPropertiesTooLarge}, {"ErrTooLarge", ErrTooLarge}, {"ErrEmptyBody", ErrEmptyBody},
		{"ErrInvalidName", ErrInvalidName}, {"ErrTopicNotFound", ErrTopicNotFound},
		{"ErrIdempotencyKeyReused", ErrIdempotencyKeyReused}, {"ErrIdempotencyInFlight", ErrIdempotencyInFlight},
	} {
		if errors.Is(err, k.err) {
			kinds = append(kinds, k.name)
		}
	}
	out := err.Error() + " [" + strings.Join(kinds, ",") + "]"
	var le *LimitError
	if errors.As(err, &le) {
		out += fmt.Sprintf(" limit{%s %d %d %q}", le.Field, le.Size, le.Limit, le.Unit)
	}
	return out
}

func TestGoldenSendLimits(t *testing.T) {
	b, _ := goldenSendBroker(t)
	ctx := context.Background()
	x := func(n int) string { return strings.Repeat("x", n) }
	keys := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%0*d", size, i)
		}
		return out
	}
	props := func(n int) map[string]string {
		out := make(map[string]string, n)
		for i := 0; i < n; i++ {
			out[fmt.Sprintf("p%03d", i)] = "v"
		}
		return out
	}
	body := []byte("b")
	// What a tag "t", keys "a" and "b", sharding key "s" and dedup id "d"
	// take of the budget: 6 bytes, the name and the value each.
	others := 6*4 + len(message.PropertyTags) + 1 + len(message.PropertyKeys) + 3 +
		len(message.PropertyShardingKey) + 1 + len(message.PropertyDedupID) + 1
	for _, tc := range []struct {
		name string
		msg  SendMessage
		want string
	}{
		{"body at the limit", SendMessage{Body: []byte(x(16 << 10))}, "ok"},
		{"body over the limit", SendMessage{Body: []byte(x(16<<10 + 1))},
			"message too large: body is 16385 bytes; the limit is 16384 bytes [ErrTooLarge] limit{body 16385 16384 \"\"}"},
		{"empty body", SendMessage{}, "empty message body [ErrEmptyBody]"},
		{"tag at the limit", SendMessage{Body: body, Tag: x(MaxTagBytes)}, "ok"},
		{"tag over the limit", SendMessage{Body: body, Tag: x(MaxTagBytes + 1)},
			"value too long: tag is 256 bytes; the limit is 255 bytes [ErrValueTooLong] limit{tag 256 255 \"\"}"},
		{"tag with a space", SendMessage{Body: body, Tag: "a b"},
			"invalid argument: tag \"a b\" may not contain white space or control characters [ErrInvalidArgument]"},
		{"tag with a control character", SendMessage{Body: body, Tag: "a\x01"},
			"invalid argument: tag \"a\\x01\" may not contain white space or control characters [ErrInvalidArgument]"},
		{"tag not UTF-8", SendMessage{Body: body, Tag: "a\xff"}, "invalid argument: tag is not valid UTF-8 [ErrInvalidArgument]"},
		{"tag with ||", SendMessage{Body: body, Tag: "a||b"},
			"invalid argument: tag \"a||b\" may not contain '||' (it separates tags in a tag expression) [ErrInvalidArgument]"},
		{"keys at the limit", SendMessage{Body: body, Keys: keys(MaxKeys, 3)}, "ok"},
		{"keys over the limit", SendMessage{Body: body, Keys: keys(MaxKeys+1, 3)},
			"value too long: keys is 65 keys; the limit is 64 keys [ErrValueTooLong] limit{keys 65 64 \"keys\"}"},
		{"key at the limit", SendMessage{Body: body, Keys: []string{"k", x(MaxKeyBytes)}}, "ok"},
		{"key over the limit", SendMessage{Body: body, Keys: []string{"k", x(MaxKeyBytes + 1)}},
			"value too long: keys[1] is 256 bytes; the limit is 255 bytes [ErrValueTooLong] limit{keys[1] 256 255 \"\"}"},
		{"key empty", SendMessage{Body: body, Keys: []string{"k", ""}}, "invalid argument: keys[1] is empty [ErrInvalidArgument]"},
		{"key with a space", SendMessage{Body: body, Keys: []string{"a b"}},
			"invalid argument: keys[0] \"a b\" may not contain white space or control characters [ErrInvalidArgument]"},
		{"sharding key at the limit", SendMessage{Body: body, ShardingKey: x(MaxShardingKeyBytes-1) + " "}, "ok"},
		{"sharding key over the limit", SendMessage{Body: body, ShardingKey: x(MaxShardingKeyBytes + 1)},
			"value too long: shardingKey is 256 bytes; the limit is 255 bytes [ErrValueTooLong] limit{shardingKey 256 255 \"\"}"},
		{"sharding key with a control character", SendMessage{Body: body, ShardingKey: "a\nb"},
			"invalid argument: shardingKey \"a\\nb\" may not contain control characters [ErrInvalidArgument]"},
		{"dedup id at the limit", SendMessage{Body: body, DedupID: x(MaxDedupIDBytes-1) + " "}, "ok"},
		{"dedup id over the limit", SendMessage{Body: body, DedupID: x(MaxDedupIDBytes + 1)},
			"value too long: dedupId is 256 bytes; the limit is 255 bytes [ErrValueTooLong] limit{dedupId 256 255 \"\"}"},
		{"dedup id not UTF-8", SendMessage{Body: body, DedupID: "\xff"}, "invalid argument: dedupId is not valid UTF-8 [ErrInvalidArgument]"},
		{"properties at the limit", SendMessage{Body: body, Properties: props(MaxProperties)}, "ok"},
		{"properties over the limit", SendMessage{Body: body, Properties: props(MaxProperties + 1)},
			"properties too large: properties is 129 properties; the limit is 128 properties [ErrPropertiesTooLarge] limit{properties 129 128 \"properties\"}"},
		{"property name at the limit", SendMessage{Body: body, Properties: map[string]string{x(MaxPropertyNameBytes): "v"}}, "ok"},
		{"property name over the limit", SendMessage{Body: body, Properties: map[string]string{x(MaxPropertyNameBytes + 1): "v"}},
			"value too long: property name \"" + x(64) + "\"… (256 bytes) is 256 bytes; the limit is 255 bytes [ErrValueTooLong] limit{property name \"" + x(64) + "\"… (256 bytes) 256 255 \"\"}"},
		{"property name empty", SendMessage{Body: body, Properties: map[string]string{"": "v"}},
			"invalid argument: a property name is empty [ErrInvalidArgument]"},
		{"property name with a space", SendMessage{Body: body, Properties: map[string]string{"a b": "v"}},
			"invalid argument: property name \"a b\" \"a b\" may not contain white space or control characters [ErrInvalidArgument]"},
		{"property reserved", SendMessage{Body: body, Properties: map[string]string{"DLQ_REASON": "v"}},
			"invalid argument: property DLQ_REASON is reserved for the broker [ErrInvalidArgument]"},
		{"property reserved (ATTEMPTS)", SendMessage{Body: body, Properties: map[string]string{"ATTEMPTS": "v"}},
			"invalid argument: property ATTEMPTS is reserved for the broker [ErrInvalidArgument]"},
		{"property reserved (TAGS)", SendMessage{Body: body, Properties: map[string]string{"TAGS": "v"}},
			"invalid argument: property TAGS is reserved for the broker [ErrInvalidArgument]"},
		{"property value not UTF-8", SendMessage{Body: body, Properties: map[string]string{"p": "\xff"}},
			"invalid argument: the value of property \"p\" is not valid UTF-8 [ErrInvalidArgument]"},
		{"user properties at the limit", SendMessage{Body: body, Tag: "t", Keys: []string{"a", "b"}, ShardingKey: "s", DedupID: "d",
			Properties: map[string]string{"p": x(MaxUserPropertiesBytes - 7 - others)}}, "ok"},
		{"user properties over the limit", SendMessage{Body: body, Tag: "t", Keys: []string{"a", "b"}, ShardingKey: "s", DedupID: "e",
			Properties: map[string]string{"p": x(MaxUserPropertiesBytes - 6 - others)}},
			"properties too large: properties is 16385 bytes; the limit is 16384 bytes [ErrPropertiesTooLarge] limit{properties 16385 16384 \"\"}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Send(ctx, "gold", []SendMessage{tc.msg})
			require.Equal(t, tc.want, describeSendErr(err))
		})
	}

	// A batch names the message: a limit's field, or a prefix and a colon
	// before the error's text.
	batch := []SendMessage{{Body: body}, {Body: body, Tag: x(MaxTagBytes + 1)}}
	_, err := b.Send(ctx, "gold", batch)
	require.Equal(t, "value too long: messages[1].tag is 256 bytes; the limit is 255 bytes [ErrValueTooLong] limit{messages[1].tag 256 255 \"\"}", describeSendErr(err))
	batch[1] = SendMessage{Body: body, Tag: "a b"}
	_, err = b.Send(ctx, "gold", batch)
	require.Equal(t, "messages[1]: invalid argument: tag \"a b\" may not contain white space or control characters [ErrInvalidArgument]", describeSendErr(err))
	batch[1] = SendMessage{}
	_, err = b.Send(ctx, "gold", batch)
	require.Equal(t, "messages[1]: empty message body [ErrEmptyBody]", describeSendErr(err))

	// The batch's size.
	_, err = b.Send(ctx, "gold", nil)
	require.Equal(t, "invalid argument: a send carries 1 to 256 messages, got 0 [ErrInvalidArgument]", describeSendErr(err))
	_, err = b.Send(ctx, "gold", make([]SendMessage, MaxSendBatch+1))
	require.Equal(t, "invalid argument: a send carries 1 to 256 messages, got 257 [ErrInvalidArgument]", describeSendErr(err))
	full := make([]SendMessage, MaxSendBatch)
	for i := range full {
		full[i] = SendMessage{Body: body}
	}
	_, err = b.Send(ctx, "gold", full)
	require.NoError(t, err)
}

func TestGoldenSendShardingQueue(t *testing.T) {
	b, _ := goldenSendBroker(t)
	ctx := context.Background()
	var got []string
	for _, queues := range []int{1, 2, 3, 8, 16} {
		topic := fmt.Sprintf("shard%d", queues)
		_, _, err := b.PutTopic(ctx, TopicConfig{Name: topic, Queues: queues})
		require.NoError(t, err)
		line := fmt.Sprintf("%d:", queues)
		for _, key := range []string{"a", "b", "order-1", "order-2", "customer 42", "é"} {
			r, err := b.Send(ctx, topic, []SendMessage{{Body: []byte("x"), ShardingKey: key}})
			require.NoError(t, err)
			line += fmt.Sprintf(" %q=%d", key, r[0].QueueID)
		}
		got = append(got, line)
	}
	require.Equal(t, []string{
		`1: "a"=0 "b"=0 "order-1"=0 "order-2"=0 "customer 42"=0 "é"=0`,
		`2: "a"=0 "b"=1 "order-1"=1 "order-2"=0 "customer 42"=1 "é"=1`,
		`3: "a"=1 "b"=1 "order-1"=1 "order-2"=1 "customer 42"=0 "é"=0`,
		`8: "a"=4 "b"=5 "order-1"=5 "order-2"=4 "customer 42"=5 "é"=1`,
		`16: "a"=12 "b"=5 "order-1"=13 "order-2"=4 "customer 42"=13 "é"=1`,
	}, got)

	// Without a sharding key, the queues in turn (one counter for the
	// broker, which no send above moved: it starts at 1).
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "rr", Queues: 3})
	require.NoError(t, err)
	var seq []int32
	for i := 0; i < 6; i++ {
		r, err := b.Send(ctx, "rr", []SendMessage{{Body: []byte("x")}})
		require.NoError(t, err)
		seq = append(seq, r[0].QueueID)
	}
	require.Equal(t, []int32{1, 2, 0, 1, 2, 0}, seq)
}

func TestGoldenSendDedupWindow(t *testing.T) {
	b, fc := goldenSendBroker(t)
	ctx := context.Background()
	window := b.opts.DedupWindow
	require.Equal(t, 5*time.Minute, window)
	send := func(body, id string) (SendResult, error) {
		r, err := b.Send(ctx, "dd", []SendMessage{{Body: []byte(body), DedupID: id}})
		if err != nil {
			return SendResult{}, err
		}
		return r[0], nil
	}
	first, err := send("one", "k1")
	require.NoError(t, err)
	require.False(t, first.Duplicate)

	// Within the window (to its last instant): the first send's result.
	for _, after := range []time.Duration{0, time.Second, window} {
		fc.Advance(after - fc.Since(goldenSendAt))
		again, err := send("one", "k1")
		require.NoError(t, err, "after %v", after)
		want := first
		want.Duplicate = true
		require.Equal(t, want, again, "after %v", after)
		// The same key with another body is refused.
		_, err = send("other", "k1")
		require.Equal(t, "idempotency key reused with a different request: k1 [ErrIdempotencyKeyReused]", describeSendErr(err))
	}
	// Another topic's key of the same id is another key.
	r, err := b.Send(ctx, "dd2", []SendMessage{{Body: []byte("two"), DedupID: "k1"}})
	require.NoError(t, err)
	require.False(t, r[0].Duplicate)

	// In one batch, a repeat of a key finds the first's claim in flight.
	_, err = b.Send(ctx, "dd", []SendMessage{{Body: []byte("n"), DedupID: "k2"}, {Body: []byte("n"), DedupID: "k2"}})
	require.Equal(t, "a request with this idempotency key is still in progress: k2 [ErrIdempotencyInFlight]", describeSendErr(err))
	// The refused batch released its claims: k2 is new.
	r, err = b.Send(ctx, "dd", []SendMessage{{Body: []byte("n"), DedupID: "k2"}})
	require.NoError(t, err)
	require.False(t, r[0].Duplicate)

	// After the window (1 ms past it): a new send, stored again.
	fc.Advance(time.Millisecond)
	later, err := send("one", "k1")
	require.NoError(t, err)
	require.False(t, later.Duplicate)
	require.NotEqual(t, first.MessageID, later.MessageID)
	// And that send answers the repeats of its own window.
	again, err := send("one", "k1")
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, later.MessageID, again.MessageID)

	// A claim in flight (a send being written) answers a concurrent send.
	claims, err := b.sends.Claim("dd", []SendMessage{{Body: []byte("f"), DedupID: "k3"}}, make([]SendResult, 1), fc.Now())
	require.NoError(t, err)
	require.Len(t, claims, 1)
	_, err = send("f", "k3")
	require.Equal(t, "a request with this idempotency key is still in progress: k3 [ErrIdempotencyInFlight]", describeSendErr(err))
	// Even past the window: a claim is never forgotten while in flight.
	fc.Advance(2 * window)
	_, err = send("f", "k3")
	require.Equal(t, "a request with this idempotency key is still in progress: k3 [ErrIdempotencyInFlight]", describeSendErr(err))
}
