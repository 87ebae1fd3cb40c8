package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestEncodeClippedEmulated checks encode_clipped_kernel (PCT, encode_clipped.cuh)
// without a GPU: tools/encode_clipped_emu.cpp runs it with one warp of 32
// threads on each field as one job, and every clipped tile must be in the
// side buffer exactly as the CPU codec's tile, at a 16-byte aligned offset
// of its own (no two overlap), with its size, raw count and largest error in
// the tables; full tiles are left alone. With a side buffer too small for
// all of them (half their bytes), the tiles that do not fit have size 0 (the
// warp encoder walks them) and the others are still exact.
func TestEncodeClippedEmulated(t *testing.T) {
	emu := buildEmu(t, "encode_clipped_emu.cpp", "-Wno-unknown-pragmas", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing")
	r := rand.New(rand.NewPCG(3, 41))
	fillv := -9999.0
	type field = clipField
	var fields []field
	for _, d := range [][3]int{{9, 17, 33}, {12, 33, 49}, {16, 20, 40}, {24, 50, 70}} {
		v := make([]float32, d[0]*d[1]*d[2])
		for i := range v {
			x, y := i%d[2], i/d[2]%d[1]
			switch u := r.IntN(300); {
			case u == 0:
				v[i] = float32(math.NaN())
			case u < 30 && (x+y)%5 < 2:
				v[i] = float32(fillv)
			case u < 34:
				v[i] = float32(50 + r.NormFloat64())
			default:
				v[i] = float32(math.Sin(0.1*float64(x)) + 0.01*r.NormFloat64())
			}
		}
		p := fz.Params{DType: fz.Float32, Dims: []uint64{uint64(d[0]), uint64(d[1]), uint64(d[2])}, Mode: fz.Abs, Bound: 1e-3, Fill: &fillv}
		name := fmt.Sprint(d)
		fields = append(fields, field{name, 3, d[0], d[1], d[2], v, p, 1 << 24}, field{name + " small side", 3, d[0], d[1], d[2], v, p, 0})
	}
	// Without holes, for the row walk (enc_rows3): clipped boxes with lx
	// from 1 to 32 (one to 32 rows a step), ly and lz from 1 up; escapes (jumps of 100 at eb 1e-3: residuals past 2^15), and at
	// eb 4e-5 on values near 1000 about a fifth fail the check (raw, keeping
	// their q: f32's ulp there is 6.1e-5, so a q * step more than half an ulp
	// from x is rounded to x's neighbour, an error of one ulp).
	// A few NaNs without a fill value: the row walk gives up on those
	// tiles, the slow path takes them.
	for _, d := range [][3]int{{8, 20, 48}, {5, 33, 63}, {11, 7, 50}, {3, 16, 17}, {9, 18, 40}, {6, 19, 35}, {10, 23, 44}, {4, 50, 34}, {7, 16, 36}, {16, 40, 90}} {
		for _, tight := range []bool{false, true} {
			nan := d[0] == 16
			v := make([]float32, d[0]*d[1]*d[2])
			for i := range v {
				x, y, z := i%d[2], i/d[2]%d[1], i/(d[1]*d[2])
				s := math.Sin(0.2*float64(x)) + math.Cos(0.3*float64(y)) + 0.1*float64(z) + 0.01*r.NormFloat64()
				if r.IntN(150) == 0 {
					s += 100
				}
				if tight {
					s = 1000 + 0.01*s
				}
				if nan && r.IntN(3000) == 0 {
					s = math.NaN()
				}
				v[i] = float32(s)
			}
			p := fz.Params{DType: fz.Float32, Dims: []uint64{uint64(d[0]), uint64(d[1]), uint64(d[2])}, Mode: fz.Abs, Bound: 1e-3}
			name := fmt.Sprint(d, " no holes")
			if nan {
				name = fmt.Sprint(d, " NaN")
			}
			if tight {
				p.Bound = 4e-5
				name += ", raw values"
			}
			fields = append(fields, field{name, 3, d[0], d[1], d[2], v, p, 1 << 24})
		}
	}
	// Rank 2 (64 x 64 tiles, the slow path): clipped along y, x or both,
	// and a field narrower than a tile (all clipped); with fill and NaN (and
	// a half-size side buffer), escapes, raw values.
	for _, d := range [][2]int{{100, 150}, {40, 300}, {70, 64}} {
		for variant := range 3 {
			v := make([]float32, d[0]*d[1])
			for i := range v {
				x, y := i%d[1], i/d[1]
				s := math.Sin(0.2*float64(x)) + math.Cos(0.3*float64(y)) + 0.01*r.NormFloat64()
				switch {
				case variant == 0 && r.IntN(300) == 0:
					s = math.NaN()
				case variant == 0 && r.IntN(10) == 0 && (x+y)%5 < 2:
					s = fillv
				case variant == 1 && r.IntN(150) == 0:
					s += 100
				case variant == 2:
					s = 1000 + 0.01*s
				}
				v[i] = float32(s)
			}
			p := fz.Params{DType: fz.Float32, Dims: []uint64{uint64(d[0]), uint64(d[1])}, Mode: fz.Abs, Bound: 1e-3}
			name := fmt.Sprint("2-D ", d)
			switch variant {
			case 0:
				p.Fill = &fillv
				fields = append(fields, field{name + " fill, NaN", 2, 1, d[0], d[1], v, p, 1 << 24})
				if d[0] != 70 { // more than one clipped tile: some fit, some do not
					fields = append(fields, field{name + " fill, NaN, small side", 2, 1, d[0], d[1], v, p, 0})
				}
			case 1:
				fields = append(fields, field{name + " no holes", 2, 1, d[0], d[1], v, p, 1 << 24})
			case 2:
				p.Bound = 4e-5
				fields = append(fields, field{name + " no holes, raw values", 2, 1, d[0], d[1], v, p, 1 << 24})
			}
		}
	}
	le := binary.LittleEndian
	var in bytes.Buffer
	cfs := make([]v1Field, len(fields))
	for i := range fields {
		f := &fields[i]
		cfs[i] = compressV1(t, f.name, f.v, f.p)
		if f.cap == 0 { // room for about half of the clipped tiles
			for k, tl := range cfs[i].tiles {
				if _, _, _, lz, ly, lx := f.tileBox(k); lz*ly*lx < 4096 {
					f.cap += uint64(len(tl)+15) &^ 15
				}
			}
			f.cap /= 2
		}
		for _, u := range []uint32{uint32(f.nz), uint32(f.ny), uint32(f.nx), b2u(cfs[i].hasFill), cfs[i].fillBits, uint32(f.rank)} {
			in.Write(le.AppendUint32(nil, u))
		}
		var hd [24]byte
		cfs[i].putSteps(hd[:])
		in.Write(hd[:])
		in.Write(le.AppendUint64(nil, f.cap))
		in.Write(f32bytes(f.v))
	}
	out := runEmu(t, emu, in.Bytes())
	at := 0
	u32 := func() uint32 { at += 4; return le.Uint32(out[at-4:]) }
	u64 := func() uint64 { at += 8; return le.Uint64(out[at-8:]) }
	for i, f := range fields {
		cf := &cfs[i]
		nfull, nclip, used, taken := u64(), u64(), u64(), u64()
		type rec struct {
			size  uint32
			off   uint64
			outs  uint32
			err   float64
			clip  bool
			ntile int
		}
		recs := make([]rec, len(cf.tiles))
		var wantClip, wantTaken uint64
		for k := range cf.tiles {
			z0, y0, x0, lz, ly, lx := f.tileBox(k)
			recs[k] = rec{size: u32(), off: u64(), outs: u32(), err: math.Float64frombits(u64()), clip: lz*ly*lx < 4096}
			if recs[k].clip {
				wantClip++
				if f.rank == 3 && lx >= rows3MinLX && (f.p.Fill != nil || !boxHasHole(f.v, f.ny, f.nx, z0, y0, x0, lz, ly, lx, f.p.Fill)) {
					wantTaken++
				}
			}
		}
		side := out[at : at+int(used)]
		at += int(used)
		if nclip != wantClip || nfull+nclip != uint64(len(cf.tiles)) {
			t.Fatalf("%s: %d full and %d clipped tiles, want %d clipped of %d", f.name, nfull, nclip, wantClip, len(cf.tiles))
		}
		owner := map[uint64]int{}
		placed, left, escs, raws := 0, 0, 0, 0
		for k, rc := range recs {
			name := fmt.Sprintf("%s tile %d", f.name, k)
			if !rc.clip {
				if rc.size != 0xFFFFFFFF {
					t.Errorf("%s: a full tile, but its size was set (%d)", name, rc.size)
				}
				continue
			}
			if rc.size == 0 {
				left++
				if f.cap >= 1<<24 {
					t.Errorf("%s: left to the warp encoder with a side buffer of %d bytes", name, f.cap)
				}
				continue
			}
			placed++
			if rc.off%16 != 0 || rc.off+uint64(rc.size) > used {
				t.Errorf("%s: at %d (%d bytes) of %d used: misaligned or outside", name, rc.off, rc.size, used)
				continue
			}
			for b := rc.off; b < rc.off+uint64(rc.size); b += 16 {
				if o, ok := owner[b]; ok {
					t.Errorf("%s: overlaps tile %d at byte %d", name, o, b)
					break
				}
				owner[b] = k
			}
			if got := side[rc.off : rc.off+uint64(rc.size)]; !bytes.Equal(got, cf.tiles[k]) {
				t.Errorf("%s: pre-coded bytes (%d) differ from the CPU's tile (%d)", name, len(got), len(cf.tiles[k]))
			}
			// the raw count: the CPU tile's (FORMAT.md 5: the count after the raw mask)
			ct := parseV1Tile(cf.tiles[k])
			escs += len(ct.esc)
			raws += len(ct.raw)
			if int(rc.outs) != len(ct.raw) {
				t.Errorf("%s: raw count %d, the CPU tile's %d", name, rc.outs, len(ct.raw))
			}
			z0, y0, x0, lz, ly, lx := f.tileBox(k)
			if want := boxMaxErr(f.v, f.ny, f.nx, z0, y0, x0, lz, ly, lx, cf); rc.err != want {
				t.Errorf("%s: largest error %g, the values' %g", name, rc.err, want)
			}
		}
		// the row walk takes exactly the clipped tiles of lx >= rows3MinLX,
		// those with holes only in a field with a fill value; the rest go to
		// the slow path
		if taken != wantTaken {
			t.Errorf("%s: the row walk took %d clipped tiles, want %d (lx >= %d; no NaN or Inf without a fill value)", f.name, taken, wantTaken, rows3MinLX)
		}
		if strings.HasSuffix(f.name, "no holes") && escs == 0 || strings.HasSuffix(f.name, "raw values") && raws == 0 {
			t.Errorf("%s: the clipped tiles hold %d escapes and %d raw values: the case does not test them", f.name, escs, raws)
		}
		if f.cap < 1<<24 && (left == 0 || placed == 0) {
			t.Errorf("%s: a side buffer of %d bytes placed %d tiles and left %d: the case does not test the fallback", f.name, f.cap, placed, left)
		}
		t.Logf("%s: %d clipped tiles (%d by the row walk), %d pre-coded, %d left to the warp encoder", f.name, nclip, taken, placed, left)
		t.Logf("%s: %d escapes, %d raw values in its clipped tiles", f.name, escs, raws)
	}
	if at != len(out) {
		t.Fatalf("encode_clipped_emu wrote %d bytes, the fields account for %d", len(out), at)
	}
}

// rows3MinLX is encode_rows3.cuh's ENC_ROWS3_MIN_LX: the narrowest clipped
// box the row walk takes.
const rows3MinLX = 1

// boxHasHole reports whether the box (z0, y0, x0) + (lz, ly, lx) of a
// row-major field holds a value without q: NaN, Inf or the fill value.
func boxHasHole(v []float32, ny, nx, z0, y0, x0, lz, ly, lx int, fill *float64) bool {
	for z := z0; z < z0+lz; z++ {
		for y := y0; y < y0+ly; y++ {
			for x := x0; x < x0+lx; x++ {
				f := float64(v[(z*ny+y)*nx+x])
				if math.IsNaN(f) || math.IsInf(f, 0) || (fill != nil && float32(f) == float32(*fill)) {
					return true
				}
			}
		}
	}
	return false
}

// boxMaxErr is the largest error |x - x'| over the box's values that keep
// their q and pass the check (FORMAT.md section 4), as the tile's error.
func boxMaxErr(v []float32, ny, nx, z0, y0, x0, lz, ly, lx int, cf *v1Field) float64 {
	merr := 0.0
	for z := z0; z < z0+lz; z++ {
		for y := y0; y < y0+ly; y++ {
			for x := x0; x < x0+lx; x++ {
				xv := v[(z*ny+y)*nx+x]
				if cf.hasFill && math.Float32bits(xv) == cf.fillBits {
					continue
				}
				s, q := quantize(xv, cf.inv)
				if !(math.Abs(s) < 1<<28) {
					continue
				}
				if e := checkErr(xv, q, cf.step); e <= cf.eb {
					merr = max(merr, e)
				}
			}
		}
	}
	return merr
}

// clipField is a case of TestEncodeClippedEmulated: a rank-3 field, or a
// rank-2 one (nz 1), its parameters and the side buffer's bytes.
type clipField struct {
	name       string
	rank       int
	nz, ny, nx int
	v          []float32
	p          fz.Params
	cap        uint64
}

// tileBox is tile k's box in the standard tile shape of the field's rank
// (FORMAT.md section 3).
func (f *clipField) tileBox(k int) (z0, y0, x0, lz, ly, lx int) {
	tz, ty, tx := 8, 16, 32
	if f.rank == 2 {
		tz, ty, tx = 1, 64, 64
	}
	gy, gx := (f.ny+ty-1)/ty, (f.nx+tx-1)/tx
	z0, y0, x0 = tz*(k/(gx*gy)), ty*(k/gx%gy), tx*(k%gx)
	return z0, y0, x0, min(tz, f.nz-z0), min(ty, f.ny-y0), min(tx, f.nx-x0)
}
