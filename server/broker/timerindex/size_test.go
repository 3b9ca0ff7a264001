package timerindex

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// modelChecks sets rapid's number of checks for a model test: quick in
// the quick tier, long with LONG=1; -rapid.checks or RAPID_CHECKS, when
// given, win. The test must not run in parallel with another rapid test
// (the flag is the package's).
func modelChecks(t *testing.T, quick, long int) {
	t.Helper()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if _, ok := os.LookupEnv("RAPID_CHECKS"); ok || explicit {
		return
	}
	n := quick
	if os.Getenv("LONG") != "" {
		n = long
	}
	old := flag.Lookup("rapid.checks").Value.String()
	if err := flag.Set("rapid.checks", strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("rapid.checks", old) })
}
