package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestEncodeRank3Emulated checks the staged f32 rank-3 walk (enc_fast3 in
// encode_rank3.cuh), with and without fill values, without a GPU: tools/encode_rank3_emu.cpp runs
// the header's code on the host (32 threads as the warp's lanes,
// AddressSanitizer and UBSan, cp.async copies landing both at issue and at
// their wait, poisoned staging, plane and scratch buffers: see its
// comment) on every full 8 x 16 x 32 tile of 3-D f32 fields, with each walk
// the kernel calls there:
//   - fields without a fill value: enc_fast3<false, false, false, V>
//     (plain: it records escapes), <false, true, false, V> (hot: the no-fill
//     kernels' walk, false for a tile with an escape or more than
//     HOT_RV_MAX(_V2) raw values) and <false, true, true, V> (no16: the
//     narrow optimistic kernel's, also false, with ts.wide, at the first
//     z-plane of 16-bit codes);
//   - fields with one: enc_fast3<true, false, false, V, true> (FILLP: a
//     first pass finds each z-plane's placeholder and parks q in 16 bits,
//     or, for a tile with a |q| > 32767, the second pass quantizes again;
//     the test counts both kinds of tile, and tiles with all-fill z-planes
//     before and between others), and <true, true, false, V, true>
//     (fillhot: the fill fields' optimistic kernel's, one pass since v54:
//     each z-plane's placeholder as the plane is quantized; false for a
//     tile with a |q| > 32767, an escape or more than HOT_RV_MAX_FILL(_V2)
//     raw values).
//
// What the walks leave must be what the CPU codec writes for the tile in its
// version-1 container, and what FORMAT.md section 4 gives recomputed here:
//   - done (and wide): as the walk's rules
//     give them from the tile's holes (values without q that are not the
//     fill value: NaN, Inf, |s| >= 2^28), escapes, largest |d| per z-plane
//     and raw count, in the walk's order (z-planes in turn: a hole, then an
//     escape, then a 16-bit plane);
//   - the placeholders (FORMAT.md section 4, Holes): per z-plane trunc(sum q
//     / count) over its values with q; an all-fill plane the nearest earlier
//     plane's, leading ones the first plane's; 0 without any: the CPU tile's
//     origin where element 0 is fill (the codes, compared below, carry the
//     others);
//   - the 16 bit planes (v1Planes), the origin, the escape count and list
//     (element order; the element-order escape bitmap marks exactly them);
//   - the raw count and element-order raw bitmap (the check failed, fill
//     values left out) and the listed raw values: the raw elements' bits in
//     element order, the first min(nraw, SC_RV_MAX) of them, equal to the CPU
//     tile's raw values;
//   - FILLP: nfill and the element-order fill bitmap (word z * 16 + y, bit x);
//     the CPU tile has a fill mask exactly when nfill > 0;
//   - merr: the largest check error of the values that are neither raw nor
//     fill.
//
// Version 2 (V = 2) escapes |d| >= 32767 and still codes every escape as
// 0x8000, as in TestEncodeRank2Emulated: the expected planes and escape list
// are the version-1 tile's with residuals of ±32767 turned into escapes.
//
// Shapes 16 x 32 x 64 (nx % 4 == 0: the 16-byte cp.async path, 8 full
// tiles) and 8 x 32 x 67 (odd nx: the 4-byte path; 4 full tiles, the
// clipped ones skipped). A second build with SC_RV_MAX = 300 walks the
// fields with many raw values again, so that tiles list fewer raw values
// than they have. Real fields (levitus with its land, csm), where present:
// a box of each.
func TestEncodeRank3Emulated(t *testing.T) {
	flags := []string{"-Wno-unknown-pragmas", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing"}
	emu := buildEmu(t, "encode_rank3_emu.cpp", flags...)
	const lowCap = 300
	emuLow := buildEmu(t, "encode_rank3_emu.cpp", append(flags, fmt.Sprintf("-DSC_RV_MAX=%d", lowCap))...)

	const (
		wPlain   = 1
		wHot     = 2
		wNo16    = 4
		wFillP   = 8
		wFillHot = 16
	)
	walkName := map[int]string{wPlain: "plain", wHot: "hot", wNo16: "no16", wFillP: "fillp", wFillHot: "fillhot"}
	type field struct {
		name       string
		nz, ny, nx int
		v          []float32
		p          fz.Params
		lowCap     bool // also walked by the build with SC_RV_MAX = lowCap
		real       bool
	}
	var fields []field
	land := -1e10
	// the first float32 from 1024 up whose check fails at 1e-4: a fill
	// value that has a q and would be raw
	rawFill := float32(1024)
	for {
		step := 2e-4
		if _, q := quantize(rawFill, 1/step); checkErr(rawFill, q, step) > 1e-4 {
			break
		}
		rawFill = math.Nextafter32(rawFill, 2048)
	}
	rawFillV := float64(rawFill)
	shapes := [][3]int{{16, 32, 64}, {8, 32, 67}}
	for si, shape := range shapes {
		nz, ny, nx := shape[0], shape[1], shape[2]
		r := rand.New(rand.NewPCG(uint64(si)+5, 33))
		mk := func(name string, eb float64, fill *float64, lowCap bool, f func(z, y, x int, step float64) float64) {
			v := make([]float32, nz*ny*nx)
			for z := range nz {
				for y := range ny {
					for x := range nx {
						v[(z*ny+y)*nx+x] = float32(f(z, y, x, 2*eb))
					}
				}
			}
			fields = append(fields, field{fmt.Sprintf("%s %dx%dx%d", name, nz, ny, nx), nz, ny, nx, v,
				fz.Params{DType: fz.Float32, Dims: []uint64{uint64(nz), uint64(ny), uint64(nx)}, Mode: fz.Abs, Bound: eb, Fill: fill},
				lowCap, false})
		}
		wave := func(z, y, x int) float64 {
			return 15 + 10*math.Sin(0.05*float64(x)+0.03*float64(y))*math.Cos(0.2*float64(z))
		}
		// smooth: |d| <= 1 nearly everywhere (2-bit codes)
		mk("smooth", 1e-3, nil, false, func(z, y, x int, step float64) float64 {
			return (0.37*float64(x) + 0.21*float64(y) + 0.5*float64(z) + 3*math.Sin(0.02*float64(x+2*y+3*z))) * step
		})
		// residuals at the coders' and escapes' edges: each tile's q is the
		// 3-D prefix sum (inside the tile) of residuals chosen per z-plane,
		// a few at ±m and the rest smaller, m one of the largest |d| each
		// coder takes and the smallest it does not (step 1: x = q exactly)
		edges := []int{0, 1, 2, 7, 8, 127, 128, 32766, 32767, 32768, 100000}
		dq := make([]int, nz*ny*nx)
		for tz := 0; tz < nz; tz += 8 {
			for ty := 0; ty < ny; ty += 16 {
				for tx := 0; tx < nx; tx += 32 {
					for z := range 8 {
						m := edges[r.IntN(len(edges))]
						at := func() int {
							return ((tz+z)*ny+ty+r.IntN(16))*nx + tx + r.IntN(min(32, nx-tx))
						}
						for range 1 + r.IntN(3) {
							dq[at()] = m * (1 - 2*r.IntN(2))
						}
						ms := min(m, 1000)
						for range r.IntN(20) {
							if i := at(); dq[i] == 0 {
								dq[i] = r.IntN(2*ms+1) - ms
							}
						}
					}
				}
			}
		}
		for z := range nz { // prefix sums along x, then y, then z, inside each tile
			for y := range ny {
				for x := range nx {
					i := (z*ny+y)*nx + x
					if x%32 != 0 {
						dq[i] += dq[i-1]
					}
				}
			}
		}
		for z := range nz {
			for y := range ny {
				for x := range nx {
					i := (z*ny+y)*nx + x
					if y%16 != 0 {
						dq[i] += dq[i-nx]
					}
				}
			}
		}
		for z := range nz {
			for y := range ny {
				for x := range nx {
					i := (z*ny+y)*nx + x
					if z%8 != 0 {
						dq[i] += dq[i-nx*ny]
					}
					if dq[i] >= 1<<24 || dq[i] <= -1<<24 {
						t.Fatalf("edges: q %d is not exact in float32", dq[i])
					}
				}
			}
		}
		mk("edges", 0.5, nil, false, func(z, y, x int, step float64) float64 { return float64(dq[(z*ny+y)*nx+x]) })
		// escapes: noise of 1e6 quanta (nearly every |d| > 32767) in the
		// left half of each tile, sparse spikes of 5e4 quanta in a smooth
		// right half
		mk("escapes", 1e-3, nil, false, func(z, y, x int, step float64) float64 {
			if x%32 < 16 && (z/8+y/16+x/32)%2 == 0 {
				return 1e6 * (2*r.Float64() - 1) * step
			}
			q := 0.3*float64(x) + 0.2*float64(y)
			if r.IntN(300) == 0 {
				q += 5e4 * float64(1-2*r.IntN(2))
			}
			return q * step
		})
		// raw values at 1e-4: near 1024 (f32 spacing 1.2e-4: about 40 % of
		// the values fail the check), near 512 (6.1e-5: about 8 %) or on
		// both sides of 512 (fewer), by tile
		mk("raw", 1e-4, nil, true, func(z, y, x int, step float64) float64 {
			b := []float64{1024, 512, 511.995}[(z/8+y/16+2*(x/32))%3]
			return b + 0.01*math.Sin(0.05*float64(x))*math.Cos(0.07*float64(y+z)) + 1e-3*r.NormFloat64()
		})
		// holes without a fill value: NaN, +Inf, 1e30 (|s| >= 2^28) and -Inf
		// in tiles (iz, iy, ix) = (0,0,0) z 0, (0,0,1) z 3, (0,1,0) z 7 (its
		// z-plane 2 noisy: 16-bit codes before the hole) and (0,1,1) z 5; the
		// tiles of iz = 1 are walked
		mk("holes", 1e-3, nil, false, func(z, y, x int, step float64) float64 {
			switch {
			case z == 0 && y == 0 && x == 5:
				return math.NaN()
			case z == 3 && y == 4 && x == 32+31:
				return math.Inf(1)
			case z == 7 && y == 31 && x == 31:
				return 1e30
			case z == 5 && y == 16+9 && x == 32+2:
				return math.Inf(-1)
			}
			v := wave(z, y, x)
			if z == 2 && y >= 16 && x < 32 {
				v += 2 * r.Float64()
			}
			return v
		})
		// land (fill -1e10) at 1e-4, by tile (iz, iy, ix): (0,0,0) a land
		// disc holding element 0 (origin = placeholder); (0,0,1) all land;
		// (0,1,0) land and a NaN (FILLP's first pass ends there); (0,1,1) no land,
		// values near 1024 (raw); (1,0,0) land and negative values (a
		// negative placeholder, truncated); (1,0,1) land stripes and values
		// near 1024; (1,1,0) land and 1e30 (false); (1,1,1) z-planes 0, 1
		// (before any value: they take plane 2's placeholder) and 4 (plane
		// 3's) all land, and one land value, the tile's last
		landF := func(z, y, x int, step float64) float64 {
			iz, iy, ix := z/8, y/16, x/32
			lz, ly, lx := z%8, y%16, x%32
			v := wave(z, y, x)
			disc := float64(ly*ly+(lx-3)*(lx-3)) < 60-4*float64(lz)
			switch [3]int{iz, iy, ix} {
			case [3]int{0, 0, 0}:
				if disc {
					return land
				}
			case [3]int{0, 0, 1}:
				return land
			case [3]int{0, 1, 0}:
				if lz == 4 && ly == 7 && lx == 20 {
					return math.NaN()
				}
				if disc {
					return land
				}
			case [3]int{0, 1, 1}:
				return 1024 + 0.01*math.Sin(0.1*float64(x+y)) + 1e-3*r.NormFloat64()
			case [3]int{1, 0, 0}:
				if (lx+ly)%7 < 2 {
					return land
				}
				return -v - 7.3
			case [3]int{1, 0, 1}:
				if (lx/4+lz)%3 == 0 {
					return land
				}
				return 1024 + 0.01*math.Sin(0.1*float64(x+y)) + 1e-3*r.NormFloat64()
			case [3]int{1, 1, 0}:
				if lz == 6 && ly == 2 && lx == 1 {
					return 1e30
				}
				if disc {
					return land
				}
			case [3]int{1, 1, 1}:
				// planes 0-1 and 4-5 all fill (runs of two, leading
				// and inner), 6 all but one value (its placeholder that
				// value's q), 7 one fill value
				if lz < 2 || lz == 4 || lz == 5 || (lz == 6 && (ly != 9 || lx != 13)) || (lz == 7 && ly == 15 && lx == 31) {
					return land
				}
			}
			return v
		}
		mk("land", 1e-4, &land, false, landF)
		// the same at 1e-2, where every |q| <= 32767 but near 1024: the fill
		// fields' optimistic walk (fillhot) takes these tiles
		mk("land small q", 1e-2, &land, false, landF)
		// fill stripes at step 1 with |q| <= 30000: in tiles (iz + iy + ix)
		// even, columns alternating -30000 / +30000 (escapes: the optimistic
		// fill walk gives them up), else a smooth wave
		mk("fillesc", 0.5, &land, false, func(z, y, x int, step float64) float64 {
			if (x+y+z)%9 == 0 {
				return land
			}
			if (z/8+y/16+x/32)%2 == 0 {
				return float64(60000*(x%2) - 30000)
			}
			return math.Round(100 * wave(z, y, x))
		})
		// a fill value with a q whose check fails (it would be raw), among
		// values near 1024 at 1e-4
		mk("rawfill", 1e-4, &rawFillV, true, func(z, y, x int, step float64) float64 {
			if (x+2*y+3*z)%11 == 0 {
				return rawFillV
			}
			return 1024 + 0.01*math.Sin(0.05*float64(x))*math.Cos(0.07*float64(y)) + 1e-3*r.NormFloat64()
		})
		// the fill walk's 16-bit limit (QUANT_S_LIM16: a value with |s| >=
		// 32767.5 is a hole): at step 1 (s = x), q near ±32700 with fill
		// values, and in a tile's value (2, 3, 5) ±32767.5 (q ±32768: fillhot
		// gives the tile up), the float just below it (q ±32767: fillhot
		// takes it) or neither, in turn
		limit := float64(math.Nextafter32(32767.5, 0))
		mk("fill q limit", 0.5, &land, false, func(z, y, x int, step float64) float64 {
			if (x+2*y+z)%7 == 0 {
				return land
			}
			t := z/8 + y/16 + x/32
			sign := float64(1 - 2*(t%2))
			if z%8 == 2 && y%16 == 3 && x%32 == 5 {
				switch t % 3 {
				case 0:
					return sign * 32767.5
				case 1:
					return sign * limit
				}
			}
			return sign * float64(32700+(x+y+z)%50)
		})
		// a fill value with a q that passes its check with an error no other
		// value has (step 1, the others integers: their errors are 0), in
		// tiles other than (0,0,0): merr must leave it out
		quarter := 0.25
		mk("fillerr", 0.5, &quarter, false, func(z, y, x int, step float64) float64 {
			if (z/8+y/16+x/32) > 0 && (x+y+z)%5 == 0 {
				return quarter
			}
			return math.Round(100 * wave(z, y, x))
		})
	}
	// real 3-D fields, where present: a box of each
	for _, c := range []struct {
		f          realField
		z0, y0, x0 int
		nz, ny, nx int
		ebs        []float64
	}{
		{benchFields[8], 0, 64, 0, 8, 64, 98, []float64{1e-2, 1e-4}}, // levitus: land (fill), unaligned box
		{benchFields[2], 40, 0, 0, 8, 32, 128, []float64{1e-4}},      // csm_b003_TS
	} {
		raw := sharedField(t, c.f)
		if raw == nil {
			continue
		}
		FY, FX := int(c.f.dims[1]), int(c.f.dims[2])
		v := make([]float32, c.nz*c.ny*c.nx)
		for z := range c.nz {
			for y := range c.ny {
				for x := range c.nx {
					i := ((c.z0+z)*FY+c.y0+y)*FX + c.x0 + x
					v[(z*c.ny+y)*c.nx+x] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				}
			}
		}
		for _, eb := range c.ebs {
			fields = append(fields, field{fmt.Sprintf("%s box %dx%dx%d rel %g", c.f.name, c.nz, c.ny, c.nx, eb), c.nz, c.ny, c.nx, v,
				fz.Params{DType: fz.Float32, Dims: []uint64{uint64(c.nz), uint64(c.ny), uint64(c.nx)}, Mode: fz.Rel, Bound: eb, Fill: c.f.fill},
				false, true})
		}
	}

	// What each tile must give, from the CPU tile and FORMAT.md section 4
	// (independent of V and the walk).
	type tileExp struct {
		name      string
		tile      int
		aligned   bool
		real      bool
		holePlane int // first z-plane with a value without q that is not fill; 8: none
		ph        int32
		bigQ      bool // a value that is not fill has |q| > 32767: FILLP quantizes it twice, not parked
		fillPlane bool // an all-fill z-plane after one with values
		fillLead  bool // all-fill z-planes before the first with values
		tileCheck
		codes   [4096]uint32 // version-1 code by element
		v1esc   map[int]int32
		fill    [128]uint32
		nfill   int
		rawBits []uint32
	}
	// What a walk must give (groupMax: the largest |d| of each z-plane).
	type want struct {
		name       string
		te         *tileExp
		V, walk    int
		done, wide bool
		walkExp
	}
	type record struct {
		in     []byte
		wants  []want
		lowCap bool
	}
	le := binary.LittleEndian
	var recs []record
	for _, f := range fields {
		c := compressV1(t, f.name, f.v, f.p)
		gy, gx := (f.ny+15)/16, (f.nx+31)/32
		var tes []*tileExp
		for iz := 0; iz < f.nz/8; iz++ {
			for iy := 0; iy < f.ny/16; iy++ {
				for ix := 0; ix < f.nx/32; ix++ {
					ti := (iz*gy+iy)*gx + ix
					te := &tileExp{name: fmt.Sprintf("%s tile %d (%d, %d, %d)", f.name, ti, iz, iy, ix), tile: ti,
						aligned: f.nx%4 == 0, real: f.real, holePlane: 8}
					val := func(e int) float32 {
						return f.v[((8*iz+e/512)*f.ny+16*iy+e/32%16)*f.nx+32*ix+e%32]
					}
					var sum, cnt [8]int64
					for e := range 4096 {
						x := val(e)
						if c.hasFill && math.Float32bits(x) == c.fillBits {
							te.fill[e/32] |= 1 << (e % 32)
							te.nfill++
							continue
						}
						// FORMAT.md section 4
						s, q := quantize(x, c.inv)
						if !(math.Abs(s) < 1<<28) {
							te.holePlane = min(te.holePlane, e/512)
							continue
						}
						sum[e/512] += int64(q)
						cnt[e/512]++
						if q > 32767 || q < -32767 {
							te.bigQ = true
						}
						d := checkErr(x, q, c.step)
						if !(d <= c.eb) {
							te.raw[e/32] |= 1 << (e % 32)
							te.nraw++
							te.rawBits = append(te.rawBits, math.Float32bits(x))
						} else {
							te.merr = max(te.merr, d)
						}
					}
					// plane 0's placeholder (element 0's plane): its own
					// mean, or the first plane with values'
					for z := range 8 {
						if cnt[z] > 0 {
							te.ph = int32(sum[z] / cnt[z])
							break
						}
					}
					for z := 1; z < 8; z++ {
						if cnt[z] == 0 && cnt[z-1] > 0 {
							te.fillPlane = true
						}
						if cnt[z] > 0 && cnt[0] == 0 {
							te.fillLead = true
						}
					}
					ct := parseV1Tile(c.tiles[ti])
					te.origin = ct.origin
					te.codes, te.v1esc = elementCodes(t, te.name, &ct, rank3Layout)
					if te.holePlane == 8 { // the tile the walks take: the CPU's agrees with the recomputation
						if len(ct.raw) != te.nraw || fmt.Sprint(ct.raw) != fmt.Sprint(te.rawBits) {
							t.Fatalf("%s: the CPU tile's raw values (%d) differ from the recomputed ones (%d)", te.name, len(ct.raw), te.nraw)
						}
						if ct.fill != (te.nfill > 0) {
							t.Fatalf("%s: the CPU tile's fill bit is %v with %d fill values", te.name, ct.fill, te.nfill)
						}
						if te.fill[0]&1 != 0 && te.origin != te.ph {
							t.Fatalf("%s: element 0 is fill: the CPU's origin %d, the placeholder recomputed %d", te.name, te.origin, te.ph)
						}
					}
					tes = append(tes, te)
				}
			}
		}
		walks := []int{wPlain, wHot, wNo16}
		if c.hasFill {
			walks = []int{wFillP, wFillHot}
		}
		for V := 1; V <= 2; V++ {
			var hdr [48]byte
			le.PutUint32(hdr[0:], uint32(f.nz))
			le.PutUint32(hdr[4:], uint32(f.ny))
			le.PutUint32(hdr[8:], uint32(f.nx))
			le.PutUint32(hdr[12:], uint32(V))
			wb := 0
			for _, w := range walks {
				wb |= w
			}
			le.PutUint32(hdr[16:], uint32(wb))
			le.PutUint32(hdr[20:], c.fillBits)
			c.putSteps(hdr[24:])
			rec := record{in: append(hdr[:], f32bytes(f.v)...), lowCap: f.lowCap}
			for _, te := range tes {
				// the planes and escapes version V's walk leaves (escapes coded 0x8000)
				w := want{te: te, V: V, walkExp: walkCodes(&te.codes, te.v1esc, V, rank3Layout)}
				for _, walk := range walks {
					w.walk = walk
					w.name = fmt.Sprintf("%s v%d %s", te.name, V, walkName[walk])
					w.done, w.wide = te.holePlane == 8, false
					if walk == wFillHot { // the optimistic fill walk: a hole, a |q| > 32767 or an escape anywhere
						w.done = te.holePlane == 8 && !te.bigQ
						escMax := uint32(32767)
						if V == 2 {
							escMax = 32766
						}
						for z := range 8 {
							if w.groupMax[z] > escMax {
								w.done = false
							}
						}
						// then more than HOT_RV_MAX_FILL(_V2) raw values: below
					}
					if walk == wHot || walk == wNo16 { // the walk's order: per z-plane a hole, an escape, 16-bit codes
						escMax := uint32(32767)
						if V == 2 {
							escMax = 32766
						}
						for z := range 8 {
							if z == te.holePlane || w.groupMax[z] > escMax {
								w.done = false
								break
							}
							if walk == wNo16 && w.groupMax[z] > 127 {
								w.done, w.wide = false, true
								break
							}
						}
						// then more than HOT_RV_MAX(_V2) raw values: below, with the emulator's constants
					}
					rec.wants = append(rec.wants, w)
				}
			}
			recs = append(recs, rec)
		}
	}

	// coverage counts
	type cover struct {
		walked, left                                     map[string]int // by walk and staging path
		withEsc, withV2, withRaw, overCap, underCap      int
		hotEsc, hotRaw, hotRawDone, wide, no16Esc, holes int
		fillTiles, noFillTiles, allFill, fill0, fillBad  int
		fillSmall, fillBig, fillPlaneGap, fillLead       int
		fillHotTiles, fillHotAll, fillHot0, fillHotGap   int
		fillHotLead, fillHotNeg, fillHotBig, fillHotEsc  int
		classes                                          [4]int
		edges                                            map[uint32]int
		realWalked                                       int
	}
	cv := cover{walked: map[string]int{}, left: map[string]int{}, edges: map[uint32]int{}}
	check := func(emu string, recs []record) {
		var in bytes.Buffer
		n := 0
		for _, r := range recs {
			in.Write(r.in)
			n += len(r.wants)
		}
		out := emuOut{t: t, b: runEmu(t, emu, in.Bytes())}
		u32 := out.u32
		rvMax, hotMax, hotMaxV2 := int(u32()), int(u32()), int(u32())
		hotFillMax, hotFillMaxV2 := int(u32()), int(u32())
		for _, r := range recs {
			for _, w := range r.wants {
				te := w.te
				if (w.walk == wHot || w.walk == wNo16) && w.done && te.nraw > [3]int{0, hotMax, hotMaxV2}[w.V] {
					w.done = false // a hot walk's tile must fit the park
				}
				if w.walk == wFillHot && w.done && te.nraw > [3]int{0, hotFillMax, hotFillMaxV2}[w.V] {
					w.done = false
				}
				if ti, walk := int(u32()), int(u32()); ti != te.tile || walk != w.walk {
					t.Fatalf("%s: emulator record for tile %d walk %d", w.name, ti, walk)
				}
				done, wide := u32() == 1, u32() == 1
				path := "4-byte"
				if te.aligned {
					path = "16-byte"
				}
				key := walkName[w.walk] + " " + path
				if w.walk == wFillP {
					if te.holePlane < 8 {
						cv.fillBad++
					}
				}
				if done != w.done || wide != w.wide {
					t.Fatalf("%s: the walk returned done=%v (wide %v), want done=%v (wide %v): holes from z-plane %d, largest |d| per z-plane %v, %d raw values",
						w.name, done, wide, w.done, w.wide, te.holePlane, w.groupMax, te.nraw)
				}
				if !done {
					cv.left[key]++
					switch {
					case w.walk == wFillHot && te.holePlane == 8 && te.bigQ:
						cv.fillHotBig++
					case w.walk == wFillHot && te.holePlane == 8:
						cv.fillHotEsc++
					case te.holePlane < 8:
						cv.holes++
					case w.wide:
						cv.wide++
					case len(w.escE) > 0 && w.walk == wHot:
						cv.hotEsc++
					case len(w.escE) > 0:
						cv.no16Esc++
					case w.walk == wHot:
						cv.hotRaw++
					}
					continue
				}
				cv.walked[key]++
				r := out.walk(true)
				nesc, nraw, nfill := r.nesc, r.nraw, r.nfill
				listed := make([]uint32, min(nraw, rvMax))
				out.words(listed)
				var sfe [128]uint32
				fillWalk := w.walk == wFillP || w.walk == wFillHot
				if fillWalk {
					out.words(sfe[:])
				}
				checkWalkTile(t, w.name, &r, &te.tileCheck, &w.walkExp, rank3Layout)
				for i, b := range listed {
					if b != te.rawBits[i] {
						t.Fatalf("%s: listed raw value %d is %#08x, want %#08x (the %dth raw element's bits)", w.name, i, b, te.rawBits[i], i)
					}
				}
				wantFill := 0
				if fillWalk {
					wantFill = te.nfill
					if sfe != te.fill {
						i := firstDiffWord(&sfe, &te.fill)
						t.Fatalf("%s: fill bitmap word %d (%s) is %#08x, want %#08x", w.name, i, rank3Layout.bitmapWord(i), sfe[i], te.fill[i])
					}
				}
				if nfill != wantFill {
					t.Fatalf("%s: nfill %d, want %d", w.name, nfill, wantFill)
				}
				// coverage
				if nesc > 0 {
					cv.withEsc++
				}
				if w.v2only > 0 {
					cv.withV2++
				}
				if nraw > 0 {
					cv.withRaw++
					if w.walk == wHot {
						cv.hotRawDone++
					}
				}
				if nraw > rvMax {
					cv.overCap++
				} else if nraw > 0 {
					cv.underCap++
				}
				if w.walk == wFillP {
					switch {
					case nfill == 4096:
						cv.allFill++
					case nfill == 0:
						cv.noFillTiles++
					default:
						cv.fillTiles++
					}
					if te.fill[0]&1 != 0 && nfill < 4096 {
						cv.fill0++
					}
					if te.bigQ {
						cv.fillBig++
					} else {
						cv.fillSmall++
					}
					if te.fillPlane {
						cv.fillPlaneGap++
					}
					if te.fillLead {
						cv.fillLead++
					}
				}
				if w.walk == wFillHot {
					switch {
					case nfill == 4096:
						cv.fillHotAll++
					case nfill > 0:
						cv.fillHotTiles++
					}
					if te.fill[0]&1 != 0 && nfill < 4096 {
						cv.fillHot0++
					}
					if te.fillPlane {
						cv.fillHotGap++
					}
					if te.fillLead {
						cv.fillHotLead++
					}
					if te.ph < 0 {
						cv.fillHotNeg++
					}
				}
				if te.real {
					cv.realWalked++
				}
				for _, m := range w.groupMax {
					cv.classes[coderClass(m)]++
					cv.edges[m]++
				}
			}
		}
		out.end()
		t.Logf("%s (SC_RV_MAX %d): %d walks of full tiles equal to the CPU's and the recomputation", filepath.Base(emu), rvMax, n)
	}
	check(emu, recs)
	var low []record
	for _, r := range recs {
		if r.lowCap {
			low = append(low, r)
		}
	}
	check(emuLow, low)

	// each check must have had something to catch
	for _, k := range []string{"plain", "hot", "no16", "fillp", "fillhot"} {
		for _, p := range []string{"16-byte", "4-byte"} {
			if cv.walked[k+" "+p] == 0 {
				t.Errorf("coverage: no tile walked by %s on the %s staging path", k, p)
			}
		}
	}
	if cv.withEsc == 0 || cv.withV2 == 0 || cv.withRaw == 0 || cv.overCap == 0 || cv.underCap == 0 || cv.hotEsc == 0 ||
		cv.hotRaw == 0 || cv.hotRawDone == 0 || cv.wide == 0 || cv.no16Esc == 0 || cv.holes == 0 || cv.fillTiles == 0 ||
		cv.noFillTiles == 0 || cv.allFill == 0 || cv.fill0 == 0 || cv.fillBad == 0 || cv.fillSmall == 0 || cv.fillBig == 0 || cv.fillPlaneGap == 0 || cv.fillLead == 0 ||
		cv.fillHotTiles == 0 || cv.fillHotAll == 0 || cv.fillHot0 == 0 || cv.fillHotGap == 0 || cv.fillHotLead == 0 ||
		cv.fillHotNeg == 0 || cv.fillHotBig == 0 || cv.fillHotEsc == 0 ||
		cv.classes[0] == 0 || cv.classes[1] == 0 || cv.classes[2] == 0 || cv.classes[3] == 0 {
		t.Errorf("coverage: %+v", cv)
	}
	for _, m := range []uint32{1, 2, 7, 8, 127, 128, 32766, 32767, 32768} {
		if cv.edges[m] == 0 {
			t.Errorf("coverage: no walked z-plane whose largest |d| is %d", m)
		}
	}
	t.Logf("walked %v; left to the slow path %v: %d for holes, %d hot for escapes, %d hot for > HOT_RV_MAX raw values, %d no16 for 16-bit codes (wide), %d no16 for escapes; FILLP given a tile with a hole that is not fill %d times",
		cv.walked, cv.left, cv.holes, cv.hotEsc, cv.hotRaw, cv.wide, cv.no16Esc, cv.fillBad)
	t.Logf("walked tiles: %d with escapes (%d with ±32767, version 2 only), %d with raw values (%d listing all, %d more than SC_RV_MAX), %d hot with raw values; FILLP: %d with fill, %d without, %d all fill, %d with element 0 fill, %d with every |q| <= 32767, %d with a larger |q|, %d with an all-fill z-plane after others, %d with all-fill z-planes first; fillhot (one pass): %d with fill, %d all fill, %d with element 0 fill, %d with an all-fill z-plane after others, %d with all-fill z-planes first, %d with a negative placeholder, given up %d for a |q| > 32767 and %d for escapes; z-planes by coder (2/4/8/16 bits) %v; real-field walks %d",
		cv.withEsc, cv.withV2, cv.withRaw, cv.underCap, cv.overCap, cv.hotRawDone, cv.fillTiles, cv.noFillTiles, cv.allFill, cv.fill0, cv.fillSmall, cv.fillBig, cv.fillPlaneGap, cv.fillLead,
		cv.fillHotTiles, cv.fillHotAll, cv.fillHot0, cv.fillHotGap, cv.fillHotLead, cv.fillHotNeg, cv.fillHotBig, cv.fillHotEsc, cv.classes, cv.realWalked)
}

// rank3Layout: a full 8 x 16 x 32 tile (element e = 512z + 32y + x) has
// slot 2048(z / 4) + 512(y / 4) + 128(x / 8) + 32(z % 4) + 8(y % 4) + x % 8;
// its 8 z-planes pick the coders.
var rank3Layout = walkLayout{
	slot: func(e int) int {
		z, y, x := e/512, e/32%16, e%32
		return 2048*(z/4) + 512*(y/4) + 128*(x/8) + 32*(z%4) + 8*(y%4) + x%8
	},
	group: func(e int) int { return e / 512 },
	planeWord: func(i int) string {
		return fmt.Sprintf("z-plane %d, row group %d, column group %d", 4*(i/64)+i%4, i%64/16, i%16/4)
	},
	bitmapWord: func(i int) string { return fmt.Sprintf("z %d, y %d", i/16, i%16) },
}
