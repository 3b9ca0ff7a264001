//go:build !race

package main

// raceEnabled: this test binary runs under the race detector, so a
// binary built by a test with -race reuses its compiled packages.
const raceEnabled = false
