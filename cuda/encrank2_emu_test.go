package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestEncodeRank2Emulated checks the staged rank-2 f32 walk (enc_fast2s in
// encode_rank2.cuh) without a GPU: tools/encode_rank2_emu.cpp runs the
// header's code on the host (32 threads as the warp's lanes,
// AddressSanitizer and UBSan, cp.async copies landing both at issue and at
// their wait, poisoned staging and plane buffers) on every full 64 x 64
// tile of 2-D f32 fields, and what the walk leaves must be what the CPU
// codec writes for that tile in its version-1 container:
//   - done: 0 exactly for the tiles holding a hole (NaN, Inf, |s| >= 2^28,
//     the fill value), 1 for every other full tile;
//   - the 16 bit planes, equal to the CPU tile's (v1Planes);
//   - the origin (word 1), the escape count and the escape list (element
//     order; the walk's element-order escape bitmap must mark exactly the
//     listed elements), the raw count (the tile's, word0 bit 18);
//   - the element-order raw bitmap, against the check of FORMAT.md
//     section 4 recomputed here, and merr, the largest check error of the
//     values that are not raw.
//
// Version 2 (enc_fast2s<2>): the walk escapes |d| >= 32767 (esc_max(2) =
// 32766) and still codes every escape as 0x8000 in its planes, which
// encode_v2.cuh turns into version 2's at the write. So the expected
// result is derived from the CPU's version-1 tile: a slot whose v1 code
// has magnitude 32767 (a residual of ±32767, a code in version 1 and an
// escape in version 2: FORMAT.md section 4) becomes code 0x8000 in the
// planes and an escape of ±32767 merged into the escape list in element
// order; everything else is as in version 1. The spike fields put residuals
// of exactly ±32767 (and ±32766, ±32768) into tiles so that both sides of
// each threshold are met.
//
// Shapes 128 x 192 (nx % 4 == 0, the rows 16-byte aligned: the 16-byte
// cp.async path) and 130 x 198 (nx % 4 == 2: the 4-byte path, and clipped
// tiles, which the walk does not take and the emulation skips).
func TestEncodeRank2Emulated(t *testing.T) {
	emu := buildEmu(t, "encode_rank2_emu.cpp", "-Wno-unknown-pragmas", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing")
	type field struct {
		name   string
		ny, nx int
		v      []float32
		p      fz.Params
	}
	var fields []field
	fill := -9999.0
	for si, shape := range [][2]int{{128, 192}, {130, 198}} {
		ny, nx := shape[0], shape[1]
		r := rand.New(rand.NewPCG(uint64(si)+11, 29))
		mk := func(name string, eb float64, f func(y, x int, step float64) float64) {
			v := make([]float32, ny*nx)
			for y := range ny {
				for x := range nx {
					v[y*nx+x] = float32(f(y, x, 2*eb))
				}
			}
			fields = append(fields, field{fmt.Sprintf("%s %dx%d", name, ny, nx), ny, nx, v,
				fz.Params{DType: fz.Float32, Dims: []uint64{uint64(ny), uint64(nx)}, Mode: fz.Abs, Bound: eb}})
		}
		ramp := func(y, x int) float64 { return 0.37*float64(x) + 0.21*float64(y) + 1e-3*float64(x*y) }
		// smooth: |d| <= 1 nearly everywhere (2-bit codes), a few 4-bit
		mk("smooth", 1e-3, func(y, x int, step float64) float64 {
			return (ramp(y, x) + 3*math.Sin(0.02*float64(x+2*y))) * step
		})
		// noise by region (32 x 32 patches): none, 1, 20 and 4000 quanta,
		// so that segments take each of the 2/4/8/16-bit coders
		mk("widths", 1e-3, func(y, x int, step float64) float64 {
			a := []float64{0, 1, 20, 4000}[(y/32+x/32+(y/64)*(x/64))%4]
			return (ramp(y, x) + 500 + a*(2*r.Float64()-1)) * step
		})
		// escapes: noise of 1e6 quanta (nearly every |d| > 32767) in the
		// left half, sparse spikes of 5e4 quanta in a smooth right half
		mk("escapes", 1e-3, func(y, x int, step float64) float64 {
			if x < nx/2 {
				return 1e6 * (2*r.Float64() - 1) * step
			}
			q := ramp(y, x)
			if r.IntN(300) == 0 {
				q += 5e4 * float64(1-2*r.IntN(2))
			}
			return q * step
		})
		// raw values: near 1024 at 1e-4 the f32 spacing (6.1e-5, 1.2e-4)
		// breaks the check for many values
		mk("raw", 1e-4, func(y, x int, step float64) float64 {
			return 1024 + 0.01*math.Sin(0.05*float64(x))*math.Cos(0.07*float64(y)) + 1e-3*r.NormFloat64()
		})
		// spikes of ±32766, ±32767, ±32768 and ±40000 quanta (step 1), 4
		// apart: residuals of exactly those magnitudes at each spike and its
		// right, lower and diagonal neighbours
		spikes := []float64{32766, 32767, 32768, 40000, -32766, -32767, -32768, -40000}
		mk("spikes", 0.5, func(y, x int, step float64) float64 {
			if y%4 == 1 && x%4 == 2 && r.IntN(3) == 0 {
				return spikes[r.IntN(len(spikes))]
			}
			return 0
		})
		// residuals at the coders' edges: each tile's q is the 2-D prefix
		// sum (inside the tile) of residuals chosen per 16 x 32 segment, a
		// few at ±m and the rest 0 or smaller, m one of the largest |d| each
		// coder takes and the smallest it does not (step 1: x = q exactly)
		edges := []int{0, 1, 2, 7, 8, 127, 128, 32766, 32767, 32768, 100000}
		dq := make([]int, ny*nx)
		for ty := 0; ty < ny; ty += 64 {
			for tx := 0; tx < nx; tx += 64 {
				for s := range 8 {
					m := edges[r.IntN(len(edges))]
					for range 1 + r.IntN(3) {
						y, x := ty+16*(s/2)+r.IntN(16), tx+32*(s%2)+r.IntN(32)
						if y < ny && x < nx {
							dq[y*nx+x] = m * (1 - 2*r.IntN(2))
						}
					}
					for range r.IntN(20) {
						y, x := ty+16*(s/2)+r.IntN(16), tx+32*(s%2)+r.IntN(32)
						if y < ny && x < nx && dq[y*nx+x] == 0 {
							dq[y*nx+x] = r.IntN(2*m+1) - m
						}
					}
				}
			}
		}
		for y := range ny { // prefix sums along x, then y, inside each tile
			for x := range nx {
				if x%64 != 0 {
					dq[y*nx+x] += dq[y*nx+x-1]
				}
			}
		}
		for y := range ny {
			for x := range nx {
				if y%64 != 0 {
					dq[y*nx+x] += dq[(y-1)*nx+x]
				}
			}
		}
		mk("edges", 0.5, func(y, x int, step float64) float64 { return float64(dq[y*nx+x]) })
		// holes: NaN, +Inf, 1e30 (|s| >= 2^28) and the fill value, each in
		// one full tile (tiles 0, 1, gx and gx + 1), and a NaN in the last
		// (clipped, when there is one) tile; the other full tiles are walked
		mk("holes", 1e-3, func(y, x int, step float64) float64 {
			switch {
			case y == 5 && x == 7:
				return math.NaN()
			case y == 63 && x == 64+63:
				return math.Inf(1)
			case y == 64 && x == 0:
				return 1e30
			case y == 100 && x == 64+33:
				return fill
			case y == ny-1 && x == nx-1:
				return math.NaN()
			}
			return (ramp(y, x) + 20*math.Sin(0.1*float64(x))) * step
		})
		fields[len(fields)-1].p.Fill = &fill
	}
	// real 2-D fields, where present: their first 128 rows
	for _, f := range []realField{benchFields[5], benchFields[12]} {
		raw := sharedField(t, f)
		if raw == nil {
			continue
		}
		ny, nx := 128, int(f.dims[1])
		v := f32sOf(raw[:4*ny*nx])
		for _, eb := range []float64{1e-2, 1e-4} {
			fields = append(fields, field{fmt.Sprintf("%s rows 0-127 rel %g", f.name, eb), ny, nx, v,
				fz.Params{DType: fz.Float32, Dims: []uint64{uint64(ny), uint64(nx)}, Mode: fz.Rel, Bound: eb, Fill: f.fill}})
		}
	}

	// One emulator record per field and walk version; the expectations.
	type want struct {
		name string
		tile int
		done bool
		tileCheck
		walkExp
		classes [4]int // segments by the coder their largest |d| picks: 2, 4, 8, 16 bits
	}
	var in bytes.Buffer
	var wants []want
	for _, f := range fields {
		c := compressV1(t, f.name, f.v, f.p)
		gx := (f.nx + 63) / 64
		for V := 1; V <= 2; V++ {
			var hdr [44]byte
			le := binary.LittleEndian
			le.PutUint32(hdr[0:], uint32(f.ny))
			le.PutUint32(hdr[4:], uint32(f.nx))
			le.PutUint32(hdr[8:], uint32(V))
			if c.hasFill {
				le.PutUint32(hdr[12:], 1)
			}
			le.PutUint32(hdr[16:], c.fillBits)
			c.putSteps(hdr[20:])
			in.Write(hdr[:])
			in.Write(f32bytes(f.v))
			for ty := 0; ty < f.ny/64; ty++ {
				for tx := 0; tx < f.nx/64; tx++ {
					ti := ty*gx + tx
					w := want{name: fmt.Sprintf("%s v%d tile %d (%d, %d)", f.name, V, ti, ty, tx), tile: ti, done: true}
					val := func(e int) float32 { return f.v[(64*ty+e/64)*f.nx+64*tx+e%64] }
					for e := range 4096 {
						x := val(e)
						s, _ := quantize(x, c.inv)
						if !(math.Abs(s) < 1<<28) || c.hasFill && math.Float32bits(x) == c.fillBits {
							w.done = false
						}
					}
					if !w.done {
						wants = append(wants, w)
						continue
					}
					ct := parseV1Tile(c.tiles[ti])
					if ct.fill {
						t.Fatalf("%s: the CPU tile has fill values, the test found none", w.name)
					}
					w.origin = ct.origin
					codes, esc := elementCodes(t, w.name, &ct, rank2Layout)
					w.walkExp = walkCodes(&codes, esc, V, rank2Layout)
					for _, m := range w.groupMax {
						w.classes[coderClass(m)]++
					}
					// the check (FORMAT.md section 4)
					for e := range 4096 {
						x := val(e)
						_, q := quantize(x, c.inv)
						d := checkErr(x, q, c.step)
						if !(d <= c.eb) {
							w.raw[e/32] |= 1 << (e % 32)
							w.nraw++
						} else {
							w.merr = max(w.merr, d)
						}
					}
					if w.nraw != len(ct.raw) {
						t.Fatalf("%s: %d raw values recomputed, the CPU tile has %d", w.name, w.nraw, len(ct.raw))
					}
					wants = append(wants, w)
				}
			}
		}
	}

	out := emuOut{t: t, b: runEmu(t, emu, in.Bytes())}
	var walked, left, withEsc, withV2, withRaw, planesSet int
	var classes [4]int
	edgeSeen := map[uint32]int{} // segments by their largest |d| (32768: escapes), at the coders' edges
	for _, w := range wants {
		if ti := int(out.u32()); ti != w.tile {
			t.Fatalf("%s: emulator record for tile %d", w.name, ti)
		}
		done := out.u32() == 1
		if done != w.done {
			t.Fatalf("%s: the walk returned done=%v, want %v (holes: NaN, Inf, |s| >= 2^28 or fill)", w.name, done, w.done)
		}
		if !done {
			left++
			continue
		}
		walked++
		r := out.walk(false)
		checkWalkTile(t, w.name, &r, &w.tileCheck, &w.walkExp, rank2Layout)
		if r.nesc > 0 {
			withEsc++
		}
		if w.v2only > 0 {
			withV2++
		}
		if r.nraw > 0 {
			withRaw++
		}
		for p := 1; p < 15; p++ {
			for i := range 128 {
				if r.planes[p][i] != 0 {
					planesSet++
				}
			}
		}
		for i := range classes {
			classes[i] += w.classes[i]
		}
		for _, m := range w.groupMax {
			edgeSeen[m]++
		}
	}
	out.end()
	// each check must have had something to catch
	if walked == 0 || left < 8 || withEsc == 0 || withV2 == 0 || withRaw == 0 || planesSet == 0 ||
		classes[0] == 0 || classes[1] == 0 || classes[2] == 0 || classes[3] == 0 {
		t.Fatalf("coverage: %d tiles walked, %d left to the slow path, %d with escapes (%d with version-2-only ones), %d with raw values, segments by coder %v",
			walked, left, withEsc, withV2, withRaw, classes)
	}
	for _, m := range []uint32{1, 2, 7, 8, 127, 128, 32766, 32767, 32768} {
		if edgeSeen[m] == 0 {
			t.Fatalf("coverage: no walked segment whose largest |d| is %d", m)
		}
	}
	t.Logf("%d full tiles of %d fields (walk versions 1 and 2): %d walked, equal to the CPU's (planes, origin, escapes, raw values, merr); %d with holes left to the slow path; %d with escapes (%d with residuals of ±32767, escapes in version 2 only), %d with raw values; segments by coder (2/4/8/16 bits): %v",
		len(wants), len(fields), walked, left, withEsc, withV2, withRaw, classes)
}

// rank2Layout: a full 64 x 64 tile (element e = 64y + x) has slot
// 1024(y / 16) + 128(x / 8) + 8(y % 16) + x % 8; its 8 segments of 16 x 32
// elements pick the coders.
var rank2Layout = walkLayout{
	slot: func(e int) int {
		y, x := e/64, e%64
		return 1024*(y/16) + 128*(x/8) + 8*(y%16) + x%8
	},
	group: func(e int) int { return 2*(e/64/16) + e%64/32 },
	planeWord: func(i int) string {
		return fmt.Sprintf("segment %d, row group %d, column group %d", i/16, i%4, i%16/4)
	},
	bitmapWord: func(i int) string { return fmt.Sprintf("row %d, half %d", i/2, i%2) },
}
