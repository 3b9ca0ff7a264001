//go:build !linux

package storagetest

import "testing"

// MountTmpfs skips: mounting a tmpfs is Linux only.
func MountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	t.Skip("tmpfs mounts are Linux only")
	return ""
}

// Usage skips: see MountTmpfs.
func Usage(t testing.TB, dir string) float64 {
	t.Helper()
	t.Skip("statfs helpers are Linux only")
	return 0
}

// FillTo skips: see MountTmpfs.
func FillTo(t testing.TB, path string, frac float64) {
	t.Helper()
	t.Skip("filling a file system is Linux only")
}
