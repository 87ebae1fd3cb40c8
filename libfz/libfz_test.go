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
	"unsafe"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
	"github.com/fzsidecar/fzsidecar/internal/retrieve"
	"github.com/fzsidecar/fzsidecar/sinks"
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

// compileC compiles test/<name>.c against fz.h and libfz.so.
func compileC(t *testing.T, name string) string {
	t.Helper()
	lib := buildLibfz(t)
	bin := filepath.Join(t.TempDir(), name)
	cc := exec.Command("gcc", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_POSIX_C_SOURCE=200809L",
		"-I.", "-o", bin, "test/"+name+".c", "-L"+lib, "-lfz", "-lm", "-lpthread", "-Wl,-rpath,"+lib)
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc test/%s.c: %v\n%s", name, err, out)
	}
	return bin
}

// TestCSmoke compiles test/smoke.c against fz.h and libfz.so, runs it, and
// checks that the container it made through the C ABI is byte for byte what
// fz.Compress makes of the same field.
func TestCSmoke(t *testing.T) {
	bin := compileC(t, "smoke")
	dir := t.TempDir()
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
	// fz_options.format_version = 2 is fz.WithFormatVersion(2).
	got, err = os.ReadFile(filepath.Join(dir, "field-v2.fz"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, err = fz.Compress(context.Background(), raw, fz.Params{DType: fz.Float32, Dims: []uint64{20, 30, 40}, Mode: fz.Abs, Bound: 1e-3}, fz.WithFormatVersion(2))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the C ABI's version-2 container (%d bytes) differs from fz.Compress's (%d bytes)", len(got), len(want))
	}
}

// TestCStore runs test/store.c on a store written through the sinks
// package: run r1, variable a at steps 0-2 and b at step 5, f64 16x8x4
// fields whose value i is step*1000 + i.
func TestCStore(t *testing.T) {
	bin := compileC(t, "store")
	dir := t.TempDir()
	ctx := context.Background()
	s, err := sinks.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []sinks.Key{{Run: "r1", Var: "a", Step: 0}, {Run: "r1", Var: "a", Step: 1}, {Run: "r1", Var: "a", Step: 2}, {Run: "r1", Var: "b", Step: 5}} {
		v := make([]float64, 16*8*4)
		for i := range v {
			v[i] = float64(k.Step*1000) + float64(i)
		}
		raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
		blob, st, err := fz.Compress(ctx, raw, fz.Params{DType: fz.Float64, Dims: []uint64{16, 8, 4}, Mode: fz.Abs, Bound: 1e-6})
		if err != nil {
			t.Fatal(err)
		}
		h, err := fz.ReadHeader(blob)
		if err != nil {
			t.Fatal(err)
		}
		m := retrieve.MetaOf(h)
		m.MaxAbsErr = st.MaxAbsErr
		if err := s.Put(ctx, k, blob, m); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, rc := nativetest.Run(t, bin, dir)
	if rc != 0 || !strings.Contains(stdout, "OK") {
		t.Fatalf("store test exited %d:\n%s%s", rc, stdout, stderr)
	}
}

// TestCLogQuiet: a library must not write to its host's stderr uninvited.
// A listing that skips a blob without its catalog sidecar logs a warning;
// test/log.c lists such a store, and its stderr must stay empty unless
// FZ_LIBFZ_LOG asks for the log.
func TestCLogQuiet(t *testing.T) {
	bin := compileC(t, "log")
	dir := t.TempDir()
	ctx := context.Background()
	s, err := sinks.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for step := range uint64(2) {
		raw := make([]byte, 4*64)
		blob, _, err := fz.Compress(ctx, raw, fz.Params{DType: fz.Float32, Dims: []uint64{64}, Mode: fz.Abs, Bound: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		h, err := fz.ReadHeader(blob)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, sinks.Key{Run: "r1", Var: "a", Step: step}, blob, retrieve.MetaOf(h)); err != nil {
			t.Fatal(err)
		}
	}
	// Step 1 loses its catalog sidecar.
	jsons, _ := filepath.Glob(filepath.Join(dir, "r1", "a", "*1.fz.json"))
	if len(jsons) != 1 {
		t.Fatalf("sidecar of step 1: found %v in %s", jsons, filepath.Join(dir, "r1", "a"))
	}
	if err := os.Remove(jsons[0]); err != nil {
		t.Fatal(err)
	}
	const warning = "skipping blob without a readable sidecar"
	for _, c := range []struct {
		setting string
		logged  bool
	}{{"", false}, {"0", false}, {"1", true}, {"debug", true}} {
		t.Setenv("FZ_LIBFZ_LOG", c.setting)
		stdout, stderr, rc := nativetest.Run(t, bin, dir)
		if rc != 0 || !strings.Contains(stdout, "OK") {
			t.Fatalf("FZ_LIBFZ_LOG=%q: log test exited %d:\n%s%s", c.setting, rc, stdout, stderr)
		}
		if c.logged && !strings.Contains(stderr, warning) {
			t.Errorf("FZ_LIBFZ_LOG=%q: stderr %q, want the warning %q", c.setting, stderr, warning)
		}
		if !c.logged && stderr != "" {
			t.Errorf("FZ_LIBFZ_LOG=%q: libfz wrote to the host's stderr: %q", c.setting, stderr)
		}
	}
}
