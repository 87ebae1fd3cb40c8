// Package bench is `fzsidecar bench-e2e` (`bench e2e`): the sidecar's
// sustained ingest throughput, raw bytes per second from publish to durable
// store, with K producer processes publishing M snapshots of S bytes each.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/fzsidecar/fzsidecar/config"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/internal/synth"
	"github.com/fzsidecar/fzsidecar/pipeline"
	"github.com/fzsidecar/fzsidecar/sidecar"
)

// Options of a run.
type Options struct {
	Producers int
	Snapshots int   // per producer
	Bytes     int64 // per snapshot
	// Sink: "null" (discard: measures ingest + compression), a path (e.g. in
	// /dev/shm for tmpfs), or any sink URL.
	Sink     string
	Backend  string
	GPUs     []int
	GPUHost  string // register (default) or stage
	GPUArena int64
	GPULanes int
	// Reuse is how many finished segments each producer keeps for its next
	// snapshots (ingest.ProducerOptions.ReuseSegments); 0 creates a new
	// file per snapshot.
	Reuse int
	// NoFill: producers publish their reused segments without rewriting
	// them (ProducerOptions.NoFill); needs Reuse > 0.
	NoFill       bool
	Compressors  int
	Writers      int
	Queue        int
	CodecThreads int
	// FormatVersion is the container version written (serve's
	// format_version); 0: the default.
	FormatVersion int
	// Tiling is the tile geometry written (serve's tiling: boxes, flat,
	// auto or padded); empty: the default.
	Tiling string
	Budget int64
	// ShmBase is where the run's segment directory is made (default
	// /dev/shm, else the temp directory).
	ShmBase string
	// Exe and Args start one producer process; the orchestrator appends
	// the producer's flags (see ProducerArgs).
	Exe  string
	Args []string
	Env  []string
	Log  *slog.Logger
}

// Report is the result, also written as JSON.
type Report struct {
	Producers int    `json:"producers"`
	Snapshots int    `json:"snapshots_per_producer"`
	Bytes     int64  `json:"bytes_per_snapshot"`
	Sink      string `json:"sink"`
	Backend   string `json:"backend"`
	// FormatVersion is the container version the run wrote.
	FormatVersion int `json:"format_version"`
	// Tiling is the tiling the run asked for (serve's tiling);
	// TilingWritten the tiles its snapshots were written with (auto
	// resolved for their dtype and dims: boxes, flat or padded).
	Tiling        string  `json:"tiling"`
	TilingWritten string  `json:"tiling_written"`
	Cores         int     `json:"cores"`
	Compressors   int     `json:"compressors"`
	Writers       int     `json:"writers"`
	Raw           uint64  `json:"raw_bytes"`
	Comp          uint64  `json:"compressed_bytes"`
	Seconds       float64 `json:"seconds"` // first publish → last result
	// Bps is raw bytes per second from publish to durable store.
	Bps        float64 `json:"ingest_bytes_per_second"`
	BpsPerCore float64 `json:"ingest_bytes_per_second_per_core"`
	// CodecBps is the codec alone on one snapshot in memory, all cores:
	// the ceiling the pipeline should approach on CPU.
	CodecBps float64 `json:"codec_only_bytes_per_second"`
	// H2DBps is the pinned host→device bandwidth of all GPUs at once,
	// measured in this run before and after the producers (GPU only).
	H2DBps      float64 `json:"pinned_h2d_bytes_per_second,omitempty"`
	H2DBpsAfter float64 `json:"pinned_h2d_after_bytes_per_second,omitempty"`
	IngestVsH2D float64 `json:"ingest_vs_pinned_h2d,omitempty"`
	GPUHost     string  `json:"gpu_host,omitempty"`
	// How snapshots reached the GPUs: registered in place (first use of a
	// segment), found registered (a reused segment), staged.
	GPURegistered uint64 `json:"gpu_registered,omitempty"`
	GPUCacheHits  uint64 `json:"gpu_cache_hits,omitempty"`
	GPUStaged     uint64 `json:"gpu_staged,omitempty"`
	// LaneBusy is the share of the window the GPU lanes held a snapshot
	// (sum over lanes / lanes × seconds): near 1 the lanes are the limit,
	// well below it the snapshots arrive too slowly. LaneWait is the mean
	// time a snapshot waited for a free lane.
	LaneBusy float64 `json:"gpu_lane_busy,omitempty"`
	LaneWait float64 `json:"gpu_lane_wait_seconds,omitempty"`
	Warmup   int     `json:"warmup_snapshots_per_producer"`
	Reuse    int     `json:"producer_reused_segments"`
	// Fill says whether producers wrote each snapshot ("copy") or published
	// their reused segments as they were ("none"). FillBps is one
	// producer's mean memcpy rate into its segment, HostCopyBps what K
	// threads copying at once reach on this host before the run (the
	// producers' ceiling), ProducerBegin the mean wait in Begin.
	Fill          string             `json:"producer_fill"`
	FillBps       float64            `json:"producer_fill_bytes_per_second,omitempty"`
	HostCopyBps   float64            `json:"host_memcpy_k_threads_bytes_per_second"`
	ProducerBegin float64            `json:"producer_begin_mean_seconds"`
	Filled        int                `json:"producer_filled_snapshots"`
	StageMeans    map[string]float64 `json:"stage_mean_seconds"`
	Failed        int                `json:"failed"`
}

// ProducerArgs are the flags the producer role of the command takes.
func ProducerArgs(url, shm, id string, index, snapshots int, bytes int64, reuse int, noFill bool) []string {
	fill := "copy"
	if noFill {
		fill = "none"
	}
	return []string{"--role", "producer", "--nats-url", url, "--shm-dir", shm, "--id", id,
		"--index", strconv.Itoa(index), "--snapshots", strconv.Itoa(snapshots), "--size", strconv.FormatInt(bytes, 10),
		"--reuse-segments", strconv.Itoa(reuse), "--fill", fill}
}

// hostCopy is what k threads copying n bytes each at once reach (bytes
// per second, best of 3 after a first touch): the ceiling of k producers
// that memcpy their snapshots, since the host's memory bandwidth is shared.
func hostCopy(k int, n int64) float64 {
	n = min(n, 256<<20)
	src, dst := make([][]byte, k), make([][]byte, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src[i], dst[i] = make([]byte, n), make([]byte, n)
			for j := range src[i] {
				src[i][j] = byte(j)
			}
			copy(dst[i], src[i])
		}()
	}
	wg.Wait()
	best := time.Duration(1<<63 - 1)
	for range 3 {
		t := time.Now()
		for i := range k {
			wg.Add(1)
			go func() { defer wg.Done(); copy(dst[i], src[i]) }()
		}
		wg.Wait()
		best = min(best, time.Since(t))
	}
	return float64(int64(k)*n) / best.Seconds()
}

// nullStore discards blobs: durable in the sense that nothing is lost that
// was promised, and free, so the measurement is ingest + compression.
type nullStore struct{}

func (nullStore) Put(context.Context, pipeline.Key, []byte, pipeline.Meta) error { return nil }

// stageTimes sums stage durations for the report.
type stageTimes struct {
	mu  sync.Mutex
	sum map[pipeline.Stage]time.Duration
	n   map[pipeline.Stage]int
}

func (s *stageTimes) Stage(st pipeline.Stage, d time.Duration) {
	s.mu.Lock()
	s.sum[st] += d
	s.n[st]++
	s.mu.Unlock()
}

// reset forgets the warm-up.
func (s *stageTimes) reset() {
	s.mu.Lock()
	clear(s.sum)
	clear(s.n)
	s.mu.Unlock()
}

func (s *stageTimes) Depth(pipeline.Stage, int)               {}
func (s *stageTimes) Done(pipeline.Outcome, string, fz.Stats) {}

// Run starts the sidecar in this process, the producers as processes, and
// measures.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	base := o.ShmBase
	if base == "" {
		base = shmBase()
	}
	shm, err := os.MkdirTemp(base, "fzsidecar-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(shm)
	state, err := os.MkdirTemp("", "fzsidecar-bench-state-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(state)

	s := config.Defaults()
	s.ShmDir, s.DataDir, s.Backend, s.GPUs = shm, state, o.Backend, o.GPUs
	if o.GPUHost != "" {
		s.GPUHost = o.GPUHost
	}
	s.GPUArena = o.GPUArena
	if o.GPULanes > 0 {
		s.GPULanes = o.GPULanes
	}
	s.NATS.Listen, s.Metrics.Listen = "127.0.0.1:0", "off"
	s.Sink = o.Sink
	if o.Sink == "null" {
		s.Sink = state // opened but unused; the null store replaces it
	}
	// Through Set, so the sidecar's GPU defaults (compressors and writers
	// per lane) leave explicit values alone.
	for _, kv := range []struct {
		key string
		v   int
	}{{"pipeline.compressors", o.Compressors}, {"pipeline.writers", o.Writers}} {
		if kv.v > 0 {
			if err := s.Set(kv.key, strconv.Itoa(kv.v), "bench flag"); err != nil {
				return nil, err
			}
		}
	}
	if o.Queue > 0 {
		s.Pipeline.Queue = o.Queue
	}
	s.Pipeline.CodecThreads = o.CodecThreads
	if o.FormatVersion != 0 {
		if err := s.Set("format_version", strconv.Itoa(o.FormatVersion), "bench flag"); err != nil {
			return nil, err
		}
	}
	if o.Tiling != "" {
		if err := s.Set("tiling", o.Tiling, "bench flag"); err != nil {
			return nil, err
		}
	}
	// Enough budget for every stage to hold a snapshot and producers to
	// fill the next ones meanwhile — each producer up to all its reused
	// segments at once, as its warm-up begins them all before publishing;
	// bounded so memory stays predictable.
	s.Budget = o.Budget
	if warm := int64(o.Producers*max(o.Reuse, 1)) * o.Bytes; s.Budget > 0 && s.Budget < warm {
		return nil, fmt.Errorf("--budget %d is below what the producers' warm-up holds at once (%d producers × %d segments × %d bytes = %d): raise it or leave it unset", s.Budget, o.Producers, max(o.Reuse, 1), o.Bytes, warm)
	}
	if s.Budget <= 0 {
		s.Budget = int64(s.Pipeline.Compressors+s.Pipeline.Queue+s.Pipeline.Writers+o.Producers*max(o.Reuse, 1)) * o.Bytes
	}
	a, err := sidecar.FromSettings(ctx, s, o.Log)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	if o.Sink == "null" {
		a.Pipeline.Store = nullStore{}
	}
	st := &stageTimes{sum: map[pipeline.Stage]time.Duration{}, n: map[pipeline.Stage]int{}}
	a.Pipeline.Observer = st
	tl := fz.TilingBoxes
	if s.Tiling != "" {
		if tl, err = fz.ParseTiling(s.Tiling); err != nil {
			return nil, err
		}
	}
	g, err := fz.PlanGeometryFor(fz.Float32, Dims(o.Bytes), fz.DefaultTilesPerChunk, tl)
	if err != nil {
		return nil, err
	}
	rep := &Report{Producers: o.Producers, Snapshots: o.Snapshots, Bytes: o.Bytes, Sink: o.Sink, Backend: a.BackendName, FormatVersion: s.FormatVersion, Tiling: s.Tiling, TilingWritten: g.Tiling().String(),
		Cores: runtime.GOMAXPROCS(0), Compressors: a.Pipeline.Compressors, Writers: a.Pipeline.Writers, Reuse: o.Reuse, Warmup: max(o.Reuse, 1), Fill: "copy"}
	if o.NoFill {
		if o.Reuse < 1 {
			return nil, fmt.Errorf("producers that do not fill their snapshots must reuse segments (--reuse-segments ≥ 1)")
		}
		rep.Fill = "none"
	}
	rep.HostCopyBps = hostCopy(o.Producers, o.Bytes)

	// The codec alone (CPU) or the copy ceiling (GPU) first, while nothing
	// else runs.
	if a.GPU != nil {
		rep.GPUHost = s.GPUHost
		if rep.H2DBps, err = a.GPU.PinnedH2D(ctx, uint64(max(o.Bytes, 256<<20))); err != nil {
			return nil, fmt.Errorf("pinned H2D: %w", err)
		}
	} else if rep.CodecBps, err = codecOnly(ctx, a.Pipeline.Codec, o.Bytes); err != nil {
		return nil, fmt.Errorf("codec-only baseline: %w", err)
	}

	var gpu0 pipeline.GPUStats
	ready := make(chan string, 1)
	a.Ready = func(url string) { ready <- url }
	sctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- sidecar.Run(sctx, a.Config) }()
	defer func() { stop(); <-ran }()
	var url string
	select {
	case url = <-ready:
	case err := <-ran:
		return nil, fmt.Errorf("sidecar: %w", err)
	}

	// Every producer warms up (its reused segments created, faulted in and
	// seen by the sidecar) and says so; only then do all start together, so
	// the window measures the sustained rate, not process start-up, field
	// generation or first-touch page faults.
	procs := make([]*producerProc, o.Producers)
	var errs []error
	for i := range o.Producers {
		if procs[i], err = startProducer(ctx, o, ProducerArgs(url, shm, fmt.Sprintf("p%d", i), i, o.Snapshots, o.Bytes, o.Reuse, o.NoFill)); err != nil {
			errs = append(errs, err)
			break
		}
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.ready:
		case <-p.exited:
		case <-ctx.Done():
		}
	}
	if errs == nil && ctx.Err() == nil {
		st.reset()
		if a.GPU != nil {
			gpu0 = a.GPU.Stats()
		}
		for _, p := range procs {
			p.start()
		}
	}
	reps := make([]ProducerReport, 0, o.Producers)
	for _, p := range procs {
		if p == nil {
			continue
		}
		r, err := p.wait()
		reps = append(reps, r)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var first, last, fillNs, beginNs int64
	var published, filled int
	for i, r := range reps {
		fillNs += r.FillNs
		filled += r.Filled
		beginNs += r.BeginNs
		published += r.OK + r.Failed
		if i == 0 || r.FirstPublish < first {
			first = r.FirstPublish
		}
		last = max(last, r.LastResult)
		rep.Raw += r.Raw
		rep.Comp += r.Comp
		rep.Failed += r.Failed
	}
	rep.Seconds = float64(last-first) / 1e9
	rep.Filled = filled
	if fillNs > 0 && filled > 0 {
		rep.FillBps = float64(int64(filled)*o.Bytes) / (float64(fillNs) / 1e9)
	}
	if published > 0 {
		rep.ProducerBegin = float64(beginNs) / 1e9 / float64(published)
	}
	if rep.Seconds > 0 {
		rep.Bps = float64(rep.Raw) / rep.Seconds
		rep.BpsPerCore = rep.Bps / float64(rep.Cores)
	}
	if a.GPU != nil {
		gs := a.GPU.Stats()
		rep.GPURegistered, rep.GPUCacheHits, rep.GPUStaged = gs.Registered-gpu0.Registered, gs.CacheHits-gpu0.CacheHits, gs.Staged-gpu0.Staged
		if busy := (gs.LaneBusy - gpu0.LaneBusy).Seconds(); rep.Seconds > 0 {
			rep.LaneBusy = busy / (rep.Seconds * float64(a.GPU.Lanes()))
		}
		if n := gs.Snapshots - gpu0.Snapshots; n > 0 {
			rep.LaneWait = (gs.LaneWait - gpu0.LaneWait).Seconds() / float64(n)
		}
		if rep.H2DBpsAfter, err = a.GPU.PinnedH2D(ctx, uint64(max(o.Bytes, 256<<20))); err != nil {
			return nil, fmt.Errorf("pinned H2D: %w", err)
		}
		rep.IngestVsH2D = rep.Bps / max(rep.H2DBps, rep.H2DBpsAfter)
	}
	rep.StageMeans = map[string]float64{}
	st.mu.Lock()
	for k, d := range st.sum {
		rep.StageMeans[string(k)] = d.Seconds() / float64(st.n[k])
	}
	st.mu.Unlock()
	return rep, nil
}

// producerProc is one producer process of the run.
type producerProc struct {
	cmd    *exec.Cmd
	args   []string
	stdin  io.WriteCloser
	stderr *bytesBuf
	ready  chan struct{} // closed when it printed its ready line
	exited chan struct{} // closed when its stdout ended
	rep    ProducerReport
	got    bool
}

func startProducer(ctx context.Context, o Options, args []string) (*producerProc, error) {
	p := &producerProc{args: args, stderr: &bytesBuf{}, ready: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, o.Exe, append(append([]string(nil), o.Args...), args...)...)
	p.cmd.Env = append(os.Environ(), o.Env...)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start producer: %w", err)
	}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(out)
		ready := false
		for sc.Scan() {
			var rl readyLine
			if json.Unmarshal(sc.Bytes(), &rl) == nil && rl.Ready != "" {
				if !ready {
					ready = true
					close(p.ready)
				}
				continue
			}
			var r ProducerReport
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.ID != "" {
				p.rep, p.got = r, true
			}
		}
	}()
	return p, nil
}

// start lets a ready producer publish its measured snapshots.
func (p *producerProc) start() { _, _ = io.WriteString(p.stdin, "go\n") }

// wait collects the producer's report. Closing stdin first makes a producer
// that never got the start signal exit instead of waiting forever.
func (p *producerProc) wait() (ProducerReport, error) {
	_ = p.stdin.Close()
	<-p.exited
	werr := p.cmd.Wait()
	switch {
	case !p.got:
		return p.rep, fmt.Errorf("producer %v: no report (%v): %s", p.args, werr, p.stderr.String())
	case p.rep.Err != "":
		return p.rep, fmt.Errorf("producer %s: %s", p.rep.ID, p.rep.Err)
	case werr != nil:
		return p.rep, fmt.Errorf("producer %s: %v: %s", p.rep.ID, werr, p.stderr.String())
	}
	return p.rep, nil
}

// codecOnly is the best of 3 in-memory compressions of one snapshot.
func codecOnly(ctx context.Context, c pipeline.Codec, n int64) (float64, error) {
	src := make([]byte, n)
	dims := Dims(n)
	synth.Fill32(fz.ViewFloats[float32](src), dims, 0, 0)
	p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: 1e-3}
	best := time.Duration(1<<63 - 1)
	for range 3 {
		t := time.Now()
		if _, _, err := c(ctx, src, p); err != nil {
			return 0, err
		}
		best = min(best, time.Since(t))
	}
	return float64(n) / best.Seconds(), nil
}

func shmBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

type bytesBuf struct {
	mu sync.Mutex
	b  []byte
}

func (b *bytesBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.b) < 8192 {
		b.b = append(b.b, p...)
	}
	return len(p), nil
}
func (b *bytesBuf) String() string { b.mu.Lock(); defer b.mu.Unlock(); return string(b.b) }

// Print writes the human-readable report.
func Print(w io.Writer, r *Report) {
	gb := func(b float64) string { return fmt.Sprintf("%.3f GB/s", b/1e9) }
	fmt.Fprintf(w, "bench e2e: %d producers × %d snapshots × %.1f MiB f32 (%.2f GB raw), sink %s, backend %s, %d cores\n",
		r.Producers, r.Snapshots, float64(r.Bytes)/(1<<20), float64(r.Raw)/1e9, r.Sink, r.Backend, r.Cores)
	tiling := r.Tiling
	switch {
	case tiling == "":
		tiling = r.TilingWritten // the default
	case r.TilingWritten != "" && r.TilingWritten != tiling:
		tiling += " (writes " + r.TilingWritten + ")"
	}
	fmt.Fprintf(w, "  pipeline: %d compressors, %d writers; container format version %d, tiling %s\n", r.Compressors, r.Writers, r.FormatVersion, tiling)
	fmt.Fprintf(w, "  after %d warm-up snapshots per producer; the window starts when all producers start together\n", r.Warmup)
	if r.Fill == "none" {
		fmt.Fprintf(w, "  producers publish their reused segments without rewriting them (--fill none; %d written anyway: new segments); mean wait in Begin %.1f ms\n", r.Filled, 1e3*r.ProducerBegin)
	} else {
		fmt.Fprintf(w, "  producers memcpy each snapshot: %s each (mean), mean wait in Begin %.1f ms\n", gb(r.FillBps), 1e3*r.ProducerBegin)
	}
	fmt.Fprintf(w, "  host memcpy, %d threads at once (before the run): %s\n", r.Producers, gb(r.HostCopyBps))
	fmt.Fprintf(w, "ingest (publish → durable): %s in %.2fs = %s per core; ratio %.2f; %d failed\n",
		gb(r.Bps), r.Seconds, gb(r.BpsPerCore), float64(r.Raw)/max(float64(r.Comp), 1), r.Failed)
	if r.CodecBps > 0 {
		fmt.Fprintf(w, "codec alone (one snapshot in memory, all cores): %s → the pipeline sustains %.0f%% of it\n",
			gb(r.CodecBps), 100*r.Bps/r.CodecBps)
	}
	if r.H2DBps > 0 {
		fmt.Fprintf(w, "pinned H2D, all GPUs at once (same run, before / after): %s / %s → ingest / H2D = %.2f (target ≥ 0.90)\n",
			gb(r.H2DBps), gb(r.H2DBpsAfter), r.IngestVsH2D)
		fmt.Fprintf(w, "  host memory: %s; snapshots registered in place %d, already registered (reused segment) %d, staged %d; producers reuse %d segments\n",
			r.GPUHost, r.GPURegistered, r.GPUCacheHits, r.GPUStaged, r.Reuse)
		fmt.Fprintf(w, "  GPU lanes busy %.0f%% of the window; a snapshot waited %.1f ms for a lane on average\n", 100*r.LaneBusy, 1e3*r.LaneWait)
	}
	fmt.Fprintf(w, "mean per snapshot:")
	for _, s := range []pipeline.Stage{pipeline.StageWait, pipeline.StageLoad, pipeline.StageCompress, pipeline.StageQueue, pipeline.StageStore, pipeline.StageResult, pipeline.StageTotal} {
		if v, ok := r.StageMeans[string(s)]; ok {
			fmt.Fprintf(w, " %s %.1fms", s, v*1e3)
		}
	}
	fmt.Fprintln(w)
}
