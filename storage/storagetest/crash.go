package storagetest

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// CrashRecorder records every file operation of a store (and of its
// user's files written through the store's FS) in a directory and turns
// moments of the run into crash images: what a power loss there could
// leave on the device (see vfs.FaultFS for the model). A test opens the
// store with Options.FS = r.FS(), runs a workload, and checks recovery
// from every image with ForEachImage.
type CrashRecorder struct {
	fs *vfs.FaultFS

	mu       sync.Mutex
	barriers int
}

// NewCrashRecorder records below dir (an existing directory, empty or
// holding files that count as durable). Crash points are taken before and
// after every every-th barrier (fdatasync, msync, directory fsync) and
// rename; every <= 0 takes none until Capture is called.
func NewCrashRecorder(t testing.TB, dir string, every int) *CrashRecorder {
	t.Helper()
	fs, err := vfs.NewFaultFS(vfs.OS(), dir)
	if err != nil {
		t.Fatalf("crash recorder on %s: %v", dir, err)
	}
	r := &CrashRecorder{fs: fs}
	if every > 0 {
		r.Every(every)
	}
	return r
}

// FS is the recording file system, for storage.Options.FS.
func (r *CrashRecorder) FS() vfs.FS { return r.fs }

// Every takes a crash point around every every-th barrier or rename from
// now on (0 stops taking them).
func (r *CrashRecorder) Every(every int) {
	r.fs.SetCapture(func(e vfs.Event) bool {
		if every <= 0 || (!e.IsBarrier() && e.Op != vfs.OpRename) {
			return false
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if e.Before {
			r.barriers++
		}
		return r.barriers%every == 0
	})
}

// Label sets what every later crash point records as its Label: f runs
// with the recorder's lock held, so it must be quick and must not touch
// the store. Record what was acknowledged before the point (a count of an
// append-only list is enough): those acknowledgements must survive it.
func (r *CrashRecorder) Label(f func() any) { r.fs.SetLabel(f) }

// Capture takes a crash point now with the given label.
func (r *CrashRecorder) Capture(label any) *vfs.CrashPoint {
	p := r.fs.Snapshot()
	p.Label = label
	return p
}

// Points are the crash points taken so far, oldest first.
func (r *CrashRecorder) Points() []*vfs.CrashPoint { return r.fs.Points() }

// Ops reports how many file operations were recorded.
func (r *CrashRecorder) Ops() int {
	n, _ := r.fs.Ops()
	return n
}

// SweepLimits bounds a sweep: at most Points crash points (spread evenly
// over the run, always with the last), at most PerPoint images of each
// (sampled with Seed when there are more).
type SweepLimits struct {
	Points   int
	PerPoint int
	Seed     uint64
}

// ForEachImage writes each image of the given crash points (bounded by
// lim) into a fresh directory and calls check there with the point's
// label and the image's name; the directory is removed afterwards. It
// returns how many images were checked.
func ForEachImage(t testing.TB, points []*vfs.CrashPoint, lim SweepLimits, check func(t testing.TB, dir string, label any, image string)) int {
	t.Helper()
	if lim.Points > 0 && len(points) > lim.Points {
		picked := make([]*vfs.CrashPoint, 0, lim.Points)
		for i := 0; i < lim.Points; i++ {
			picked = append(picked, points[i*(len(points)-1)/(lim.Points-1)])
		}
		points = picked
	}
	parent := imageParent(t)
	n := 0
	for _, p := range points {
		for _, im := range p.Images(lim.PerPoint, lim.Seed) {
			dir, err := os.MkdirTemp(parent, "image-")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Materialize(im, dir); err != nil {
				t.Fatalf("materialize point %d image %s: %v", p.N, im.Name, err)
			}
			check(t, dir, p.Label, pointName(p, im))
			n++
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if t.Failed() {
				return n
			}
		}
	}
	return n
}

func pointName(p *vfs.CrashPoint, im vfs.Image) string {
	e := p.Event
	when := "after"
	if e.Before {
		when = "before"
	}
	if e.Op == 0 && e.Path == "" {
		return "op " + strconv.Itoa(p.N) + " image " + im.Name
	}
	return "op " + strconv.Itoa(p.N) + " (" + when + " " + e.Op.String() + " " + e.Path + ") image " + im.Name
}

// imageParent is a fresh directory for crash images: on a RAM file system
// when there is one (/dev/shm), since every image is opened by a store
// that fsyncs, and thrown away.
func imageParent(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "mqgate-crash-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// Event is a recorded file operation, as CaptureWhen's predicate sees it.
type Event = vfs.Event

// The operations an Event names.
const (
	OpCreate      = vfs.OpCreate
	OpRename      = vfs.OpRename
	OpRemove      = vfs.OpRemove
	OpSyncDir     = vfs.OpSyncDir
	OpWrite       = vfs.OpWrite
	OpPreallocate = vfs.OpPreallocate
	OpSync        = vfs.OpSync
	OpMsync       = vfs.OpMsync
)

// CaptureWhen takes a crash point at every operation for which keep
// returns true (it runs with the recorder's lock held), replacing Every.
func (r *CrashRecorder) CaptureWhen(keep func(Event) bool) { r.fs.SetCapture(keep) }
