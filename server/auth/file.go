package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
)

// DefaultPollInterval is how often a File looks at its file.
const DefaultPollInterval = time.Second

// racyWindow: a file modified this recently is read again on every poll
// even when its size and time stamp look unchanged, because file systems
// stamp modification times coarsely (a jiffy or worse) and two writes in
// one tick of the same size would otherwise be missed.
const racyWindow = 3 * time.Second

// FileOptions configure a File.
type FileOptions struct {
	// PollInterval is how often the file is looked at (default
	// DefaultPollInterval).
	PollInterval time.Duration
	// Logger receives reloads and their failures (default: none).
	Logger zerolog.Logger
	// Metrics, when not nil, counts reloads.
	Metrics *Metrics
}

// File is an ACL file kept loaded: ACL returns the last good version,
// and a poller started by Start reloads the file when it changes.
//
// Reload is polling, not file-system notification: a stat per interval
// (and a read only when the stat or the racy window says the file may have
// changed) costs nothing, needs no dependency, and sees every way a file
// gets replaced — an editor's rename over it, a Kubernetes ConfigMap or
// Secret swapping its ..data symlink, a network file system — where
// inotify watches of the file itself go stale. The price is up to one
// interval of delay.
//
// A version that does not load (it does not parse, or its mode is
// refused) leaves the last good ACL in force; the error is logged once
// and reported by Degraded until a good version loads.
type File struct {
	path string
	opts FileOptions

	current atomic.Pointer[ACL]

	mu sync.Mutex
	// stamp is the stat of the last version read.
	stamp fileStamp
	// lastErr is why the newest version did not load (nil when it did).
	lastErr error
	// loadedAt is when the current ACL was loaded.
	loadedAt time.Time

	// started is set by Start (under mu).
	poller *worker.Periodic // the poll loop (Start, Stop)
}

// fileStamp is what a stat says about a version of the file.
type fileStamp struct {
	size    int64
	modTime time.Time
	mode    os.FileMode
	inode   uint64
	device  uint64
}

// OpenFile loads path; an error (the file is missing, unreadable, refused
// for its mode or invalid) means no ACL at all.
func OpenFile(path string, opts FileOptions) (*File, error) {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	opts.Logger = opts.Logger.With().Str("component", "acl").Str("acl_file", path).Logger()
	f := &File{path: path, opts: opts}
	f.poller = worker.Every(opts.PollInterval, func(context.Context, time.Time) { f.runOnce() })
	stamp, data, err := f.read()
	if err != nil {
		return nil, fmt.Errorf("acl file %s: %w", path, err)
	}
	acl, err := f.load(stamp, data)
	if err != nil {
		return nil, fmt.Errorf("acl file %s: %w", path, err)
	}
	f.install(acl, stamp, time.Now())
	return f, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// ACL returns the ACL in force. It never returns nil.
func (f *File) ACL() *ACL { return f.current.Load() }

// Degraded says why the newest version of the file is not in force, or
// nothing when it is.
func (f *File) Degraded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lastErr == nil {
		return nil
	}
	return []string{fmt.Sprintf("acl file %s: %v; serving the version loaded at %s",
		f.path, f.lastErr, f.loadedAt.UTC().Format(time.RFC3339))}
}

// Start polls the file every PollInterval until Stop (a worker.Every
// whose pass is runOnce). Only the first call does anything.
func (f *File) Start() { f.poller.Start(context.Background()) }

// Stop ends the poller and waits for it; it is idempotent.
func (f *File) Stop() { f.poller.Stop() }

// ReloadResult is what one poll did.
type ReloadResult struct {
	// Reloaded: a new ACL is in force.
	Reloaded bool
	// Err is why the version read did not load.
	Err error
}

// runOnce looks at the file once and reloads it when its content changed.
func (f *File) runOnce() ReloadResult {
	f.mu.Lock()
	old, failing := f.stamp, f.lastErr != nil
	f.mu.Unlock()
	if info, err := os.Stat(f.path); err == nil {
		if s := stampOf(info); s == old && !failing && time.Since(s.modTime) > racyWindow {
			return ReloadResult{}
		}
	}
	stamp, data, err := f.read()
	current := f.ACL()
	if err == nil && sha256.Sum256(data) == current.digest {
		// The same content (touched, or rewritten identically): only the
		// mode may have changed.
		if err = checkMode(stamp.mode, current.hasPlainSecret); err == nil {
			f.mu.Lock()
			f.stamp, f.lastErr = stamp, nil
			f.mu.Unlock()
			return ReloadResult{}
		}
	}
	var acl *ACL
	if err == nil {
		acl, err = f.load(stamp, data)
	}
	if err != nil {
		f.mu.Lock()
		repeated := f.lastErr != nil && f.lastErr.Error() == err.Error()
		f.lastErr, f.stamp = err, stamp
		f.mu.Unlock()
		if !repeated {
			f.opts.Logger.Error().Err(err).Msg("acl file not reloaded; the last good version stays in force")
			f.opts.Metrics.reloaded(false)
		}
		return ReloadResult{Err: err}
	}
	f.install(acl, stamp, time.Now())
	f.opts.Metrics.reloaded(true)
	f.opts.Logger.Info().Int("accounts", len(acl.order)).Msg("acl file reloaded")
	return ReloadResult{Reloaded: true}
}

// install puts acl in force.
func (f *File) install(acl *ACL, stamp fileStamp, now time.Time) {
	f.current.Store(acl)
	f.mu.Lock()
	f.stamp, f.lastErr, f.loadedAt = stamp, nil, now
	f.mu.Unlock()
	f.opts.Metrics.loaded(acl, now)
}

// read stats and reads the file (through symlinks), bounded by MaxFileSize.
func (f *File) read() (fileStamp, []byte, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return fileStamp{}, nil, err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return fileStamp{}, nil, err
	}
	if !info.Mode().IsRegular() {
		return fileStamp{}, nil, fmt.Errorf("not a regular file (%s)", info.Mode())
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return fileStamp{}, nil, err
	}
	return stampOf(info), data, nil
}

// load parses data and checks the file's mode against its content.
func (f *File) load(stamp fileStamp, data []byte) (*ACL, error) {
	acl, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if err := checkMode(stamp.mode, acl.hasPlainSecret); err != nil {
		return nil, err
	}
	if err := checkDirs(f.path); err != nil {
		return nil, err
	}
	if stamp.mode.Perm()&0o044 != 0 && runtime.GOOS != "windows" {
		f.opts.Logger.Warn().Str("mode", fmt.Sprintf("%04o", stamp.mode.Perm())).
			Msg("the acl file is readable by group or others; it holds only hashes, but offline guessing of weak secrets is possible: chmod 600")
	}
	for _, k := range acl.order {
		if len(acl.accounts[k].secrets) == 0 {
			f.opts.Logger.Info().Str("account", k).Msg("account has no secretKey: it signs in with bearer tokens only")
		}
	}
	return acl, nil
}

// checkMode refuses a file anyone may write (anyone could make themselves
// admin), and a file holding plain secret keys that group or others may
// read. On Windows modes mean nothing and nothing is refused.
func checkMode(mode os.FileMode, plainSecret bool) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	perm := mode.Perm()
	switch {
	case perm&0o002 != 0:
		return fmt.Errorf("%w: mode %04o lets any user write the file (and make themselves admin): chmod 600 it", ErrFileMode, perm)
	case plainSecret && perm&0o044 != 0:
		return fmt.Errorf("%w: mode %04o lets group or others read the plain secretKey values in it: chmod 600 it, or replace secretKey by secretKeyHash", ErrFileMode, perm)
	}
	return nil
}

// checkDirs refuses an ACL file in a directory any user may write
// without the sticky bit — the file's own, and the one it resolves to
// through symlinks (a Kubernetes volume's ..data): anyone could rename
// another file over it. (A sticky directory, like a Kubernetes volume's
// root or /tmp, lets users replace only their own files.)
func checkDirs(path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil {
			continue
		}
		if m := info.Mode(); m.Perm()&0o002 != 0 && m&os.ModeSticky == 0 {
			return fmt.Errorf("%w: the directory %s (mode %04o) lets any user replace the file (and make themselves admin): chmod o-w it, or move the file to a directory only its owner may write",
				ErrFileMode, dir, m.Perm())
		}
	}
	return nil
}

func stampOf(info os.FileInfo) fileStamp {
	s := fileStamp{size: info.Size(), modTime: info.ModTime(), mode: info.Mode()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		s.inode, s.device = uint64(st.Ino), uint64(st.Dev) //nolint:unconvert // widths differ per platform
	}
	return s
}
