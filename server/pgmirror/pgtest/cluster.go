package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a throwaway PostgreSQL cluster (initdb + pg_ctl) on a free
// loopback port, for tests that stop and restart the database (PostgreSQL outages). It
// never touches the shared cluster of TEST_DATABASE_URL. As root, the
// binaries run as the postgres user (PostgreSQL refuses root) on a data
// dir that user owns under the system temp dir.
type Cluster struct {
	t    testing.TB
	bin  string
	dir  string // owned by the cluster's user: data/, log, socket
	port int
	asPG bool
}

// NewCluster initialises and starts a cluster, stopped and removed when
// the test ends. Without PostgreSQL's server binaries the test is skipped,
// or failed when CI is set.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("pgtest: no PostgreSQL server binaries under /usr/lib/postgresql, and CI is set")
		}
		t.Skip("pgtest: no PostgreSQL server binaries under /usr/lib/postgresql")
	}
	sort.Slice(bins, func(i, j int) bool { return versionOf(bins[i]) < versionOf(bins[j]) })
	c := &Cluster{t: t, bin: filepath.Dir(bins[len(bins)-1]), port: freePort(t), asPG: os.Geteuid() == 0}
	dir, err := os.MkdirTemp("", "mqgate-pg-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	c.dir = dir
	t.Cleanup(func() {
		_ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	if c.asPG {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if err := c.run("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		t.Fatalf("pgtest: initdb: %v", err)
	}
	c.Start()
	return c
}

// versionOf extracts the major version from /usr/lib/postgresql/N/bin/x.
func versionOf(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// run runs a PostgreSQL binary (as the postgres user when root).
func (c *Cluster) run(name string, args ...string) error {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.asPG {
		quoted := make([]string, 0, len(args)+1)
		for _, a := range append([]string{path}, args...) {
			quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
		}
		cmd = exec.Command("su", "postgres", "-s", "/bin/sh", "-c", strings.Join(quoted, " "))
	} else {
		cmd = exec.Command(path, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// URL is the cluster's connection URL (database postgres, trust auth).
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the cluster and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.dir)
	if err := c.run("pg_ctl", "-D", c.data(), "-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "start"); err != nil {
		c.t.Fatalf("pgtest: start cluster: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL())
		if err == nil {
			_ = conn.Close(ctx)
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("pgtest: cluster does not answer: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the cluster; mode "immediate" is a crash (no checkpoint, every
// connection cut), "fast" a clean shutdown.
func (c *Cluster) Stop(mode string) {
	c.t.Helper()
	if err := c.run("pg_ctl", "-D", c.data(), "-m", mode, "-w", "stop"); err != nil {
		c.t.Fatalf("pgtest: stop cluster: %v", err)
	}
}
