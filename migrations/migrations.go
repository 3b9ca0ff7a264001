// Package migrations holds the PostgreSQL schema of mqgate's mirror as
// numbered golang-migrate pairs (NNNN_name.up.sql / NNNN_name.down.sql),
// embedded in the binary. Package server/pgmirror applies them with
// golang-migrate's iofs source at start-up and for `mqgate migrate`.
//
// Rules: an applied migration is never edited; a change is a new pair.
// Every up has a down that undoes exactly it. The schema holds no data
// that the CommitLog does not have (PostgreSQL is a projection), except
// the mirror's own cursors.
package migrations

import "embed"

// FS holds every migration file, at its root.
//
//go:embed *.sql
var FS embed.FS
