package vfs

import (
	"errors"
	"os"
)

// ErrInjected is the error an Injector returns when it has nothing more
// specific to say.
var ErrInjected = errors.New("vfs: injected error")

// Op names one kind of file-system operation, for error injection.
type Op uint8

// The operations an Injector sees.
const (
	OpCreate      Op = iota // FS.Create
	OpOpen                  // FS.OpenReadWrite
	OpRename                // FS.Rename
	OpRemove                // FS.Remove
	OpMkdirAll              // FS.MkdirAll
	OpReadDir               // FS.ReadDir
	OpStat                  // FS.Stat and File.Stat
	OpSyncDir               // FS.SyncDir
	OpRead                  // File.ReadAt
	OpWrite                 // File.WriteAt
	OpClose                 // File.Close
	OpPreallocate           // File.Preallocate, File.Allocate and File.PunchHole
	OpSync                  // File.Sync (fdatasync)
	OpSeek                  // File.SeekData and File.SeekHole
	OpMap                   // File.Map
	OpMsync                 // Mapping.Sync
	OpUnmap                 // Mapping.Unmap
	OpTruncate              // File.Truncate
)

var opNames = [...]string{
	OpCreate: "create", OpOpen: "open", OpRename: "rename", OpRemove: "remove",
	OpMkdirAll: "mkdirall", OpReadDir: "readdir", OpStat: "stat", OpSyncDir: "syncdir",
	OpRead: "read", OpWrite: "write", OpClose: "close", OpPreallocate: "preallocate",
	OpSync: "sync", OpSeek: "seek", OpMap: "map", OpMsync: "msync", OpUnmap: "unmap",
	OpTruncate: "truncate",
}

// String is the operation's lower-case name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "unknown"
}

// Injector decides whether an operation fails. MaybeError is called before
// the operation runs (with the path of the file or directory involved); a
// non-nil result is returned instead of running it. Injectors are called
// from several goroutines.
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// NewErrorFS wraps fs so that every operation first asks inj whether to
// fail. Failed operations have no effect (except Unmap and Close, which
// still release their resource so tests do not leak).
func NewErrorFS(fs FS, inj Injector) FS { return errorFS{fs: fs, inj: inj} }

type errorFS struct {
	fs  FS
	inj Injector
}

func (e errorFS) Create(name string) (File, error) {
	if err := e.inj.MaybeError(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return errorFile{f: f, inj: e.inj}, nil
}

func (e errorFS) CreatePerm(name string, perm os.FileMode) (File, error) {
	if err := e.inj.MaybeError(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.CreatePerm(name, perm)
	if err != nil {
		return nil, err
	}
	return errorFile{f: f, inj: e.inj}, nil
}

func (e errorFS) ReadFile(name string) ([]byte, error) {
	if err := e.inj.MaybeError(OpRead, name); err != nil {
		return nil, err
	}
	return e.fs.ReadFile(name)
}

func (e errorFS) RemoveAll(path string) error {
	if err := e.inj.MaybeError(OpRemove, path); err != nil {
		return err
	}
	return e.fs.RemoveAll(path)
}

func (e errorFS) OpenReadWrite(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return errorFile{f: f, inj: e.inj}, nil
}

func (e errorFS) Rename(oldname, newname string) error {
	if err := e.inj.MaybeError(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e errorFS) Remove(name string) error {
	if err := e.inj.MaybeError(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e errorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.inj.MaybeError(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e errorFS) ReadDir(dir string) ([]os.DirEntry, error) {
	if err := e.inj.MaybeError(OpReadDir, dir); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(dir)
}

func (e errorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.inj.MaybeError(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e errorFS) SyncDir(dir string) error {
	if err := e.inj.MaybeError(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

type errorFile struct {
	f   File
	inj Injector
}

func (e errorFile) Name() string { return e.f.Name() }

func (e errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := e.inj.MaybeError(OpRead, e.f.Name()); err != nil {
		return 0, err
	}
	return e.f.ReadAt(p, off)
}

func (e errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := e.inj.MaybeError(OpWrite, e.f.Name()); err != nil {
		return 0, err
	}
	return e.f.WriteAt(p, off)
}

func (e errorFile) Close() error {
	err := e.inj.MaybeError(OpClose, e.f.Name())
	if cerr := e.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (e errorFile) Stat() (os.FileInfo, error) {
	if err := e.inj.MaybeError(OpStat, e.f.Name()); err != nil {
		return nil, err
	}
	return e.f.Stat()
}

func (e errorFile) Preallocate(size int64) error {
	if err := e.inj.MaybeError(OpPreallocate, e.f.Name()); err != nil {
		return err
	}
	return e.f.Preallocate(size)
}

func (e errorFile) Sync() error {
	if err := e.inj.MaybeError(OpSync, e.f.Name()); err != nil {
		return err
	}
	return e.f.Sync()
}

func (e errorFile) Truncate(size int64) error {
	if err := e.inj.MaybeError(OpTruncate, e.f.Name()); err != nil {
		return err
	}
	return e.f.Truncate(size)
}

func (e errorFile) Allocate(off, n int64) (bool, error) {
	if err := e.inj.MaybeError(OpPreallocate, e.f.Name()); err != nil {
		return false, err
	}
	return e.f.Allocate(off, n)
}

func (e errorFile) PunchHole(off, n int64) (bool, error) {
	if err := e.inj.MaybeError(OpPreallocate, e.f.Name()); err != nil {
		return false, err
	}
	return e.f.PunchHole(off, n)
}

func (e errorFile) SeekData(off int64) (int64, error) {
	if err := e.inj.MaybeError(OpSeek, e.f.Name()); err != nil {
		return 0, err
	}
	return e.f.SeekData(off)
}

func (e errorFile) SeekHole(off int64) (int64, error) {
	if err := e.inj.MaybeError(OpSeek, e.f.Name()); err != nil {
		return 0, err
	}
	return e.f.SeekHole(off)
}

func (e errorFile) Map(size int) (Mapping, error) {
	if err := e.inj.MaybeError(OpMap, e.f.Name()); err != nil {
		return nil, err
	}
	m, err := e.f.Map(size)
	if err != nil {
		return nil, err
	}
	return errorMapping{m: m, name: e.f.Name(), inj: e.inj}, nil
}

type errorMapping struct {
	m    Mapping
	name string
	inj  Injector
}

func (e errorMapping) Bytes() []byte { return e.m.Bytes() }

func (e errorMapping) Sync(from, to int) error {
	if err := e.inj.MaybeError(OpMsync, e.name); err != nil {
		return err
	}
	return e.m.Sync(from, to)
}

func (e errorMapping) Unmap() error {
	err := e.inj.MaybeError(OpUnmap, e.name)
	if uerr := e.m.Unmap(); err == nil {
		err = uerr
	}
	return err
}
