// Package pgtest gives each test its own PostgreSQL schema in the database
// named by TEST_DATABASE_URL (like river's riverdbtest): a fresh, empty
// schema whose name is derived from the test, reachable through a URL whose
// search_path points at it, and dropped (CASCADE) when the test ends.
//
// Without TEST_DATABASE_URL a test is skipped, unless the environment
// variable CI is set: in CI a missing database is a failure, never a
// silent skip (.ci/run always provides one).
//
// Locally, postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
// works against a trust-auth PostgreSQL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the environment variable naming the test database.
const EnvURL = "TEST_DATABASE_URL"

// DatabaseURL returns TEST_DATABASE_URL. When it is unset the test is
// skipped, or failed when CI is set.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("pgtest: %s is not set, and CI is: PostgreSQL tests must run in CI", EnvURL)
		}
		t.Skipf("pgtest: %s is not set; skipping a PostgreSQL test", EnvURL)
	}
	return u
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// SchemaName builds a schema name from the test name plus a random
// suffix: lower case, at most 63 bytes (PostgreSQL's identifier limit).
func SchemaName(t testing.TB) string {
	t.Helper()
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		t.Fatalf("pgtest: random suffix: %v", err)
	}
	base := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_")
	base = strings.Trim(base, "_")
	const maxBase = 63 - len("t_") - 1 - 8
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	return "t_" + base + "_" + hex.EncodeToString(suffix[:])
}

// URL creates a fresh schema in the test database and returns a URL whose
// connections use it (search_path=<schema>). The schema and everything in
// it are dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	base := DatabaseURL(t)
	schema := SchemaName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redact(base), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { DropSchema(t, base, schema) })
	return WithSearchPath(t, base, schema)
}

// DropSchema drops schema (CASCADE) in the database at databaseURL.
func DropSchema(t testing.TB, databaseURL, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: connect: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// WithSearchPath returns databaseURL with its search_path set to schema.
// It accepts URL-form connection strings only (postgres://…).
func WithSearchPath(t testing.TB, databaseURL, schema string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: %s must be a postgres:// URL", EnvURL)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// redact hides a password in a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
