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

// TestEncodeSlowEmulated checks the warp encoder's slow path (encode_slow.cuh:
// enc_slow, which takes every clipped tile, every tile with a value that has
// no q, and the tiles a walk gave up on) without a GPU: tools/encode_slow_emu.cpp
// runs it on the host with 32 threads as the warp's lanes (ASan/UBSan) on
// every tile of each field, then the kernel's tail (tile_layout, tile_write),
// and each tile's bytes must be the CPU codec's tile; so must its parts, for
// the message: the origin, the 16 bit planes, the escapes' residuals, the
// fill and raw masks (slot order), the raw values, and the counts; the
// largest error must be the largest |x - x'| over the tile's values that
// keep their q and pass the check. Fields: ranks 1, 2 and 3 with clipped edges (narrow ones
// too: 1, 2 and 17 of a tile's 32 columns), fill values, NaN, Inf, values
// past 2^28 steps, escapes (jumps of more than 32767 steps), errors of
// exactly eb (kept), and boxes of
// the real fields (coads and levitus with their fill values, era5, plot3d,
// stageIV, adk, hyg) where ../shared/data is present.
func TestEncodeSlowEmulated(t *testing.T) {
	emu := buildEmu(t, "encode_slow_emu.cpp", "-Wno-unknown-pragmas", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing")
	type field struct {
		name       string
		rank       int // and nz, ny, nx: from the geometry the codec takes
		nz, ny, nx int
		v          []float32
		p          fz.Params
	}
	var fields []field
	r := rand.New(rand.NewPCG(11, 23))
	fillv := -9999.0
	mk := func(name string, dims []uint64, bound float64, mode fz.Mode, fill *float64, f func(z, y, x int) float64) {
		fields = append(fields, field{name: name, v: asF32(gridValues(dims, f)),
			p: fz.Params{DType: fz.Float32, Dims: dims, Mode: mode, Bound: bound, Fill: fill}})
	}
	for _, d := range [][]uint64{{9, 17, 33}, {3, 5, 1}, {8, 16, 2}, {12, 33, 49}, {16, 20, 17}, {70, 129}, {1, 65}, {64, 3}} {
		mk(fmt.Sprint(d, " smooth"), d, 1e-3, fz.Rel, nil, emuWave)
		mk(fmt.Sprint(d, " holes"), d, 1e-3, fz.Abs, &fillv, emuHoles(r, fillv))
	}
	// errors of exactly eb (ABS 0.25, step 0.5: x = k + 0.25 is a tie, q
	// rounds to even and |x - x'| = 0.25): kept, not raw
	mk("[9 17 33] ties", []uint64{9, 17, 33}, 0.25, fz.Abs, nil, func(z, y, x int) float64 { return float64(r.IntN(40)) + 0.25 })
	for _, n := range []uint64{5000, 4096 + 31} {
		mk(fmt.Sprint(n, " holes"), []uint64{n}, 1e-3, fz.Abs, &fillv, emuHoles(r, fillv))
	}
	// the real fields, where present: a box of each (rank 3: the first z
	// slabs at full y and x; rank 2: the first rows)
	for _, c := range []struct {
		i     int // benchFields
		first int // slabs (rank 3) or rows (rank 2) taken
		eb    float64
	}{{1, 12, 1e-2}, {8, 8, 1e-3}, {4, 16, 1e-4}, {10, 25, 1e-2}, {12, 100, 1e-3}, {0, 98, 1e-2}, {6, 0, 1e-4}} {
		f := benchFields[c.i]
		raw, dims := realFieldBox(t, f, c.first)
		if raw == nil {
			continue
		}
		v := f32sOf(raw)
		fields = append(fields, field{name: fmt.Sprintf("%s %v rel %g", f.name, dims, c.eb), v: v,
			p: fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: c.eb, Fill: f.fill}})
	}

	var in bytes.Buffer
	cfs := make([]v1Field, len(fields))
	le := binary.LittleEndian
	for i := range fields {
		f := &fields[i]
		cfs[i] = compressV1(t, f.name, f.v, f.p)
		g, err := fz.PlanGeometry(f.p.Dims, fz.DefaultTilesPerChunk)
		if err != nil {
			t.Fatal(err)
		}
		if f.rank = tileRank(g); f.rank == 0 {
			t.Fatalf("%s: tile %v", f.name, g.Tile)
		}
		f.nz, f.ny, f.nx = int(g.NZ), int(g.NY), int(g.NX)
		for _, u := range []uint32{uint32(f.rank), uint32(f.nz), uint32(f.ny), uint32(f.nx), b2u(cfs[i].hasFill), cfs[i].fillBits} {
			in.Write(le.AppendUint32(nil, u))
		}
		var hd [24]byte
		cfs[i].putSteps(hd[:])
		in.Write(hd[:])
		in.Write(f32bytes(f.v))
	}
	out := runEmu(t, emu, in.Bytes())
	at := 0
	u32 := func() uint32 {
		if at+4 > len(out) {
			t.Fatalf("encode_slow_emu's output ends early (%d bytes)", len(out))
		}
		at += 4
		return le.Uint32(out[at-4:])
	}
	tiles, clipped, holed := 0, 0, 0
	for i, f := range fields {
		cf := &cfs[i]
		tz, ty, tx := 8, 16, 32
		switch f.rank {
		case 2:
			tz, ty, tx = 1, 64, 64
		case 1:
			tz, ty, tx = 1, 1, 4096
		}
		gy, gx := (f.ny+ty-1)/ty, (f.nx+tx-1)/tx
		for k, tile := range cf.tiles {
			iz, iy, ix := k/(gx*gy), k/gx%gy, k%gx
			z0, y0, x0 := iz*tz, iy*ty, ix*tx
			lz, ly, lx := min(tz, f.nz-z0), min(ty, f.ny-y0), min(tx, f.nx-x0)
			name := fmt.Sprintf("%s tile %d (%dx%dx%d)", f.name, k, lz, ly, lx)
			// what the CPU's tile holds
			w := func(j int) uint32 { return le.Uint32(tile[4*j:]) }
			planes, end := v1Planes(tile)
			var esc []int32
			if w(0)>>16&1 != 0 {
				for j := range int(w(end)) {
					esc = append(esc, int32(w(end+1+j)))
				}
				end += 1 + int(w(end))
			}
			mask := func() (m [128]uint32) {
				bm := w(end)
				end++
				for b := range 32 {
					if bm>>b&1 != 0 {
						for j := range 4 {
							m[4*b+j] = w(end)
							end++
						}
					}
				}
				return m
			}
			var fillM, rawM [128]uint32
			var rawV []uint32
			if w(0)>>17&1 != 0 {
				fillM = mask()
			}
			if w(0)>>18&1 != 0 {
				rawM = mask()
				for j := range int(w(end)) {
					rawV = append(rawV, w(end+1+j))
				}
			}
			// the counts and the largest error, from the values
			var nfill uint32
			merr := 0.0
			for z := range lz {
				for y := range ly {
					for x := range lx {
						xv := f.v[((z0+z)*f.ny+y0+y)*f.nx+x0+x]
						if cf.hasFill && math.Float32bits(xv) == cf.fillBits {
							nfill++
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
			// what the slow path gave: the tile's bytes, then its parts
			size := int(u32())
			if at+size > len(out) {
				t.Fatalf("%s: encode_slow_emu's output ends early", name)
			}
			gotTile := out[at : at+size]
			at += size
			if !bytes.Equal(gotTile, tile) {
				i := 0
				for i < min(len(gotTile), len(tile)) && gotTile[i] == tile[i] {
					i++
				}
				t.Errorf("%s: the tile's %d bytes differ from the CPU's %d from byte %d", name, len(gotTile), len(tile), i)
			}
			origin := int32(u32())
			nesc, nraw, nf := u32(), u32(), u32()
			gm := math.Float64frombits(uint64(u32()) | uint64(u32())<<32)
			var gp [16][128]uint32
			var gf, gr [128]uint32
			for p := range 16 {
				for j := range 128 {
					gp[p][j] = u32()
				}
			}
			for j := range 128 {
				gf[j] = u32()
			}
			for j := range 128 {
				gr[j] = u32()
			}
			gesc := make([]int32, nesc)
			for j := range gesc {
				gesc[j] = int32(u32())
			}
			graw := make([]uint32, nraw)
			for j := range graw {
				graw[j] = u32()
			}
			tiles++
			if lz*ly*lx < 4096 {
				clipped++
			}
			if nraw+nf > 0 {
				holed++
			}
			switch {
			case origin != int32(w(1)):
				t.Errorf("%s: origin %d, the CPU's %d", name, origin, int32(w(1)))
			case nf != nfill:
				t.Errorf("%s: %d fill values, the tile has %d", name, nf, nfill)
			case gm != merr:
				t.Errorf("%s: largest error %g, the values' %g", name, gm, merr)
			case fmt.Sprint(gesc) != fmt.Sprint(esc):
				t.Errorf("%s: escapes %v, the CPU's %v", name, gesc, esc)
			case fmt.Sprint(graw) != fmt.Sprint(rawV):
				t.Errorf("%s: raw values %x, the CPU's %x", name, graw, rawV)
			case gf != fillM:
				t.Errorf("%s: fill mask word %d is %#x, the CPU's %#x", name, firstDiffWord(&gf, &fillM), gf[firstDiffWord(&gf, &fillM)], fillM[firstDiffWord(&gf, &fillM)])
			case gr != rawM:
				t.Errorf("%s: raw mask word %d is %#x, the CPU's %#x", name, firstDiffWord(&gr, &rawM), gr[firstDiffWord(&gr, &rawM)], rawM[firstDiffWord(&gr, &rawM)])
			default:
				for p := range 16 {
					if gp[p] != planes[p] {
						j := firstDiffWord(&gp[p], &planes[p])
						t.Errorf("%s: plane %d word %d is %#x, the CPU's %#x", name, p, j, gp[p][j], planes[p][j])
						break
					}
				}
			}
		}
	}
	if at != len(out) {
		t.Fatalf("encode_slow_emu wrote %d bytes, the tiles account for %d", len(out), at)
	}
	if clipped == 0 || holed == 0 {
		t.Fatalf("%d tiles, %d clipped, %d with holes: the cases do not reach the slow path's branches", tiles, clipped, holed)
	}
	t.Logf("%d tiles of %d fields (%d clipped, %d with fill or raw values) identical to the CPU codec's", tiles, len(fields), clipped, holed)
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
