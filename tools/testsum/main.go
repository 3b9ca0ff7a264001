// Command testsum reads `go test -json` on standard input and writes what
// `go test` without -json writes (each package's closing line, the output
// of failed tests, build errors) as it comes, then a summary: which tests
// were skipped for want of PostgreSQL (pgtest's skips without
// TEST_DATABASE_URL or without PostgreSQL's server binaries), and a last
// line "N passed, N failed". With -summary FILE the summary goes to FILE
// instead, for a caller that prints it after other output (tools/test.sh).
// It exits 1 when a test, a package or a build failed.
//
//	go test -json ./... | go run ./tools/testsum
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one line of test2json (go doc test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Output     string
}

// pgSkip is how pgtest words a skip for want of PostgreSQL.
var pgSkip = []string{"TEST_DATABASE_URL is not set", "no PostgreSQL server binaries"}

// summary counts the tests of a run.
type summary struct {
	passed, failed, skipped int
	failedPkgs              []string
	testFails               map[string]int // package -> its failed tests
	pgSkipped               []string       // package.Test
	buildFailed             bool
}

func main() {
	summaryFile := flag.String("summary", "", "write the summary to this file instead of standard output")
	flag.Parse()
	var s summary
	if err := run(os.Stdin, os.Stdout, &s); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	out := io.Writer(os.Stdout)
	if *summaryFile != "" {
		f, err := os.Create(*summaryFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
		defer f.Close()
		out = f
	}
	s.write(out, os.Getenv("TEST_DATABASE_URL") != "")
	if s.failed > 0 || len(s.failedPkgs) > 0 || s.buildFailed {
		os.Exit(1)
	}
}

// run copies in's events to out as go test would print them and counts them.
func run(in io.Reader, out io.Writer, s *summary) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	s.testFails = map[string]int{}
	// the output of each running test, printed if it fails
	pending := map[string][]string{}
	key := func(e event) string { return e.Package + "\x00" + e.Test }
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// not an event: a line of go itself, as it is
			w.Write(line)
			w.WriteByte('\n')
			continue
		}
		switch {
		case e.Action == "build-output":
			w.WriteString(e.Output)
		case e.Action == "build-fail":
			s.buildFailed = true
		case e.Test == "":
			// the package's own lines: "ok  pkg 1.2s", "FAIL pkg", a panic,
			// "[no test files]"; "PASS" is what -json's -v adds
			if e.Action == "output" && e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				w.WriteString(e.Output)
			}
			if e.Action == "fail" {
				s.failedPkgs = append(s.failedPkgs, e.Package)
				if s.testFails[e.Package] == 0 {
					s.failed++ // no test failed: the package did (a panic, a timeout, TestMain)
				}
				// tests that never ended (a panic, a timeout): their output
				for k, lines := range pending {
					if strings.HasPrefix(k, e.Package+"\x00") {
						w.WriteString(strings.Join(lines, ""))
						delete(pending, k)
					}
				}
			}
		case e.Action == "output":
			// -json's -v adds "=== RUN" and the like, and "--- PASS" lines
			if !strings.HasPrefix(e.Output, "=== ") && !strings.Contains(e.Output, "--- PASS: ") {
				pending[key(e)] = append(pending[key(e)], e.Output)
			}
		case e.Action == "pass":
			s.passed++
			delete(pending, key(e))
		case e.Action == "skip":
			s.skipped++
			for _, l := range pending[key(e)] {
				if slices.ContainsFunc(pgSkip, func(p string) bool { return strings.Contains(l, p) }) {
					s.pgSkipped = append(s.pgSkipped, strings.TrimPrefix(e.Package, "github.com/mqgate/mqgate/")+"."+e.Test)
					break
				}
			}
			delete(pending, key(e))
		case e.Action == "fail":
			s.failed++
			s.testFails[e.Package]++
			w.WriteString(strings.Join(pending[key(e)], ""))
			delete(pending, key(e))
		}
		w.Flush()
	}
	return sc.Err()
}

// write prints the summary; its last line is "N passed, N failed".
func (s *summary) write(w io.Writer, dbSet bool) {
	switch {
	case len(s.pgSkipped) > 0 && !dbSet:
		fmt.Fprintf(w, "PostgreSQL: not configured (TEST_DATABASE_URL is not set): %d tests skipped: %s\n",
			len(s.pgSkipped), strings.Join(s.pgSkipped, " "))
	case len(s.pgSkipped) > 0:
		fmt.Fprintf(w, "PostgreSQL: %d tests skipped (no PostgreSQL server binaries for a throwaway cluster): %s\n",
			len(s.pgSkipped), strings.Join(s.pgSkipped, " "))
	case dbSet:
		fmt.Fprintln(w, "PostgreSQL: TEST_DATABASE_URL is set; no PostgreSQL test skipped")
	}
	if len(s.failedPkgs) > 0 {
		fmt.Fprintf(w, "failed packages: %s\n", strings.Join(s.failedPkgs, " "))
	}
	fmt.Fprintf(w, "%d skipped\n", s.skipped)
	fmt.Fprintf(w, "%d passed, %d failed\n", s.passed, s.failed)
}
