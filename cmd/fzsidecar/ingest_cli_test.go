package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"math"
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

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/fzsidecar/fzsidecar/internal/synth"
	"github.com/fzsidecar/fzsidecar/sinks"
)

// With FZSIDECAR_TEST_EXEC=1 the test binary is fzsidecar itself, so tests
// can run serve, simulate and publish as separate OS processes (and SIGKILL
// them) without a separate build step.
func init() {
	if os.Getenv("FZSIDECAR_TEST_EXEC") == "1" {
		os.Exit(realMain(os.Args[1:]))
	}
}

type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	errb strings.Builder
	done chan struct{}
	line chan string
}

// start runs `fzsidecar args...` in a new process.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FZSIDECAR_TEST_EXEC=1")
	p := &proc{cmd: cmd, done: make(chan struct{}), line: make(chan string, 1024)}
	so, _ := cmd.StdoutPipe()
	se, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(so)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.line <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(se)
		for sc.Scan() {
			p.mu.Lock()
			p.errb.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() { wg.Wait(); cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("fzsidecar %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), lastN(p.stdout(), 3000), lastN(p.stderr(), 3000))
		}
	})
	return p
}

func lastN(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *proc) stdout() string { p.mu.Lock(); defer p.mu.Unlock(); return p.out.String() }
func (p *proc) stderr() string { p.mu.Lock(); defer p.mu.Unlock(); return p.errb.String() }

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// wait waits for exit and returns the exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("fzsidecar %v still running after %v", p.cmd.Args[1:], d)
	}
	return -1
}

// waitFor waits until a stdout line contains s.
func (p *proc) waitFor(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l := <-p.line:
			if strings.Contains(l, s) {
				return
			}
		case <-p.done:
			t.Fatalf("exited before printing %q", s)
		case <-deadline:
			t.Fatalf("no %q on stdout within %v", s, d)
		}
	}
}

// stderrHas waits up to d until stderr contains s. Stdout and stderr are
// read by separate goroutines, so a line the process logged before the
// stdout line a test waited for may still be on its way.
func (p *proc) stderrHas(s string, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; {
		if strings.Contains(p.stderr(), s) {
			return true
		}
		select {
		case <-p.done: // stderr is complete
			return strings.Contains(p.stderr(), s)
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type serveEnv struct {
	listen, shm, sink, data string
	served                  bool // serve ran once: later starts are restarts and keep the address
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

func newServeEnv(t *testing.T) serveEnv {
	addr := freeAddr(t)
	base := t.TempDir()
	shm := filepath.Join(base, "shm")
	if d, err := os.MkdirTemp("/dev/shm", "fzclitest-"); err == nil {
		shm = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	return serveEnv{listen: addr, shm: shm, sink: filepath.Join(base, "fzdata"), data: filepath.Join(base, "state")}
}

// serve starts `fzsidecar serve` on e and waits until it is ready. A first
// start binds port 0 and takes the address serve reports (a port picked
// beforehand could be taken by another process before serve binds it); a
// restart binds that address again, where its producers reconnect.
func (e *serveEnv) serve(t *testing.T, extra ...string) *proc {
	t.Helper()
	listen := e.listen
	if !e.served {
		listen = "127.0.0.1:0"
	}
	args := append([]string{"serve", "--nats-listen", listen, "--shm-dir", e.shm, "--sink", e.sink,
		"--data-dir", e.data, "--ack-wait", "2s", "--backend", "cpu", "--metrics-listen", "127.0.0.1:0"}, extra...)
	p := start(t, args...)
	p.waitFor(t, "fzsidecar ready", 60*time.Second)
	if !e.served {
		m := readyNATSRE.FindStringSubmatch(p.stdout())
		if m == nil {
			t.Fatalf("fzsidecar serve's ready line names no NATS address:\n%s", lastN(p.stdout(), 2000))
		}
		e.listen, e.served = m[1], true
	}
	return p
}

// readyNATSRE finds the embedded NATS server's address in serve's ready line.
var readyNATSRE = regexp.MustCompile(`fzsidecar ready: nats nats://([^,\s]+),`)

func (e serveEnv) url() string { return "nats://" + e.listen }

// The main ingest path as a user runs it: serve, then a simulation in
// another process; the sidecar is SIGKILLed mid-stream and restarted; every
// snapshot ends up in the sink exactly once and within its error bound.
func TestServeSimulateKilledAndRestarted(t *testing.T) {
	serveSimulateKillRestart(t, newServeEnv(t))
}

// The same against a real MinIO server: the S3 sink under a crash.
func TestServeSimulateKilledAndRestartedS3(t *testing.T) {
	ms := miniotest.Shared(t)
	ms.SetEnv(t)
	e := newServeEnv(t)
	e.sink = "s3://" + ms.Bucket(t) + "/sims"
	serveSimulateKillRestart(t, e)
}

func serveSimulateKillRestart(t *testing.T, e serveEnv) {
	srv := e.serve(t)
	vars := []string{"temp", "pres", "rho"}
	const steps = 12
	dims := []uint64{16, 64, 64}
	sim := start(t, "simulate", "--nats-url", e.url(), "--shm-dir", e.shm, "--run", "e2e",
		"--vars", strings.Join(vars, ","), "--steps", "12", "--dims", "16x64x64", "--interval", "150ms",
		"--mode", "rel", "--eb", "1e-3", "--block-timeout", "2m")
	sim.waitFor(t, "ratio", 60*time.Second) // stored something
	sim.waitFor(t, "ratio", 60*time.Second)
	srv.kill()
	t.Logf("sidecar killed after %d results", strings.Count(sim.stdout(), "ratio"))
	time.Sleep(1500 * time.Millisecond) // the simulation keeps stepping meanwhile
	srv = e.serve(t)
	if code := sim.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("simulate exit %d", code)
	}
	t.Logf("simulate: %s", strings.TrimSpace(lastN(sim.stdout(), 200)))
	if !strings.Contains(sim.stdout(), "36 stored, 0 failed, 0 skipped") {
		t.Fatalf("simulate summary: %s", lastN(sim.stdout(), 300))
	}

	ctx := context.Background()
	s, err := sinks.Open(ctx, e.sink)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries, err := s.List(ctx, sinks.Filter{Run: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(vars)*steps {
		t.Fatalf("%d objects in the sink, want %d", len(entries), len(vars)*steps)
	}
	want := make([]float32, 16*64*64)
	for vi, v := range vars {
		for step := uint64(0); step < steps; step++ {
			blob, _, err := s.Get(ctx, sinks.Key{Run: "e2e", Var: v, Step: step})
			if err != nil {
				t.Fatalf("%s step %d: %v", v, step, err)
			}
			h, raw, err := fz.Decompress(ctx, blob)
			if err != nil {
				t.Fatal(err)
			}
			synth.Fill32(want, dims, vi, step)
			for i, w := range want {
				got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				if math.Abs(float64(got)-float64(w)) > h.AbsEB*(1+1e-6) {
					t.Fatalf("%s step %d element %d: %v vs %v, bound %v", v, step, i, got, w, h.AbsEB)
				}
			}
		}
	}
	// Every segment was released by the producer (the sidecar's
	// credentials file stays: producers of a restarted sidecar reuse it).
	if segs, _ := filepath.Glob(filepath.Join(e.shm, "*.seg")); len(segs) != 0 {
		t.Errorf("%d segments left in the shm dir: %v", len(segs), segs)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Errorf("serve exit %d after SIGTERM", code)
	}
}

func TestPublishCLI(t *testing.T) {
	e := newServeEnv(t)
	e.serve(t, "--budget", "1MiB")
	raw := make([]byte, 4*100*200)
	for i := 0; i < 100*200; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(math.Sin(float64(i)/300))))
	}
	file := filepath.Join(t.TempDir(), "f.raw")
	os.WriteFile(file, raw, 0o644)
	base := []string{"publish", "--nats-url", e.url(), "--shm-dir", e.shm, "--run", "cli", "--var", "x", "--dtype", "f32", "--mode", "abs", "--eb", "1e-3"}

	p := start(t, append(base, "--step", "3", "--dims", "100x200", file)...)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("publish exit %d", code)
	}
	if !strings.Contains(p.stdout(), "stored cli/x/000000000003.fz") {
		t.Fatalf("publish output: %s", p.stdout())
	}
	s, _ := sinks.Open(context.Background(), e.sink)
	defer s.Close()
	blob, _, err := s.Get(context.Background(), sinks.Key{Run: "cli", Var: "x", Step: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, out, err := fz.Decompress(context.Background(), blob)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(raw); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(out[i:]))
		if math.Abs(float64(a-b)) > 1e-3 {
			t.Fatalf("element %d: %v vs %v", i/4, a, b)
		}
	}
	// Same step again, same bytes: idempotent, succeeds.
	p = start(t, append(base, "--step", "3", "--dims", "100x200", file)...)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("republish exit %d: %s", code, p.stderr())
	}
	if strings.Contains(p.stderr(), "fill value") {
		t.Fatalf("publish of a field without fill-like values warned: %s", p.stderr())
	}
	// A -1e34 fill forgotten: stored, with the warning compress gives (#27.9);
	// at an abs bound it is kept exactly but raw (2^28 steps of 2·bound).
	filled := filepath.Join(t.TempDir(), "filled.raw")
	fr := append([]byte(nil), raw...)
	for i := 0; i < len(fr); i += 12 {
		binary.LittleEndian.PutUint32(fr[i:], math.Float32bits(-1e34))
	}
	os.WriteFile(filled, fr, 0o644)
	p = start(t, append(base, "--step", "6", "--dims", "100x200", filled)...)
	if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stderr(), "looks like a fill value") ||
		!strings.Contains(p.stderr(), "--fill -1e+34") || !strings.Contains(p.stderr(), "stored raw, at full size") {
		t.Fatalf("publish of a field with a forgotten fill: exit %d, stderr %q", code, p.stderr())
	}
	// Wrong dims for the file: refused before anything is sent.
	p = start(t, append(base, "--step", "4", "--dims", "100x300", file)...)
	if code := p.wait(t, 30*time.Second); code != 1 || !strings.Contains(p.stderr(), "need 120000 bytes") {
		t.Fatalf("wrong dims: exit %d, %s", code, p.stderr())
	}
	// Larger than the whole budget: a typed error from the sidecar.
	big := filepath.Join(t.TempDir(), "big.raw")
	os.WriteFile(big, make([]byte, 2<<20), 0o644)
	p = start(t, append(base, "--step", "5", "--dims", "524288", "--policy", "fail", big)...)
	if code := p.wait(t, 30*time.Second); code != 1 || !strings.Contains(p.stderr(), "too_large") {
		t.Fatalf("too large: exit %d, %s", code, p.stderr())
	}
}

func TestIngestUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "--help"}, 0, "--nats-listen"},
		{[]string{"serve", "--nats-url", "nats://x:1", "--nats-listen", "127.0.0.1:1"}, 2, "cannot be combined"},
		{[]string{"serve", "--budget", "lots"}, 2, "--budget"},
		{[]string{"serve", "--backend", "tpu"}, 2, "expected auto, cpu or gpu"},
		{[]string{"serve", "extra"}, 2, "unexpected argument"},
		{[]string{"publish", "--help"}, 0, "--eb"},
		{[]string{"publish", "--run", "r", "--var", "v", "--step", "1", "--dtype", "f32", "--dims", "4", "--eb", "1e-3"}, 2, "missing FILE"},
		{[]string{"publish", "--var", "v", "--step", "1", "f"}, 2, "missing --run"},
		{[]string{"publish", "--run", "r", "--var", "v", "--step", "x", "f"}, 2, "--step"},
		{[]string{"publish", "--run", "r", "--var", "v", "--step", "1", "--dtype", "i8", "--dims", "4", "--eb", "1", "f"}, 2, "--dtype"},
		{[]string{"publish", "--run", "r", "--var", "v", "--step", "1", "--dtype", "f32", "--dims", "4", "--eb", "-1", "f"}, 2, "--eb"},
		{[]string{"publish", "--run", "r", "--var", "v", "--step", "1", "--dtype", "f32", "--dims", "4", "--eb", "1", "--policy", "maybe", "f"}, 2, "--policy"},
		{[]string{"simulate", "--help"}, 0, "--interval"},
		{[]string{"simulate"}, 2, "missing --run"},
		{[]string{"simulate", "--run", "r", "--steps", "0"}, 2, "--steps"},
		{[]string{"simulate", "--run", "r", "--dims", "4xq"}, 2, "--dims"},
		{[]string{"simulate", "--run", "r", "--vars", "a,,b"}, 2, "--vars"},
	}
	for _, c := range cases {
		code, out, errOut := cli(t, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("fzsidecar %s: exit %d (want %d), output lacks %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, out, lastN(errOut, 500))
		}
	}
}

// serve against an external NATS server that requires a token; the token
// reaches both serve and publish through $FZ_NATS_TOKEN.
func TestServeExternalNATSWithToken(t *testing.T) {
	ns, err := ingest.StartServer(ingest.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(),
		Auth: ingest.ConnOptions{Token: "tok3n"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	e := newServeEnv(t)
	t.Setenv("FZ_NATS_TOKEN", "tok3n")
	args := []string{"serve", "--nats-url", ns.ClientURL(), "--shm-dir", e.shm, "--sink", e.sink, "--data-dir", e.data}
	srv := start(t, args...)
	srv.waitFor(t, "fzsidecar ready", 60*time.Second)
	file := filepath.Join(t.TempDir(), "f.raw")
	os.WriteFile(file, make([]byte, 4*64), 0o644)
	p := start(t, "publish", "--nats-url", ns.ClientURL(), "--shm-dir", e.shm, "--run", "ext", "--var", "v",
		"--step", "1", "--dtype", "f32", "--dims", "8x8", "--mode", "abs", "--eb", "0.1", file)
	if code := p.wait(t, 60*time.Second); code != 0 || !strings.Contains(p.stdout(), "stored ext/v/000000000001.fz") {
		t.Fatalf("publish exit %d: %s", code, p.stdout())
	}
	// Without the token the server refuses the producer, with a clear error.
	t.Setenv("FZ_NATS_TOKEN", "")
	p = start(t, "publish", "--nats-url", ns.ClientURL(), "--shm-dir", e.shm, "--run", "ext", "--var", "v",
		"--step", "2", "--dtype", "f32", "--dims", "8x8", "--mode", "abs", "--eb", "0.1", file)
	if code := p.wait(t, 60*time.Second); code != 1 || !strings.Contains(strings.ToLower(p.stderr()), "authorization") {
		t.Fatalf("publish without token: exit %d: %s", code, p.stderr())
	}
}
