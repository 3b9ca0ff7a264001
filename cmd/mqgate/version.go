package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// build is what the binary knows of the source it was built from.
type build struct {
	Version  string // -X main.version, else the module's version (go install …@v1.2.3), else "dev"
	Commit   string // -X main.commit, else vcs.revision, else "unknown"
	Modified bool   // vcs.modified: the checkout had uncommitted changes
	Time     string // vcs.time: the commit's time, when known
}

// buildOf combines the -ldflags -X values (which win when set) with what
// `go build` stamped into the binary from its git checkout
// (runtime/debug.ReadBuildInfo: vcs.revision, vcs.modified, vcs.time;
// stamped by go build in a git clone, not with -buildvcs=false nor in a
// `git worktree`, whose .git is a file).
func buildOf(ldVersion, ldCommit string, info *debug.BuildInfo) build {
	b := build{Version: ldVersion, Commit: ldCommit}
	if info == nil {
		return b
	}
	if b.Version == "" || b.Version == "dev" {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		} else {
			b.Version = "dev"
		}
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		if k, ok := strings.CutPrefix(s.Key, "vcs."); ok {
			vcs[k] = s.Value
		}
	}
	if b.Commit == "" || b.Commit == "unknown" {
		b.Commit = "unknown"
		if rev := vcs["revision"]; rev != "" {
			b.Commit = rev
			b.Modified = vcs["modified"] == "true"
			b.Time = vcs["time"]
		}
	}
	return b
}

// thisBuild is the build of the running binary.
func thisBuild() build {
	info, _ := debug.ReadBuildInfo()
	return buildOf(version, commit, info)
}

// String is the line `mqgate version` and `mqgate --version` print:
// mqgate v1.2.3 (commit 0123abcd…, modified, 2026-01-02T03:04:05Z, go1.26.0).
func (b build) String() string {
	parts := []string{"commit " + b.Commit}
	if b.Modified {
		parts = append(parts, "modified")
	}
	if b.Time != "" {
		parts = append(parts, b.Time)
	}
	parts = append(parts, runtime.Version())
	return fmt.Sprintf("mqgate %s (%s)", b.Version, strings.Join(parts, ", "))
}
