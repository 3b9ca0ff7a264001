package shard

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/raftlog"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// shardStoreID is the shard's logical address: every replica mints ids
// with it, so ids hold across failover.
var shardStoreID = message.Host{9, 9, 9, 9, 9, 9, 9, 9}

// testLogOptions are a replica's store and Raft files in dir: segments
// small enough that the tests roll them.
func testLogOptions(dir string) raftlog.Options {
	so := storagetest.SmallOptions(dir)
	so.SegmentSize, so.MaxMessageSize = 32<<10, 4<<10
	so.StoreID = shardStoreID
	so.Clock = clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	return raftlog.Options{Store: so, IndexFileEntries: 64}
}

var topics = []string{"orders", "audit"}

// batch builds n messages whose bodies name them (tag-k).
func batch(tag string, n int) []*message.Message {
	ms := make([]*message.Message, n)
	for i := range ms {
		ms[i] = storagetest.NewMessage(topics[(len(tag)+i)%2], int32(i%3), fmt.Sprintf("%s-%d-%0200d", tag, i, i), "t")
	}
	return ms
}
