package cuda

import (
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
		{"padded, f32 rank 3, clipped tiles", []uint64{744, 33, 49}, fz.Float32, fz.TilingPadded, true},
		{"padded, f64 rank 3, clipped tiles", []uint64{744, 33, 49}, fz.Float64, fz.TilingPadded, false},
		{"padded, f32 rank 2, clipped tiles", []uint64{881, 1121}, fz.Float32, fz.TilingPadded, false},
		{"padded, f32 rank 1, a clipped tile", []uint64{107857}, fz.Float32, fz.TilingPadded, false},
		{"padded, f64, no clipped tile", []uint64{16, 32, 64}, fz.Float64, fz.TilingPadded, true},
		{"padded, f32 rank 2, no clipped tile", []uint64{1024, 1024}, fz.Float32, fz.TilingPadded, true},
	}
	for _, c := range cases {
		g, err := fz.PlanGeometryFor(c.dims, 64, c.tiling)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := onGPU(c.dt, g); got != c.want {
			t.Errorf("%s (dims %v: %+v): onGPU = %v, want %v", c.name, c.dims, g, got, c.want)
		}
	}
}
