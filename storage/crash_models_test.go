package storage_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The explicit power-loss models: crash points only around the steps of
// one protocol, and their images (with LONG=1 every image of every point;
// the quick tier samples 50 points and 10 images of each). Each model also
// asserts that the states it is about were produced, so a change that
// stops producing them (or a recorder that stops modelling them) fails.

// modelRun records the sweep workload with crash points where keep says,
// checks every image as the sweep does, and requires an image in each
// state of need (named by classify).
func modelRun(t *testing.T, segSize int64, keep func(storagetest.Event) bool, classify func(img string) []string, need ...string) {
	t.Helper()
	dir := t.TempDir()
	rec := storagetest.NewCrashRecorder(t, dir, 0)
	rec.CaptureWhen(keep)
	opts, log := runSweepWorkload(t, rec, dir, 90, segSize)
	seen := map[string]int{}
	n := 0
	// A sample of the points (every one with LONG=1); while a state the
	// caller needs is missing from what was sampled (the points depend on
	// the allocator's timing), another sample, up to four.
	for seed := uint64(3); seed < 7; seed++ {
		lim := storagetest.SweepLimits{Points: 50, PerPoint: 10, Seed: seed}
		if os.Getenv("LONG") != "" {
			lim = storagetest.SweepLimits{} // every image of every point
		}
		n += storagetest.ForEachImage(t, rec.Points(), lim, func(t testing.TB, img string, label any, name string) {
			for _, s := range classify(img) {
				seen[s]++
			}
			checkSweepImage(t, img, opts, log.acks, label.(sweepLabel), name)
		})
		if os.Getenv("LONG") != "" || !slices.ContainsFunc(need, func(s string) bool { return seen[s] == 0 }) {
			break
		}
	}
	t.Logf("%d crash points, %d images recovered, states %v", len(rec.Points()), n, seen)
	for _, s := range need {
		if seen[s] == 0 {
			t.Errorf("no image with state %s", s)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestPowerLossDuringSegmentRoll: around the allocator's create,
// preallocate, fdatasync, rename and directory fsync of each new segment,
// and the first msync into it.
func TestPowerLossDuringSegmentRoll(t *testing.T) {
	modelRun(t, 8<<10, func(e storagetest.Event) bool {
		return strings.HasPrefix(e.Path, "commitlog") && e.Op != storagetest.OpWrite
	}, func(img string) []string {
		var out []string
		tmps, _ := filepath.Glob(filepath.Join(img, "commitlog", "*.tmp"))
		if len(tmps) > 0 {
			out = append(out, "tmp-not-renamed")
		}
		for _, tmp := range tmps {
			if st, err := os.Stat(tmp); err == nil && st.Size() == 0 {
				out = append(out, "tmp-not-preallocated")
			}
		}
		return out
	}, "tmp-not-renamed", "tmp-not-preallocated")
}

// TestPowerLossDuringCheckpoint: around the checkpoint's and the queue
// table's tmp write, fdatasync, rename and directory fsync.
func TestPowerLossDuringCheckpoint(t *testing.T) {
	modelRun(t, 12<<10, func(e storagetest.Event) bool {
		return strings.HasPrefix(e.Path, "checkpoint") || strings.HasPrefix(e.Path, "queues") || (e.Op == storagetest.OpSyncDir && e.Path == ".")
	}, func(img string) []string {
		var out []string
		if exists(filepath.Join(img, "checkpoint.tmp")) {
			out = append(out, "tmp-not-renamed")
			if b, _ := os.ReadFile(filepath.Join(img, "checkpoint.tmp")); len(b) > 0 && len(b) < 64 {
				out = append(out, "tmp-short")
			}
		}
		if exists(filepath.Join(img, "queues.tmp")) {
			out = append(out, "table-tmp-not-renamed")
		}
		if !exists(filepath.Join(img, "checkpoint")) {
			out = append(out, "no-checkpoint")
		} else if _, _, _, err := storage.CheckpointForTest(img); err != nil {
			out = append(out, "checkpoint-invalid")
		}
		return out
	}, "tmp-not-renamed", "table-tmp-not-renamed", "no-checkpoint")
}

// TestPowerLossDuringMetadataSnapshot: around WriteMeta's tmp write,
// fdatasync, rename and the fsync of config/: a torn tmp, a tmp never
// renamed, a rename the directory fsync did not cover (the old version
// comes back, which is allowed only until WriteMeta returned).
func TestPowerLossDuringMetadataSnapshot(t *testing.T) {
	modelRun(t, 12<<10, func(e storagetest.Event) bool {
		return strings.HasPrefix(e.Path, "config")
	}, func(img string) []string {
		var out []string
		tmp := filepath.Join(img, "config", "sweep.json.tmp")
		if b, err := os.ReadFile(tmp); err == nil {
			out = append(out, "tmp-not-renamed")
			if !json.Valid(b) {
				out = append(out, "tmp-torn")
			}
		}
		if b, err := os.ReadFile(filepath.Join(img, "config", "sweep.json")); err == nil {
			var m sweepMeta
			if json.Unmarshal(b, &m) == nil {
				out = append(out, "version")
			}
		} else {
			out = append(out, "missing")
		}
		return out
	}, "tmp-not-renamed", "tmp-torn", "missing")
}
