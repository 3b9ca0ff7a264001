package server_test

// End-to-end tests of how the server keeps secrets: push URLs shown with
// their credentials redacted (and kept when sent back redacted), push
// URLs that reach forbidden addresses refused when the group is saved,
// the data dir's secrets readable by their owner only, and the registry
// records (which hold push secrets) never shown as messages.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestE2EPushURLRedacted: GET and PUT answers show a push URL with the
// values of credential-like query parameters replaced by REDACTED (and
// urlRedacted set); a PUT or PATCH that sends the redacted URL back keeps
// the stored values, which the receiver still gets.
func TestE2EPushURLRedacted(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var queries []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer receiver.Close()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/hooks", map[string]int{"queues": 1}), http.StatusCreated, nil)

	query := "token=abc123secret&region=eu&X-Amz-Signature=zzz9sig&api_key=k77key&page=2"
	hookURL := receiver.URL + "/hook?" + query
	var g api.Group
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/hooked", map[string]any{
		"subscriptions": []map[string]string{{"topic": "hooks"}},
		"push":          map[string]any{"url": hookURL},
	}), http.StatusCreated, &g)
	shown := receiver.URL + "/hook?token=REDACTED&region=eu&X-Amz-Signature=REDACTED&api_key=REDACTED&page=2"
	require.Equal(t, shown, g.Push.URL)
	require.True(t, g.Push.URLRedacted)

	got := e.Get(t, "/v1/groups/hooked")
	for _, secret := range []string{"abc123secret", "zzz9sig", "k77key"} {
		require.NotContains(t, string(got.Body), secret)
	}
	servertest.Decode(t, got, http.StatusOK, &g)
	require.Equal(t, shown, g.Push.URL)

	// Written back as read, with one change: the stored values stay.
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/hooked", map[string]any{
		"subscriptions": []map[string]string{{"topic": "hooks"}},
		"push":          map[string]any{"url": g.Push.URL, "maxConcurrency": 2},
	}), http.StatusOK, &g)
	require.Equal(t, shown, g.Push.URL)
	servertest.Decode(t, e.Do(t, http.MethodPatch, "/v1/groups/hooked", "application/merge-patch+json",
		[]byte(`{"push":{"url":"`+shown+`","timeoutMs":5000}}`), nil), http.StatusOK, &g)
	require.Equal(t, int64(5000), g.Push.TimeoutMs)

	e.Send(t, "hooks", api.SendMessage{Body: "to the hook"})
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(queries) > 0, "no push yet"
	})
	mu.Lock()
	require.Equal(t, query, queries[0], "the receiver gets the stored credentials")
	mu.Unlock()

	// A URL without credentials is shown as it is.
	g = api.Group{}
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/plain-hook", map[string]any{
		"subscriptions": []map[string]string{{"topic": "hooks"}},
		"push":          map[string]any{"url": receiver.URL + "/hook?page=2", "disabled": true},
	}), http.StatusCreated, &g)
	require.Equal(t, receiver.URL+"/hook?page=2", g.Push.URL)
	require.False(t, g.Push.URLRedacted)
}

// loopbackName is a name /etc/hosts maps to a 127.x address, other than
// localhost (which needs no lookup), or "".
func loopbackName(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/etc/hosts")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.SplitN(sc.Text(), "#", 2)[0])
		if len(fields) < 2 || !strings.HasPrefix(fields[0], "127.") {
			continue
		}
		for _, name := range fields[1:] {
			if !strings.Contains(name, "localhost") {
				return name
			}
		}
	}
	return ""
}

// TestE2EPushURLCheckedAtSave: a push URL whose host is a numeric form
// resolvers read as an IPv4 address, a cloud metadata name, or a name
// that resolves to a denied address is refused by the PUT or PATCH that
// would save it.
func TestE2EPushURLCheckedAtSave(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) { c.PushDenyPrivate = true })
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/hooks", map[string]int{"queues": 1}), http.StatusCreated, nil)
	put := func(url string) servertest.Resp {
		return e.JSON(t, http.MethodPut, "/v1/groups/ssrf", map[string]any{
			"subscriptions": []map[string]string{{"topic": "hooks"}},
			"push":          map[string]any{"url": url},
		})
	}
	cases := map[string]string{
		"http://2852039166/latest/meta-data/":                 "numeric form",
		"http://0xa9fea9fe/":                                  "numeric form",
		"http://0251.0376.0251.0376/":                         "numeric form",
		"http://169.254.43518/":                               "numeric form",
		"http://metadata.google.internal/computeMetadata/v1/": "cloud metadata service",
		"http://[::ffff:169.254.169.254]/":                    "cloud metadata address",
		"http://[fe80::1%25eth0]:8080/":                       "link-local",
		"http://127.0.0.1:9/":                                 "loopback",
	}
	if name := loopbackName(t); name != "" {
		cases["http://"+name+":9/hook"] = "(" + name + ") is loopback"
	}
	for url, want := range cases {
		p := servertest.WantProblem(t, put(url), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, want, url)
	}
	// A name that does not resolve now is left to delivery.
	servertest.Decode(t, put("http://hooks.invalid/x"), http.StatusCreated, nil)
	// PATCH checks with the same lookup.
	if name := loopbackName(t); name != "" {
		p := servertest.WantProblem(t, e.Do(t, http.MethodPatch, "/v1/groups/ssrf", "application/merge-patch+json",
			[]byte(`{"push":{"url":"http://`+name+`:9/"}}`), nil), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "loopback")
	}
}

// modeOf is the permission bits of path.
func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Mode().Perm()
}

// TestE2EDataDirModes: the data dir and its config dir are 0700 and the
// receipt keyring and the group snapshot (push secrets) 0600; a data dir left
// 0755/0644 by an older version is restricted at start.
func TestE2EDataDirModes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	cfg := servertest.Config(t, dir)
	e := openE2E(t, cfg)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/secretive", map[string]any{"push": map[string]any{"url": "http://hooks.invalid/", "disabled": true}}), http.StatusCreated, nil)
	config := filepath.Join(dir, "config")
	check := func() {
		require.Equal(t, os.FileMode(0o700), modeOf(t, dir))
		require.Equal(t, os.FileMode(0o700), modeOf(t, config))
		require.Equal(t, os.FileMode(0o600), modeOf(t, filepath.Join(config, "receipt-keys.json")))
		entries, err := os.ReadDir(config)
		require.NoError(t, err)
		for _, entry := range entries {
			require.Equal(t, os.FileMode(0o600), modeOf(t, filepath.Join(config, entry.Name())), entry.Name())
		}
	}
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(config, "groups.json"))
		return err == nil, fmt.Sprint(err)
	})
	check()
	e.Close(t)

	// As an older version left it.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(config, 0o755))
	require.NoError(t, os.Chmod(filepath.Join(config, "receipt-keys.json"), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(config, "groups.json"), 0o644))
	openE2E(t, cfg)
	check()
}

// TestE2ERegistryRecordsAreNotMessages: the registry record a group's
// PUT writes into the CommitLog (with its push secret) is no message: a
// lookup of its id is a 404 and shows nothing of it.
func TestE2ERegistryRecordsAreNotMessages(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	var g api.Group
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/secretive", map[string]any{"push": map[string]any{"url": "http://hooks.invalid/", "disabled": true}}), http.StatusCreated, &g)
	sent := e.Send(t, "after", api.SendMessage{Body: "user message"})
	// The same store host, at CommitLog offset 0: the first record, which
	// is bookkeeping (no user message came before the send above).
	host := sent.MessageID[:16]
	r := e.Get(t, "/v1/messages/"+host+"0000000000000000")
	servertest.WantProblem(t, r, http.StatusNotFound, "message-not-found")
	require.NotContains(t, string(r.Body), "whsec_")
	var m api.PulledMessage
	servertest.Decode(t, e.Get(t, "/v1/messages/"+sent.MessageID), http.StatusOK, &m)
	require.Equal(t, "user message", m.Body)
}
