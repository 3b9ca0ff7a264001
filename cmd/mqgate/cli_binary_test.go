package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The CLI's commands (topic put, msg send, …) run as a real process. In a
// test binary built with -race, re-executing the test binary as mqgate
// costs about 0.7 s of CPU per command before it does anything: kong's
// interpolation of every flag's help runs regexps under the race
// detector's instrumentation. The tests run the CLI hundreds of times, so
// under -race they run it as mqgate built once without the race detector
// (go build of this package, the commands' code unchanged). The servers
// the tests start, and `mqgate bench`, whose clients run concurrently,
// still run as the race-built test binary.
var cliBuild struct {
	once sync.Once
	dir  string
	path string
	out  []byte
	err  error
}

// cliCommand is the command that runs `mqgate args…`: the non-race build
// under -race, this test binary re-executed as mqgate otherwise.
func cliCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if !raceEnabled {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), e2eArgsEnv+"="+strings.Join(args, "\x1f"))
		return cmd
	}
	cmd := exec.Command(cliBinary(t), args...)
	cmd.Env = os.Environ()
	return cmd
}

// cliBinary is the path of the binary cliCommand runs.
func cliBinary(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		return os.Args[0]
	}
	cliBuild.once.Do(func() {
		cliBuild.dir, cliBuild.err = os.MkdirTemp("", "mqgate-cli-")
		if cliBuild.err != nil {
			return
		}
		cliBuild.path = filepath.Join(cliBuild.dir, "mqgate")
		cmd := exec.Command("go", "build", "-o", cliBuild.path, ".")
		cliBuild.out, cliBuild.err = cmd.CombinedOutput()
	})
	if cliBuild.err != nil {
		t.Fatalf("go build of the CLI: %v\n%s", cliBuild.err, cliBuild.out)
	}
	return cliBuild.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cliBuild.dir != "" {
		_ = os.RemoveAll(cliBuild.dir)
	}
	os.Exit(code)
}
