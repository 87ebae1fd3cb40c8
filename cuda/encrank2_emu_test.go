package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	ctx := context.Background()
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
	dir := os.Getenv("FZ_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	for _, f := range []realField{realFields[5], realFields[12]} {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Logf("%s not found (%v): left out", f.name, err)
			continue
		}
		ny, nx := 128, int(f.dims[1])
		v := make([]float32, ny*nx)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		for _, eb := range []float64{1e-2, 1e-4} {
			fields = append(fields, field{fmt.Sprintf("%s rows 0-127 rel %g", f.name, eb), ny, nx, v,
				fz.Params{DType: fz.Float32, Dims: []uint64{uint64(ny), uint64(nx)}, Mode: fz.Rel, Bound: eb, Fill: f.fill}})
		}
	}

	// One emulator record per field and walk version; the expectations.
	type want struct {
		name    string
		tile    int
		done    bool
		origin  int32
		planes  [16][128]uint32
		escE    []int // escaped elements, in order
		escD    []int32
		raw     [128]uint32
		nraw    int
		merr    float64
		classes [4]int // segments by the coder their largest |d| picks: 2, 4, 8, 16 bits
		segMax  [8]uint32
		v2only  int // escapes of magnitude 32767 (version 2)
	}
	var in bytes.Buffer
	var wants []want
	for _, f := range fields {
		blob, _, err := fz.Compress(ctx, f32bytes(f.v), f.p, fz.WithFormatVersion(1))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		tiles, _ := containerTiles(t, blob)
		eb := math.Float64frombits(binary.LittleEndian.Uint64(blob[40:]))
		step := math.Float64frombits(binary.LittleEndian.Uint64(blob[48:]))
		inv := 1 / step
		hasFill := blob[11]&1 != 0
		fillBits := binary.LittleEndian.Uint32(blob[56:])
		gx := (f.nx + 63) / 64
		for V := 1; V <= 2; V++ {
			var hdr [44]byte
			le := binary.LittleEndian
			le.PutUint32(hdr[0:], uint32(f.ny))
			le.PutUint32(hdr[4:], uint32(f.nx))
			le.PutUint32(hdr[8:], uint32(V))
			if hasFill {
				le.PutUint32(hdr[12:], 1)
			}
			le.PutUint32(hdr[16:], fillBits)
			le.PutUint64(hdr[20:], math.Float64bits(inv))
			le.PutUint64(hdr[28:], math.Float64bits(step))
			le.PutUint64(hdr[36:], math.Float64bits(eb))
			in.Write(hdr[:])
			in.Write(f32bytes(f.v))
			for ty := 0; ty < f.ny/64; ty++ {
				for tx := 0; tx < f.nx/64; tx++ {
					ti := ty*gx + tx
					w := want{name: fmt.Sprintf("%s v%d tile %d (%d, %d)", f.name, V, ti, ty, tx), tile: ti, done: true}
					val := func(e int) float32 { return f.v[(64*ty+e/64)*f.nx+64*tx+e%64] }
					for e := range 4096 {
						x := val(e)
						s := float64(float64(x) * inv)
						if !(math.Abs(s) < 1<<28) || hasFill && math.Float32bits(x) == fillBits {
							w.done = false
						}
					}
					if !w.done {
						wants = append(wants, w)
						continue
					}
					tile := tiles[ti]
					word := func(i int) uint32 { return le.Uint32(tile[4*i:]) }
					w0 := word(0)
					w.origin = int32(word(1))
					pl, end := v1Planes(tile)
					var v1esc []int32
					if w0>>16&1 != 0 {
						m := int(word(end))
						for i := range m {
							v1esc = append(v1esc, int32(word(end+1+i)))
						}
						end += 1 + m
					}
					if w0>>17&1 != 0 {
						t.Fatalf("%s: the CPU tile has fill values, the test found none", w.name)
					}
					cpuRaw := 0
					if w0>>18&1 != 0 {
						end += 1 + 4*bits.OnesCount32(word(end))
						cpuRaw = int(word(end))
					}
					// codes by element (full tile: slot = 1024j + 128k + 8dy + dx)
					slotOf := func(e int) int {
						y, x := e/64, e%64
						return 1024*(y/16) + 128*(x/8) + 8*(y%16) + x%8
					}
					code := func(s int) uint32 {
						c := uint32(0)
						for p := range 16 {
							c |= (pl[p][s/32] >> (s % 32) & 1) << p
						}
						return c
					}
					setCode := func(s int, c uint32) {
						for p := range 16 {
							pl[p][s/32] = pl[p][s/32]&^(1<<(s%32)) | (c>>p&1)<<(s%32)
						}
					}
					next := 0
					var segMax [8]uint32
					for e := 1; e < 4096; e++ {
						s := slotOf(e)
						c := code(s)
						mag := c & 0x7FFF
						switch {
						case c == 0x8000:
							if next >= len(v1esc) {
								t.Fatalf("%s: more 0x8000 codes than escapes in the CPU tile", w.name)
							}
							w.escE = append(w.escE, e)
							w.escD = append(w.escD, v1esc[next])
							next++
							mag = 32768
						case V == 2 && mag == 32767:
							d := int32(32767)
							if c&0x8000 != 0 {
								d = -d
							}
							w.escE = append(w.escE, e)
							w.escD = append(w.escD, d)
							setCode(s, 0x8000)
							w.v2only++
							mag = 32768
						}
						sg := 2*(e/64/16) + e%64/32
						segMax[sg] = max(segMax[sg], mag)
					}
					if next != len(v1esc) {
						t.Fatalf("%s: %d escapes in the CPU tile, %d codes 0x8000", w.name, len(v1esc), next)
					}
					for _, m := range segMax {
						switch {
						case m <= 1:
							w.classes[0]++
						case m <= 7:
							w.classes[1]++
						case m <= 127:
							w.classes[2]++
						default:
							w.classes[3]++
						}
					}
					w.planes = pl
					w.segMax = segMax
					// the check (FORMAT.md section 4), each step rounded on its own
					for e := range 4096 {
						x := val(e)
						s := float64(float64(x) * inv)
						q := float64(float64(s+6755399441055744.0) - 6755399441055744.0)
						xr := float32(float64(q * step))
						d := math.Abs(float64(x) - float64(xr))
						if !(d <= eb) {
							w.raw[e/32] |= 1 << (e % 32)
							w.nraw++
						} else {
							w.merr = max(w.merr, d)
						}
					}
					if w.nraw != cpuRaw {
						t.Fatalf("%s: %d raw values recomputed, the CPU tile has %d", w.name, w.nraw, cpuRaw)
					}
					wants = append(wants, w)
				}
			}
		}
	}

	got := runEmu(t, emu, in.Bytes())
	u32 := func() uint32 {
		if len(got) < 4 {
			t.Fatal("emulator output ends early")
		}
		v := binary.LittleEndian.Uint32(got)
		got = got[4:]
		return v
	}
	var walked, left, withEsc, withV2, withRaw, planesSet int
	var classes [4]int
	edgeSeen := map[uint32]int{} // segments by their largest |d| (32768: escapes), at the coders' edges
	for _, w := range wants {
		if ti := int(u32()); ti != w.tile {
			t.Fatalf("%s: emulator record for tile %d", w.name, ti)
		}
		done := u32() == 1
		if done != w.done {
			t.Fatalf("%s: the walk returned done=%v, want %v (holes: NaN, Inf, |s| >= 2^28 or fill)", w.name, done, w.done)
		}
		if !done {
			left++
			continue
		}
		walked++
		origin, nesc, nraw, merr := int32(u32()), int(u32()), int(u32()), math.Float32frombits(u32())
		var pl [16][128]uint32
		for p := range 16 {
			for i := range 128 {
				pl[p][i] = u32()
			}
		}
		var sraw, sesc [128]uint32
		for i := range sraw {
			sraw[i] = u32()
		}
		for i := range sesc {
			sesc[i] = u32()
		}
		esc := make([]int32, nesc)
		for i := range esc {
			esc[i] = int32(u32())
		}
		if origin != w.origin {
			t.Errorf("%s: origin %d, CPU %d", w.name, origin, w.origin)
		}
		for p := range 16 {
			for i := range 128 {
				if pl[p][i] != w.planes[p][i] {
					t.Fatalf("%s: plane %d word %d (segment %d, row group %d, column group %d) is %#08x, CPU %#08x",
						w.name, p, i, i/16, i%4, i%16/4, pl[p][i], w.planes[p][i])
				}
			}
		}
		if nesc != len(w.escE) {
			t.Fatalf("%s: %d escapes, CPU %d", w.name, nesc, len(w.escE))
		}
		var wesc [128]uint32
		for i, e := range w.escE {
			wesc[e/32] |= 1 << (e % 32)
			if esc[i] != w.escD[i] {
				t.Fatalf("%s: escape %d (element %d) is %d, CPU %d", w.name, i, e, esc[i], w.escD[i])
			}
		}
		if sesc != wesc {
			i := 0
			for sesc[i] == wesc[i] {
				i++
			}
			t.Fatalf("%s: escape bitmap word %d (row %d, half %d) is %#08x, want %#08x", w.name, i, i/2, i%2, sesc[i], wesc[i])
		}
		if nraw != w.nraw {
			t.Errorf("%s: %d raw values, CPU %d", w.name, nraw, w.nraw)
		}
		if sraw != w.raw {
			i := 0
			for sraw[i] == w.raw[i] {
				i++
			}
			t.Fatalf("%s: raw bitmap word %d (row %d, half %d) is %#08x, want %#08x", w.name, i, i/2, i%2, sraw[i], w.raw[i])
		}
		if float64(merr) != w.merr {
			t.Errorf("%s: merr %g, want %g", w.name, merr, w.merr)
		}
		if nesc > 0 {
			withEsc++
		}
		if w.v2only > 0 {
			withV2++
		}
		if nraw > 0 {
			withRaw++
		}
		for p := 1; p < 15; p++ {
			for i := range 128 {
				if pl[p][i] != 0 {
					planesSet++
				}
			}
		}
		for i := range classes {
			classes[i] += w.classes[i]
		}
		for _, m := range w.segMax {
			edgeSeen[m]++
		}
	}
	if len(got) != 0 {
		t.Fatalf("emulator wrote %d bytes more than the tiles", len(got))
	}
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
