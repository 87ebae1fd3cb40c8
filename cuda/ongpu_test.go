package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestOnGPULimits: the geometries the kernels decline (flat tiles with a
// plane of 2^24 values or more: cuda/flat.cuh's 32-bit arithmetic; padded
// box tiles, docs/FORMAT.md 3.2, with clipped tiles other than f32 rank-3
// ones: the padded kernels are the staged f32 rank-3 walks) go to the CPU
// codec; the others, however large, to the GPU. No GPU needed: geometry
// only.
func TestOnGPULimits(t *testing.T) {
	cases := []struct {
		name   string
		dims   []uint64
		dt     fz.DType
		tiling fz.Tiling
		want   bool
	}{
		{"era5 flat", []uint64{744, 33, 49}, fz.Float32, fz.TilingFlat, true},
		{"flat, plane of 2^24 values", []uint64{3, 1 << 12, 1 << 12}, fz.Float32, fz.TilingFlat, false},
		{"flat, plane just under 2^24", []uint64{3, 1<<12 - 1, 1 << 12}, fz.Float32, fz.TilingFlat, true},
		{"flat, 1-D (a plane of one row)", []uint64{1<<24 - 1}, fz.Float32, fz.TilingFlat, true},
		{"flat, 1-D, a row of 2^24 values", []uint64{1 << 24}, fz.Float32, fz.TilingFlat, false},
		{"boxes, 2^33 tiles", []uint64{1 << 23, 1 << 11, 1 << 11}, fz.Float32, fz.TilingBoxes, true},
		{"auto on era5 (flat)", []uint64{744, 33, 49}, fz.Float32, fz.TilingAuto, true},
		{"auto on coads (padded)", []uint64{12, 90, 180}, fz.Float32, fz.TilingAuto, true},
		{"auto on levitus f64 (boxes)", []uint64{20, 180, 360}, fz.Float64, fz.TilingAuto, true},
		{"padded, f32 rank 3, clipped tiles", []uint64{744, 33, 49}, fz.Float32, fz.TilingPadded, true},
		{"padded, f64 rank 3, clipped tiles", []uint64{744, 33, 49}, fz.Float64, fz.TilingPadded, false},
		{"padded, f32 rank 2, clipped tiles", []uint64{881, 1121}, fz.Float32, fz.TilingPadded, false},
		{"padded, f32 rank 1, a clipped tile", []uint64{107857}, fz.Float32, fz.TilingPadded, false},
		{"padded, f64, no clipped tile", []uint64{16, 32, 64}, fz.Float64, fz.TilingPadded, true},
		{"padded, f32 rank 2, no clipped tile", []uint64{1024, 1024}, fz.Float32, fz.TilingPadded, true},
	}
	for _, c := range cases {
		g, err := fz.PlanGeometryFor(c.dt, c.dims, 64, c.tiling)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := onGPU(c.dt, g); got != c.want {
			t.Errorf("%s (dims %v: %+v): onGPU = %v, want %v", c.name, c.dims, g, got, c.want)
		}
	}
}

// TestAutoOnGPU: what fz.TilingAuto resolves to never sends a field to the
// CPU codec that boxes would keep on the GPU (it takes padded tiles only
// where the padded kernels walk them: f32, rank-3 tiles), over random
// shapes of both dtypes. No GPU needed: geometry only.
func TestAutoOnGPU(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	padded := 0
	for range 20000 {
		dims := make([]uint64, 1+r.IntN(4))
		for i := range dims {
			dims[i] = uint64(1 + r.IntN([]int{3, 40, 400}[r.IntN(3)]))
		}
		for _, dt := range []fz.DType{fz.Float32, fz.Float64} {
			g, err := fz.PlanGeometryFor(dt, dims, 64, fz.TilingAuto)
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := fz.PlanGeometryFor(dt, dims, 64, fz.TilingBoxes)
			if onGPU(dt, gb) && !onGPU(dt, g) {
				t.Fatalf("auto on %v %v: %v geometry %+v leaves the GPU", dt, dims, g.Tiling(), g)
			}
			if g.Padded {
				padded++
				if dt != fz.Float32 || !hasClippedTiles(g) {
					t.Fatalf("auto on %v %v: padded tiles (clipped tiles: %v)", dt, dims, hasClippedTiles(g))
				}
			}
		}
	}
	if padded == 0 {
		t.Fatal("no shape drawn took padded tiles")
	}
}
