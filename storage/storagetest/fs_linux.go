//go:build linux

package storagetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size bytes on a fresh temporary directory
// and unmounts it when the test ends: a small real file system that a test
// can fill. It skips the test unless it runs as root (mount(2) needs
// CAP_SYS_ADMIN). Open stores on it below the returned directory.
func MountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Skipf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Usage is the used fraction of the file system holding dir, as the store
// computes it (df).
func Usage(t testing.TB, dir string) float64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	used := float64(st.Blocks-st.Bfree) * float64(st.Bsize)
	avail := float64(st.Bavail) * float64(st.Bsize)
	return used / (used + avail)
}

// FillTo grows the filler file at path until the file system holding it
// is at least frac used (frac >= 1: until it is full), the way another
// process sharing the disk would: the bytes are written by dd, a separate
// process. Shrinking or removing the file gives the space back.
func FillTo(t testing.TB, path string, frac float64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	const block = 4096
	used := int64(st.Blocks-st.Bfree) * int64(st.Bsize)
	total := used + int64(st.Bavail)*int64(st.Bsize)
	args := []string{"if=/dev/zero", "of=" + path, fmt.Sprintf("bs=%d", block), "oflag=append", "conv=notrunc,fsync"}
	if frac < 1 {
		need := int64(frac*float64(total)) - used
		if need <= 0 {
			return
		}
		args = append(args, fmt.Sprintf("count=%d", (need+block-1)/block))
	}
	out, err := exec.Command("dd", args...).CombinedOutput()
	if err != nil && !(frac >= 1 && strings.Contains(string(out), "No space left")) {
		t.Fatalf("dd %v: %v: %s", args, err, out)
	}
}
