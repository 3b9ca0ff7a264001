package server

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage"
)

// RepairConfig is what `mqgate repair` needs.
type RepairConfig struct {
	// DataDir is the store's directory (the server must not be running).
	DataDir string
	// SegmentSize is the size a recreated CommitLog segment gets (0: the
	// largest segment found).
	SegmentSize int64
	// Apply makes the repair; without it nothing is changed.
	Apply bool
	// LogOutput receives the store's warnings while the repair opens it
	// (default os.Stderr).
	LogOutput io.Writer
}

// RepairReport is what a repair found and did (storage.RepairReport).
type RepairReport = storage.RepairReport

// Repair surveys (and with Apply repairs) a data directory whose CommitLog
// lost durable data; see storage.Repair and ARCHITECTURE.md,
// crash-consistency rule 4.
func Repair(cfg RepairConfig) (RepairReport, error) {
	out := cfg.LogOutput
	if out == nil {
		out = os.Stderr
	}
	if cfg.DataDir == "" {
		return RepairReport{}, fmt.Errorf("%w: --data-dir is empty", ErrInvalidConfig)
	}
	opts := DefaultConfig().Storage
	opts.Dir = cfg.DataDir
	opts.SegmentSize = cfg.SegmentSize
	opts.AwaitRetentionPolicy = true // no retention pass while the repair has the store open
	opts.ScrubRate = -1
	opts.Logger = zerolog.New(zerolog.ConsoleWriter{Out: out, NoColor: true}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	return storage.Repair(storage.RepairOptions{Store: opts, Apply: cfg.Apply})
}

// repairHint adds to a refusal to open a damaged store the command that
// shows (and makes) the repair.
func repairHint(err error, dataDir string) error {
	if !errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w\nthe intact data can be kept: run 'mqgate repair --data-dir %s' to see what a repair keeps and loses (it changes nothing without --apply)", err, dataDir)
}
