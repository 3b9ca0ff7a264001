package pgmirror

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
)

// TestStatusChangeWakesMirror: a dead-letter discard writes no progress
// record, yet the running mirror writes it at once, not at its next poll
// (an hour away here).
func TestStatusChangeWakesMirror(t *testing.T) {
	url := pgtest.URL(t)
	b := mustOpenBroker(t, t.TempDir(), "sync")
	m := mustOpenMirror(t, url, b, func(c *Config) { c.PollInterval = time.Hour })
	deadLetters(t, b, "g", "pay", 2)
	b.OffsetRecordsMax() // waits until the nacks are dispatched: their signal fired before Start
	ctx := t.Context()
	m.Start(ctx)
	waitFor(t, 5*time.Second, "dead letters in PostgreSQL", func() bool {
		got, _, err := m.ListDeadLetters(ctx, "g", broker.DLQFilter{}, "", 10)
		return err == nil && len(got) == 2
	})
	letters, _, err := b.ListDeadLetters(ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.NoError(t, b.DiscardDeadLetter(ctx, "g", letters[0].MessageID))
	took := waitFor(t, 5*time.Second, "the discard in PostgreSQL", func() bool {
		got, _, err := m.ListDeadLetters(ctx, "g", broker.DLQFilter{Status: broker.DLQDiscarded}, "", 10)
		return err == nil && len(got) == 1
	})
	t.Logf("discard mirrored after %v", took)
}
