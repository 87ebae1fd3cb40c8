package cuda

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// The fields the emulation tests of the slow path and the warp decoder
// (encslow_emu_test.go, decwarp_emu_test.go) feed their kernels.

// emuWave is a smooth field.
func emuWave(z, y, x int) float64 {
	return math.Sin(0.3*float64(z)+1) * math.Cos(0.2*float64(y)) * (1 + 0.1*math.Sin(0.15*float64(x)))
}

// emuHoles is emuWave with noise and, at random places, what the codec
// takes apart: NaN, ±Inf, values far past 2^28 steps (raw), the fill value
// fill in clusters, and jumps of more than 32767 steps at 1e-3 (escapes).
func emuHoles(r *rand.Rand, fill float64) func(z, y, x int) float64 {
	return func(z, y, x int) float64 {
		switch u := r.IntN(300); {
		case u == 0:
			return math.NaN()
		case u == 1:
			return math.Inf(1 - 2*(x&1))
		case u == 2:
			return 1e30
		case u < 40 && (x+y)%7 < 3:
			return fill
		case u < 44:
			return emuWave(z, y, x) + 50
		}
		return emuWave(z, y, x) + 1e-4*r.NormFloat64()
	}
}

// gridValues is f over a field of dims (rank 1-3, slowest first) in C order.
func gridValues(dims []uint64, f func(z, y, x int) float64) []float64 {
	nz, ny, nx := 1, 1, int(dims[len(dims)-1])
	if len(dims) >= 2 {
		ny = int(dims[len(dims)-2])
	}
	if len(dims) == 3 {
		nz = int(dims[0])
	}
	v := make([]float64, 0, nz*ny*nx)
	for z := range nz {
		for y := range ny {
			for x := range nx {
				v = append(v, f(z, y, x))
			}
		}
	}
	return v
}

// asF32 is v's values as float32 (f64bytes, in gpu_test.go, gives them as
// f64 bytes).
func asF32(v []float64) []float32 {
	o := make([]float32, len(v))
	for i, u := range v {
		o[i] = float32(u)
	}
	return o
}

// f32sOf is the little-endian f32 values of raw (len(raw)/4 of them).
func f32sOf(raw []byte) []float32 {
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// realFieldBox is a real field's first `first` z slabs (rank 3) or rows
// (rank 2), or all of it (rank 1), as stored, with its dims; nil where the
// shared data is not there.
func realFieldBox(t *testing.T, f realField, first int) ([]byte, []uint64) {
	raw := sharedField(t, f)
	if raw == nil {
		return nil, nil
	}
	dims := append([]uint64(nil), f.dims...)
	if len(dims) > 1 {
		dims[0] = uint64(first)
	}
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return raw[:f.dtype.Size()*n], dims
}

// tileRank is the rank whose standard tile a geometry has (FORMAT.md
// section 3), 0 for another: the codec may drop dimensions of 1 (a 3x5x1
// field has rank-2 tiles).
func tileRank(g fz.Geometry) int {
	return map[[3]int]int{{8, 16, 32}: 3, {1, 64, 64}: 2, {1, 1, 4096}: 1}[g.Tile]
}
