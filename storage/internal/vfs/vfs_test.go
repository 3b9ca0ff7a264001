package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOSFileLifecycle(t *testing.T) {
	t.Parallel()
	fs := OS()
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	f, err := fs.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(1 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if off, err := f.SeekData(0); err != nil || off != -1 && off != 0 {
		t.Fatalf("SeekData on a fresh preallocated file = %d, %v", off, err)
	}
	m, err := f.Map(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	copy(m.Bytes()[4096:], "hello")
	if err := m.Sync(4096, 4101); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmap(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 4096); err != nil || string(buf) != "hello" {
		t.Fatalf("read back %q, %v", buf, err)
	}
	if off, err := f.SeekData(0); err != nil || off > 4096 {
		t.Fatalf("SeekData = %d, %v; want <= 4096", off, err)
	}
	if end, err := f.SeekHole(4096); err != nil || end <= 4096 {
		t.Fatalf("SeekHole = %d, %v; want > 4096", end, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(path + ".2"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove(path + ".2"); err != nil {
		t.Fatal(err)
	}
}

func TestErrorFSInjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var failing Op
	var seen []Op
	fs := NewErrorFS(OS(), InjectorFunc(func(op Op, path string) error {
		seen = append(seen, op)
		if op == failing {
			return ErrInjected
		}
		return nil
	}))
	failing = OpMsync
	f, err := fs.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(4096); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(0, 4096); !errors.Is(err, ErrInjected) {
		t.Fatalf("msync: %v, want ErrInjected", err)
	}
	failing = OpUnmap
	if err := m.Unmap(); !errors.Is(err, ErrInjected) {
		t.Fatalf("unmap: %v", err)
	}
	failing = OpSync
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("sync: %v", err)
	}
	failing = OpClose
	if err := f.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("close: %v", err)
	}
	failing = OpCreate
	if _, err := fs.Create(filepath.Join(dir, "g")); !errors.Is(err, ErrInjected) {
		t.Fatalf("create: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "g")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a failed create must not create the file")
	}
	want := []Op{OpCreate, OpPreallocate, OpMap, OpMsync, OpUnmap, OpSync, OpClose, OpCreate}
	if len(seen) != len(want) {
		t.Fatalf("ops %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("op %d = %v, want %v", i, seen[i], want[i])
		}
	}
	if OpMsync.String() != "msync" || Op(200).String() != "unknown" {
		t.Fatal("Op.String")
	}
}
