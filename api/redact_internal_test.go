package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRedactURL: user info and the values of credential-like query
// parameters are replaced; everything else (order, escaping, other
// parameters) stays; a redacted URL sent back gets its stored values.
func TestRedactURL(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"https://h.example/p?a=1&b=2", "https://h.example/p?a=1&b=2"},
		{"https://h.example/p?access_token=t1&sig=s2&Signature=s3&client_secret=c&author=me&postcode=1",
			"https://h.example/p?access_token=REDACTED&sig=REDACTED&Signature=REDACTED&client_secret=REDACTED&author=me&postcode=1"},
		{"https://h.example/p?X-Amz-Credential=AK%2F1&X-Amz-Signature=ab&X-Amz-Date=2026", "https://h.example/p?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Date=2026"},
		{"https://h.example/p?api-key=1&apikey=2&password=3&auth=4&flag", "https://h.example/p?api-key=REDACTED&apikey=REDACTED&password=REDACTED&auth=REDACTED&flag"},
		{"https://user:pw@h.example/", "https://REDACTED@h.example/"},
	} {
		got, redacted := redactURL(c.in)
		require.Equal(t, c.out, got)
		require.Equal(t, c.in != c.out, redacted, c.in)
		if u := c.in; redacted && !hasUserInfo(u) {
			require.Equal(t, c.in, restoreRedacted(got, c.in), "sent back as shown")
		}
	}
	stored := "https://h.example/p?token=t1&token=t2"
	require.Equal(t, stored, restoreRedacted("https://h.example/p?token=REDACTED&token=REDACTED", stored))
	require.Equal(t, "https://other.example/p?token=REDACTED", restoreRedacted("https://other.example/p?token=REDACTED", stored), "another endpoint gets nothing")
	require.Equal(t, "https://h.example/p?key=REDACTED", restoreRedacted("https://h.example/p?key=REDACTED", stored), "another parameter gets nothing")
}

// hasUserInfo reports a URL with user info.
func hasUserInfo(u string) bool {
	for i := 0; i < len(u); i++ {
		if u[i] == '@' {
			return true
		}
	}
	return false
}
