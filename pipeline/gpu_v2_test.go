package pipeline_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fzsidecar/fzsidecar/cuda"
	"github.com/fzsidecar/fzsidecar/fz"
	"github.com/fzsidecar/fzsidecar/ingest"
	"github.com/fzsidecar/fzsidecar/pipeline"
)

// TestGPUDirectFormatVersion2: the sidecar's GPU lanes given
// fz.WithFormatVersion(2) (what serve's format_version: 2 passes) store
// version-2 containers with the CPU codec's bytes: f32 and f64, registered
// segments and a small field (staged), two steps each.
func TestGPUDirectFormatVersion2(t *testing.T) {
	s := gpuStreamer(t, cuda.StreamOptions{ArenaBytes: 64 << 20, JobTiles: 512})
	v2 := fz.WithFormatVersion(2)
	g := pipeline.NewGPU([]*cuda.Streamer{s}, pipeline.GPUOptions{Host: pipeline.HostRegister, Codec: []fz.Option{v2}})
	e := newEnv(t)
	url := runGPUSidecar(t, e, g)
	p := newProducer(t, url, e.ShmDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	specs := []ingest.Spec{
		{Run: "v2", Var: "temp", DType: fz.Float32, Dims: []uint64{40, 256, 256}, Mode: fz.Rel, Bound: 1e-3},
		{Run: "v2", Var: "rho", DType: fz.Float64, Dims: []uint64{1000, 1100}, Mode: fz.Abs, Bound: 1e-4},
		{Run: "v2", Var: "small", DType: fz.Float32, Dims: []uint64{7, 33, 65}, Mode: fz.Rel, Bound: 1e-2},
	}
	for step := range 2 {
		for i, sp := range specs {
			sp.Step = uint64(step)
			sn, pd := publishOne(ctx, p, sp, step*7+i)
			if sn.err != nil {
				t.Fatal(sn.err)
			}
			if _, err := pd.Wait(ctx); err != nil {
				t.Fatalf("step %d %s: %v", step, sp.Var, err)
			}
			k := pipeline.Key{Run: sp.Run, Var: sp.Var, Step: sp.Step}
			got, err := os.ReadFile(filepath.Join(e.StoreDir, filepath.FromSlash(k.String())))
			if err != nil {
				t.Fatal(err)
			}
			h, err := fz.ReadHeader(got)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if h.Version != 2 {
				t.Fatalf("%s: stored header version %d, want 2", k, h.Version)
			}
			want, _, err := fz.Compress(ctx, sn.raw, fz.Params{DType: sp.DType, Dims: sp.Dims, Mode: sp.Mode, Bound: sp.Bound}, v2)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: GPU stored %d bytes of version 2, the CPU makes %d (not the same bytes)", k, len(got), len(want))
			}
		}
	}
	t.Logf("%d version-2 snapshots stored with the CPU's bytes; %+v", 2*len(specs), g.Stats())
}
