package broker_test

// CommitOffsets (package consume's): what it refuses, and what a commit
// does to the group's pop cursor and leases on that queue.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

func TestCommitOffsetsRefusalsAndCursor(t *testing.T) {
	ctx := context.Background()
	b := brokertest.MustOpen(t, "")
	_, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: "co", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 3})
	require.NoError(t, err)
	for _, body := range []string{"m0", "m1", "m2", "m3"} {
		_, err := b.Send(ctx, "co", []broker.SendMessage{{Body: []byte(body)}})
		require.NoError(t, err)
	}

	commit := func(cs ...broker.OffsetCommit) error { return b.CommitOffsets(ctx, "g", cs) }
	require.ErrorIs(t, commit(), broker.ErrInvalidArgument, "no commit")
	many := make([]broker.OffsetCommit, broker.MaxBatchItems+1)
	for i := range many {
		many[i] = broker.OffsetCommit{Topic: "co"}
	}
	require.ErrorIs(t, commit(many...), broker.ErrInvalidArgument, "more than a batch")
	require.ErrorIs(t, commit(broker.OffsetCommit{Topic: "nope"}), broker.ErrTopicNotFound)
	require.ErrorIs(t, commit(broker.OffsetCommit{Topic: "co", QueueID: 1}), broker.ErrInvalidArgument, "a queue the topic does not have")
	require.ErrorIs(t, commit(broker.OffsetCommit{Topic: "co", QueueID: -1}), broker.ErrInvalidArgument)
	require.ErrorIs(t, commit(broker.OffsetCommit{Topic: "co", Offset: 5}), broker.ErrOffsetOutOfRange, "past the queue's end")
	require.ErrorIs(t, commit(broker.OffsetCommit{Topic: "co", Offset: -1}), broker.ErrOffsetOutOfRange)
	// A commit names its group as a pull does: auto-created.
	require.NoError(t, b.CommitOffsets(ctx, "new", []broker.OffsetCommit{{Topic: "co"}}))
	_, err = b.GetGroup(ctx, "new")
	require.NoError(t, err)

	// A pull leases m0 and m1; a commit at 3 drops those leases and moves
	// the cursor: the next pull starts at m3, and an ack of m0's receipt
	// is ok, m0 being below the committed offset (consumed).
	got, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "co", MaxMessages: 2})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.NoError(t, commit(broker.OffsetCommit{Topic: "co", Offset: 3}))
	again, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "co", MaxMessages: 4})
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, "m3", string(again[0].Body))
	res, err := b.Ack(ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status, "%+v", res[0])
	rows, err := b.Progress(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, int64(3), rows[0].ConsumerOffset)
}
