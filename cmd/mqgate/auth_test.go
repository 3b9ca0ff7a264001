package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runMqgate runs the real binary with args and stdin and returns its
// combined output and exit error.
func runMqgate(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := cliCommand(t, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestProcessAuthWithCurl: `mqgate hash-secret` hashes a secret read from
// standard input; a server with that hash in its ACL file admits
// `curl -u account:secret` and refuses curl without credentials or with a
// wrong secret (401 with a Basic challenge).
func TestProcessAuthWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	hash, err := runMqgate(t, "curl-secret-42\n", "hash-secret")
	require.NoError(t, err, hash)
	hash = strings.TrimSpace(hash)
	require.True(t, strings.HasPrefix(hash, "$argon2id$v=19$"), hash)

	dir := t.TempDir()
	acl := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(acl, []byte("accounts:\n  - accessKey: curl-user\n    secretKeyHash: \""+hash+"\"\n    admin: true\n"), 0o600))
	p := startServer(t, filepath.Join(dir, "data"), freeAddr(t), "--acl-file", acl)

	curl := func(args ...string) string {
		out, err := exec.Command("curl", append([]string{"-sS", "-o", "/dev/null", "-w", "%{http_code} %header{www-authenticate}"}, args...)...).Output()
		require.NoError(t, err)
		return string(out)
	}
	require.Equal(t, "200 ", curl("-u", "curl-user:curl-secret-42", p.url("/v1/topics")))
	require.Equal(t, `401 Basic realm="mqgate", charset="UTF-8"`, curl(p.url("/v1/topics")))
	require.Equal(t, `401 Basic realm="mqgate", charset="UTF-8"`, curl("-u", "curl-user:wrong", p.url("/v1/topics")))
	require.Equal(t, "200 ", curl(p.url("/livez")))
}

// TestProcessRefusesAnOpenListenWithoutACL: `mqgate serve` on every
// interface without --acl-file exits 80 (usage error) and says what to do.
func TestProcessRefusesAnOpenListenWithoutACL(t *testing.T) {
	out, err := runMqgate(t, "", "serve", "--listen", "0.0.0.0:0", "--data-dir", t.TempDir())
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, out)
	require.Equal(t, 80, exit.ExitCode(), "a usage error: %s", out)
	require.Contains(t, out, "--acl-file")
	require.Contains(t, out, "--insecure-no-auth")

	out, err = runMqgate(t, "", "hash-secret")
	require.Error(t, err)
	require.Contains(t, out, "standard input")
}
