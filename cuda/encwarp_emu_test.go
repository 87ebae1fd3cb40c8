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

// TestEncodeWarpKernelEmulated runs the warp encoder kernel itself
// (encode_warp_kernel, f32 ranks 1-3 and flat tiles: the walks, the FILLP walk, the slow path, the
// tail, the scanner warp and the L2 park) on the host with one block of
// ENC_W warps of 32 threads (tools/encode_warp_emu.cpp, ASan/UBSan), with and
// without pre-coded clipped tiles (PCT: encode_clipped_kernel first), and
// rank 3 with padded tiles (docs/FORMAT.md 3.2: the PAD kernels, every
// clipped tile walked whole with its loads clamped to the field), with
// cp.async copies landing at issue and when waited for. Every tile it writes,
// at its prefix plus the size tables' room, must be the CPU codec's tile,
// with its size, raw count and error in the tables, the prefixes the sums of
// the sizes before, and no error flag. Fields: clipped along x, y
// and z, fill values, NaN, escapes, and a field of two chunks (272 tiles),
// run whole and as one job per chunk (tile0 = 256 for the second).
func TestEncodeWarpKernelEmulated(t *testing.T) {
	emu := buildEmu(t, "encode_warp_emu.cpp", "-Wno-unknown-pragmas", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing")
	r := rand.New(rand.NewPCG(5, 77))
	fillv := -9999.0
	type field struct {
		name       string
		rank       int
		nz, ny, nx int
		v          []float32
		p          fz.Params
		optWhole   bool // the fill fields' optimistic kernel must take the job whole
	}
	var fields []field
	clean := false   // no NaN: tiles the walks take whole (a NaN sends its tile to the slow path)
	mild := false    // no jumps of 80 (escapes at eb 1e-3): fill fields' tiles the optimistic kernel takes
	lateNaN := false // one NaN, in the field's last full tile: the optimistic kernel gives up late
	mk := func(d [3]int, fill bool) {
		rank := 3
		if d[0] == 0 && d[1] == 0 { // rank 1: tiles of 4096
			d[0], d[1], rank = 1, 1, 1
		}
		if d[0] == 0 { // rank 2: 64 x 64 tiles
			d[0], rank = 1, 2
		}
		if d[0] < 0 { // flat tiles (FORMAT.md 3.1; the kernel's FAST 4)
			d[0], rank = -d[0], 4
		}
		v := make([]float32, d[0]*d[1]*d[2])
		for i := range v {
			x, y, z := i%d[2], i/d[2]%d[1], i/(d[1]*d[2])
			s := math.Sin(0.1*float64(x))*math.Cos(0.07*float64(y)) + 0.01*float64(z) + 1e-3*r.NormFloat64()
			switch u := r.IntN(400); {
			case u == 0 && !clean:
				s = math.NaN()
			case fill && u < 60 && (x+2*y)%9 < 3:
				s = fillv
			case u < 3 && !mild:
				s += 80
			}
			if lateNaN && z == d[0]-1 && y == d[1]-1 && x == d[2]/32*32-1 {
				s = math.NaN()
			}
			v[i] = float32(s)
		}
		p := fz.Params{DType: fz.Float32, Dims: []uint64{uint64(d[0]), uint64(d[1]), uint64(d[2])}, Mode: fz.Abs, Bound: 1e-3}
		if rank == 2 {
			p.Dims = p.Dims[1:]
		}
		if rank == 1 {
			p.Dims = p.Dims[2:]
		}
		if fill {
			p.Fill = &fillv
		}
		name := fmt.Sprintf("%v fill %v", d, fill)
		if mild {
			name += fmt.Sprintf(" mild, clean %v, late NaN %v", clean, lateNaN)
		}
		if rank == 4 || rank == 1 {
			name = fmt.Sprintf("rank %d %s clean %v", rank, name, clean)
		}
		fields = append(fields, field{name, rank, d[0], d[1], d[2], v, p, fill && mild && clean && !lateNaN})
	}
	for _, d := range [][3]int{{16, 32, 64}, {9, 17, 33}, {12, 33, 49}, {24, 48, 100}} {
		mk(d, false)
		mk(d, true)
	}
	mk([3]int{136, 64, 97}, true) // two chunks (emulating a tile costs: this one only with fill)
	// fill fields the fill fields' optimistic kernel (HF 5) takes whole
	// (no NaN, no escapes; whole tiles, or clipped tiles pre-coded), and
	// one it gives up on at its last tile, after it has copied pre-coded
	// tiles and written their prefixes
	mild, clean = true, true
	mk([3]int{16, 32, 64}, true)
	mk([3]int{12, 33, 49}, true)
	lateNaN = true
	mk([3]int{24, 48, 100}, true)
	mild, clean, lateNaN = false, false, false
	// rank 2 (nz 0 here): clipped along y, x, both, and a field narrower
	// than a tile, with the staged rank-2 walk for its full tiles
	for _, d := range [][3]int{{0, 100, 150}, {0, 40, 300}, {0, 128, 200}} {
		mk(d, false)
		mk(d, true)
	}
	// flat tiles (nz < 0 here): era5's plane (the flat walk: 32 <= nx <= 64,
	// 256 <= ny nx < 2048), and shapes the walk leaves to the slow path
	// (nx > 64, small planes, planes of 2048 or more), a last partial tile
	for _, d := range [][3]int{{-12, 33, 49}, {-9, 40, 50}, {-3, 100, 40}, {-6, 20, 70}, {-7, 11, 13}, {-5, 64, 32}, {-30, 8, 40}} {
		mk(d, false)
		mk(d, true)
		clean = true
		mk(d, false)
		clean = false
	}
	// rank 1: the f32 walk for fields without a fill value (every full
	// tile without a hole), enc_fast1 for fields with one; a last partial
	// tile (the slow path)
	for _, n := range []int{5*4096 + 1000, 3 * 4096} {
		mk([3]int{0, 0, n}, false)
		mk([3]int{0, 0, n}, true)
		clean = true
		mk([3]int{0, 0, n}, false)
		clean = false
	}
	// era5's first 24 planes with flat tiles at REL 1e-4 and 1e-2, where
	// ../shared/data is present: real raw values (the check fails for
	// 77 % of its box tiles at 1e-4), which the flat walk must list
	if raw, dims := realFieldBox(t, benchFields[4], 24); raw != nil {
		v := f32sOf(raw)
		for _, eb := range []float64{1e-4, 1e-2} {
			p := fz.Params{DType: fz.Float32, Dims: dims, Mode: fz.Rel, Bound: eb}
			fields = append(fields, field{fmt.Sprintf("flat era5 %v rel %g clean true", dims, eb), 4, int(dims[0]), int(dims[1]), int(dims[2]), v, p, false})
		}
	}
	// hyg_stars_x's first 12 tiles (rank 1) at REL 1e-4 and 1e-2: real raw
	// values and escapes for the rank-1 walk
	if raw := sharedField(t, benchFields[6]); raw != nil {
		n := 12 * 4096
		v := f32sOf(raw[:4*n])
		for _, eb := range []float64{1e-4, 1e-2} {
			p := fz.Params{DType: fz.Float32, Dims: []uint64{uint64(n)}, Mode: fz.Rel, Bound: eb}
			fields = append(fields, field{fmt.Sprintf("rank 1 hyg [%d] rel %g clean true", n, eb), 1, 1, 1, n, v, p, false})
		}
	}
	// the fill fields levitus and coads where ../shared/data is present:
	// the tile plane across the bench's seam (`fzsidecar bench` repeats a
	// field along z, so one tile holds its last planes and its first: the
	// largest steps along z), a box with land, clipped along x, at the
	// bench's bounds. The fill fields' optimistic kernel must take each
	// whole: v38's gain on the bench's fill fields rests on it.
	for _, c := range []struct {
		f      realField
		zs     []int
		y0, ny int
		nx     int
	}{
		{benchFields[8], []int{16, 17, 18, 19, 0, 1, 2, 3}, 40, 90, 100}, // levitus (20 planes)
		{benchFields[1], []int{8, 9, 10, 11, 0, 1, 2, 3}, 0, 90, 100},    // coads (12 planes)
	} {
		raw := sharedField(t, c.f)
		if raw == nil {
			continue
		}
		FY, FX := int(c.f.dims[1]), int(c.f.dims[2])
		nz := len(c.zs)
		v := make([]float32, nz*c.ny*c.nx)
		for z, fz0 := range c.zs {
			for y := range c.ny {
				for x := range c.nx {
					i := (fz0*FY+c.y0+y)*FX + x
					v[(z*c.ny+y)*c.nx+x] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				}
			}
		}
		for _, eb := range []float64{1e-2, 1e-3, 1e-4} {
			p := fz.Params{DType: fz.Float32, Dims: []uint64{uint64(nz), uint64(c.ny), uint64(c.nx)}, Mode: fz.Rel, Bound: eb, Fill: c.f.fill}
			fields = append(fields, field{fmt.Sprintf("%s seam %v box y %d+%d x 0+%d rel %g", c.f.name, c.zs, c.y0, c.ny, c.nx, eb),
				3, nz, c.ny, c.nx, v, p, true})
		}
	}
	le := binary.LittleEndian
	// how clipped tiles are coded: in the kernel, pre-coded (PCT), padded
	const (
		modeBox = iota
		modePCT
		modePadded
	)
	type run struct {
		f             int
		mode          int
		late          bool
		cf            *v1Field
		box           *v1Field // the box tiles: each tile's raw count is that of its values in the field
		tile0, ntiles int
		describe      string
	}
	var runs []run
	var in bytes.Buffer
	cfs := make([]v1Field, len(fields))
	pcfs := make([]v1Field, len(fields)) // rank 3: the CPU codec's padded tiles
	for i, f := range fields {
		if f.rank == 4 {
			cfs[i] = compressV1(t, f.name, f.v, f.p, fz.WithTiling(fz.TilingFlat))
		} else {
			cfs[i] = compressV1(t, f.name, f.v, f.p)
		}
		if f.rank == 3 {
			pcfs[i] = compressV1(t, f.name, f.v, f.p, fz.WithTiling(fz.TilingPadded))
		}
		// jobs: the whole field, and for fields of several chunks each
		// chunk of 256 tiles as a job of its own (tile0 > 0)
		nt := len(cfs[i].tiles)
		jobs := [][2]int{{0, nt}}
		if nt > 256 {
			jobs = append(jobs, [2]int{0, 256}, [2]int{256, nt - 256})
		}
		for mode, name := range []string{"boxes", "pct", "padded"} {
			if mode == modePCT && (f.rank == 4 || f.rank == 1) || mode == modePadded && f.rank != 3 {
				continue // no clipped tiles to pre-code; padded kernels for rank 3 only
			}
			cf := &cfs[i]
			if mode == modePadded {
				cf = &pcfs[i]
			}
			for _, jb := range jobs {
				late := (i+mode+jb[0])%2 == 1
				runs = append(runs, run{i, mode, late, cf, &cfs[i], jb[0], jb[1],
					fmt.Sprintf("%s %s late %v job %d+%d", f.name, name, late, jb[0], jb[1])})
				for _, u := range []uint32{uint32(f.nz), uint32(f.ny), uint32(f.nx), b2u(cf.hasFill), cf.fillBits,
					uint32(mode), b2u(late), uint32(jb[0]), uint32(jb[1]), uint32(f.rank)} {
					in.Write(le.AppendUint32(nil, u))
				}
				var hd [24]byte
				cf.putSteps(hd[:])
				in.Write(hd[:])
				in.Write(f32bytes(f.v))
			}
		}
	}
	out := runEmu(t, emu, in.Bytes())
	at := 0
	u32 := func() uint32 { at += 4; return le.Uint32(out[at-4:]) }
	u64 := func() uint64 { at += 8; return le.Uint64(out[at-8:]) }
	for _, rn := range runs {
		errf := u32()
		// tiles the flat walk took whole (the rest: the slow path); the
		// clean flat fields it can walk must have some, or this test would
		// not see the walk
		taken := u32()
		// the fill fields' optimistic kernel runs for rank-3 fill jobs
		// without clipped tiles or with them pre-coded, and must take the
		// mild clean ones whole and give up on the others
		optDone := u32()
		if f := fields[rn.f]; f.rank == 3 && f.p.Fill != nil && (rn.mode != modeBox || f.nz%8 == 0 && f.ny%16 == 0 && f.nx%32 == 0) {
			if want := b2u(f.optWhole); optDone != want {
				t.Errorf("%s: the fill fields' optimistic kernel did the job: %d, expected %d", rn.describe, optDone, want)
			}
		} else if optDone != 0 {
			t.Errorf("%s: the fill fields' optimistic kernel ran", rn.describe)
		}
		if f := fields[rn.f]; f.rank == 4 && strings.Contains(f.name, "clean true") && f.nx >= 32 && f.nx <= 64 &&
			f.ny*f.nx >= 256 && f.ny*f.nx < 2048 && taken == 0 {
			t.Errorf("%s: the flat walk took no tile", rn.describe)
		}
		// rank 1: the f32 walk takes every full tile of a clean field
		// without a fill value, and no tile of a field with one
		if f := fields[rn.f]; f.rank == 1 {
			full := uint32(f.nx / 4096)
			if f.p.Fill != nil && taken != 0 || strings.Contains(f.name, "clean true") && taken != full {
				t.Errorf("%s: the f32 walk took %d tiles (full tiles: %d)", rn.describe, taken, full)
			}
		}
		sizes := make([]uint32, rn.ntiles)
		prefix := make([]uint64, rn.ntiles)
		outs := make([]uint32, rn.ntiles)
		errs := make([]float64, rn.ntiles)
		for k := range rn.ntiles {
			sizes[k], prefix[k], outs[k], errs[k] = u32(), u64(), u32(), math.Float64frombits(u64())
		}
		n := int(u64())
		buf := out[at : at+n]
		at += n
		if errf != 0 {
			t.Errorf("%s: error flags %#x", rn.describe, errf)
			continue
		}
		var sum uint64
		for k, tl := range rn.cf.tiles[rn.tile0 : rn.tile0+rn.ntiles] {
			// the tiles follow each other: prefix = the sizes before
			if prefix[k] != sum {
				t.Errorf("%s tile %d: prefix %d, the sizes before it sum to %d", rn.describe, k, prefix[k], sum)
				break
			}
			sum += uint64(sizes[k])
			// the raw count (Stats.Outliers) counts the field's values: a
			// padded tile's values outside the field (copies of edge values)
			// are not counted, so it is the box tile's
			if ct := parseV1Tile(rn.box.tiles[rn.tile0+k]); int(outs[k]) != len(ct.raw) || !(errs[k] >= 0 && errs[k] <= rn.cf.eb) {
				t.Errorf("%s tile %d: raw count %d (the CPU's %d), largest error %g (eb %g)", rn.describe, k, outs[k], len(ct.raw), errs[k], rn.cf.eb)
				break
			}
			tb := 4 * uint64(min(len(rn.cf.tiles), ((rn.tile0+k)/256+1)*256)-rn.tile0)
			o := tb + prefix[k]
			if int(sizes[k]) != len(tl) || o+uint64(sizes[k]) > uint64(n) {
				t.Errorf("%s tile %d: size %d at %d, the CPU's tile has %d", rn.describe, k, sizes[k], o, len(tl))
				break
			}
			if !bytes.Equal(buf[o:o+uint64(sizes[k])], tl) {
				t.Errorf("%s tile %d: the bytes at %d differ from the CPU's tile", rn.describe, k, o)
				break
			}
		}
	}
	if at != len(out) {
		t.Fatalf("encode_warp_emu wrote %d bytes, the runs account for %d", len(out), at)
	}
	if !t.Failed() {
		t.Logf("%d runs of the kernel: every tile the CPU codec's", len(runs))
	}
}
