package clustertest

import (
	"context"
	"fmt"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// required reports whether a missing server binary must fail the test
// (CI) instead of skipping it.
func required() bool {
	return os.Getenv("FZ_REQUIRE_NATIVE") == "1" || os.Getenv("FZ_REQUIRE_MINIO") == "1"
}

func need(t testing.TB, what, where, install string) {
	t.Helper()
	msg := "\n" +
		"##########################################################################\n" +
		"##  " + what + " NOT FOUND: multi-node cluster test NOT RUN.\n" +
		"##  " + where + "\n" +
		"##  Install it with: " + install + "\n" +
		"##########################################################################"
	if required() {
		t.Fatal(msg + "\nFZ_REQUIRE_NATIVE=1 or FZ_REQUIRE_MINIO=1: failing instead of skipping")
	}
	fmt.Fprintln(os.Stderr, msg)
	skiplog.Skipf(t, "%s", msg)
}

// natsServerBinary finds nats-server in $FZ_NATS_SERVER_BIN, PATH or the
// cache of .ci/install-nats-server.sh.
func natsServerBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FZ_NATS_SERVER_BIN"); p != "" {
		if isExec(p) {
			return p
		}
		need(t, "nats-server", "FZ_NATS_SERVER_BIN="+p+" is not an executable file", "bash .ci/install-nats-server.sh")
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	cache := os.Getenv("FZ_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "fzsidecar")
	}
	p := filepath.Join(cache, "bin", "nats-server")
	if !isExec(p) {
		need(t, "nats-server", "looked in $FZ_NATS_SERVER_BIN, PATH and "+p, "bash .ci/install-nats-server.sh")
	}
	return p
}

func minioBinary(t testing.TB) string {
	t.Helper()
	p, how := miniotest.Binary()
	if p == "" {
		need(t, "MinIO server", how, "bash .ci/install-minio.sh  (or set FZ_MINIO_BIN)")
	}
	return p
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// freePorts returns n distinct free loopback ports (all held open while
// picking, so they differ from each other).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// proc is one server process; its output goes to a log file that failures
// quote.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start() error {
	lf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Dies with the test binary even if that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("%s: starting %s: %w", p.name, p.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); lf.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// pid is the process id, 0 when not running.
func (p *proc) pid() int {
	if p.exited() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// exited reports whether the process has ended (or was never started).
func (p *proc) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// stop sends SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// waitHTTP polls url until it answers 200 or the process exits.
func waitHTTP(p *proc, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	cl := http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited during start-up:\n%s", p.name, p.logTail())
		}
		resp, err := cl.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s not OK after %v:\n%s", p.name, url, within, p.logTail())
}

// natsCluster is n nats-server processes with JetStream, routed into one
// cluster.
type natsCluster struct {
	servers  []*proc
	clients  []string // nats://127.0.0.1:port
	monitors []string // http://127.0.0.1:port
}

// URL is the comma-separated list of all servers, as clients get it.
func (c *natsCluster) URL() string { return strings.Join(c.clients, ",") }

// startNATSCluster starts n servers; extra is appended to every server's
// configuration (accounts), env to their environment (the passwords it
// names).
func startNATSCluster(t testing.TB, n int, extra string, env []string) *natsCluster {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	ports := freePorts(t, 3*n)
	c := &natsCluster{}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("\"nats-route://127.0.0.1:%d\"", ports[3*i+1]))
	}
	for i := range n {
		cp, rp, mp := ports[3*i], ports[3*i+1], ports[3*i+2]
		sdir := filepath.Join(dir, "n"+strconv.Itoa(i))
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`server_name: "n%d"
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 4GB
}
cluster {
  name: "fzcluster"
  listen: "127.0.0.1:%d"
  routes: [%s]
}
%s
`, i, cp, mp, filepath.Join(sdir, "js"), rp, strings.Join(routes, ", "), extra)
		cf := filepath.Join(sdir, "nats.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		p := &proc{name: "nats-server n" + strconv.Itoa(i), bin: bin, args: []string{"-c", cf}, env: env,
			logPath: filepath.Join(sdir, "nats.log")}
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		c.servers = append(c.servers, p)
		c.clients = append(c.clients, fmt.Sprintf("nats://127.0.0.1:%d", cp))
		c.monitors = append(c.monitors, fmt.Sprintf("http://127.0.0.1:%d", mp))
	}
	// /healthz is OK once the server's JetStream is current with the
	// cluster (a meta leader is elected).
	for i, p := range c.servers {
		if err := waitHTTP(p, c.monitors[i]+"/healthz", 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// minioCluster is MinIO distributed over n server processes with one drive
// each (erasure coding across them; with 4, any one may die).
type minioCluster struct {
	servers   []*proc
	endpoints []string // http://127.0.0.1:port
	drives    []string // each server's drive directory
}

func startMinIOCluster(t testing.TB, n int) *minioCluster {
	t.Helper()
	bin := minioBinary(t)
	dir := t.TempDir()
	ports := freePorts(t, 2*n)
	var drives []string
	for i := range n {
		d := filepath.Join(dir, "drive"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		drives = append(drives, fmt.Sprintf("http://127.0.0.1:%d%s", ports[2*i], d))
	}
	c := &minioCluster{}
	for i := range n {
		c.drives = append(c.drives, filepath.Join(dir, "drive"+strconv.Itoa(i)))
		p := &proc{name: "minio m" + strconv.Itoa(i), bin: bin,
			args: append([]string{"server", "--quiet", "--address", "127.0.0.1:" + strconv.Itoa(ports[2*i]),
				"--console-address", "127.0.0.1:" + strconv.Itoa(ports[2*i+1])}, drives...),
			env: []string{"MINIO_ROOT_USER=" + miniotest.AccessKey, "MINIO_ROOT_PASSWORD=" + miniotest.SecretKey,
				"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1",
				// In a container (/.dockerenv) MinIO waits for endpoints
				// on loopback to "resolve to a valid IP", forever; this
				// names the process's own endpoint so it stops looking.
				"_MINIO_SERVER_LOCAL=127.0.0.1:" + strconv.Itoa(ports[2*i])},
			logPath: filepath.Join(dir, "minio"+strconv.Itoa(i)+".log")}
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		c.servers = append(c.servers, p)
		c.endpoints = append(c.endpoints, "http://127.0.0.1:"+strconv.Itoa(ports[2*i]))
	}
	// Every server must be up, and the cluster must have write quorum.
	for i, p := range c.servers {
		if err := waitHTTP(p, c.endpoints[i]+"/minio/health/cluster", 120*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// client is an S3 client of one endpoint (host:port or http://host:port).
func s3Client(t testing.TB, endpoint string) *minio.Client {
	t.Helper()
	cl, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(miniotest.AccessKey, miniotest.SecretKey, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// balancer is a TCP load balancer in front of the MinIO servers, as a
// deployment has one (or DNS round robin): each connection goes to the next
// server that accepts it, so a dead server only costs the requests that
// were on it.
type balancer struct {
	ln       net.Listener
	backends []string // host:port
	next     atomic.Uint32
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func startBalancer(t testing.TB, backends []string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, conns: map[net.Conn]struct{}{}}
	for _, e := range backends {
		b.backends = append(b.backends, strings.TrimPrefix(e, "http://"))
	}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *balancer) Endpoint() string { return "http://" + b.ln.Addr().String() }

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.forward(c)
		}()
	}
}

func (b *balancer) track(c net.Conn, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.conns[c] = struct{}{}
	} else {
		delete(b.conns, c)
	}
}

func (b *balancer) forward(c net.Conn) {
	defer c.Close()
	first := int(b.next.Add(1))
	var up net.Conn
	for i := range b.backends {
		addr := b.backends[(first+i)%len(b.backends)]
		d, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			up = d
			break
		}
	}
	if up == nil {
		return // no server accepts: the client sees a reset and retries
	}
	defer up.Close()
	b.track(c, true)
	b.track(up, true)
	defer b.track(c, false)
	defer b.track(up, false)
	sent := make(chan struct{})
	go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); close(sent) }()
	// The server's side ends the connection: when it closes (or dies) the
	// client sees it at once, and the copy above ends with the close.
	io.Copy(c, up)
	c.Close()
	up.Close()
	<-sent
}

func (b *balancer) close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// makeBucket creates bucket through cl.
func makeBucket(t testing.TB, cl *minio.Client, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cl.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
	if minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
		// Seen once right after start-up: minio-go retries a request that
		// failed (a server of the young cluster still initialising, a
		// reset through the balancer) and the first attempt had created
		// the bucket. Nobody else talks to this fresh cluster, so the
		// bucket is ours, as asked.
		t.Logf("make bucket %s: %v (a retried request; the bucket is there)", bucket, err)
		err = nil
	}
	if err != nil {
		t.Fatalf("make bucket %s: %v", bucket, err)
	}
}

// objectNames lists every object of the bucket.
func objectNames(ctx context.Context, cl *minio.Client, bucket string) ([]string, error) {
	var names []string
	for o := range cl.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		names = append(names, o.Key)
	}
	return names, nil
}
