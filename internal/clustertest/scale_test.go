package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/internal/nativetest"
	"github.com/fzsidecar/fzsidecar/internal/synth"
)

// BenchmarkClusterIngest measures aggregate ingest with 1, 2 and 3 sidecars
// on the deployment of TestClusterWithFaults (3 NATS servers, replicas 3,
// CPU backend), once into the 4-process MinIO and once into a tmpfs
// directory per sidecar (the sidecars and NATS alone). Each node has two
// producers (goroutines of this process, each with its own connection)
// that copy a precomputed field into reused segments, as a simulation
// writes its output, and publish without waiting for results; the budget
// paces them. The CPU seconds that each kind of process used in the
// measured window show where a small machine runs out.
//
//	go test ./internal/clustertest -run '^$' -bench ClusterIngest -benchtime 1x
func BenchmarkClusterIngest(b *testing.B) {
	natsServerBinary(b)
	minioBinary(b)
	bin := nativetest.BuildFzsidecar(b)
	auth := loadNATSAuth(b)
	nc := startNATSCluster(b, 3, auth.accounts, auth.env)
	mc := startMinIOCluster(b, 4)
	lb := startBalancer(b, mc.endpoints)
	makeBucket(b, s3Client(b, lb.Endpoint()), bucket)
	snapshots := 16
	if v, err := strconv.Atoi(os.Getenv("FZ_CLUSTER_BENCH_SNAPSHOTS")); err == nil && v > 0 {
		snapshots = v
	}
	round := 0
	for _, sink := range []string{"s3", "tmpfs"} {
		for n := 1; n <= 3; n++ {
			b.Run(fmt.Sprintf("sink=%s/sidecars=%d", sink, n), func(b *testing.B) {
				for range b.N {
					round++
					r := ingestRound(b, bin, nc, mc, auth, lb.Endpoint(), sink, n, 2, snapshots, round)
					b.ReportMetric(r.mbps, "MB/s")
					b.ReportMetric(r.cpu["sidecars"], "sidecar-cpu-s")
					b.ReportMetric(r.cpu["nats"], "nats-cpu-s")
					b.ReportMetric(r.cpu["minio"], "minio-cpu-s")
					b.ReportMetric(r.cpu["producers"], "producer-cpu-s")
					b.ReportMetric(r.wall, "wall-s")
				}
			})
		}
	}
}

type roundResult struct {
	mbps, wall float64
	cpu        map[string]float64
}

// ingestRound starts n sidecars, has each node's producers publish
// snapshots of 4 MiB, and stops the sidecars again.
func ingestRound(b *testing.B, bin string, nc *natsCluster, mc *minioCluster, auth natsAuth, s3, sink string, n, perNode, snapshots, round int) roundResult {
	b.StopTimer()
	var nodes []*node
	for i := range n {
		nd := &node{name: fmt.Sprintf("r%dnode%d", round, i), prefix: fmt.Sprintf("fz-r%d-node%d", round, i)}
		shm, err := os.MkdirTemp("/dev/shm", "fzbench-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(shm)
		nd.shm = shm
		sinkURL := "s3://" + bucket
		if sink == "tmpfs" {
			sinkURL = filepath.Join(shm, "sink")
		}
		args := []string{"serve", "--nats-url", nc.URL(), "--nats-user", "alice-sidecar", "--replicas", "3",
			"--subject-prefix", nd.prefix, "--shm-dir", shm, "--sink", sinkURL, "--s3-endpoint", s3,
			"--data-dir", b.TempDir(), "--backend", "cpu", "--metrics-listen", "off", "--budget", "64MiB"}
		nd.sc = &nativetest.Sidecar{Bin: bin, ShmDir: shm, Sink: sinkURL, Args: args,
			Env: append(s3Env(s3), "FZ_NATS_PASSWORD="+auth.sidecarPass)}
		nd.sc.Start(b)
		defer nd.sc.Stop()
		nodes = append(nodes, nd)
	}

	dims := []uint64{16, 256, 256}
	field := make([]byte, 16*256*256*4)
	synth.Fill32(fz.ViewFloats[float32](field), dims, 0, 0)
	type prod struct {
		p  *ingest.Producer
		nd *node
		id string
	}
	var prods []prod
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, nd := range nodes {
		for j := range perNode {
			id := fmt.Sprintf("%s-p%d", nd.name, j)
			conn, err := ingest.Connect(ctx, ingest.ConnOptions{URL: nc.URL(), Name: id, User: "alice-producer", Password: auth.producerPass})
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			p, err := ingest.NewProducer(ctx, conn, ingest.ProducerOptions{ID: id, Subjects: ingest.Subjects{Prefix: nd.prefix},
				ShmDir: nd.shm, Policy: ingest.Block, BlockTimeout: 5 * time.Minute, ReuseSegments: 4})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			prods = append(prods, prod{p, nd, id})
		}
	}

	before := cpuSeconds(nc, mc, nodes)
	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(prods))
	for _, pr := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pds []*ingest.Pending
			for s := range snapshots {
				snap, err := pr.p.Begin(ctx, ingest.Spec{Run: "bench-" + strconv.Itoa(round), Var: pr.id, Step: uint64(s),
					DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3})
				if err != nil {
					errs <- err
					return
				}
				copy(snap.Bytes(), field)
				pd, err := snap.Publish(ctx)
				if err != nil {
					errs <- err
					return
				}
				pds = append(pds, pd)
			}
			for _, pd := range pds {
				if _, err := pd.Wait(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	b.StopTimer()
	after := cpuSeconds(nc, mc, nodes)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	r := roundResult{wall: wall, cpu: map[string]float64{}}
	for k, v := range after {
		r.cpu[k] = v - before[k]
	}
	total := float64(len(prods)*snapshots) * float64(len(field))
	r.mbps = total / wall / 1e6
	var la [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscanf(string(b), "%f %f %f", &la[0], &la[1], &la[2])
	}
	b.Logf("sink %s, %d sidecars, %d producers x %d snapshots of 4 MiB: %.0f MB/s in %.2fs; CPU s: sidecars %.2f, nats %.2f, minio %.2f, producers %.2f (of %.2f available on %d cores); load %.1f",
		sink, n, len(prods), snapshots, r.mbps, wall, r.cpu["sidecars"], r.cpu["nats"], r.cpu["minio"], r.cpu["producers"],
		wall*float64(numCPU()), numCPU(), la[0])
	return r
}

// cpuSeconds sums user+system CPU time per kind of process, from /proc:
// the NATS and MinIO servers (by pid), the sidecars (by their shm dir on
// the command line) and this process (the producers).
func cpuSeconds(nc *natsCluster, mc *minioCluster, nodes []*node) map[string]float64 {
	out := map[string]float64{}
	for _, p := range nc.servers {
		out["nats"] += procCPU(p.pid())
	}
	for _, p := range mc.servers {
		out["minio"] += procCPU(p.pid())
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cl), "\x00")
		if len(args) < 2 || args[1] != "serve" {
			continue
		}
		for _, nd := range nodes {
			if strings.Contains(string(cl), "\x00"+nd.shm+"\x00") {
				out["sidecars"] += procCPU(pid)
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out["producers"] = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	return out
}

// procCPU is a process's user+system time in seconds (0 if it is gone).
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

func numCPU() int { return runtime.NumCPU() }
