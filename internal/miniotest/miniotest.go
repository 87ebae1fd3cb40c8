// Package miniotest runs a real MinIO server for tests, as a separate
// process on 127.0.0.1 with a random port and a temp data directory. MinIO
// is AGPL: it is only ever executed, never imported.
//
// The binary is looked up in $FZ_MINIO_BIN, then PATH, then
// ${FZ_CACHE:-$HOME/.cache/fzsidecar}/bin/minio (where .ci/install-minio.sh
// puts it). Without it the tests skip, saying how to install it, and record
// the skip with skiplog: `go test ./...` prints nothing of a passing package,
// so `make test` lists the skips at the end where a user sees them.
// FZ_REQUIRE_MINIO=1 (CI) turns the skips into failures.
package miniotest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/skiplog"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Test credentials of the throwaway server.
const (
	AccessKey = "fztestadmin"
	SecretKey = "fztestsecret-not-a-real-one"
)

// Binary returns the MinIO server binary's path and how it was found, or
// "" and the places looked at.
func Binary() (path, how string) {
	if p := os.Getenv("FZ_MINIO_BIN"); p != "" {
		if isExec(p) {
			return p, "FZ_MINIO_BIN"
		}
		return "", fmt.Sprintf("FZ_MINIO_BIN=%s is not an executable file", p)
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, "PATH"
	}
	cache := os.Getenv("FZ_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "fzsidecar")
	}
	p := filepath.Join(cache, "bin", "minio")
	if isExec(p) {
		return p, "cache"
	}
	return "", "looked in $FZ_MINIO_BIN, PATH and " + p
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Server is one running MinIO process.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	Addr     string
	Dir      string
	// Drives are the data directories: one (Dir/data), or those of an
	// erasure-coded server (StartDrives).
	Drives  []string
	bin     string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logFile *os.File
}

// bannerOnce makes the first test without MinIO print the whole
// explanation and the others one line.
var bannerOnce sync.Once

// requireBinary skips the test without MinIO (recorded by skiplog), or
// fails it under FZ_REQUIRE_MINIO=1.
func requireBinary(t testing.TB) string {
	t.Helper()
	bin, how := Binary()
	if bin != "" {
		return bin
	}
	skip := os.Getenv("FZ_REQUIRE_MINIO") != "1"
	msg := "MinIO server binary not found: S3 test not run (" + how + ")"
	bannerOnce.Do(func() {
		msg = "\n" +
			"##########################################################################\n" +
			"##  MinIO server binary NOT FOUND: the S3 integration tests cannot run.\n" +
			"##  " + how + "\n" +
			"##  Install it:  bash .ci/install-minio.sh   (builds MinIO from the Go\n" +
			"##  module proxy once, ~5 min, cached; or set FZ_MINIO_BIN=/path/minio)\n" +
			"##########################################################################"
	})
	if skip {
		skiplog.Skipf(t, "%s", msg)
	}
	t.Fatal(msg)
	return ""
}

// Start starts a server owned by t (stopped in t.Cleanup).
func Start(t testing.TB) *Server { return StartDrives(t, 1) }

// StartDrives starts a server of n drives (Dir/drive1..n), erasure coded
// when n >= 4 as a MinIO deployment is (4 drives: 2 data + 2 parity, read
// quorum 2, write quorum 3), owned by t.
func StartDrives(t testing.TB, n int) *Server {
	t.Helper()
	s, err := start(requireBinary(t), t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

var shared struct {
	once sync.Once
	s    *Server
	err  error
	dir  string
}

// Shared returns a server shared by the tests of one package (start-up
// costs seconds); tests keep apart by using their own bucket. The package's
// TestMain must call StopShared.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := requireBinary(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "fz-minio-")
		if shared.err == nil {
			shared.s, shared.err = start(bin, shared.dir, 1)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

// StopShared stops the shared server, if one was started.
func StopShared() {
	if shared.s != nil {
		shared.s.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(bin, dir string, drives int) (*Server, error) {
	var last error
	// The port is free when picked but could be taken before MinIO binds
	// it: try a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{bin: bin, Dir: dir, Addr: "127.0.0.1:" + strconv.Itoa(port)}
		if drives <= 1 {
			s.Drives = []string{filepath.Join(dir, "data")}
		} else {
			for i := range drives {
				s.Drives = append(s.Drives, filepath.Join(dir, "drive"+strconv.Itoa(i+1)))
			}
		}
		s.Endpoint = "http://" + s.Addr
		if last = s.launch(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func (s *Server) launch() error {
	for _, d := range s.Drives {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	lf, err := os.OpenFile(filepath.Join(s.Dir, "minio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cport, err := freePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.Addr, "--console-address", "127.0.0.1:"+strconv.Itoa(cport))
	cmd.Args = append(cmd.Args, s.Drives...)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+AccessKey,
		"MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CI_CD=1",
	)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Dies with the test binary even if that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.logFile = cmd, exited, lf
	s.mu.Unlock()

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			log, _ := os.ReadFile(lf.Name())
			lf.Close()
			return fmt.Errorf("minio exited during start-up: %s", tail(log))
		default:
		}
		resp, err := http.Get(s.Endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Kill()
	log, _ := os.ReadFile(lf.Name())
	return fmt.Errorf("minio not ready after 60 s: %s", tail(log))
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Kill sends SIGKILL and waits for the process to go.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited, lf := s.cmd, s.exited, s.logFile
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
	lf.Close()
}

// Restart starts the server again on the same address and data.
func (s *Server) Restart() error {
	s.Kill()
	var err error
	// The old socket may linger for a moment.
	for range 20 {
		if err = s.launch(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Stop kills the server.
func (s *Server) Stop() { s.Kill() }

// Pause stops the process with SIGSTOP: its kernel still accepts
// connections and buffers what clients send, but nothing answers — what a
// hung server or a dead host behind a load balancer looks like to a
// client. Resume continues it (Kill works on a paused server too).
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("minio at %s is not running", s.Addr)
	}
	return s.cmd.Process.Signal(sig)
}

// Client is a plain minio-go client for test set-up and inspection.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Addr, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Secure: false, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var bucketSeq atomic.Int64

// Bucket makes a new bucket named after the test and returns its name.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t-%d-%d", os.Getpid(), bucketSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Client(t).MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	return name
}

// SetEnv points the AWS_* variables at this server for the rest of t.
func (s *Server) SetEnv(t testing.TB) {
	t.Setenv("AWS_ENDPOINT_URL", s.Endpoint)
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
}
