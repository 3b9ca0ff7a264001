package main

import (
	"context"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server"
)

// migrateCmd runs the PostgreSQL mirror's migrations by hand (serve runs
// `up` by itself when --database-url is set).
type migrateCmd struct {
	Command     string        `arg:"" enum:"up,down,version" help:"up: apply pending; down: revert the last one; version: print it."`
	DatabaseURL string        `help:"PostgreSQL URL." env:"MQGATE_DATABASE_URL,DATABASE_URL" required:""`
	Timeout     time.Duration `help:"Give up after this long." default:"1m"`
}

// Run applies the command and prints the schema version.
func (c *migrateCmd) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	v, err := server.Migrate(ctx, c.DatabaseURL, c.Command)
	if err != nil {
		return err
	}
	fmt.Println("schema", v)
	return nil
}
