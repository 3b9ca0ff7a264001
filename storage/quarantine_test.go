package storage_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// oversized is a message whose properties exceed the format's limit: the
// record that once wedged the dispatcher for good.
func oversized(topic string) *message.Message {
	m := storagetest.NewMessage(topic, 0, "poison", "")
	m.SetProperty("big", strings.Repeat("x", message.MaxPropertiesSize))
	return m
}

func TestPutRefusesWhatReadersRefuse(t *testing.T) {
	t.Parallel()
	s := storagetest.MustOpen(t, storagetest.SmallOptions(""))
	cases := map[string]struct {
		m    *message.Message
		want error
	}{
		"PropertiesOverFormatLimit": {oversized("t"), storage.ErrMessageTooLarge},
		"EmptyPropertyKey": {func() *message.Message {
			m := storagetest.NewMessage("t", 0, "x", "")
			m.SetProperty("", "v")
			return m
		}(), storage.ErrInvalidMessage},
		"TopicWithSlash":  {storagetest.NewMessage("a/b", 0, "x", ""), storage.ErrInvalidMessage},
		"TopicDotDot":     {storagetest.NewMessage("..", 0, "x", ""), storage.ErrInvalidMessage},
		"TopicTooLong":    {storagetest.NewMessage(strings.Repeat("t", message.MaxTopicLen+1), 0, "x", ""), storage.ErrInvalidMessage},
		"QueueIDTooLarge": {storagetest.NewMessage("t", storage.MaxQueueID+1, "x", ""), storage.ErrInvalidMessage},
		"NegativeQueueID": {storagetest.NewMessage("t", -1, "x", ""), storage.ErrInvalidMessage},
	}
	for name, tc := range cases {
		_, err := s.Put(tc.m)
		require.ErrorIs(t, err, tc.want, name)
		err = s.PutBatch([]*message.Message{storagetest.NewMessage("t", 0, "ok", ""), tc.m}, make([]storage.PutResult, 2))
		require.ErrorIs(t, err, tc.want, name+" in a batch")
	}
	// Nothing of the refused batches was written, and the store serves.
	r := storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "after", ""))
	require.Equal(t, int64(0), r.QueueOffset)
	waitDispatched(t, s, "t", 0, 1)
	got, err := s.ReadQueue("t", 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	require.Equal(t, "after", string(got.Messages[0].Body))
	require.Zero(t, s.Quarantined().Count)
}

// TestDispatcherQuarantinesAndMovesOn plants undispatchable records (intact
// frames, bad payloads) in a running store: the dispatcher sets each aside
// and every later message still becomes visible.
func TestDispatcherQuarantinesAndMovesOn(t *testing.T) {
	t.Parallel()
	opts := storagetest.SmallOptions(t.TempDir())
	s, err := storage.Open(opts)
	require.NoError(t, err)
	defer s.Close()

	storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "before", ""))
	var planted []int64
	for _, payload := range [][]byte{
		storagetest.EncodeUnchecked(oversized("t")),                                  // properties over the limit
		storagetest.EncodeUnchecked(storagetest.NewMessage("../escape", 0, "x", "")), // not a directory name
		[]byte("not a payload at all"),
	} {
		off, err := storage.AppendRawForTest(s, payload)
		require.NoError(t, err)
		planted = append(planted, off)
	}
	storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "after", ""))
	waitDispatched(t, s, "t", 0, 2)

	res, err := s.ReadQueue("t", 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)
	require.Equal(t, "before", string(res.Messages[0].Body))
	require.Equal(t, "after", string(res.Messages[1].Body))

	q := s.Quarantined()
	require.Equal(t, int64(3), q.Count)
	for i, r := range q.Recent {
		require.Equal(t, planted[i], r.Offset)
		require.Equal(t, "dispatch", r.Stage)
		require.NotEmpty(t, r.Reason)
	}
	require.Contains(t, q.Recent[0].Reason, "properties length")
	require.Contains(t, q.Recent[1].Reason, "topic")
	st := s.DispatchStatus()
	require.NoError(t, st.Err)
	require.Zero(t, st.LagBytes)

	// A clean restart keeps the list (and does not see the records again).
	require.NoError(t, s.Close())
	s2 := storagetest.MustOpen(t, opts)
	require.Equal(t, int64(3), s2.Quarantined().Count)
	waitDispatched(t, s2, "t", 0, 2)
}

// TestDataDirWithUndispatchableRecordOpens is the data dir the bug left
// behind: a record with over-limit properties below the end of the log.
// Open quarantines it during recovery instead of failing, also when the
// checkpoint is gone and everything is re-dispatched.
func TestDataDirWithUndispatchableRecordOpens(t *testing.T) {
	t.Parallel()
	opts := storagetest.SmallOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "one", ""))
	require.NoError(t, s.Close())

	off := storagetest.AppendRaw(t, opts.Dir, opts.SegmentSize, storagetest.EncodeUnchecked(oversized("t")))

	s = storagetest.MustOpen(t, opts)
	q := s.Quarantined()
	require.Equal(t, int64(1), q.Count)
	require.Equal(t, off, q.Recent[0].Offset)
	// The queue goes on after the quarantined record.
	r := storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "two", ""))
	require.Equal(t, int64(1), r.QueueOffset)
	waitDispatched(t, s, "t", 0, 2)
	res, err := s.ReadQueue("t", 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)
	require.NoError(t, s.Close())

	// Without a checkpoint (full re-dispatch) the record is met again: the
	// store still opens, and the list does not count it twice.
	storagetest.RemoveCheckpoint(t, opts.Dir)
	s = storagetest.MustOpen(t, opts)
	require.Equal(t, int64(1), s.Quarantined().Count)
	waitDispatched(t, s, "t", 0, 2)
}
