package auth

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// writeACL writes content to path with mode (replacing the file).
func writeACL(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
	require.NoError(t, os.Chmod(path, mode))
}

func oneAccount(key, secret string) string {
	return "accounts:\n  - accessKey: " + key + "\n    secretKey: " + secret + "\n    admin: true\n"
}

func TestFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeACL(t, path, oneAccount("first", "secret-aaaa"), 0o600)
	f, err := OpenFile(path, FileOptions{})
	require.NoError(t, err)
	require.NotNil(t, f.ACL().Account("first"))
	require.Empty(t, f.Degraded())
	require.Equal(t, ReloadResult{}, f.runOnce(), "unchanged")

	t.Run("ChangeIsLoaded", func(t *testing.T) {
		writeACL(t, path, oneAccount("second", "secret-aaaa"), 0o600)
		require.True(t, f.runOnce().Reloaded)
		require.Nil(t, f.ACL().Account("first"))
		require.NotNil(t, f.ACL().Account("second"))
	})
	t.Run("SameSizeRewriteInOneTick", func(t *testing.T) {
		// Same length, written right after the previous version: the
		// racy window makes the poll read it anyway.
		writeACL(t, path, oneAccount("second", "secret-bbbb"), 0o600)
		require.True(t, f.runOnce().Reloaded)
		require.True(t, f.ACL().Account("second").secrets[0].verify([]byte("secret-bbbb")))
	})
	t.Run("InvalidKeepsTheLastGood", func(t *testing.T) {
		before := f.ACL()
		writeACL(t, path, "accounts:\n  - accessKey: second\n    secretKey: secret-cccc\n    admin: maybe\n", 0o600)
		res := f.runOnce()
		require.ErrorIs(t, res.Err, ErrInvalidACL)
		require.Same(t, before, f.ACL())
		d := f.Degraded()
		require.Len(t, d, 1)
		require.Contains(t, d[0], "acl file "+path+": auth: invalid acl: line 4")
		require.Contains(t, d[0], "serving the version loaded at")
		require.NotContains(t, d[0], "secret-cccc")
		// Polling the same bad version again changes nothing.
		require.ErrorIs(t, f.runOnce().Err, ErrInvalidACL)
		require.Same(t, before, f.ACL())
	})
	t.Run("DeletedKeepsTheLastGood", func(t *testing.T) {
		before := f.ACL()
		require.NoError(t, os.Remove(path))
		require.ErrorIs(t, f.runOnce().Err, os.ErrNotExist)
		require.Same(t, before, f.ACL())
		require.Contains(t, f.Degraded()[0], "no such file")
	})
	t.Run("FixedClearsDegraded", func(t *testing.T) {
		writeACL(t, path, oneAccount("third", "secret-dddd"), 0o600)
		require.True(t, f.runOnce().Reloaded)
		require.NotNil(t, f.ACL().Account("third"))
		require.Empty(t, f.Degraded())
	})
	t.Run("ModeRefusedOnReload", func(t *testing.T) {
		before := f.ACL()
		require.NoError(t, os.Chmod(path, 0o644))
		require.ErrorIs(t, f.runOnce().Err, ErrFileMode)
		require.Same(t, before, f.ACL(), "the ACL stays; the new mode is reported")
		require.Contains(t, f.Degraded()[0], "chmod 600")
		require.NoError(t, os.Chmod(path, 0o600))
		require.Equal(t, ReloadResult{}, f.runOnce())
		require.Empty(t, f.Degraded())
	})
}

func TestFileModes(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed-secret"), bcrypt.MinCost)
	require.NoError(t, err)
	hashed := "accounts:\n  - accessKey: h\n    secretKeyHash: \"" + string(hash) + "\"\n"
	plain := oneAccount("p", "plain-secret")
	cases := []struct {
		name    string
		content string
		mode    os.FileMode
		ok      bool
	}{
		{"PlainOwnerOnly", plain, 0o600, true},
		{"PlainReadOnly", plain, 0o400, true},
		{"PlainGroupReadable", plain, 0o640, false},
		{"PlainWorldReadable", plain, 0o644, false},
		{"HashesWorldReadable", hashed, 0o644, true},
		{"HashesWorldWritable", hashed, 0o666, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".yml")
			writeACL(t, path, c.content, c.mode)
			_, err := OpenFile(path, FileOptions{})
			if c.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrFileMode)
				require.Contains(t, err.Error(), path)
			}
		})
	}
	_, err = OpenFile(filepath.Join(dir, "missing.yml"), FileOptions{})
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = OpenFile(dir, FileOptions{})
	require.ErrorContains(t, err, "not a regular file")
}

func TestFilePollerStartStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.yml")
	writeACL(t, path, oneAccount("first", "secret-aaaa"), 0o600)
	f, err := OpenFile(path, FileOptions{PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	f.Start()
	f.Start()
	writeACL(t, path, oneAccount("later", "secret-aaaa"), 0o600)
	require.Eventually(t, func() bool { return f.ACL().Account("later") != nil }, 5*time.Second, 5*time.Millisecond)
	f.Stop()
	f.Stop()

	g, err := OpenFile(path, FileOptions{})
	require.NoError(t, err)
	g.Stop() // never started
}

// TestFileDirectoryModes: an ACL file in a directory any user may write
// is refused (anyone could rename a file of their own over it), also when
// the file is reached through a symlink; a sticky directory is fine.
func TestFileDirectoryModes(t *testing.T) {
	content := oneAccount("p", "plain-secret")
	for _, c := range []struct {
		name string
		mode os.FileMode
		ok   bool
	}{
		{"OwnerOnly", 0o700, true},
		{"WorldReadable", 0o755, true},
		{"WorldWritable", 0o777, false},
		{"WorldWritableSticky", 0o777 | os.ModeSticky, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "acl")
			require.NoError(t, os.Mkdir(dir, 0o700))
			path := filepath.Join(dir, "plain_acl.yml")
			writeACL(t, path, content, 0o600)
			require.NoError(t, os.Chmod(dir, c.mode))
			_, err := OpenFile(path, FileOptions{})
			// Through a symlink from a safe directory, as Kubernetes mounts.
			link := filepath.Join(t.TempDir(), "plain_acl.yml")
			require.NoError(t, os.Symlink(path, link))
			_, linkErr := OpenFile(link, FileOptions{})
			if c.ok {
				require.NoError(t, err)
				require.NoError(t, linkErr)
				return
			}
			require.ErrorIs(t, err, ErrFileMode)
			require.ErrorContains(t, err, "lets any user replace the file")
			require.ErrorIs(t, linkErr, ErrFileMode)
		})
	}
}
