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
	type field struct {
		name       string
		nz, ny, nx int
		v          []float32
		p          fz.Params
		cap        uint64
	}
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
		fields = append(fields, field{name, d[0], d[1], d[2], v, p, 1 << 24}, field{name + " small side", d[0], d[1], d[2], v, p, 0})
	}
	le := binary.LittleEndian
	var in bytes.Buffer
	cfs := make([]v1Field, len(fields))
	for i := range fields {
		f := &fields[i]
		cfs[i] = compressV1(t, f.name, f.v, f.p)
		if f.cap == 0 { // room for about half of the clipped tiles
			gy, gx := (f.ny+15)/16, (f.nx+31)/32
			for k, tl := range cfs[i].tiles {
				iz, iy, ix := k/(gx*gy), k/gx%gy, k%gx
				if min(8, f.nz-8*iz)*min(16, f.ny-16*iy)*min(32, f.nx-32*ix) < 4096 {
					f.cap += uint64(len(tl)+15) &^ 15
				}
			}
			f.cap /= 2
		}
		for _, u := range []uint32{uint32(f.nz), uint32(f.ny), uint32(f.nx), b2u(cfs[i].hasFill), cfs[i].fillBits} {
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
		nfull, nclip, used := u64(), u64(), u64()
		gy, gx := (f.ny+15)/16, (f.nx+31)/32
		type rec struct {
			size  uint32
			off   uint64
			outs  uint32
			err   float64
			clip  bool
			ntile int
		}
		recs := make([]rec, len(cf.tiles))
		var wantClip uint64
		for k := range cf.tiles {
			iz, iy, ix := k/(gx*gy), k/gx%gy, k%gx
			lz, ly, lx := min(8, f.nz-8*iz), min(16, f.ny-16*iy), min(32, f.nx-32*ix)
			recs[k] = rec{size: u32(), off: u64(), outs: u32(), err: math.Float64frombits(u64()), clip: lz*ly*lx < 4096}
			if recs[k].clip {
				wantClip++
			}
		}
		side := out[at : at+int(used)]
		at += int(used)
		if nclip != wantClip || nfull+nclip != uint64(len(cf.tiles)) {
			t.Fatalf("%s: %d full and %d clipped tiles, want %d clipped of %d", f.name, nfull, nclip, wantClip, len(cf.tiles))
		}
		owner := map[uint64]int{}
		placed, left := 0, 0
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
			if int(rc.outs) != len(ct.raw) {
				t.Errorf("%s: raw count %d, the CPU tile's %d", name, rc.outs, len(ct.raw))
			}
			if !(rc.err >= 0 && rc.err <= cf.eb) {
				t.Errorf("%s: largest error %g outside [0, eb %g]", name, rc.err, cf.eb)
			}
		}
		if f.cap < 1<<24 && (left == 0 || placed == 0) {
			t.Errorf("%s: a side buffer of %d bytes placed %d tiles and left %d: the case does not test the fallback", f.name, f.cap, placed, left)
		}
		t.Logf("%s: %d clipped tiles, %d pre-coded, %d left to the warp encoder", f.name, nclip, placed, left)
	}
	if at != len(out) {
		t.Fatalf("encode_clipped_emu wrote %d bytes, the fields account for %d", len(out), at)
	}
}
