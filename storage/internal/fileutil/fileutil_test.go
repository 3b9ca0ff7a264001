package fileutil

import (
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNumberedNames(t *testing.T) {
	for _, n := range []int64{0, 1, 1 << 30, math.MaxInt64} {
		name := NumberedName(n)
		if len(name) != NumberedNameWidth {
			t.Fatalf("NumberedName(%d) = %q: not %d digits", n, name, NumberedNameWidth)
		}
		if got, ok := ParseNumberedName(name); !ok || got != n {
			t.Fatalf("ParseNumberedName(%q) = %d, %v", name, got, ok)
		}
	}
	for _, bad := range []string{"", "1", "0000000000000000000a", "-0000000000000000001", "+0000000000000000001",
		"99999999999999999999", "000000000000000000001", "00000000000000000000.tmp"} {
		if n, ok := ParseNumberedName(bad); ok {
			t.Fatalf("ParseNumberedName(%q) = %d, accepted", bad, n)
		}
	}
}

// TestAllocate: Allocate gives a sparse file's range blocks without
// changing its size (or grows it when the range passes the end), and
// DiskBytes is the file system's size as df counts it.
func TestAllocate(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(64<<20))
	blocks := func() int64 {
		st, err := f.Stat()
		require.NoError(t, err)
		return st.Sys().(*syscall.Stat_t).Blocks * 512
	}
	require.Zero(t, blocks(), "a truncated file is sparse")
	ok, err := Allocate(f, 4<<20, 8<<20)
	require.NoError(t, err)
	if !ok {
		t.Skip("the file system cannot allocate ahead")
	}
	require.Equal(t, int64(8<<20), blocks())
	st, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(64<<20), st.Size(), "the size is kept")
	_, err = Allocate(f, 64<<20, 4096)
	require.NoError(t, err)
	st, err = f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(64<<20+4096), st.Size(), "a range past the end grows the file")
	total, err := DiskBytes(filepath.Dir(f.Name()))
	require.NoError(t, err)
	require.Greater(t, total, int64(64<<20))
}
