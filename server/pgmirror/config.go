package pgmirror

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Config configures a Mirror. Zero values take the documented defaults.
type Config struct {
	// DatabaseURL is the PostgreSQL connection string (postgres://… or
	// key=value). Required.
	DatabaseURL string
	// BatchSize is the most records read from each stream in one pass
	// (default 4096). One pass is one transaction.
	BatchSize int
	// BatchDelay is how long the writer waits after the log signals new
	// records before it reads them, so that a burst of acks becomes one
	// transaction (default 10 ms).
	BatchDelay time.Duration
	// PollInterval is how often the writer runs a pass when the log does
	// not signal (dead-letter status changes are polled; default 1 s).
	PollInterval time.Duration
	// SweepInterval is how often every group's dead-letter queue is read
	// even though the progress stream did not move (default 5 s).
	SweepInterval time.Duration
	// PassTimeout bounds one pass, reads and transaction (default 15 s).
	PassTimeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff after a failed
	// pass (defaults 100 ms and 10 s; each wait jittered by ±50%, never
	// above RetryMax: internal/worker.Backoff).
	RetryMin, RetryMax time.Duration
	// MaxConns is the pool size (default 4: one writer plus admin reads).
	MaxConns int32
	// ConnectTimeout bounds establishing one connection (default 5 s).
	ConnectTimeout time.Duration
	// Logger receives the mirror's logs (default zerolog.Nop()).
	Logger zerolog.Logger
}

// Defaults.
const (
	DefaultBatchSize      = 4096
	DefaultBatchDelay     = 10 * time.Millisecond
	DefaultPollInterval   = time.Second
	DefaultSweepInterval  = 5 * time.Second
	DefaultPassTimeout    = 15 * time.Second
	DefaultRetryMin       = 100 * time.Millisecond
	DefaultRetryMax       = 10 * time.Second
	DefaultMaxConns       = 4
	DefaultConnectTimeout = 5 * time.Second
)

func (c Config) withDefaults() Config {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	set(&c.BatchDelay, DefaultBatchDelay)
	set(&c.PollInterval, DefaultPollInterval)
	set(&c.SweepInterval, DefaultSweepInterval)
	set(&c.PassTimeout, DefaultPassTimeout)
	set(&c.RetryMin, DefaultRetryMin)
	set(&c.RetryMax, DefaultRetryMax)
	set(&c.ConnectTimeout, DefaultConnectTimeout)
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.DatabaseURL == "":
		return fmt.Errorf("%w: database URL is required", ErrConfig)
	case c.BatchSize < 1 || c.BatchSize > 1<<16:
		return fmt.Errorf("%w: batch size must be 1..65536", ErrConfig)
	case c.BatchDelay < 0 || c.PollInterval < 0 || c.SweepInterval < 0 || c.PassTimeout < 0 || c.ConnectTimeout < 0:
		return fmt.Errorf("%w: durations must not be negative", ErrConfig)
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return fmt.Errorf("%w: retry bounds must satisfy 0 < min <= max", ErrConfig)
	case c.MaxConns < 1:
		return fmt.Errorf("%w: max conns must be >= 1", ErrConfig)
	}
	if _, err := c.poolConfig(); err != nil {
		return err
	}
	return nil
}

// poolConfig parses DatabaseURL into a pool configuration.
func (c Config) poolConfig() (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(c.DatabaseURL)
	if err != nil {
		// pgx's message may quote the URL; keep the password out of logs.
		return nil, fmt.Errorf("%w: database URL does not parse", ErrConfig)
	}
	pc.MaxConns = c.MaxConns
	pc.MinConns = 0
	pc.ConnConfig.ConnectTimeout = c.ConnectTimeout
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = "mqgate-mirror"
	}
	return pc, nil
}
