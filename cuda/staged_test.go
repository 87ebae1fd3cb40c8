package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestWalksSmall: the walks added since v22 (cuda/PERF.md) on a few tiles
// each, small enough for compute-sanitizer racecheck: the staged f32 rank-2
// walk (encode_rank2.cuh; 16-byte and 4-byte staging, escapes, raw values),
// the staged rank-3 walk of tiles with fill values (FILLP: a land region,
// an all-fill tile; q parked between its passes, or at ABS 1e-4, where |q|
// passes 32767, quantized twice), the clipped kernel's row walk (rank 3,
// with and without a fill value) and the f32 rank-1 walk (v30:
// enc_flat32 without y/z neighbours; escapes, raw values, a last partial
// tile), byte-identical to the CPU codec in both container versions.
func TestWalksSmall(t *testing.T) {
	g := gpu(t)
	r := rand.New(rand.NewPCG(3, 22))
	fill := -1e10
	type field struct {
		name string
		dims []uint64
		fill *float64
		val  func(z, y, x int) float64
	}
	wave := func(z, y, x int) float64 {
		return 15 + 10*math.Sin(0.05*float64(x)+0.03*float64(y))*math.Cos(0.2*float64(z))
	}
	// one value in `every` an escape, one a raw value at 1e-4
	spiky := func(v float64, every int) float64 {
		switch r.IntN(every) {
		case 0:
			v *= 1e4
		case 1:
			v = 1024 + r.Float64()
		}
		return v
	}
	fields := []field{
		{"rank-2 aligned", []uint64{128, 192}, nil, func(z, y, x int) float64 { return spiky(wave(0, y, x), 200) }},
		{"rank-2 unaligned", []uint64{192, 134}, nil, func(z, y, x int) float64 { return wave(0, y, x) }},
		{"rank-1", []uint64{3*4096 + 100}, nil, func(z, y, x int) float64 { return spiky(wave(0, 0, x), 300) }},
		{"rank-3 land", []uint64{16, 32, 64}, &fill, func(z, y, x int) float64 {
			dy, dx := float64(y)-10, float64(x)-20-float64(z)
			switch {
			case x >= 32 && y < 16 && z < 8: // one tile all land
				return fill
			case dy*dy+dx*dx < 80:
				return fill
			}
			return wave(z, y, x)
		}},
		// clipped rank-3 tiles without a fill value (the clipped kernel's
		// row walk: 4 rows of 32, 16 rows of 8 and 4 of 8; escapes, raw values)
		{"rank-3 clipped", []uint64{8, 20, 40}, nil, func(z, y, x int) float64 { return spiky(wave(z, y, x), 150) }},
		{"rank-3 land unaligned", []uint64{8, 16, 66}, &fill, func(z, y, x int) float64 {
			if (x/5+y/3+z)%7 == 0 {
				return fill
			}
			return wave(z, y, x)
		}},
	}
	n := 0
	for _, f := range fields {
		nz, ny, nx := 1, 1, int(f.dims[0])
		if len(f.dims) == 2 {
			ny, nx = int(f.dims[0]), int(f.dims[1])
		}
		if len(f.dims) == 3 {
			nz, ny, nx = int(f.dims[0]), int(f.dims[1]), int(f.dims[2])
		}
		v := make([]float32, nz*ny*nx)
		for z := 0; z < nz; z++ {
			for y := 0; y < ny; y++ {
				for x := 0; x < nx; x++ {
					v[(z*ny+y)*nx+x] = float32(f.val(z, y, x))
				}
			}
		}
		raw := f32bytes(v)
		for _, mode := range []fz.Mode{fz.Abs, fz.Rel} {
			for _, eb := range []float64{1e-2, 1e-4} {
				for _, ver := range formatVersions {
					p := fz.Params{DType: fz.Float32, Dims: f.dims, Mode: mode, Bound: eb, Fill: f.fill}
					check(t, g, fmt.Sprintf("%s %v %g v%d", f.name, mode, eb, ver), raw, p, fz.WithFormatVersion(ver))
					n++
				}
			}
		}
	}
	t.Logf("%d cases of the staged rank-2, fill and f32 rank-1 walks byte-identical to the CPU", n)
}
