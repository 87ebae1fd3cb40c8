package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
)

// version is set at link time by release builds:
//
//	go build -ldflags "-X main.version=v1.2.0" ./cmd/fzsidecar
//
// Otherwise it comes from the module's build information: the module
// version for `go install ...@v1.2.0`, or the commit a checkout was built at.
var version = ""

// versionString says which build this is: version (or commit), the
// container format and protocol it speaks, and the Go toolchain.
func versionString() string {
	v, commit, dirty, when := version, "", false, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			case "vcs.time":
				when = s.Value
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	out := "fzsidecar " + v
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		out += " (commit " + commit
		if dirty {
			out += ", modified"
		}
		if when != "" {
			out += ", " + when
		}
		out += ")"
	}
	// Reads every version up to fz.Version2; writes DefaultVersion unless
	// --format-version / format_version ask for another.
	return fmt.Sprintf("%s\ncontainer format v%d (default) and v%d (--format-version %d), reads both; ingest protocol v%d, %s %s/%s",
		out, fz.DefaultVersion, fz.Version2, fz.Version2, ingest.ProtocolVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func printVersion(w io.Writer) { fmt.Fprintln(w, versionString()) }
