package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// The library first runs f32 rank-3 fields whose tiles are all full and
// that have no fill through two optimistic kernels, which have no slow
// path: the narrow one gives the job up at its first z-plane of 16-bit
// codes (the optimistic one then redoes it), and either gives it up at a
// tile with a value without q, an escape or more raw values than its park
// holds (the full kernel then redoes it; cuda/PERF.md v19). These fields
// take those kernels, and each case below puts such a tile first, in the
// middle or last, so that the job is given up early, halfway or at its
// end; fields with a fill value take the fill fields' optimistic kernel the
// same way. The bytes must be the CPU's either way.
func TestOptimisticFallbackMatchCPU(t *testing.T) {
	g := gpu(t)
	dims := []uint64{64, 64, 128} // 8 x 4 x 4 = 128 full tiles
	nz, ny, nx := int(dims[0]), int(dims[1]), int(dims[2])
	n := nz * ny * nx
	idx := func(z, y, x int) int { return (z*ny+y)*nx + x }
	smooth := func(amp float64) []float32 {
		v := make([]float32, n)
		for z := 0; z < nz; z++ {
			for y := 0; y < ny; y++ {
				for x := 0; x < nx; x++ {
					v[idx(z, y, x)] = float32(amp * math.Sin(0.05*float64(x)+0.03*float64(y)) * math.Cos(0.02*float64(z)))
				}
			}
		}
		return v
	}
	// tile (tz, ty, tx) of the 8 x 4 x 4 grid, 8 x 16 x 32 values each
	tileOf := func(k int) (int, int, int) { return 8 * (k / 16), 16 * (k / 4 % 4), 32 * (k % 4) }
	r := rand.New(rand.NewPCG(19, 3))
	// amp 100: 16-bit codes in every tile at ABS (the narrow kernel gives
	// up at once); amp 1: none at ABS 1e-2 and REL
	type variant struct {
		name  string
		amp   float64
		modes []fz.Mode
		edit  func(v []float32, tile int)
	}
	variants := []variant{
		{"clean", 100, []fz.Mode{fz.Abs, fz.Rel}, func(v []float32, tile int) {}},
		{"clean", 1, []fz.Mode{fz.Abs, fz.Rel}, func(v []float32, tile int) {}},
		// a steep ramp in one tile: 16-bit codes there only
		{"wide", 1, []fz.Mode{fz.Abs, fz.Rel}, func(v []float32, tile int) {
			z, y, x := tileOf(tile)
			for dz := 0; dz < 8; dz++ {
				for dy := 0; dy < 16; dy++ {
					for dx := 0; dx < 32; dx++ {
						v[idx(z+dz, y+dy, x+dx)] += float32(50 * dx)
					}
				}
			}
		}},
		{"nan", 100, []fz.Mode{fz.Abs, fz.Rel}, func(v []float32, tile int) {
			z, y, x := tileOf(tile)
			v[idx(z+3, y+5, x+7)] = float32(math.NaN())
		}},
		{"inf", 1, []fz.Mode{fz.Abs, fz.Rel}, func(v []float32, tile int) {
			z, y, x := tileOf(tile)
			v[idx(z+7, y+15, x+31)] = float32(math.Inf(-1))
		}},
		// |d| > 32767 at ABS 1e-4 without a hole (|x / step| < 2^28)
		{"escape", 1, []fz.Mode{fz.Abs}, func(v []float32, tile int) {
			z, y, x := tileOf(tile)
			v[idx(z+4, y+8, x+16)] = 5000
		}},
		// values whose f32 spacing is near the bound at 1e-4: ~40 % raw,
		// more than the optimistic kernel's park takes
		{"raw-heavy", 1, []fz.Mode{fz.Abs}, func(v []float32, tile int) {
			z, y, x := tileOf(tile)
			for dz := 0; dz < 8; dz++ {
				for dy := 0; dy < 16; dy++ {
					for dx := 0; dx < 32; dx++ {
						v[idx(z+dz, y+dy, x+dx)] = float32(1024 + 0.25*r.Float64()) // |d| < 2^15: raw values, no escapes
					}
				}
			}
		}},
	}
	// FZ_GPU_SHORT (compute-sanitizer runs): the fill fields only, their
	// tiles 0 and 77, the first mode, ABS/REL 1e-4 and version 1
	short := os.Getenv("FZ_GPU_SHORT") != ""
	tiles, bounds, versions := []int{0, 77, 127}, []float64{1e-2, 1e-4}, formatVersions
	if short {
		tiles, bounds, versions = []int{0, 77}, []float64{1e-4}, formatVersions[:1]
	}
	noFill := variants
	if short {
		noFill = nil
	}
	cases := 0
	for _, vr := range noFill {
		for _, tile := range tiles {
			if vr.name == "clean" && tile != 0 {
				continue
			}
			v := smooth(vr.amp)
			vr.edit(v, tile)
			raw := f32bytes(v)
			for _, mode := range vr.modes {
				for _, eb := range []float64{1e-2, 1e-4} {
					p := fz.Params{DType: fz.Float32, Dims: dims, Mode: mode, Bound: eb}
					for _, ver := range formatVersions {
						check(t, g, fmt.Sprintf("%s (amplitude %g) in tile %d %v %g v%d", vr.name, vr.amp, tile, mode, eb, ver), raw, p, fz.WithFormatVersion(ver))
						cases++
					}
				}
			}
		}
	}
	// Fields with a fill value take the fill fields' optimistic kernel
	// first (the FILLP walk without the slow path; encode_warp.cuh's HF 5):
	// whole tiles, and a field with clipped tiles (pre-coded by the clipped
	// kernel; the optimistic kernel copies them and writes their prefixes,
	// and a kernel after it that redoes the job must still find them), each
	// with a land region of fill values; the same edits make it give the
	// job up early, halfway or last (16-bit codes it takes itself).
	fill := -1e10
	for _, fd := range [][]uint64{dims, {64, 70, 140}} {
		fny, fnx := int(fd[1]), int(fd[2])
		for _, vr := range variants {
			if vr.name == "wide" {
				continue
			}
			for _, tile := range tiles {
				if vr.name == "clean" && tile != 0 {
					continue
				}
				base := smooth(vr.amp)
				vr.edit(base, tile) // the edits' tiles lie in the first 64 x 64 x 128 values
				v := make([]float32, nz*fny*fnx)
				for z := 0; z < nz; z++ {
					for y := 0; y < fny; y++ {
						for x := 0; x < fnx; x++ {
							dy, dx := float64(y-30), float64(x-95-z/4)
							switch {
							case dy*dy+dx*dx < 120: // land: rows 19-41, away from the edits
								v[(z*fny+y)*fnx+x] = float32(fill)
							case y < ny && x < nx:
								v[(z*fny+y)*fnx+x] = base[idx(z, y, x)]
							default:
								v[(z*fny+y)*fnx+x] = float32(vr.amp * math.Sin(0.05*float64(x)+0.03*float64(y)))
							}
						}
					}
				}
				raw := f32bytes(v)
				modes := vr.modes
				if short {
					modes = modes[:1]
				}
				for _, mode := range modes {
					for _, eb := range bounds {
						p := fz.Params{DType: fz.Float32, Dims: fd, Mode: mode, Bound: eb, Fill: &fill}
						for _, ver := range versions {
							check(t, g, fmt.Sprintf("fill %v: %s (amplitude %g) in tile %d %v %g v%d", fd, vr.name, vr.amp, tile, mode, eb, ver), raw, p, fz.WithFormatVersion(ver))
							cases++
						}
					}
				}
			}
		}
	}
	// A real field cut to whole tiles (96 of its 100 months), so that it
	// takes the optimistic kernel too.
	dir := os.Getenv("FZ_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	if short {
		t.Logf("FZ_GPU_SHORT: %d compressions of f32 rank-3 fill fields byte-identical to the CPU", cases)
		return
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "csm_b003_TS_100x64x128.f32")); err == nil {
		raw = raw[:96*64*128*4]
		for _, mode := range []fz.Mode{fz.Abs, fz.Rel} {
			for _, eb := range []float64{1e-2, 1e-3, 1e-4} {
				p := fz.Params{DType: fz.Float32, Dims: []uint64{96, 64, 128}, Mode: mode, Bound: eb}
				for _, ver := range formatVersions {
					check(t, g, fmt.Sprintf("csm_b003 96x64x128 %v %g v%d", mode, eb, ver), raw, p, fz.WithFormatVersion(ver))
					cases++
				}
			}
		}
	} else {
		t.Logf("csm_b003 not found (%v): its cases skipped", err)
	}
	t.Logf("%d compressions of f32 rank-3 fields (the optimistic kernels, given up early, halfway, last or never) byte-identical to the CPU (container versions 1 and 2)", cases)
}
