package pgmirror

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/migrations"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
)

func TestMigrate(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	files, err := fs.Glob(migrations.FS, "*.up.sql")
	require.NoError(t, err)
	latest := uint(len(files))
	require.GreaterOrEqual(t, latest, uint(3))
	tables := func() int {
		return count(t, url, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()
AND tablename IN ('consumer_offsets', 'dead_letters', 'mirror_cursors')`)
	}

	t.Run("UpDownUp", func(t *testing.T) {
		st, err := Migrate(ctx, url, "version")
		require.NoError(t, err)
		require.Equal(t, MigrationStatus{}, st, "a fresh schema has no version")

		st, err = Migrate(ctx, url, "up")
		require.NoError(t, err)
		require.Equal(t, MigrationStatus{Version: latest}, st)
		require.Equal(t, 3, tables())

		st, err = Migrate(ctx, url, "up")
		require.NoError(t, err, "up twice is a no-op")
		require.Equal(t, latest, st.Version)

		for v := latest; v > 0; v-- {
			st, err = Migrate(ctx, url, "down")
			require.NoError(t, err)
			require.Equal(t, MigrationStatus{Version: v - 1}, st, "down reverts one step")
		}
		require.Equal(t, 0, tables())
		st, err = Migrate(ctx, url, "down")
		require.NoError(t, err, "down at version 0 is a no-op")
		require.Equal(t, uint(0), st.Version)

		st, err = Migrate(ctx, url, "up")
		require.NoError(t, err)
		require.Equal(t, MigrationStatus{Version: latest}, st)
		require.Equal(t, 3, tables())
		require.Equal(t, fmt.Sprintf("version %d", latest), st.String())
	})
	t.Run("ErrUnknownCommand", func(t *testing.T) {
		_, err := Migrate(ctx, url, "drop")
		require.ErrorIs(t, err, ErrUnknownCommand)
	})
	t.Run("ErrConfig", func(t *testing.T) {
		_, err := Migrate(ctx, "postgres://%zz", "up")
		require.ErrorIs(t, err, ErrConfig)
	})
	t.Run("EveryUpHasADown", func(t *testing.T) {
		for _, up := range files {
			_, err := fs.Stat(migrations.FS, strings.TrimSuffix(up, ".up.sql")+".down.sql")
			require.NoError(t, err, up)
		}
	})
}

func TestOpenMigrates(t *testing.T) {
	url := pgtest.URL(t)
	m := mustOpenMirror(t, url, mustOpenBroker(t, t.TempDir(), "sync"))
	st, err := Migrate(context.Background(), url, "version")
	require.NoError(t, err)
	require.Positive(t, st.Version, "Open ran the migrations")
	require.False(t, st.Dirty)
	require.ErrorIs(t, m.Health(), ErrDegraded, "degraded until the first pass")
	_, err = m.runOnce(context.Background())
	require.NoError(t, err)
	require.NoError(t, m.Health())
}

func TestOpenValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"NoURL":       {},
		"BadURL":      {DatabaseURL: "postgres://%zz"},
		"BadBatch":    {DatabaseURL: "postgres://x/y", BatchSize: -1},
		"BadRetry":    {DatabaseURL: "postgres://x/y", RetryMin: 2, RetryMax: 1},
		"BadMaxConns": {DatabaseURL: "postgres://x/y", MaxConns: -1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Open(context.Background(), cfg, nil)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}
