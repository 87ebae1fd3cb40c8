// Package python holds the Python package fzsidecar (codec, store, xarray
// backend over libfz). This Go test drives its pytest suite against real
// fzsidecar processes: it builds libfz.so, pip-installs the package offline
// into a virtual environment (as `make python` does), writes a store with
// `fzsidecar serve` + simulate + publish and another with `fzsidecar demo`,
// and runs python/tests with the paths in FZ_TEST_* variables.
package python

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

// install builds libfz.so and installs the package into a new venv (with
// Debian's numpy and xarray visible); it returns the venv's python.
func install(t *testing.T) string {
	t.Helper()
	nativetest.Tools(t, "gcc")
	sys := nativetest.PythonModules(t, "numpy", "xarray", "pytest", "venv", "pip", "setuptools")
	root := nativetest.RepoRoot(t)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	lib := filepath.Join(src, "fzsidecar", "_lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(lib, "libfz.so"), "./libfz")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared ./libfz: %v\n%s", err, out)
	}
	os.Remove(filepath.Join(lib, "libfz.h"))
	for _, f := range []string{"pyproject.toml", "README.md"} {
		copyFile(t, filepath.Join(root, "python", f), filepath.Join(src, f))
	}
	pys, _ := filepath.Glob(filepath.Join(root, "python", "fzsidecar", "*.py"))
	for _, f := range pys {
		copyFile(t, f, filepath.Join(src, "fzsidecar", filepath.Base(f)))
	}
	venv := filepath.Join(tmp, "venv")
	run(t, sys, "-m", "venv", "--system-site-packages", venv)
	py := filepath.Join(venv, "bin", "python")
	// The install command of docs/PYTHON.md: no network, Debian's setuptools.
	run(t, py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "--quiet", src)
	return py
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, prog string, args ...string) string {
	t.Helper()
	stdout, stderr, rc := nativetest.Run(t, prog, args...)
	if rc != 0 {
		t.Fatalf("%s %s: exit %d\n%s%s", prog, strings.Join(args, " "), rc, stdout, stderr)
	}
	return stdout
}

// maskedField is an 8x32x32 float32 field whose every 5th value is the
// fill value -9999 (test_store.py counts them).
func maskedField(t *testing.T, seed float64) string {
	t.Helper()
	const n = 8 * 32 * 32
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		v := float32(math.Sin(0.01*float64(i)+seed) * 10)
		if i%5 == 0 {
			v = -9999
		}
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	p := filepath.Join(t.TempDir(), "masked.raw")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPython(t *testing.T) {
	py := install(t)
	root := nativetest.RepoRoot(t)

	// A store written by serve: simulate (temp, pres; steps 0-2) and
	// publish (masked, with a fill value, steps 0 and 2).
	sc := nativetest.Serve(t)
	const runName = "pyrun"
	producer := []string{"--nats-url", sc.URL, "--shm-dir", sc.ShmDir}
	if _, stderr, rc := sc.CLI(t, append([]string{"simulate", "--run", runName, "--vars", "temp,pres", "--steps", "3",
		"--dims", "8x32x32", "--interval", "0", "--eb", "1e-3"}, producer...)...); rc != 0 {
		t.Fatalf("simulate: exit %d\n%s", rc, stderr)
	}
	for _, step := range []string{"0", "2"} {
		if _, stderr, rc := sc.CLI(t, append([]string{"publish", "--run", runName, "--var", "masked", "--step", step,
			"--dtype", "f32", "--dims", "8x32x32", "--mode", "abs", "--eb", "0.01", "--fill", "-9999",
			maskedField(t, float64(len(step)))}, producer...)...); rc != 0 {
			t.Fatalf("publish: exit %d\n%s", rc, stderr)
		}
	}

	// A store written by demo.
	demoSink := filepath.Join(t.TempDir(), "fzdata")
	if stdout, stderr, rc := nativetest.Run(t, sc.Bin, "demo", "--sink", demoSink, "--run", "demo1", "--steps", "3",
		"--dims", "8x32x32", "--backend", "cpu", "--nats-listen", nativetest.FreeAddr(t)); rc != 0 {
		t.Fatalf("demo: exit %d\n%s%s", rc, stdout, stderr)
	}

	venv := filepath.Dir(filepath.Dir(py))
	tests := filepath.Join(root, "python", "tests")
	cmd := exec.Command(py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error::pytest.PytestUnraisableExceptionWarning",
		filepath.Join(tests, "test_codec.py"), filepath.Join(tests, "test_store.py"), filepath.Join(tests, "test_xarray.py"))
	cmd.Dir = t.TempDir() // not python/: the installed package must be the one imported
	cmd.Env = append(os.Environ(), "FZ_TEST_FZSIDECAR="+sc.Bin, "FZ_TEST_SERVE_STORE="+sc.Sink,
		"FZ_TEST_SERVE_RUN="+runName, "FZ_TEST_DEMO_STORE="+demoSink, "FZ_TEST_DEMO_RUN=demo1",
		"FZ_TEST_EXPECT_PREFIX="+venv, "FZ_LIBFZ=", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Fatalf("pytest failed: %v", err)
	}
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("pytest skipped tests that must run here")
	}
}
