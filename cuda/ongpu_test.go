package cuda

import (
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestOnGPULimits: the geometries the kernels decline (flat tiles with a
// plane of 2^24 values or more: cuda/flat.cuh's 32-bit arithmetic; padded
// box tiles, docs/FORMAT.md 3.2, which no kernel codes yet) go to the CPU
// codec; the others, however large, to the GPU. No GPU needed: geometry
// only.
func TestOnGPULimits(t *testing.T) {
	cases := []struct {
		name   string
		dims   []uint64
		tiling fz.Tiling
		want   bool
	}{
		{"era5 flat", []uint64{744, 33, 49}, fz.TilingFlat, true},
		{"flat, plane of 2^24 values", []uint64{3, 1 << 12, 1 << 12}, fz.TilingFlat, false},
		{"flat, plane just under 2^24", []uint64{3, 1<<12 - 1, 1 << 12}, fz.TilingFlat, true},
		{"flat, 1-D (a plane of one row)", []uint64{1<<24 - 1}, fz.TilingFlat, true},
		{"flat, 1-D, a row of 2^24 values", []uint64{1 << 24}, fz.TilingFlat, false},
		{"boxes, 2^33 tiles", []uint64{1 << 23, 1 << 11, 1 << 11}, fz.TilingBoxes, true},
		{"auto on era5 (flat)", []uint64{744, 33, 49}, fz.TilingAuto, true},
		{"padded, clipped tiles", []uint64{744, 33, 49}, fz.TilingPadded, false},
		{"padded, no clipped tile", []uint64{16, 32, 64}, fz.TilingPadded, false},
	}
	for _, c := range cases {
		g, err := fz.PlanGeometryFor(c.dims, 64, c.tiling)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := onGPU(g); got != c.want {
			t.Errorf("%s (dims %v: %+v): onGPU = %v, want %v", c.name, c.dims, g, got, c.want)
		}
	}
}
