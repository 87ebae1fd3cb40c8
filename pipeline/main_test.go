package pipeline_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/fzsidecar/fzsidecar/sidecar"
)

// The test binary doubles as the sidecar process: with FZ_TEST_SIDECAR=1 it
// runs sidecar.Run (the same code `fzsidecar serve` runs) with a local
// directory store, so producer and sidecar live in separate OS processes and
// the sidecar can be SIGKILLed for real.
func TestMain(m *testing.M) {
	if os.Getenv("FZ_TEST_SIDECAR") == "1" {
		os.Exit(childSidecar())
	}
	if os.Getenv("FZ_TEST_PRODUCER") == "1" {
		os.Exit(childProducer())
	}
	os.Exit(m.Run())
}

type sidecarEnv struct {
	Listen, URL, DataDir, ShmDir, StoreDir string
	Budget                                 int64
	StoreDelay                             time.Duration
	DrainTimeout                           time.Duration
	// AckWait, if set, replaces the short default of these tests (2s).
	AckWait time.Duration
	// Hang makes every Put wait until its context ends (a sink that never
	// answers).
	Hang bool
	// ReclaimAfter, if set, turns on reclaiming orphaned segments.
	ReclaimAfter time.Duration
}

func (e sidecarEnv) environ() []string {
	return append(os.Environ(), "FZ_TEST_SIDECAR=1",
		"FZ_LISTEN="+e.Listen, "FZ_URL="+e.URL, "FZ_DATA="+e.DataDir, "FZ_SHM="+e.ShmDir,
		"FZ_STORE="+e.StoreDir, "FZ_BUDGET="+strconv.FormatInt(e.Budget, 10), "FZ_DELAY="+e.StoreDelay.String(), "FZ_DRAIN="+e.DrainTimeout.String(),
		"FZ_ACKWAIT="+e.AckWait.String(), "FZ_HANG="+strconv.FormatBool(e.Hang), "FZ_RECLAIM="+e.ReclaimAfter.String())
}

func (e sidecarEnv) config() sidecar.Config {
	ackWait := e.AckWait
	if ackWait == 0 {
		// Short, so that snapshots in flight at a crash come back soon.
		ackWait = 2 * time.Second
	}
	store := &dirStore{dir: e.StoreDir, delay: e.StoreDelay}
	if e.Hang {
		store.gate = make(chan struct{}) // never opened
	}
	return sidecar.Config{
		Embedded: e.URL == "", Listen: e.Listen, DataDir: e.DataDir,
		Conn: ingest.ConnOptions{URL: e.URL},
		Receiver: ingest.ReceiverConfig{ShmDir: e.ShmDir, Budget: e.Budget, AckWait: ackWait,
			ReclaimAfter: e.ReclaimAfter},
		Pipeline: pipeline.Config{Store: store, Codec: testCodec(), DrainTimeout: e.DrainTimeout},
	}
}

func childSidecar() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	budget, _ := strconv.ParseInt(os.Getenv("FZ_BUDGET"), 10, 64)
	delay, _ := time.ParseDuration(os.Getenv("FZ_DELAY"))
	drain, _ := time.ParseDuration(os.Getenv("FZ_DRAIN"))
	ackWait, _ := time.ParseDuration(os.Getenv("FZ_ACKWAIT"))
	reclaim, _ := time.ParseDuration(os.Getenv("FZ_RECLAIM"))
	hang, _ := strconv.ParseBool(os.Getenv("FZ_HANG"))
	e := sidecarEnv{Listen: os.Getenv("FZ_LISTEN"), URL: os.Getenv("FZ_URL"), DataDir: os.Getenv("FZ_DATA"),
		ShmDir: os.Getenv("FZ_SHM"), StoreDir: os.Getenv("FZ_STORE"), Budget: budget, StoreDelay: delay, DrainTimeout: drain,
		AckWait: ackWait, Hang: hang, ReclaimAfter: reclaim}
	cfg := e.config()
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Ready = func(url string) { fmt.Println("READY", url) }
	if err := sidecar.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar:", err)
		return 1
	}
	return 0
}

type child struct {
	cmd *exec.Cmd
	url string
}

// startChild runs the sidecar in a new process and waits for it to be ready.
// With an embedded server and e.Listen empty it binds port 0 and sets
// e.Listen to the address the child reports (a port picked beforehand could
// be taken by another process before the child binds it), so that a restart
// binds the same port, where the producers reconnect.
func startChild(t *testing.T, e *sidecarEnv, logName string) *child {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(e.DataDir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("sidecar log %s:\n%s", logName, tail(string(b), 4000))
		}
	})
	pick := e.URL == "" && e.Listen == ""
	if pick {
		e.Listen = "127.0.0.1:0"
	}
	start, _ := logf.Seek(0, io.SeekEnd)
	c := tryStartChild(t, *e, logf)
	if c == nil {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("sidecar exited before it was ready:\n%s", tail(string(b[min(int(start), len(b)):]), 4000))
	}
	if pick {
		e.Listen = strings.TrimPrefix(c.url, "nats://")
	}
	return c
}

// tryStartChild starts the sidecar process; it returns nil if the process
// ends before it is ready.
func tryStartChild(t *testing.T, e sidecarEnv, logf *os.File) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = e.environ()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	t.Cleanup(func() { c.kill() })
	ready := make(chan string, 1)
	ended := make(chan struct{}) // stdout closed: the process is gone
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- url
			}
		}
	}()
	select {
	case c.url = <-ready:
		return c
	case <-ended:
		select {
		case c.url = <-ready:
			return c
		default:
		}
		cmd.Wait()
		return nil
	case <-time.After(60 * time.Second):
		t.Fatal("sidecar did not become ready within 60s")
	}
	return nil
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Signal(syscall.SIGKILL)
		c.cmd.Wait()
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sidecar exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("sidecar did not exit within 30s of SIGTERM")
		c.kill()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newEnv(t *testing.T) sidecarEnv {
	base := t.TempDir()
	e := sidecarEnv{DataDir: filepath.Join(base, "data"), ShmDir: filepath.Join(base, "shm"),
		StoreDir: filepath.Join(base, "store"), Budget: 64 << 20}
	// Prefer real shared memory, as in production, when it is there.
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "fztest-"); err == nil {
			e.ShmDir = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	for _, d := range []string{e.DataDir, e.StoreDir} {
		os.MkdirAll(d, 0o755)
	}
	return e
}

// runInProcess starts the sidecar in this process (for tests that need no
// crash) and returns its URL.
func runInProcess(t *testing.T, e sidecarEnv, mod func(*sidecar.Config)) string {
	t.Helper()
	cfg := e.config()
	if cfg.Listen == "" && cfg.Embedded {
		cfg.Listen = "127.0.0.1:0"
	}
	cfg.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if mod != nil {
		mod(&cfg)
	}
	ready := make(chan string, 1)
	cfg.Ready = func(url string) { ready <- url }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sidecar.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sidecar: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("sidecar did not stop")
		}
	})
	select {
	case url := <-ready:
		return url
	case err := <-done:
		t.Fatalf("sidecar: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("sidecar not ready")
	}
	return ""
}

type sidecarConfig = sidecar.Config

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
