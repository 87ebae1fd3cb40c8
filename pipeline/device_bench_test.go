package pipeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/fzsidecar/fzsidecar/sidecar"
)

type discard struct{}

func (discard) Put(context.Context, pipeline.Key, []byte, pipeline.Meta) error { return nil }

// TestDeviceIngestBench measures the ingest rate of GPU-resident snapshots:
// the sidecar runs in this process with the GPU backend and a null sink
// (as bench e2e --sink null), the producer is the CUDA program devbench
// (producer/examples/cuda/devbench.cu, which also measures pinned H2D in
// the same run) named by $FZ_DEVBENCH, with $FZ_DEVBENCH_ARGS. GPU lanes:
// $FZ_DEVBENCH_LANES (default as serve). It needs a GPU and the program:
// without them it skips.
func TestDeviceIngestBench(t *testing.T) {
	prog := os.Getenv("FZ_DEVBENCH")
	if prog == "" {
		skiplog.Skipf(t, "SKIP: set FZ_DEVBENCH to a built producer/examples/cuda/devbench (needs a GPU; see producer/examples/cuda/run_device.sh)")
	}
	if ok, err := cuda.Available(); !ok {
		skiplog.Skipf(t, "SKIP: no GPU: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := config.Defaults()
	s.Backend, s.DataDir, s.Sink = "gpu", t.TempDir(), t.TempDir()
	s.NATS.Listen, s.Metrics.Listen = "127.0.0.1:0", "off"
	if v := os.Getenv("FZ_DEVBENCH_LANES"); v != "" {
		s.GPULanes, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("FZ_DEVBENCH_FORMAT_VERSION"); v != "" { // container version the sidecar writes
		fv, err := config.ParseFormatVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		s.FormatVersion = fv
	}
	os.RemoveAll(s.ShmDir) // a fresh credentials file
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("FZ_DEVBENCH_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	a, err := sidecar.FromSettings(ctx, s, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.GPU == nil {
		t.Fatal("no GPU backend")
	}
	a.Pipeline.Store = discard{}
	ready := make(chan string, 1)
	a.Ready = func(url string) { ready <- url }
	sctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- sidecar.Run(sctx, a.Config) }()
	defer func() { stop(); <-ran }()
	select {
	case <-ready:
	case err := <-ran:
		t.Fatalf("sidecar: %v", err)
	}
	d0 := a.GPU.DeviceStats()
	cmd := exec.CommandContext(ctx, prog, strings.Fields(os.Getenv("FZ_DEVBENCH_ARGS"))...)
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Ingest    float64 `json:"ingest_Bps"`
		H2D       float64 `json:"h2d_Bps"`
		Wall      float64 `json:"wall_s"`
		Snapshots int     `json:"snapshots"`
		Bytes     uint64  `json:"bytes"`
		StallP50  float64 `json:"stall_p50_ms"`
		StallP90  float64 `json:"stall_p90_ms"`
		Publish   float64 `json:"publish_ms"`
		Failed    int     `json:"failed"`
	}
	sc := bufio.NewScanner(out)
	got := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		if j, ok := strings.CutPrefix(line, "DEVBENCH_JSON "); ok {
			got = json.Unmarshal([]byte(j), &rep) == nil
		}
	}
	if err := cmd.Wait(); err != nil || !got || rep.Failed != 0 {
		t.Fatalf("devbench: %v (report read: %v, failed %d)", err, got, rep.Failed)
	}
	d := a.GPU.DeviceStats()
	n := d.Snapshots - d0.Snapshots
	gpu := d.GPUTime - d0.GPUTime
	// The warm-up's snapshots (one per buffer) are in the sidecar's counts
	// but not in the timed window: per-snapshot means over all of them.
	t.Logf("lanes %d: ingest %.1f GB/s = %.2f× pinned H2D (%.1f GB/s); stall p50 %.2f ms p90 %.2f ms; publish call %.3f ms",
		a.GPU.Lanes(), rep.Ingest/1e9, rep.Ingest/rep.H2D, rep.H2D/1e9, rep.StallP50, rep.StallP90, rep.Publish)
	t.Logf("sidecar: %d device snapshots, device-work span %.2f ms/snapshot (sum over the window %.2f s of %.2f s wall), event wait %.3f ms, read %.2f ms",
		n, gpu.Seconds()*1e3/float64(max(n, 1)), gpu.Seconds()*float64(rep.Snapshots)/float64(max(n, 1)), rep.Wall,
		(d.EventWait-d0.EventWait).Seconds()*1e3/float64(max(n, 1)), (d.Stall-d0.Stall).Seconds()*1e3/float64(max(n, 1)))
	dl, dt := a.GPU.DeviceLanes()
	fmt.Printf("DEVICE_BENCH device_lanes=%d job_tiles=%d ingest_GBps=%.1f h2d_GBps=%.1f x_h2d=%.2f stall_p50_ms=%.2f stall_p90_ms=%.2f publish_ms=%.3f read_ms=%.2f span_ms=%.2f\n", dl, dt,
		rep.Ingest/1e9, rep.H2D/1e9, rep.Ingest/rep.H2D, rep.StallP50, rep.StallP90, rep.Publish,
		(d.Stall-d0.Stall).Seconds()*1e3/float64(max(n, 1)), gpu.Seconds()*1e3/float64(max(n, 1)))
	fmt.Printf("DEVICE_BENCH lanes=%d ingest_GBps=%.1f h2d_GBps=%.1f x_h2d=%.2f stall_p50_ms=%.2f span_ms=%.2f\n", a.GPU.Lanes(),
		rep.Ingest/1e9, rep.H2D/1e9, rep.Ingest/rep.H2D, rep.StallP50, gpu.Seconds()*1e3/float64(max(n, 1)))
}
