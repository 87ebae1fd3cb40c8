// Package python holds the Python package fzsidecar (codec, store, xarray
// backend over libfz). This Go test drives its pytest suite against real
// fzsidecar processes: it builds libfz.so, pip-installs the package offline
// into a virtual environment (as `make python` does), writes a store with
// `fzsidecar serve` + simulate + publish and another with `fzsidecar demo`,
// and runs python/tests with the paths in FZ_TEST_* variables.
package python

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if installed.dir != "" {
		os.RemoveAll(installed.dir)
	}
	miniotest.StopShared()
	os.Exit(code)
}

var installed struct {
	once sync.Once
	dir  string
	py   string
	err  error
}

// install builds libfz.so and installs the package into a new venv (with
// Debian's numpy and xarray visible), once per test binary; it returns the
// venv's python.
func install(t testing.TB) string {
	t.Helper()
	nativetest.Tools(t, "gcc")
	sys := nativetest.PythonModules(t, "numpy", "xarray", "pytest", "venv", "pip", "setuptools")
	installed.once.Do(func() {
		installed.dir, installed.err = os.MkdirTemp("", "fzsidecar-python-test-")
		if installed.err == nil {
			installed.py, installed.err = installInto(nativetest.RepoRoot(t), installed.dir, sys)
		}
	})
	if installed.err != nil {
		t.Fatal(installed.err)
	}
	return installed.py
}

func installInto(root, tmp, sys string) (string, error) {
	src := filepath.Join(tmp, "src")
	lib := filepath.Join(src, "fzsidecar", "_lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return "", err
	}
	if err := command(root, "go", "build", "-buildmode=c-shared", "-o", filepath.Join(lib, "libfz.so"), "./libfz"); err != nil {
		return "", err
	}
	os.Remove(filepath.Join(lib, "libfz.h"))
	files := []string{filepath.Join("python", "pyproject.toml"), filepath.Join("python", "README.md")}
	pys, _ := filepath.Glob(filepath.Join(root, "python", "fzsidecar", "*.py"))
	for _, f := range pys {
		files = append(files, filepath.Join("python", "fzsidecar", filepath.Base(f)))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(src, strings.TrimPrefix(f, "python"+string(filepath.Separator))), b, 0o644); err != nil {
			return "", err
		}
	}
	venv := filepath.Join(tmp, "venv")
	if err := command(tmp, sys, "-m", "venv", "--system-site-packages", venv); err != nil {
		return "", err
	}
	py := filepath.Join(venv, "bin", "python")
	// The install command of docs/PYTHON.md: no network, Debian's setuptools.
	return py, command(tmp, py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "--quiet", src)
}

func command(dir, prog string, args ...string) error {
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
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

	// A store written by serve with format_version 2.
	sc2 := nativetest.Serve(t, "--format-version", "2")
	if _, stderr, rc := sc2.CLI(t, "simulate", "--run", "v2run", "--vars", "temp", "--steps", "2", "--dims", "8x32x32",
		"--interval", "0", "--eb", "1e-3", "--nats-url", sc2.URL, "--shm-dir", sc2.ShmDir); rc != 0 {
		t.Fatalf("simulate (format_version 2): exit %d\n%s", rc, stderr)
	}

	pytest(t, py, []string{"FZ_TEST_FZSIDECAR=" + sc.Bin, "FZ_TEST_SERVE_STORE=" + sc.Sink,
		"FZ_TEST_SERVE_RUN=" + runName, "FZ_TEST_DEMO_STORE=" + demoSink, "FZ_TEST_DEMO_RUN=demo1",
		"FZ_TEST_SERVE_V2_STORE=" + sc2.Sink, "FZ_TEST_SERVE_V2_RUN=v2run"},
		"test_codec.py", "test_store.py", "test_xarray.py", "test_numcodecs.py", "test_format_version.py")
}

// TestPythonS3 opens a run that demo stored in S3 (a real MinIO server)
// with xarray and the store API.
func TestPythonS3(t *testing.T) {
	py := install(t)
	s3 := miniotest.Shared(t)
	s3.SetEnv(t)
	sink := "s3://" + s3.Bucket(t) + "/some/prefix"
	bin := nativetest.BuildFzsidecar(t)
	if stdout, stderr, rc := nativetest.Run(t, bin, "demo", "--sink", sink, "--run", "demo1", "--steps", "3",
		"--dims", "8x32x32", "--backend", "cpu", "--nats-listen", nativetest.FreeAddr(t)); rc != 0 {
		t.Fatalf("demo: exit %d\n%s%s", rc, stdout, stderr)
	}
	pytest(t, py, []string{"FZ_TEST_DEMO_STORE=" + sink, "FZ_TEST_DEMO_RUN=demo1"},
		"test_xarray.py", "-k", "demo_run or separately or dask")
}

// pytest runs python/tests files with the installed package and env; no
// test may skip.
func pytest(t *testing.T, py string, env []string, args ...string) {
	t.Helper()
	tests := filepath.Join(nativetest.RepoRoot(t), "python", "tests")
	for i, a := range args {
		if strings.HasSuffix(a, ".py") {
			args[i] = filepath.Join(tests, a)
		}
	}
	cmd := exec.Command(py, append([]string{"-m", "pytest", "-q", "-p", "no:cacheprovider"}, args...)...)
	cmd.Dir = t.TempDir() // not python/: the installed package must be the one imported
	cmd.Env = append(append(os.Environ(), env...),
		"FZ_TEST_EXPECT_PREFIX="+filepath.Dir(filepath.Dir(py)), "FZ_LIBFZ=", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Fatalf("pytest failed: %v", err)
	}
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("pytest skipped tests that must run here")
	}
}
