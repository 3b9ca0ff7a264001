package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummarisesARealRun runs `go test -json` on a small module whose
// tests pass, fail, skip for want of PostgreSQL (as pgtest words it) and
// panic, and checks what testsum prints: go test's own lines for what
// failed, the closing line of each package, the PostgreSQL skips, and the
// last line "N passed, N failed".
func TestSummarisesARealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.test/m\n\ngo 1.22\n")
	write("a/a_test.go", `package a

import "testing"

func TestPass(t *testing.T) { t.Log("quiet when it passes") }
func TestFail(t *testing.T) { t.Error("the reason it failed") }
func TestSub(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("pg", func(t *testing.T) { t.Skip("pgtest: TEST_DATABASE_URL is not set; skipping a PostgreSQL test") })
}
func TestOtherSkip(t *testing.T) { t.Skip("not on this OS") }
`)
	write("b/b_test.go", `package b

import "testing"

func TestPanics(t *testing.T) { panic("boom") }
`)
	write("c/c_test.go", `package c

import "testing"

func TestFine(t *testing.T) {}
`)
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	raw, _ := cmd.Output() // it fails: TestFail and TestPanics
	var out bytes.Buffer
	var s summary
	if err := run(bytes.NewReader(raw), &out, &s); err != nil {
		t.Fatal(err)
	}
	s.write(&out, false)
	got := out.String()
	for _, want := range []string{
		"--- FAIL: TestFail", "the reason it failed", "panic: boom", "FAIL\texample.test/m/a", "FAIL\texample.test/m/b",
		"ok  \texample.test/m/c",
		"PostgreSQL: not configured (TEST_DATABASE_URL is not set): 1 tests skipped: example.test/m/a.TestSub/pg\n",
		"2 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"quiet when it passes", "=== RUN", "--- PASS"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("the output has %q:\n%s", unwanted, got)
		}
	}
	// TestPass, TestSub, TestSub/ok, TestFine; TestFail and TestPanics.
	if !strings.HasSuffix(got, "\n4 passed, 2 failed\n") {
		t.Errorf("the last line is not 4 passed, 2 failed:\n%s", got)
	}
}
