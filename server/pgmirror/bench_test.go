package pgmirror

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
)

// BenchmarkMirrorOffsets measures how fast the mirror absorbs a backlog of
// progress records (one ack each, as HTTP clients ack one by one, spread
// over 2 groups x 4 queues), coalescing them into consumer_offsets rows:
// the catch-up speed after an outage. Each iteration starts the projection
// over and drains the whole backlog in BatchSize-record transactions.
//
//	TEST_DATABASE_URL=… go test -run '^$' -bench MirrorOffsets -benchtime 5x ./server/pgmirror/
func BenchmarkMirrorOffsets(b *testing.B) {
	const perGroup = 10000
	url := pgtest.URL(b)
	ctx := context.Background()
	br := mustOpenBroker(b, b.TempDir(), "async")
	_, _, err := br.PutTopic(ctx, broker.TopicConfig{Name: "bench", Queues: 4})
	require.NoError(b, err)
	for sent := 0; sent < perGroup; sent += 500 {
		send(b, br, "bench", 500)
	}
	for _, g := range []string{"g1", "g2"} {
		consume(b, br, g, "bench", perGroup)
	}
	records := int64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i > 0 {
			execSQL(b, url, `TRUNCATE consumer_offsets, dead_letters, mirror_cursors`)
		}
		m := mustOpenMirror(b, url, br)
		_, err := m.runOnce(ctx) // migrations and load: not part of the measure
		require.NoError(b, err)
		execSQL(b, url, `TRUNCATE consumer_offsets, dead_letters, mirror_cursors`)
		m.st = nil
		_, err = migratePool(ctx, m.pool, "version")
		require.NoError(b, err)
		b.StartTimer()
		res := drain(b, m)
		b.StopTimer()
		records += int64(res.Records)
		require.Equal(b, 2*perGroup, res.Records)
		require.NoError(b, m.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(2*perGroup), "records/op")
}
