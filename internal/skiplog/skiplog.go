// Package skiplog makes skipped tests visible. `go test ./...` prints
// nothing of a package that passes, so a test skipped for a missing MinIO
// binary, toolchain, GPU or data set would look the same as one that ran.
// Skipf records the skip in the file named by $FZ_SKIP_LOG (one line per
// skip, appended; `make test` sets it and prints the list at the end) and
// then skips.
package skiplog

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Skipf records why t is skipped, then skips it.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	Record(t.Name(), msg)
	t.Skip(msg)
}

// Record appends "name: first line of msg" to $FZ_SKIP_LOG, if set. One
// write per line with O_APPEND keeps lines whole across the parallel test
// processes of `go test ./...`.
func Record(name, msg string) {
	path := os.Getenv("FZ_SKIP_LOG")
	if path == "" {
		return
	}
	line := strings.TrimSpace(msg)
	for _, l := range strings.Split(line, "\n") {
		// The first line that says something (banners start with #s).
		if l = strings.Trim(strings.TrimSpace(l), "#"); strings.TrimSpace(l) != "" {
			line = strings.TrimSpace(l)
			break
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(name + ": " + line + "\n")
}
