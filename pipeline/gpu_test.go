package pipeline_test

import (
	"bytes"
	"context"
	"github.com/fzsidecar/fzsidecar/internal/skiplog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
)

// gpuStreamer skips the test where there is no GPU backend, else makes a
// streamer on device 0, closed after everything else the test set up.
func gpuStreamer(t *testing.T, o cuda.StreamOptions) *cuda.Streamer {
	t.Helper()
	if ok, err := cuda.Available(); !ok {
		skiplog.Skipf(t, "SKIP: no GPU backend (needs %s and a CUDA device): %v", cuda.LibName, err)
	}
	s, err := cuda.NewStreamer(0, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runGPUSidecar runs the sidecar in process with g compressing its
// snapshots (the direct codec; released blobs are reused as outputs) and
// returns its NATS URL. g is closed after the sidecar stops.
func runGPUSidecar(t *testing.T, e sidecarEnv, g *pipeline.GPU) string {
	t.Helper()
	t.Cleanup(func() { g.Close() }) // after the sidecar stops (cleanups run last-in first-out)
	return runInProcess(t, e, func(c *sidecarConfig) {
		c.Pipeline.Codec = nil
		c.Pipeline.Direct = g.Direct
		c.Pipeline.Release = g.Release
		c.Pipeline.Compressors = g.Lanes()
	})
}

// TestGPUDirect runs the sidecar with the GPU direct codec (segments
// registered in place, or staged) against the embedded NATS server: every
// snapshot is stored with the CPU codec's bytes, and a producer that
// reuses its segments gets them served from the registration cache.
func TestGPUDirect(t *testing.T) {
	s := gpuStreamer(t, cuda.StreamOptions{ArenaBytes: 64 << 20, JobTiles: 512})
	for _, mode := range []pipeline.HostMode{pipeline.HostRegister, pipeline.HostStage} {
		t.Run(string(mode), func(t *testing.T) {
			g := pipeline.NewGPU([]*cuda.Streamer{s}, pipeline.GPUOptions{Host: mode})
			e := newEnv(t)
			url := runGPUSidecar(t, e, g)
			p := newProducer(t, url, e.ShmDir, func(o *ingest.ProducerOptions) { o.ReuseSegments = 3 })
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			specs := []ingest.Spec{
				{Run: "gpu", Var: "temp", DType: fz.Float32, Dims: []uint64{40, 256, 256}, Mode: fz.Rel, Bound: 1e-3},
				{Run: "gpu", Var: "rho", DType: fz.Float64, Dims: []uint64{1000, 1100}, Mode: fz.Abs, Bound: 1e-4},
				{Run: "gpu", Var: "small", DType: fz.Float32, Dims: []uint64{7, 33, 65}, Mode: fz.Rel, Bound: 1e-2},
			}
			n := 0
			for step := range 4 {
				var pending []*sent
				var pds []*ingest.Pending
				for i, sp := range specs {
					sp.Step = uint64(step)
					s, pd := publishOne(ctx, p, sp, step*7+i)
					if s.err != nil {
						t.Fatal(s.err)
					}
					pending, pds = append(pending, s), append(pds, pd)
				}
				for i, pd := range pds {
					res, err := pd.Wait(ctx)
					if err != nil {
						t.Fatalf("step %d %s: %v", step, pending[i].spec.Var, err)
					}
					sp := pending[i].spec
					k := pipeline.Key{Run: sp.Run, Var: sp.Var, Step: sp.Step}
					got, err := os.ReadFile(filepath.Join(e.StoreDir, filepath.FromSlash(k.String())))
					if err != nil {
						t.Fatal(err)
					}
					want, _, err := fz.Compress(ctx, pending[i].raw, fz.Params{DType: sp.DType, Dims: sp.Dims, Mode: sp.Mode, Bound: sp.Bound})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) || res.CompressedBytes != uint64(len(want)) {
						t.Fatalf("%s: GPU stored %d bytes, CPU makes %d (equal: %v)", k, len(got), len(want), bytes.Equal(got, want))
					}
					n++
				}
			}
			st := g.Stats()
			t.Logf("%d snapshots stored with the CPU's bytes; %+v", n, st)
			switch mode {
			case pipeline.HostRegister:
				// 2 big variables x 4 steps, registered at step 0 and reused
				// (rewritten through the mapping) after; the small one
				// (< 4 MiB) is staged.
				if st.Registered != 2 || st.CacheHits != 6 || st.Staged != 4 {
					t.Fatalf("register mode: %+v; want 2 registered, 6 cache hits, 4 staged", st)
				}
			case pipeline.HostStage:
				if st.Staged != uint64(n) {
					t.Fatalf("stage mode: %+v; want all %d staged", st, n)
				}
			}
		})
	}
}

// TestProducerReusesSegments: with ReuseSegments the producer writes later
// snapshots into a finished segment (same file), every snapshot is stored
// correctly, and Close removes the spares.
func TestProducerReusesSegments(t *testing.T) {
	e := newEnv(t)
	url := runInProcess(t, e, nil)
	p := newProducer(t, url, e.ShmDir, func(o *ingest.ProducerOptions) { o.ReuseSegments = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := map[string]int{}
	var all []*sent
	for step := range 5 {
		sp := specFor(0)
		sp.Step = uint64(step)
		s, pd := publishOne(ctx, p, sp, step)
		if s.err != nil {
			t.Fatal(s.err)
		}
		names[pd.Notification().Segment]++
		if s.res, s.err = pd.Wait(ctx); s.err != nil {
			t.Fatal(s.err)
		}
		all = append(all, s)
	}
	if len(names) != 1 {
		t.Fatalf("5 sequential snapshots used %d segments %v; want one, reused", len(names), names)
	}
	for i, s := range all {
		if s.reused != (i > 0) {
			t.Fatalf("snapshot %d: Reused() = %v, want %v (the first segment is new, the rest reuse it)", i, s.reused, i > 0)
		}
	}
	for _, s := range all {
		k := pipeline.Key{Run: s.spec.Run, Var: s.spec.Var, Step: s.spec.Step}
		blob, err := os.ReadFile(filepath.Join(e.StoreDir, filepath.FromSlash(k.String())))
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeCheck(blob, s.raw, fz.Params{DType: s.spec.DType, Dims: s.spec.Dims, Mode: s.spec.Mode, Bound: s.spec.Bound}); err != nil {
			t.Fatalf("step %d: %v", s.spec.Step, err)
		}
	}
	if ents, _ := os.ReadDir(e.ShmDir); len(ents) != 1 {
		t.Fatalf("%d files in the shm dir while the producer keeps one spare", len(ents))
	}
	p.Close()
	if ents, _ := os.ReadDir(e.ShmDir); len(ents) != 0 {
		t.Fatalf("%d segments left after Close", len(ents))
	}
}
