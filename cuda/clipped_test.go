package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// Tiles the hot walks of the warp encoder do not take: clipped at the
// field's edges in any axis (rank 3 and 2; version 1 codes them first, in
// encode_clipped_kernel, version 2 in the warp encoder's generic path), and tiles with
// holes (fill, NaN, Inf, values without q) whose placeholder is far from 0
// or exactly 0, with escapes and raw values beside them, f32 and f64; box
// and padded tiles (FORMAT.md 3.2: the PAD kernels for f32 rank 3). (The
// v20 box walk, tried and not kept, PERF.md, was checked with these.)
func TestClippedAndHolesMatchCPU(t *testing.T) {
	g := gpu(t)
	shapes := [][]uint64{
		{20, 33, 49},  // era5-like: per z-slab 2 full tiles, 4 clipped in y (1 row) or x (17 columns)
		{12, 90, 180}, // coads-like: clipped in z (4 planes), y (10 rows) and x (20 columns)
		{9, 1, 17},    // folds to 9 x 17 (rank 2, one clipped tile)
		{3, 5, 9},     // one small box
		{8, 16, 32},   // one full tile
		{16, 20, 70},  // full tiles beside clipped ones
		{5, 40, 3},    // 3 columns
		// rank 2 (64 x 64 tiles): full tiles beside clipped ones
		{100, 70},
		{64, 64},
		{33, 49},
		{130, 20},
	}
	type variant struct {
		name string
		fill *float64
		gen  func(r *rand.Rand, z, y, x int) float64
	}
	smooth := func(z, y, x int) float64 {
		return 280 + 10*math.Sin(0.07*float64(x)+0.05*float64(y))*math.Cos(0.11*float64(z))
	}
	variants := []variant{
		// q far from 0: a hole's placeholder is large (the second pass)
		{"smooth", nil, func(r *rand.Rand, z, y, x int) float64 { return smooth(z, y, x) }},
		// land mask: a disc of fill in every plane, moving with z
		{"land", ptr(-1e34), func(r *rand.Rand, z, y, x int) float64 {
			dy, dx := float64(y)-8-float64(z%5), float64(x)-20
			if dy*dy+dx*dx < 60 {
				return -1e34
			}
			return smooth(z, y, x)
		}},
		// scattered fill, NaN and Inf (holes in almost every tile)
		{"holes", ptr(-9999), func(r *rand.Rand, z, y, x int) float64 {
			switch r.IntN(40) {
			case 0:
				return -9999
			case 1:
				return math.NaN()
			case 2:
				return math.Inf(1 - 2*(x%2))
			}
			return smooth(z, y, x)
		}},
		// centred on 0: a placeholder of exactly 0 (one pass) beside holes
		{"zero-mean", ptr(-9999), func(r *rand.Rand, z, y, x int) float64 {
			if (x+y+z)%11 == 0 {
				return -9999
			}
			return float64(1 - 2*((x+y+z)%2))
		}},
		// jumps: escapes (|d| > 32767) and, at tight bounds, raw values
		{"jumps", nil, func(r *rand.Rand, z, y, x int) float64 {
			v := smooth(z, y, x) + r.NormFloat64()*1e-3
			if r.IntN(50) == 0 {
				v *= 1e3
			}
			return v
		}},
		// every value a hole at tight bounds (|x / step| >= 2^28 under REL 1e-4)
		{"offset", nil, func(r *rand.Rand, z, y, x int) float64 { return 1e6 + float64((x+y+z)%7)*0.0625 }},
	}
	// FZ_GPU_SHORT (for compute-sanitizer runs): three shapes, f32 and f64 at one bound
	short := os.Getenv("FZ_GPU_SHORT") != ""
	n := 0
	for si, dims := range shapes {
		if short && si != 0 && si != 3 && si != 7 {
			continue
		}
		if len(dims) == 2 {
			dims = append([]uint64{1}, dims...)
		}
		nz, ny, nx := int(dims[0]), int(dims[1]), int(dims[2])
		for _, vr := range variants {
			r := rand.New(rand.NewPCG(uint64(si), 11))
			v64 := make([]float64, nz*ny*nx)
			v32 := make([]float32, len(v64))
			for z := 0; z < nz; z++ {
				for y := 0; y < ny; y++ {
					for x := 0; x < nx; x++ {
						i := (z*ny+y)*nx + x
						v64[i] = vr.gen(r, z, y, x)
						v32[i] = float32(v64[i])
					}
				}
			}
			for _, dt := range []fz.DType{fz.Float32, fz.Float64} {
				raw := f32bytes(v32)
				if dt == fz.Float64 {
					raw = f64bytes(v64)
				}
				for _, mode := range []fz.Mode{fz.Abs, fz.Rel} {
					for _, eb := range []float64{1e-1, 1e-4} {
						if short && (mode == fz.Abs || eb > 1e-2) {
							continue
						}
						p := fz.Params{DType: dt, Dims: dims, Mode: mode, Bound: eb, Fill: vr.fill}
						for _, ver := range formatVersions {
							check(t, g, fmt.Sprintf("%s %v %v %v %g v%d", vr.name, dims, dt, mode, eb, ver), raw, p, fz.WithFormatVersion(ver))
							// padded tiles (FORMAT.md 3.2): f32 rank 3 in the PAD kernels,
							// holes and escapes included (their slow path codes whole tiles)
							check(t, g, fmt.Sprintf("%s %v %v %v %g v%d padded", vr.name, dims, dt, mode, eb, ver), raw, p,
								fz.WithFormatVersion(ver), fz.WithTiling(fz.TilingPadded))
							n += 2
						}
					}
				}
			}
		}
	}
	t.Logf("%d clipped or holed cases byte-identical to the CPU (container versions 1 and 2, box and padded tiles)", n)
}
