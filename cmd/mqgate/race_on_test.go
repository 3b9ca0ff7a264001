//go:build race

package main

import (
	"os"
	"strings"
)

// raceEnabled: this test binary runs under the race detector, so a
// binary built by a test with -race reuses its compiled packages.
const raceEnabled = true

// The binaries the tests start (this test binary re-executed as mqgate:
// every CLI command, every server) inherit GORACE; without
// atexit_sleep_ms=0 the race runtime sleeps a second before each exit,
// and a test of many commands waits for nothing but that.
func init() {
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}
