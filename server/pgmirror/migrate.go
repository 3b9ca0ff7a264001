package pgmirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mqgate/mqgate/migrations"
)

// MigrationsTable is where golang-migrate records the schema version (in
// the connection's current schema). Part of the schema; never change.
const MigrationsTable = "mqgate_schema_migrations"

// MigrationStatus is the schema version after a Migrate command.
type MigrationStatus struct {
	// Version is the last applied migration (0 = none).
	Version uint
	// Dirty reports a migration that failed half-way; fix the schema by
	// hand, then force the version with the golang-migrate CLI.
	Dirty bool
}

// String renders the status for the `mqgate migrate` subcommand.
func (s MigrationStatus) String() string {
	if s.Dirty {
		return fmt.Sprintf("version %d (dirty)", s.Version)
	}
	return fmt.Sprintf("version %d", s.Version)
}

// Migrate runs one golang-migrate command against databaseURL with the
// embedded migrations: "up" applies every pending migration, "down"
// reverts the last applied one (one step: the mirror is a projection, but
// dropping all of it at once should take more than one typo), "version"
// changes nothing. It returns the version afterwards.
func Migrate(ctx context.Context, databaseURL, command string) (MigrationStatus, error) {
	cc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("%w: database URL does not parse", ErrConfig)
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	return migrateDB(ctx, db, command)
}

// migratePool runs a migrate command over one of pool's connections.
func migratePool(ctx context.Context, pool *pgxpool.Pool, command string) (MigrationStatus, error) {
	db := stdlib.OpenDBFromPool(pool) // closing db leaves the pool open
	defer db.Close()
	return migrateDB(ctx, db, command)
}

func migrateDB(ctx context.Context, db *sql.DB, command string) (MigrationStatus, error) {
	var st MigrationStatus
	switch command {
	case "up", "down", "version":
	default:
		return st, fmt.Errorf("%w: %q (want up, down or version)", ErrUnknownCommand, command)
	}
	if err := db.PingContext(ctx); err != nil {
		return st, fmt.Errorf("migrate: connect: %w", err)
	}
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{MigrationsTable: MigrationsTable})
	if err != nil {
		return st, fmt.Errorf("migrate: %w", err)
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return st, fmt.Errorf("migrate: embedded migrations: %w", err)
	}
	mg, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		return st, fmt.Errorf("migrate: %w", err)
	}
	defer mg.Close()
	stop := context.AfterFunc(ctx, func() {
		select {
		case mg.GracefulStop <- true:
		default:
		}
	})
	defer stop()

	switch command {
	case "up":
		err = mg.Up()
	case "down":
		err = mg.Steps(-1)
		if errors.Is(err, os.ErrNotExist) {
			err = nil // nothing applied: nothing to revert
		}
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return st, fmt.Errorf("migrate %s: %w", command, err)
	}
	v, dirty, err := mg.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return st, fmt.Errorf("migrate: version: %w", err)
	}
	st.Version, st.Dirty = v, dirty
	if st.Dirty {
		return st, fmt.Errorf("migrate: schema is dirty at version %d", v)
	}
	return st, nil
}
