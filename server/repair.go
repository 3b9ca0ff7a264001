package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

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
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft")); err == nil {
		// A repair keeps what is intact and cuts the rest: on a replica
		// that would drop entries it acknowledged, and let it vote with a
		// log shorter than the one it promised.
		return RepairReport{}, fmt.Errorf("%w: %s is a replica of a cluster (it has raft/): a damaged replica is rebuilt from the others, never repaired — %s",
			ErrInvalidConfig, cfg.DataDir, rebuildSteps(cfg.DataDir, 0))
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

// replicaHint is repairHint for a replica of a cluster: a damaged replica
// refuses to start (so it never votes) and is rebuilt, not repaired.
func replicaHint(err error, dataDir string, nodeID uint64) error {
	if !errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w\nthis replica's log is damaged, maybe below what it acknowledged: it does not start, so it never votes. %s", err, rebuildSteps(dataDir, nodeID))
}

// rebuildSteps says how a damaged replica is rebuilt (the README's
// "Replacing a node").
func rebuildSteps(dataDir string, nodeID uint64) string {
	id := "ID"
	if nodeID != 0 {
		id = fmt.Sprint(nodeID)
	}
	return fmt.Sprintf("rebuild it from the others: with it stopped, 'mqgate replica rebuild --data-dir %s --node-id %s --peers ... --server <another replica's URL>' "+
		"moves the data dir aside and adds it back as a learner; start it with --join, then 'mqgate cluster promote %s --wait 10m'", dataDir, id, id)
}

// PeerAddress is the peer address of replica nodeID in peers (--peers
// as serve takes it).
func PeerAddress(peers string, nodeID uint64) (string, error) {
	m, err := Config{NodeID: nodeID, Peers: peers}.peerMap()
	if err != nil {
		return "", err
	}
	return m[nodeID], nil
}

// SetReplicaAside moves a stopped replica's data dir aside (to
// dataDir.damaged-<UTC time>) and leaves it empty, for `mqgate replica
// rebuild`: the replica then starts with --join and receives the log from
// the others. It refuses a data dir a running server holds, and one that
// holds a single node's store (no raft/): that is repaired, not rebuilt.
// aside is "" when there was nothing to move (a missing or empty dir).
func SetReplicaAside(dataDir string, now time.Time) (aside string, err error) {
	if dataDir == "" {
		return "", fmt.Errorf("%w: --data-dir is empty", ErrInvalidConfig)
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if len(entries) == 0 || len(entries) == 1 && entries[0].Name() == "LOCK" {
		return "", os.MkdirAll(dataDir, 0o700)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft")); err != nil {
		return "", fmt.Errorf("%w: %s holds no replica (no raft/): a single node's store is repaired (mqgate repair), not rebuilt", ErrInvalidConfig, dataDir)
	}
	return storage.SetAside(dataDir, ".damaged-"+now.UTC().Format("20060102T150405Z"))
}
