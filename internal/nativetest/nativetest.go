// Package nativetest lets Go tests drive the bindings in other languages (C,
// Fortran, Python) as real programs against a real `fzsidecar serve`
// process. A missing toolchain skips the test with a message the user sees,
// unless FZ_REQUIRE_NATIVE=1 (CI), where it fails instead.
package nativetest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/skiplog"
)

// Required reports whether missing native tools must fail the test run.
func Required() bool { return os.Getenv("FZ_REQUIRE_NATIVE") == "1" }

// Need skips (or, under FZ_REQUIRE_NATIVE=1, fails) the test when ok is
// false; what says what is missing and how to get it.
func Need(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if Required() {
		t.Fatalf("FZ_REQUIRE_NATIVE=1 but %s", what)
	}
	skiplog.Skipf(t, "SKIPPED (native toolchain missing): %s; install it (bash .ci/install-apt.sh installs .ci/apt-packages.txt) or set FZ_REQUIRE_NATIVE=1 to make this a failure", what)
}

// Tools needs every named program on PATH.
func Tools(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		_, err := exec.LookPath(n)
		Need(t, err == nil, fmt.Sprintf("program %q not found on PATH", n))
	}
}

// PkgConfig needs the pkg-config module (e.g. "libnats").
func PkgConfig(t testing.TB, module string) {
	t.Helper()
	Tools(t, "pkg-config")
	err := exec.Command("pkg-config", "--exists", module).Run()
	Need(t, err == nil, fmt.Sprintf("pkg-config module %q not installed", module))
}

// PythonModules needs /usr/bin/python3 (or $FZ_PYTHON) able to import each module.
func PythonModules(t testing.TB, modules ...string) string {
	t.Helper()
	py := Python()
	_, err := exec.LookPath(py)
	Need(t, err == nil, fmt.Sprintf("python %q not found", py))
	for _, m := range modules {
		out, err := exec.Command(py, "-c", "import "+m).CombinedOutput()
		Need(t, err == nil, fmt.Sprintf("python module %q cannot be imported by %s: %s", m, py, strings.TrimSpace(string(out))))
	}
	return py
}

// Python is the interpreter for tests: $FZ_PYTHON, else Debian's /usr/bin/python3.
func Python() string {
	if p := os.Getenv("FZ_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// RepoRoot is the directory holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("nativetest: go.mod not found above the test's directory")
		}
		dir = up
	}
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// BuildFzsidecar builds ./cmd/fzsidecar once per test binary and returns its path.
func BuildFzsidecar(t testing.TB) string {
	t.Helper()
	root := RepoRoot(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fzsidecar-nativetest-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "fzsidecar")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/fzsidecar")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/fzsidecar: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// FreeAddr returns a free 127.0.0.1:port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Sidecar is a `fzsidecar serve` process.
type Sidecar struct {
	Bin         string
	URL         string // nats://127.0.0.1:port
	Listen      string // 127.0.0.1:port of the embedded NATS server
	ShmDir      string
	Sink        string
	DataDir     string
	MetricsURL  string // http://host:port/metrics once ready
	Args        []string
	Env         []string
	cmd         *exec.Cmd
	out, errOut *syncBuf
	done        chan struct{}
	t           testing.TB
}

var metricsRE = regexp.MustCompile(`metrics (http://\S+/metrics)`)

// Serve starts `fzsidecar serve` with its own free port, shm directory (in
// /dev/shm when possible), sink and data directory, CPU backend and a short
// ack wait, plus extra flags; it waits for "fzsidecar ready" and stops the
// process at cleanup.
func Serve(t testing.TB, extra ...string) *Sidecar {
	t.Helper()
	base := t.TempDir()
	shm := filepath.Join(base, "shm")
	if d, err := os.MkdirTemp("/dev/shm", "fznative-"); err == nil {
		shm = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	s := &Sidecar{Bin: BuildFzsidecar(t), ShmDir: shm,
		Sink: filepath.Join(base, "fzdata"), DataDir: filepath.Join(base, "state"), t: t}
	t.Cleanup(func() { s.Stop() })
	// Port 0, and the address serve reports: a port picked beforehand could
	// be taken by another process before serve binds it. Restarts (Start)
	// bind the reported address again, where producers reconnect.
	s.Args = append([]string{"serve", "--nats-listen", "127.0.0.1:0", "--shm-dir", s.ShmDir, "--sink", s.Sink,
		"--data-dir", s.DataDir, "--ack-wait", "2s", "--backend", "cpu", "--metrics-listen", "127.0.0.1:0"}, extra...)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	m := readyNATSRE.FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("fzsidecar serve's ready line names no NATS address:\n%s", s.out.String())
	}
	s.Listen, s.URL = m[1], "nats://"+m[1]
	s.Args[2] = s.Listen
	return s
}

var readyNATSRE = regexp.MustCompile(`fzsidecar ready: nats nats://([^,\s]+),`)

// Start (re)starts the process with the same arguments and waits until ready.
func (s *Sidecar) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

func (s *Sidecar) start() error {
	s.out, s.errOut = &syncBuf{}, &syncBuf{}
	s.cmd = exec.Command(s.Bin, s.Args...)
	s.cmd.Env = append(os.Environ(), s.Env...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.errOut
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(s.out.String(), "fzsidecar ready") {
		select {
		case <-s.done:
			err := fmt.Errorf("fzsidecar serve exited before ready:\nstdout: %s\nstderr: %s", s.out.String(), tail(s.errOut.String(), 3000))
			return err
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fzsidecar serve not ready within 60 s:\nstdout: %s\nstderr: %s", s.out.String(), tail(s.errOut.String(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m := metricsRE.FindStringSubmatch(s.out.String()); m != nil {
		s.MetricsURL = m[1]
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to end.
func (s *Sidecar) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Restart kills the process and starts it again with the same state.
func (s *Sidecar) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.Start(t)
}

// Stop sends SIGTERM, waits up to 30 s, then kills.
func (s *Sidecar) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.Kill()
	}
}

// Stdout and Stderr are what the process printed so far.
func (s *Sidecar) Stdout() string { return s.out.String() }
func (s *Sidecar) Stderr() string { return s.errOut.String() }

// CLI runs another fzsidecar command (ls, get, …) and returns stdout, stderr and the exit code.
func (s *Sidecar) CLI(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	return Run(t, s.Bin, args...)
}

// Run runs a program with a 10-minute limit and returns stdout, stderr and the exit code.
func Run(t testing.TB, prog string, args ...string) (string, string, int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(prog, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v: still running after 10 minutes", prog, args)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
