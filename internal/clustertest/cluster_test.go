package clustertest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/miniotest"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
	"github.com/fzsidecar/fzsidecar/internal/simulate"
	"github.com/fzsidecar/fzsidecar/sinks"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const bucket = "fzcluster"

// natsAuth is the accounts block of deploy/nats/nats-server.conf, which the
// test's servers run with, so the users and permissions docs/DEPLOY.md
// recommends are the ones checked here: sidecars connect as alice-sidecar,
// producers as alice-producer.
type natsAuth struct {
	accounts                  string
	env                       []string // the servers' password variables
	sidecarPass, producerPass string
}

func loadNATSAuth(t testing.TB) natsAuth {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(nativetest.RepoRoot(t), "deploy", "nats", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "\naccounts {")
	if i < 0 {
		t.Fatal("deploy/nats/nats-server.conf has no accounts block")
	}
	a := natsAuth{accounts: string(b[i:]), sidecarPass: "sidecar-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		producerPass: "producer-" + strconv.FormatInt(time.Now().UnixNano()+1, 36)}
	a.env = []string{"ALICE_SIDECAR_PASSWORD=" + a.sidecarPass, "ALICE_PRODUCER_PASSWORD=" + a.producerPass}
	return a
}

// node is one "compute node": its sidecar, shared-memory directory and
// subject prefix.
type node struct {
	name   string // node0
	prefix string // fz-node0
	shm    string
	sc     *nativetest.Sidecar
	// earlier is the stderr of this node's killed sidecars (Start resets
	// the live one's).
	earlier []string
}

// restart starts nd's (killed) sidecar again, keeping the old one's log.
func (nd *node) restart(t *testing.T) {
	t.Helper()
	nd.earlier = append(nd.earlier, nd.sc.Stderr())
	nd.sc.Start(t)
}

// log is everything nd's sidecars printed on stderr, oldest first.
func (nd *node) log() string {
	var b strings.Builder
	for i, l := range nd.earlier {
		fmt.Fprintf(&b, "--- sidecar %s, run %d (killed) ---\n%s", nd.name, i+1, l)
	}
	fmt.Fprintf(&b, "--- sidecar %s, run %d ---\n%s", nd.name, len(nd.earlier)+1, nd.sc.Stderr())
	return b.String()
}

// s3Env is the environment of every fzsidecar process that opens the
// bucket; endpoint is the S3 server it talks to.
func s3Env(endpoint string) []string {
	return []string{"AWS_ACCESS_KEY_ID=" + miniotest.AccessKey, "AWS_SECRET_ACCESS_KEY=" + miniotest.SecretKey,
		"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL=" + endpoint}
}

// startNodes starts one sidecar per node on the NATS cluster, each with its
// own prefix and shm directory, all writing to the one bucket through the
// balancer.
func startNodes(t *testing.T, bin string, nc *natsCluster, auth natsAuth, s3 string, n int, extra ...string) []*node {
	t.Helper()
	var nodes []*node
	for i := range n {
		nd := &node{name: "node" + strconv.Itoa(i), prefix: "fz-node" + strconv.Itoa(i)}
		shm, err := os.MkdirTemp("/dev/shm", "fzcluster-")
		if err != nil {
			shm = filepath.Join(t.TempDir(), "shm")
		} else {
			t.Cleanup(func() { os.RemoveAll(shm) })
		}
		nd.shm = shm
		args := append([]string{"serve", "--nats-url", nc.URL(), "--nats-user", "alice-sidecar", "--replicas", "3", "--subject-prefix", nd.prefix,
			"--shm-dir", shm, "--sink", "s3://" + bucket, "--s3-endpoint", s3, "--data-dir", t.TempDir(),
			"--ack-wait", "2s", "--backend", "cpu", "--metrics-listen", "127.0.0.1:0"}, extra...)
		if os.Getenv("FZ_CLUSTER_VERBOSE") != "" {
			args = append(args, "--log-level", "debug")
		}
		nd.sc = &nativetest.Sidecar{Bin: bin, ShmDir: shm, Sink: "s3://" + bucket, Args: args,
			Env: append(s3Env(s3), "FZ_NATS_PASSWORD="+auth.sidecarPass)}
		nd.sc.Start(t)
		t.Cleanup(nd.sc.Stop)
		nodes = append(nodes, nd)
	}
	return nodes
}

// producer is one `fzsidecar simulate` process.
type producer struct {
	id       string
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
}

func startProducer(t *testing.T, bin string, nc *natsCluster, auth natsAuth, nd *node, id string, args ...string) *producer {
	t.Helper()
	p := &producer{id: id, done: make(chan struct{})}
	full := append([]string{"simulate", "--nats-url", nc.URL(), "--nats-user", "alice-producer", "--subject-prefix", nd.prefix,
		"--shm-dir", nd.shm, "--producer", id, "--block-timeout", "2m", "--timeout", "3m"}, args...)
	p.cmd = exec.Command(bin, full...)
	p.cmd.Env = append(os.Environ(), "FZ_NATS_PASSWORD="+auth.producerPass)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *producer) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

var summaryRE = regexp.MustCompile(`(?m)^(\d+) stored, (\d+) failed, (\d+) skipped.*$`)

// wait waits for the producer and returns its stored/failed/skipped counts.
func (p *producer) wait(t *testing.T, within time.Duration) (stored, failed, skipped int) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("producer %s still running after %v:\n%s\n%s", p.id, within, p.out.String(), p.err.String())
	}
	m := summaryRE.FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("producer %s ended without a summary (exit %d):\nstdout: %s\nstderr: %s", p.id,
			p.cmd.ProcessState.ExitCode(), p.out.String(), p.err.String())
	}
	stored, _ = strconv.Atoi(m[1])
	failed, _ = strconv.Atoi(m[2])
	skipped, _ = strconv.Atoi(m[3])
	return
}

// lsRow is what `fzsidecar ls --json` prints per step (the fields used here).
type lsRow struct {
	Run   string   `json:"run"`
	Var   string   `json:"var"`
	Step  uint64   `json:"step"`
	Dims  []uint64 `json:"dims"`
	DType string   `json:"dtype"`
	Mode  string   `json:"mode"`
	Bound float64  `json:"bound"`
	AbsEB float64  `json:"abs_eb"`
}

func ls(t *testing.T, bin, endpoint string, args ...string) (string, []lsRow) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"ls", "--sink", "s3://" + bucket, "--json"}, args...)...)
	cmd.Env = append(os.Environ(), s3Env(endpoint)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("fzsidecar ls via %s: %v\n%s", endpoint, err, e.String())
	}
	var rows []lsRow
	if err := json.Unmarshal(o.Bytes(), &rows); err != nil {
		t.Fatalf("fzsidecar ls --json via %s: %v\n%s", endpoint, err, o.String())
	}
	return o.String(), rows
}

// checkDecodes fetches every row with `fzsidecar get` (spread over the
// endpoints, a few at once) and checks it against the field the producer
// wrote: within the stored absolute bound, which itself must be what the
// relative bound asked for.
func checkDecodes(t *testing.T, bin string, endpoints []string, rows []lsRow, varIndex func(lsRow) int) {
	t.Helper()
	dir := t.TempDir()
	sem := make(chan struct{}, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	fail := func(f string, a ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	for i, r := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out := filepath.Join(dir, strconv.Itoa(i)+".raw")
			ep := endpoints[i%len(endpoints)]
			cmd := exec.Command(bin, "get", "--sink", "s3://"+bucket, "--run", r.Run, "--var", r.Var,
				"--step", strconv.FormatUint(r.Step, 10), "--backend", "cpu", "-o", out)
			cmd.Env = append(os.Environ(), s3Env(ep)...)
			if b, err := cmd.CombinedOutput(); err != nil {
				fail("get %s/%s/%d via %s: %v\n%s", r.Run, r.Var, r.Step, ep, err, b)
				return
			}
			got, err := os.ReadFile(out)
			if err != nil {
				fail("%v", err)
				return
			}
			os.Remove(out)
			if r.DType != "f32" {
				fail("%s/%s/%d: dtype %q, want f32", r.Run, r.Var, r.Step, r.DType)
				return
			}
			want := simulate.Field(r.Dims, fz.Float32, varIndex(r), r.Step)
			if len(got) != len(want) {
				fail("%s/%s/%d: %d bytes decoded, want %d", r.Run, r.Var, r.Step, len(got), len(want))
				return
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			maxErr := 0.0
			for j := 0; j < len(want); j += 4 {
				w := float64(math.Float32frombits(binary.LittleEndian.Uint32(want[j:])))
				g := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[j:])))
				lo, hi = min(lo, w), max(hi, w)
				maxErr = max(maxErr, math.Abs(g-w))
			}
			if r.Mode != "rel" || !(r.AbsEB > 0) || r.AbsEB > r.Bound*(hi-lo)*(1+1e-6) {
				fail("%s/%s/%d: stored bound %s %g (abs %g) is not the requested relative bound of a field of range %g",
					r.Run, r.Var, r.Step, r.Mode, r.Bound, r.AbsEB, hi-lo)
			}
			if maxErr > r.AbsEB {
				fail("%s/%s/%d: max error %g exceeds the bound %g", r.Run, r.Var, r.Step, maxErr, r.AbsEB)
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
}

// TestClusterWithFaults: 3 sidecars on a 3-server NATS cluster (replicas
// 3) and a 4-server MinIO, 6 producers; mid-stream a NATS server, a sidecar
// (restarted) and a MinIO server are SIGKILLed. Every snapshot must be
// stored exactly once and decode within its bound, every node must list the
// same catalog, and two sidecars writing one run/var/step must conflict,
// never overwrite.
func TestClusterWithFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the multi-node cluster test starts 10 servers")
	}
	natsServerBinary(t)
	minioBinary(t)
	bin := nativetest.BuildFzsidecar(t)
	start := time.Now()
	auth := loadNATSAuth(t)
	nc := startNATSCluster(t, 3, auth.accounts, auth.env)
	mc := startMinIOCluster(t, 4)
	lb := startBalancer(t, mc.endpoints)
	s3 := s3Client(t, lb.Endpoint())
	makeBucket(t, s3, bucket)
	nodes := startNodes(t, bin, nc, auth, lb.Endpoint(), 3)
	t.Logf("cluster up in %.1fs: nats %s; minio %v behind %s", time.Since(start).Seconds(), nc.URL(), mc.endpoints, lb.Endpoint())

	// Two producers per node, each its own run of two variables.
	const steps, perNode = 12, 2
	vars := []string{"temp", "pres"}
	var prods []*producer
	var runs []string
	for _, nd := range nodes {
		for j := range perNode {
			id := fmt.Sprintf("%s-p%d", nd.name, j)
			runs = append(runs, "job-"+id)
			prods = append(prods, startProducer(t, bin, nc, auth, nd, id, "--run", "job-"+id,
				"--vars", strings.Join(vars, ","), "--steps", strconv.Itoa(steps), "--dims", "16x64x64",
				"--interval", "400ms", "--mode", "rel", "--eb", "1e-3"))
		}
	}
	total := len(prods) * len(vars) * steps

	// The faults, each once a share of the snapshots is stored, so they hit
	// the stream in its middle.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitStored := func(n int) int {
		for {
			names, err := objectNames(ctx, s3, bucket)
			if err == nil && len(names) >= n {
				return len(names)
			}
			if ctx.Err() != nil {
				t.Fatalf("waiting for %d stored snapshots: %v (last error %v)", n, ctx.Err(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	midStream := func(what string, stored int) {
		running := 0
		for _, p := range prods {
			if p.running() {
				running++
			}
		}
		t.Logf("%.1fs: %s with %d of %d snapshots stored, %d producers running", time.Since(start).Seconds(), what, stored, total, running)
		if stored >= total || running == 0 {
			t.Fatalf("%s came after the stream ended (%d of %d stored): the producers are too fast for this test", what, stored, total)
		}
	}
	// The NATS server leading node1's snapshot stream dies, and node1's
	// sidecar right after it: the sidecar restarts while the stream elects
	// a new leader (seconds), so its start-up requests meet the election.
	stored := waitStored(total / 5)
	leader := streamLeader(t, ctx, nc, auth, nodes[1])
	nc.servers[leader].kill()
	midStream(fmt.Sprintf("SIGKILL nats-server n%d (leader of node1's stream)", leader), stored)
	nodes[1].sc.Kill()
	midStream("SIGKILL sidecar of node1", stored)
	nodes[1].restart(t)
	t.Logf("%.1fs: sidecar of node1 restarted", time.Since(start).Seconds())

	stored = waitStored(total * 2 / 5)
	mc.servers[1].kill()
	midStream("SIGKILL minio m1", stored)

	for _, p := range prods {
		st, failed, skipped := p.wait(t, 4*time.Minute)
		t.Logf("producer %s: %s", p.id, summaryRE.FindString(p.out.String()))
		if st != len(vars)*steps || failed != 0 || skipped != 0 || p.cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("producer %s: %d stored, %d failed, %d skipped, exit %d; want %d stored\nstdout: %s\nstderr: %s",
				p.id, st, failed, skipped, p.cmd.ProcessState.ExitCode(), len(vars)*steps, p.out.String(), p.err.String())
		}
	}
	t.Logf("%.1fs: all %d producers done", time.Since(start).Seconds(), len(prods))
	logs := func() {
		for _, nd := range nodes {
			t.Logf("sidecar %s stderr:\n%s", nd.name, nd.log())
		}
		for _, p := range prods {
			t.Logf("producer %s stdout:\n%s\nstderr:\n%s", p.id, p.out.String(), p.err.String())
		}
		for _, p := range mc.servers {
			t.Logf("%s log:\n%s", p.name, p.logTail())
		}
	}
	keepLogs(t, nodes, prods, mc)
	if t.Failed() || os.Getenv("FZ_CLUSTER_VERBOSE") != "" {
		logs()
		if t.Failed() {
			t.FailNow()
		}
	}

	// The dead NATS server comes back and must catch up with everything it
	// missed: its /healthz is OK only once its streams are current.
	if err := nc.servers[leader].start(); err != nil {
		t.Fatal(err)
	}
	if err := waitHTTP(nc.servers[leader], nc.monitors[leader]+"/healthz", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1fs: nats-server n%d restarted and current", time.Since(start).Seconds(), leader)

	// Exactly once: the bucket holds exactly the expected objects.
	var want []string
	for _, r := range runs {
		for _, v := range vars {
			for s := range steps {
				want = append(want, fmt.Sprintf("%s/%s/%0*d.fz", r, v, sinks.StepDigits, s))
			}
		}
	}
	slices.Sort(want)
	got, err := objectNames(ctx, s3, bucket)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		// A listing is not a lookup: say what each live server answers to a
		// HEAD of each missing key, and what each drive holds of it.
		diagnoseMissing(t, ctx, mc, got, want, nodes, prods)
		if os.Getenv("FZ_CLUSTER_VERBOSE") == "" {
			logs()
		}
		t.Fatalf("bucket holds %d objects, want exactly the %d snapshots:\n got %v\nwant %v", len(got), len(want), got, want)
	}

	// Nothing left behind in JetStream: every node's snapshot stream is
	// empty (all acknowledged) and replicated on 3 current servers.
	checkStreams(t, ctx, nc, auth, nodes)

	// The same catalog from every node (each through its own live MinIO
	// server, no balancer).
	var live []string
	for i, p := range mc.servers {
		if !p.exited() {
			live = append(live, mc.endpoints[i])
		}
	}
	first, rows := ls(t, bin, live[0])
	if len(rows) != total {
		t.Fatalf("ls via %s lists %d steps, want %d", live[0], len(rows), total)
	}
	for _, ep := range live[1:] {
		if out, _ := ls(t, bin, ep); out != first {
			t.Errorf("ls via %s differs from ls via %s:\n%s\n---\n%s", ep, live[0], out, first)
		}
	}
	checkDecodes(t, bin, live, rows, func(r lsRow) int { return slices.Index(vars, r.Var) })
	t.Logf("%.1fs: %d snapshots stored once, listed alike by %d servers, decoded within bound", time.Since(start).Seconds(), total, len(live))

	checkCreateOnly(t, bin, nc, auth, nodes, live)
	t.Logf("%.1fs: done", time.Since(start).Seconds())
}

// streamLeader is the index of the NATS server leading nd's snapshot
// stream.
func streamLeader(t *testing.T, ctx context.Context, nc *natsCluster, auth natsAuth, nd *node) int {
	t.Helper()
	conn, err := nats.Connect(nc.URL(), nats.Timeout(10*time.Second), nats.UserInfo("alice-sidecar", auth.sidecarPass))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToUpper(strings.ReplaceAll(nd.prefix, "-", "_")) + "_SNAPSHOTS"
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream %s: %v %+v", name, err, info)
	}
	i, err := strconv.Atoi(strings.TrimPrefix(info.Cluster.Leader, "n"))
	if err != nil || i < 0 || i >= len(nc.servers) {
		t.Fatalf("stream %s: leader %q is none of the servers", name, info.Cluster.Leader)
	}
	return i
}

// allCurrent reports a stream led by one server with two peers, both
// online and current.
func allCurrent(info *jetstream.StreamInfo) bool {
	if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if r.Offline || !r.Current {
			return false
		}
	}
	return true
}

// checkStreams: every node's snapshot stream is empty and both its streams
// have 3 replicas, all current.
func checkStreams(t *testing.T, ctx context.Context, nc *natsCluster, auth natsAuth, nodes []*node) {
	t.Helper()
	conn, err := nats.Connect(nc.URL(), nats.Timeout(10*time.Second), nats.UserInfo("alice-sidecar", auth.sidecarPass))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		for _, name := range []string{"SNAPSHOTS", "RESULTS"} {
			sname := strings.ToUpper(strings.ReplaceAll(nd.prefix, "-", "_")) + "_" + name
			st, err := js.Stream(ctx, sname)
			if err != nil {
				t.Fatalf("stream %s: %v", sname, err)
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatalf("stream %s: %v", sname, err)
			}
			// All three servers hold the stream again, the restarted one
			// included, and are current.
			for deadline := time.Now().Add(30 * time.Second); !allCurrent(info) && time.Now().Before(deadline); {
				time.Sleep(200 * time.Millisecond)
				if info, err = st.Info(ctx); err != nil {
					t.Fatalf("stream %s: %v", sname, err)
				}
			}
			if info.Config.Replicas != 3 || !allCurrent(info) {
				t.Errorf("stream %s: %d replicas, cluster %+v; want 3 (a leader and 2 current peers)", sname, info.Config.Replicas, info.Cluster)
			}
			if name != "SNAPSHOTS" {
				continue
			}
			// Acks travel after the results: give the last ones (and any
			// redelivery after a lost ack) the ack wait and some.
			for deadline := time.Now().Add(15 * time.Second); info.State.Msgs != 0 && time.Now().Before(deadline); {
				time.Sleep(200 * time.Millisecond)
				if info, err = st.Info(ctx); err != nil {
					t.Fatalf("stream %s: %v", sname, err)
				}
			}
			if info.State.Msgs != 0 {
				c, _ := st.Consumer(ctx, "fzsidecar")
				var ci *jetstream.ConsumerInfo
				if c != nil {
					ci, _ = c.Info(ctx)
				}
				var msgs []string
				for seq := info.State.FirstSeq; seq <= info.State.LastSeq && len(msgs) < 10; seq++ {
					if m, err := st.GetMsg(ctx, seq); err == nil {
						msgs = append(msgs, fmt.Sprintf("seq %d %s %s", m.Sequence, m.Subject, m.Data))
					}
				}
				t.Errorf("stream %s still holds %d notifications after every result came back; state %+v; consumer %+v\n%s",
					sname, info.State.Msgs, info.State, ci, strings.Join(msgs, "\n"))
			}
		}
	}
}

// checkCreateOnly: producers on two nodes write the same run/var/steps with
// different error bounds (so different bytes). For each step exactly one
// wins; the other gets a conflict result; the stored object stays the
// winner's.
func checkCreateOnly(t *testing.T, bin string, nc *natsCluster, auth natsAuth, nodes []*node, endpoints []string) {
	t.Helper()
	const steps = 6
	args := []string{"--run", "race", "--vars", "temp", "--steps", strconv.Itoa(steps), "--dims", "16x64x64",
		"--interval", "0", "--mode", "rel"}
	a := startProducer(t, bin, nc, auth, nodes[0], "race-a", append(args, "--eb", "1e-2")...)
	b := startProducer(t, bin, nc, auth, nodes[2], "race-b", append(args, "--eb", "1e-4")...)
	aOK, aFail, _ := a.wait(t, 2*time.Minute)
	bOK, bFail, _ := b.wait(t, 2*time.Minute)
	if aOK+bOK != steps || aFail+bFail != steps {
		t.Fatalf("racing writers: a %d stored %d failed, b %d stored %d failed; want %d of each in all\na: %s\nb: %s",
			aOK, aFail, bOK, bFail, steps, a.out.String(), b.out.String())
	}
	for _, p := range []*producer{a, b} {
		for _, line := range strings.Split(p.out.String(), "\n") {
			if strings.HasPrefix(line, "FAILED") && !strings.Contains(line, "conflict") {
				t.Errorf("producer %s: %q is not a create-only conflict", p.id, line)
			}
		}
	}
	_, rows := ls(t, bin, endpoints[0], "--run", "race")
	if len(rows) != steps {
		t.Fatalf("ls --run race: %d steps, want %d", len(rows), steps)
	}
	aStored := 0
	for _, r := range rows {
		switch r.Bound {
		case 1e-2:
			aStored++
		case 1e-4:
		default:
			t.Errorf("race/temp/%d: bound %g is neither writer's", r.Step, r.Bound)
		}
	}
	if aStored != aOK {
		t.Errorf("%d steps hold writer a's blob but a was told %d were stored: a blob was replaced", aStored, aOK)
	}
	checkDecodes(t, bin, endpoints, rows, func(lsRow) int { return 0 })
	t.Logf("racing writers: a stored %d, b stored %d; the losers got conflicts", aOK, bOK)
}
