package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

var (
	libOnce sync.Once
	libDir  string
	libErr  error
)

// buildLibfz builds libfz.so with -buildmode=c-shared once per test binary
// and returns its directory.
func buildLibfz(t *testing.T) string {
	t.Helper()
	nativetest.Tools(t, "gcc")
	root := nativetest.RepoRoot(t)
	libOnce.Do(func() {
		libDir, libErr = os.MkdirTemp("", "libfz-test-")
		if libErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(libDir, "libfz.so"), "./libfz")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			libErr = &buildError{"go build -buildmode=c-shared ./libfz", err, out}
		}
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	return libDir
}

type buildError struct {
	what string
	err  error
	out  []byte
}

func (e *buildError) Error() string { return e.what + ": " + e.err.Error() + "\n" + string(e.out) }

// TestCSmoke compiles test/smoke.c against fz.h and libfz.so, runs it, and
// checks that the container it made through the C ABI is byte for byte what
// fz.Compress makes of the same field.
func TestCSmoke(t *testing.T) {
	lib := buildLibfz(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "smoke")
	cc := exec.Command("gcc", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_POSIX_C_SOURCE=200809L",
		"-I.", "-o", bin, "test/smoke.c", "-L"+lib, "-lfz", "-lm", "-lpthread", "-Wl,-rpath,"+lib)
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc test/smoke.c: %v\n%s", err, out)
	}
	stdout, stderr, rc := nativetest.Run(t, bin, dir)
	if rc != 0 {
		t.Fatalf("smoke exited %d:\n%s%s", rc, stdout, stderr)
	}
	if !strings.Contains(stdout, "OK") {
		t.Fatalf("smoke printed no OK: %q", stdout)
	}
	t.Log(strings.TrimSpace(stdout))
	raw, err := os.ReadFile(filepath.Join(dir, "field.raw"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "field.fz"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := fz.Compress(context.Background(), raw, fz.Params{DType: fz.Float32, Dims: []uint64{20, 30, 40}, Mode: fz.Abs, Bound: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the C ABI's container (%d bytes) differs from fz.Compress's (%d bytes)", len(got), len(want))
	}
}
