package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestDecodeWarpEmulated checks the warp decoder (decode_warp.cuh) without a
// GPU: tools/decode_warp_emu.cpp runs decode_warp_kernel on the host, one
// warp of 32 threads per tile (ASan/UBSan), on the version-1 tiles of each
// field, and every value must equal the CPU decoder's, bit for bit, with no
// tile left for the block decoder. That covers the staged walks (full tiles
// of ranks 1-3, with and without masks), the generic walks (clipped tiles,
// escapes, tiles too big to stage), the masked walks of fill fields (FK) and
// the full-tiles-first order (tile_order.cuh: rank-3 fill fields, and here
// every rank-3 field once more), and f32 rank-3 fields with clipped tiles
// once more with padded tiles (FORMAT.md 3.2: the PAD kernel, every tile
// through the full-tile walks, only its box stored). Fields: clipped edges down to one column,
// fill values, NaN, Inf, values past 2^28 steps, escapes, noise at a tight
// bound (big tiles), f32 and f64, and boxes of the real fields (mpas is f64)
// where ../shared/data is present. Corrupted copies of the tiles must not crash it (the tiles that
// do not check out go on the list; what the others decode to is not
// checked: the block decoder judges them on the GPU). The staged walks'
// 8-bit layout for tiles without planes 7-14 (few_codes) is checked beside
// the 16-bit one that every other tile takes (the smooth fields' tiles at 1e-3 are of the first kind,
// the noise's at 1e-6 of the second).
func TestDecodeWarpEmulated(t *testing.T) {
	emu := buildEmu(t, "decode_warp_emu.cpp", "-Wno-unknown-pragmas", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing")
	type field struct {
		name string
		raw  []byte // the values, f32 or f64 (p.DType)
		p    fz.Params
		flat bool // flat tiles (FORMAT.md 3.1): dec_flat, the kernel's R = 4
	}
	var fields []field
	r := rand.New(rand.NewPCG(17, 29))
	fillv := -9999.0
	flat := false
	mk := func(name string, dims []uint64, bound float64, mode fz.Mode, fill *float64, f func(z, y, x int) float64) {
		v := gridValues(dims, f)
		fields = append(fields, field{name, f32bytes(asF32(v)), fz.Params{DType: fz.Float32, Dims: dims, Mode: mode, Bound: bound, Fill: fill}, flat})
		if len(dims) != 2 || dims[0] != 64 { // f64 too (every shape but one)
			fields = append(fields, field{name + " f64", f64bytes(v), fz.Params{DType: fz.Float64, Dims: dims, Mode: mode, Bound: bound, Fill: fill}, flat})
		}
	}
	for _, d := range [][]uint64{{9, 17, 33}, {16, 32, 64}, {12, 33, 49}, {8, 16, 2}, {70, 129}, {64, 128}, {5000}, {8192}} {
		name := fmt.Sprint(d)
		mk(name+" smooth", d, 1e-3, fz.Rel, nil, emuWave)
		mk(name+" holes", d, 1e-3, fz.Abs, &fillv, emuHoles(r, fillv))
		mk(name+" noise 1e-6", d, 1e-6, fz.Rel, nil, func(z, y, x int) float64 { return r.NormFloat64() })
	}
	// flat tiles, shapes dec_flat takes (32 <= nx <= 64, 256 <= ny nx <= 2016:
	// era5's plane, plot3d_comb's, a small one, a last partial tile, the
	// largest plane)
	flat = true
	for _, d := range [][]uint64{{12, 33, 49}, {9, 36, 50}, {30, 8, 40}, {5, 33, 57}, {5, 36, 56}} {
		name := fmt.Sprint("flat ", d)
		mk(name+" smooth", d, 1e-3, fz.Rel, nil, emuWave)
		mk(name+" holes", d, 1e-3, fz.Abs, &fillv, emuHoles(r, fillv))
		mk(name+" noise 1e-6", d, 1e-6, fz.Rel, nil, func(z, y, x int) float64 { return r.NormFloat64() })
	}
	flat = false
	// real fields; flat: era5 (its raw values put a raw mask in most tiles
	// at 1e-4) and plot3d_comb with flat tiles, dec_flat's two fields
	for _, c := range []struct {
		i     int
		first int // rank 3: z slabs taken; rank 2: rows
		eb    float64
		flat  bool
	}{{1, 12, 1e-2, false}, {8, 8, 1e-4, false}, {4, 16, 1e-3, false}, {10, 25, 1e-2, false}, {12, 100, 1e-3, false},
		{0, 98, 1e-2, false}, {6, 0, 1e-4, false}, {9, 0, 1e-3, false},
		{4, 24, 1e-4, true}, {4, 24, 1e-2, true}, {10, 25, 1e-3, true}} {
		f := benchFields[c.i]
		raw, dims := realFieldBox(t, f, c.first)
		if raw == nil {
			continue
		}
		name := fmt.Sprintf("%s %v rel %g", f.name, dims, c.eb)
		if c.flat {
			name = "flat " + name
		}
		fields = append(fields, field{name, raw,
			fz.Params{DType: f.dtype, Dims: dims, Mode: fz.Rel, Bound: c.eb, Fill: f.fill}, c.flat})
	}

	le := binary.LittleEndian
	type job struct {
		name    string
		want    []byte // the CPU's values; nil: corrupted, not compared
		nt, n   int    // tiles, bytes of values
		corrupt bool
	}
	var jobs []job
	var in bytes.Buffer
	// mode: bit 0 the full tiles first, bit 1 the masked walks for every
	// tile (decode_warp.cuh's mcount at or over DEC_MASKS_ALL_PCT), bit 2
	// padded tiles
	put := func(name string, cf *decField, dbytes int, g fz.Geometry, rank int, mode uint32, tiles [][]byte, want []byte) {
		var blob []byte
		var offs []uint64
		var sizes []uint32
		for _, tl := range tiles {
			offs = append(offs, uint64(len(blob)))
			sizes = append(sizes, uint32(len(tl)))
			blob = append(blob, tl...)
		}
		for _, u := range []uint32{uint32(rank), uint32(dbytes)} {
			in.Write(le.AppendUint32(nil, u))
		}
		for _, u := range []uint64{g.NZ, g.NY, g.NX, uint64(len(tiles))} {
			in.Write(le.AppendUint64(nil, u))
		}
		in.Write(le.AppendUint32(nil, b2u(cf.hasFill)))
		in.Write(le.AppendUint32(nil, mode))
		in.Write(le.AppendUint64(nil, cf.fillBits64))
		in.Write(le.AppendUint64(nil, math.Float64bits(cf.step)))
		in.Write(le.AppendUint64(nil, uint64(len(blob))))
		for _, o := range offs {
			in.Write(le.AppendUint64(nil, o))
		}
		for _, s := range sizes {
			in.Write(le.AppendUint32(nil, s))
		}
		in.Write(blob)
		jobs = append(jobs, job{name, want, len(tiles), dbytes * int(g.NZ*g.NY*g.NX), want == nil})
	}
	// f32 rank 3 with padded tiles (the PAD kernel): the tiles of the
	// padded container, their values the CPU decoder's; with masked walks
	// for all tiles too (fields without a fill value), and corrupted
	putPadded := func(name string, raw []byte, p fz.Params, g fz.Geometry) {
		blob, _, err := fz.Compress(context.Background(), raw, p, fz.WithFormatVersion(1), fz.WithTiling(fz.TilingPadded))
		if err != nil {
			t.Fatalf("%s padded: %v", name, err)
		}
		_, want, err := fz.Decompress(context.Background(), blob)
		if err != nil {
			t.Fatalf("%s padded: %v", name, err)
		}
		cf := decField{step: math.Float64frombits(le.Uint64(blob[48:])), hasFill: blob[11]&1 != 0, fillBits64: le.Uint64(blob[56:])}
		cf.tiles, _ = containerTiles(t, blob)
		put(name+" padded", &cf, 4, g, 3, 4, cf.tiles, want)
		if !cf.hasFill {
			put(name+" padded, masked walks for all", &cf, 4, g, 3, 6, cf.tiles, want)
		}
		bad := make([][]byte, len(cf.tiles))
		for i, tl := range cf.tiles {
			bad[i] = append([]byte(nil), tl...)
			if i%3 == 0 { // the tiles the check below expects corrupted
				bad[i][r.IntN(len(tl))] ^= byte(1 << r.IntN(8))
			}
		}
		put(name+" padded, corrupted", &cf, 4, g, 3, 4, bad, nil)
	}
	for _, f := range fields {
		tiling := fz.TilingBoxes
		if f.flat {
			tiling = fz.TilingFlat
		}
		blob, _, err := fz.Compress(context.Background(), f.raw, f.p, fz.WithFormatVersion(1), fz.WithTiling(tiling))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		_, want, err := fz.Decompress(context.Background(), blob)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		// the container's step and fill value (FORMAT.md section 2)
		cf := decField{step: math.Float64frombits(le.Uint64(blob[48:])), hasFill: blob[11]&1 != 0, fillBits64: le.Uint64(blob[56:])}
		cf.tiles, _ = containerTiles(t, blob)
		db := f.p.DType.Size()
		g, err := fz.PlanGeometryFor(f.p.DType, f.p.Dims, fz.DefaultTilesPerChunk, tiling)
		if err != nil {
			t.Fatal(err)
		}
		rank := tileRank(g)
		if f.flat {
			rank = 4
		}
		if rank == 0 {
			t.Fatalf("%s: tile %v", f.name, g.Tile)
		}
		clipped := !f.flat && g.NZ%uint64(g.Tile[0]) != 0 || g.NY%uint64(g.Tile[1]) != 0 || g.NX%uint64(g.Tile[2]) != 0
		full := g.NZ >= uint64(g.Tile[0]) && g.NY >= uint64(g.Tile[1]) && g.NX >= uint64(g.Tile[2])
		// as fzgpu.cu: the order for rank-3 fill fields with clipped tiles
		order := rank == 3 && cf.hasFill && clipped && full
		put(f.name, &cf, db, g, rank, b2u(order), cf.tiles, want)
		if rank == 3 && clipped && full && !order {
			put(f.name+" full tiles first", &cf, db, g, rank, 1, cf.tiles, want)
		}
		// without a fill value, the masked walks for every tile (as where
		// the mask census finds many tiles with masks): tiles without masks
		// must decode the same through them
		if !cf.hasFill {
			put(f.name+" masked walks for all", &cf, db, g, rank, 2, cf.tiles, want)
		}
		// a corrupted copy: random bytes of a third of the tiles
		bad := make([][]byte, len(cf.tiles))
		for i, tl := range cf.tiles {
			bad[i] = append([]byte(nil), tl...)
			if i%3 == 0 {
				for range 1 + r.IntN(4) {
					bad[i][r.IntN(len(tl))] ^= byte(1 << r.IntN(8))
				}
			}
		}
		put(f.name+" corrupted", &cf, db, g, rank, b2u(order), bad, nil)
		if !cf.hasFill {
			put(f.name+" corrupted, masked walks for all", &cf, db, g, rank, 2, bad, nil)
		}
		if rank == 3 && clipped && f.p.DType == fz.Float32 {
			putPadded(f.name, f.raw, f.p, g)
		}
	}
	out := runEmu(t, emu, in.Bytes())
	at := 0
	compared := 0
	for _, j := range jobs {
		if at+4 > len(out) {
			t.Fatalf("decode_warp_emu's output ends early at %s", j.name)
		}
		cnt := int(le.Uint32(out[at:]))
		at += 4
		if cnt > j.nt {
			t.Fatalf("%s: %d tiles listed of %d", j.name, cnt, j.nt)
		}
		listed := make([]uint32, cnt)
		for i := range listed {
			listed[i] = le.Uint32(out[at:])
			at += 4
		}
		vals := out[at : at+j.n]
		at += j.n
		if j.corrupt {
			// only corrupted tiles (every third) may be listed, each once:
			// the list names job tiles, whatever batch decoded them
			seen := map[uint32]bool{}
			for _, tl := range listed {
				if int(tl) >= j.nt || tl%3 != 0 || seen[tl] {
					t.Errorf("%s: the list names tile %d (of %d; the corrupted ones are every third, each listed once): %v", j.name, tl, j.nt, listed)
					break
				}
				seen[tl] = true
			}
			continue
		}
		if cnt != 0 {
			t.Errorf("%s: the warps left %d tiles for the block decoder (%v): a valid tile must decode", j.name, cnt, listed)
			continue
		}
		if !bytes.Equal(vals, j.want) {
			for i := 0; i < j.n; i++ {
				if vals[i] != j.want[i] {
					t.Errorf("%s: byte %d of the values is %#02x, the CPU's %#02x", j.name, i, vals[i], j.want[i])
					break
				}
			}
			continue
		}
		compared++
	}
	if at != len(out) {
		t.Fatalf("decode_warp_emu wrote %d bytes, the jobs account for %d", len(out), at)
	}
	t.Logf("%d jobs decoded identically to the CPU, %d corrupted ones ran", compared, len(jobs)-compared)
}

// decField is what the warp decoder takes of a version-1 container.
type decField struct {
	tiles      [][]byte
	step       float64
	hasFill    bool
	fillBits64 uint64
}
