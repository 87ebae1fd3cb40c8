package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestPaddedTilesMatchCPU: padded box tiles (docs/FORMAT.md 3.2; the PAD
// kernels, every clipped tile walked whole with its loads clamped to the
// field and only its box stored) on every adversarial generator, f32 rank-3
// shapes clipped along z, y, x and all three, boxes smaller than a tile, a
// single column, chunks of a few tiles (jobs that start at clipped tiles);
// f64 and rank 2 once each (the CPU codec's: onGPU): compressed and
// decoded identically by the GPU and the CPU, in container versions 1 and 2.
func TestPaddedTilesMatchCPU(t *testing.T) {
	g := gpu(t)
	shapes := [][]uint64{
		{20, 33, 49}, {12, 90, 180}, {9, 17, 33}, {3, 5, 9}, {16, 20, 70}, {5, 40, 3}, {24, 48, 100}, {8, 16, 33},
	}
	// FZ_GPU_SHORT (compute-sanitizer runs): four generators (the walks,
	// fill values, holes, raw values) on two shapes
	short := os.Getenv("FZ_GPU_SHORT") != ""
	n := 0
	for name, gen := range adversarial {
		if short && name != "smooth" && name != "fill" && name != "nan-inf" && name != "raw-heavy" {
			continue
		}
		for si, dims := range shapes {
			if short && si != 0 && si != 7 {
				continue
			}
			cnt := int(dims[0] * dims[1] * dims[2])
			v32, v64 := adversarialValues(gen, rand.New(rand.NewPCG(uint64(si), 23)), cnt)
			for _, eb := range []float64{1e-2, 1e-4} {
				p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: eb}
				if name == "fill" {
					p.Fill = ptr(-9999)
				}
				opts := shapeOpts(fz.TilingPadded, si)
				for _, ver := range formatVersions {
					check(t, g, fmt.Sprintf("padded %s %v f32 %g v%d", name, dims, eb, ver), f32bytes(v32), p, withVersion(ver, opts...)...)
					n++
				}
				if si == 0 && !short { // the CPU codec's geometries: f64, and rank 2
					p64 := p
					p64.DType = fz.Float64
					check(t, g, fmt.Sprintf("padded %s %v f64 %g", name, dims, eb), f64bytes(v64), p64, opts...)
					p2 := p
					p2.Dims = []uint64{dims[0] * dims[1], dims[2]}
					check(t, g, fmt.Sprintf("padded %s %v f32 %g", name, p2.Dims, eb), f32bytes(v32), p2, opts...)
					n += 2
				}
			}
		}
	}
	t.Logf("%d padded-tile cases byte-identical to the CPU (container versions 1 and 2)", n)
}

// TestPaddedRealFieldsMatchCPU: the real f32 3-D fields (fill fields,
// narrow grids, curvilinear grids) with padded tiles at REL 1e-2, 1e-3 and
// 1e-4, container versions 1 and 2, byte-identical to the CPU.
func TestPaddedRealFieldsMatchCPU(t *testing.T) {
	g := gpu(t)
	dir := dataDir(t)
	n := 0
	for _, f := range benchFields {
		if len(f.dims) != 3 || f.dtype != fz.Float32 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, eb := range []float64{1e-2, 1e-3, 1e-4} {
			p := fz.Params{DType: f.dtype, Dims: f.dims, Mode: fz.Rel, Bound: eb, Fill: f.fill}
			for _, ver := range formatVersions {
				check(t, g, fmt.Sprintf("padded %s %g v%d", f.name, eb, ver), raw, p, fz.WithFormatVersion(ver), fz.WithTiling(fz.TilingPadded))
				n++
			}
		}
	}
	t.Logf("%d real-field padded cases byte-identical to the CPU (container versions 1 and 2)", n)
}
