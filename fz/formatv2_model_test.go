package fz

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"testing"
)

// This file measures candidate changes to the tile coding (docs/FORMAT-v2-proposal.md)
// on the fields of ../shared/peers/compare.sh, tiled to 1 GiB exactly as that script
// (and `fzsidecar bench --data`) tiles them. Nothing here is part of the product.

// peerField is one field of compare.sh: its values are produced slab by slab
// so that a 1 GiB field never has to be in memory.
type peerField struct {
	name  string
	dims  []uint64 // the tiled (1 GiB) shape, slowest first
	lo    float64  // value range of the whole field
	hi    float64
	value func(i uint64) float32 // flat element i of the tiled field
	cusz  [3]float64             // cuSZp's better mode at REL 1e-2, 1e-3, 1e-4 (peers/README.md, H100)
}

// peerFields builds the five compare.sh fields from dir (../shared/data).
func peerFields(t testing.TB, dir string) []peerField {
	const S = 1 << 30
	tiled := func(file string, dims []uint64, cusz [3]float64) peerField {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		a := asFloats[float32](raw)
		reps := (S + uint64(len(raw)) - 1) / uint64(len(raw))
		d := append([]uint64{dims[0] * reps}, dims[1:]...)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range a {
			lo, hi = min(lo, float64(v)), max(hi, float64(v))
		}
		n := uint64(len(a))
		return peerField{name: file, dims: d, lo: lo, hi: hi, cusz: cusz, value: func(i uint64) float32 { return a[i%n] }}
	}
	// smooth3d: fzsidecar bench's smooth field (the formula of peers/fields.py).
	const nz, ny, nx = 256, 1024, 1024
	sz, cy := make([]float64, nz), make([]float64, ny)
	for k := range sz {
		sz[k] = math.Sin(6*float64(k)/nz + 1)
	}
	for j := range cy {
		cy[j] = math.Cos(9 * float64(j) / ny)
	}
	sxy := make([]float64, ny*nx)
	for j := 0; j < ny; j++ {
		for i := 0; i < nx; i++ {
			sxy[j*nx+i] = 0.5 * math.Sin(13*float64(i)/nx+5*float64(j)/ny)
		}
	}
	smooth := func(i uint64) float32 {
		k, j, x := i/(ny*nx), (i/nx)%ny, i%nx
		return float32(sz[k]*cy[j] + sxy[j*nx+x] + float64(k)/nz*float64(x)/nx)
	}
	slo, shi := math.Inf(1), math.Inf(-1)
	for i := uint64(0); i < nz*ny*nx; i++ {
		v := float64(smooth(i))
		slo, shi = min(slo, v), max(shi, v)
	}
	return []peerField{
		{name: "smooth3d", dims: []uint64{nz, ny, nx}, lo: slo, hi: shi, value: smooth, cusz: [3]float64{16.55, 11.06, 5.60}},
		tiled("csm_b003_TS_100x64x128.f32", []uint64{100, 64, 128}, [3]float64{9.78, 5.09, 3.35}),
		tiled("era5_t2m_uk_744x33x49.f32", []uint64{744, 33, 49}, [3]float64{8.00, 4.36, 2.88}),
		tiled("hst_acs_j8bt06nyq_SCI_1024x1024.f32", []uint64{1024, 1024}, [3]float64{21.17, 8.42, 4.91}),
		tiled("hyg_stars_x_107857.f32", []uint64{107857}, [3]float64{6.88, 4.09, 2.88}),
	}
}

// slabTiles walks the tiles of a (possibly huge) float32 field slab by slab
// along its slowest folded axis. Each slab starts at a tile boundary, so its
// tiles are exactly the whole field's tiles. every > 1 visits only every
// every-th slab (a sample, for quick exploration). fn sees each tile's
// scratch right after encodeTile (v1) wrote it.
func slabTiles(f peerField, rel float64, every int, fn func(s *tileScratch, l *layout, t uint64, v1 []byte)) {
	slabTilesWith(f, rel, every, encodeTile[float32], fn)
}

// slabTilesWith is slabTiles with another tile encoder.
func slabTilesWith(f peerField, rel float64, every int, enc func(*tileScratch, *tileStats, []float32, *layout, uint64, *quantizer, []byte) []byte, fn func(s *tileScratch, l *layout, t uint64, tile []byte)) {
	nz, ny, nx, rank := foldDims(f.dims)
	sh := defaultShapeOf(rank)
	// Rows of the slowest folded axis per slab: whole tiles, about 16 Mi values.
	var rows, total uint64
	switch rank {
	case 1:
		rows, total = 4096*4096, nx
	case 2:
		rows, total = uint64(sh.tile[1])*max(1, (1<<24)/(uint64(sh.tile[1])*nx)), ny
	default:
		rows, total = uint64(sh.tile[0])*max(1, (1<<24)/(uint64(sh.tile[0])*ny*nx)), nz
	}
	per := nx // values per row of the slowest folded axis
	switch rank {
	case 2:
		per = nx
	case 3:
		per = ny * nx
	case 1:
		per = 1
	}
	p := Params{DType: Float32, Mode: Rel, Bound: rel}
	eb, step, err := DeriveBound(p, f.lo, f.hi, true)
	if err != nil {
		panic(err)
	}
	qz := &quantizer{step: step, eb: eb, inv: 1 / step}
	s := new(tileScratch)
	var st tileStats
	buf := make([]float32, rows*per)
	var out []byte
	for r0, k := uint64(0), 0; r0 < total; r0, k = r0+rows, k+1 {
		if k%every != 0 {
			continue
		}
		nr := min(rows, total-r0)
		src := buf[:nr*per]
		for i := range src {
			src[i] = f.value(r0*per + uint64(i))
		}
		var dims []uint64
		switch rank {
		case 1:
			dims = []uint64{nr}
		case 2:
			dims = []uint64{nr, nx}
		default:
			dims = []uint64{nr, ny, nx}
		}
		l, err := newLayout(dims, sh, DefaultTilesPerChunk)
		if err != nil {
			panic(err)
		}
		for t := uint64(0); t < l.tiles; t++ {
			out = enc(s, &st, src, l, t, qz, out[:0])
			fn(s, l, t, out)
		}
	}
}

// containerOverhead is what a container of dims adds to its tiles: header,
// chunk index and the u32 size of every tile.
func containerOverhead(dims []uint64) uint64 {
	l, err := newLayout(dims, defaultShapeOf(func() int { _, _, _, r := foldDims(dims); return r }()), DefaultTilesPerChunk)
	if err != nil {
		panic(err)
	}
	return uint64(headerFixed+8*len(dims)+4) + l.chunks*indexEntry + 4 + 4*l.tiles
}

// v1Extra is the part of a v1 tile after its planes: escapes, fill and raw
// sections. The candidates below keep these sections unchanged (escapes are
// recounted where the residuals change).
func v1Extra(v1 []byte) (planeBytes int, extra int) {
	word0 := binary.LittleEndian.Uint32(v1)
	off := 8
	for pm := word0 & 0xFFFF; pm != 0; pm &= pm - 1 {
		m := binary.LittleEndian.Uint32(v1[off:])
		off += 4 + 16*bits.OnesCount32(m)
	}
	extra = len(v1) - off
	if word0&tileHasEscapes != 0 {
		m := binary.LittleEndian.Uint32(v1[off:])
		extra -= 4 + 4*int(m)
	}
	return off - 8, extra
}

// TestPeerFieldRatiosV1 prints v1's ratio on the compare.sh fields tiled to
// 1 GiB (exact: every tile is encoded) beside cuSZp's better mode.
func TestPeerFieldRatiosV1(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	for _, f := range peerFields(t, sharedData(t)) {
		for i, rel := range []float64{1e-2, 1e-3, 1e-4} {
			var sum uint64
			slabTiles(f, rel, 1, func(s *tileScratch, l *layout, tt uint64, v1 []byte) { sum += uint64(len(v1)) })
			n, _ := NumElements(f.dims)
			r := float64(4*n) / float64(sum+containerOverhead(f.dims))
			t.Logf("%-36s %v rel %g: v1 %.3f  cuSZp %.2f  (%.3f×)", f.name, f.dims, rel, r, f.cusz[i], r/f.cusz[i])
		}
	}
}

var _ = fmt.Sprint

// predictedCodes are one tile's residual codes in slot order under a predictor.
type predictedCodes struct {
	mag  [TileElems]uint16 // |d| (0 for escapes and unused slots)
	neg  [TileElems]bool
	nesc int
}

// predictResiduals fills c with the residuals of q (element order, n =
// lz·ly·lx, zero outside the box) under predictor pred: 0 = v1's Lorenzo
// over the folded rank; 1 = 1-D along x, with the first value of each row
// predicted by the lower-rank Lorenzo over the x = 0 face.
func predictResiduals(c *predictedCodes, q []int32, lz, ly, lx int, smap *[TileElems]uint16, pred int) {
	clear(c.mag[:])
	clear(c.neg[:])
	c.nesc = 0
	at := func(z, y, x int) int32 {
		if z < 0 || y < 0 || x < 0 {
			return 0
		}
		return q[(z*ly+y)*lx+x]
	}
	for z := 0; z < lz; z++ {
		for y := 0; y < ly; y++ {
			for x := 0; x < lx; x++ {
				e := (z*ly+y)*lx + x
				if e == 0 {
					continue
				}
				var d int32
				if pred == 1 && x > 0 {
					d = at(z, y, x) - at(z, y, x-1)
				} else {
					// Lorenzo; for pred 1 on the x = 0 face (x−1 terms are 0).
					d = at(z, y, x) - at(z-1, y, x) - at(z, y-1, x) + at(z-1, y-1, x)
					if pred == 0 {
						d -= at(z, y, x-1) - at(z-1, y, x-1) - at(z, y-1, x-1) + at(z-1, y-1, x-1)
					}
				}
				slot := smap[e] & (TileElems - 1)
				m := d
				if m < 0 {
					m = -m
					c.neg[slot] = true
				}
				if m > maxCode {
					c.nesc++
					c.mag[slot], c.neg[slot] = 0, true
					continue
				}
				c.mag[slot] = uint16(m)
			}
		}
	}
}

// planeWords returns the 128 words of 32 slots of plane p (0..14 magnitude
// bits, 15 sign).
func planeWords(c *predictedCodes, p int) (w [TileElems / 32]uint32) {
	for s := 0; s < TileElems; s++ {
		var b bool
		if p == 15 {
			b = c.neg[s]
		} else {
			b = c.mag[s]>>p&1 != 0
		}
		if b {
			w[s/32] |= 1 << (s % 32)
		}
	}
	return
}

// Candidate costs of the code planes of one tile, in bytes.
const (
	costV1              = iota // v1: per plane in use, u32 mask of 128-slot blocks + 16 B per non-zero block
	costW32Two                 // per plane in use, u32 block mask + a nibble per non-zero block naming its non-zero 32-slot words (nibbles padded to 4 B) + 4 B per non-zero word
	costW32Full                // per plane in use, 128-bit word mask + 4 B per non-zero word
	costRate32                 // cuSZp-like: 4-bit rate per 32 slots (64 B) + sign word and rate words for each group with rate > 0
	costW32TwoCS               // costW32Two for magnitudes, sign bits only for non-zero magnitudes (packed, padded to 4 B)
	costRate32CS               // costRate32 with sign bits only for non-zero magnitudes
	costRate32CSB              // costRate32CS with sparse rates: u32 mask of 128-slot blocks with a non-zero rate + 2 B of rates per such block (padded to 4 B); nothing for a tile without codes
	costHybrid                 // per tile the smaller of costW32TwoCS and costRate32CSB
	costRate16CSB              // costRate32CSB with groups of 16 slots (u32 of rates per non-zero 128-slot block)
	costRate64CSB              // costRate32CSB with groups of 64 slots (u8 of rates per non-zero 128-slot block)
	costRate8CSB               // costRate32CSB with groups of 8 slots (u64 of rates per non-zero 128-slot block)
	costV1RawPlanes            // v1 with a per-plane choice of raw 512 bytes (no mask) when every block is non-zero
	costRate16SignUnits        // costRate16CSB with a 16-bit sign unit for every group with rate > 0 instead of packed signs
	nCosts
)

var costNames = [nCosts]string{"v1", "w32two", "w32full", "rate32", "w32two+cs", "rate32+cs", "rate32+cs sparse", "hybrid", "rate16+cs sparse", "rate64+cs sparse", "rate8+cs sparse", "v1+raw planes", "rate16 sign units"}

func planeCosts(c *predictedCodes) (cost [nCosts]int) {
	var words [16][TileElems / 32]uint32
	for p := 0; p < 16; p++ {
		words[p] = planeWords(c, p)
	}
	nzMag := 0
	for s := 0; s < TileElems; s++ {
		if c.mag[s] != 0 {
			nzMag++
		}
	}
	// Escapes keep a set sign bit with magnitude 0 (their slot must be told apart).
	signCS := (nzMag + c.nesc + 31) / 32 * 4
	for p := 0; p < 16; p++ {
		var b128, w32 int
		var nib int
		for k := 0; k < 32; k++ {
			any := false
			for j := 0; j < 4; j++ {
				if words[p][4*k+j] != 0 {
					w32++
					any = true
				}
			}
			if any {
				b128++
				nib++
			}
		}
		if b128 == 0 {
			continue
		}
		cost[costV1] += 4 + 16*b128
		cost[costV1RawPlanes] += min(4+16*b128, planeBytes)
		two := 4 + (nib*4+31)/32*4 + 4*w32
		cost[costW32Two] += two
		cost[costW32Full] += 16 + 4*w32
		if p < 15 {
			cost[costW32TwoCS] += two
		}
	}
	cost[costW32TwoCS] += signCS
	cost[costRate32], cost[costRate32CS] = 64, 64+signCS
	var rateBlocks uint32
	for g := 0; g < TileElems/32; g++ {
		var or uint16
		for j := 0; j < 32; j++ {
			or |= c.mag[32*g+j]
		}
		r := bits.Len16(or)
		if r > 0 || words[15][g] != 0 {
			cost[costRate32] += 4 + 4*r
			cost[costRate32CS] += 4 * r
			cost[costRate32CSB] += 4 * r
			rateBlocks |= 1 << (g / 4)
		}
	}
	if rateBlocks != 0 {
		cost[costRate32CSB] += 4 + (2*bits.OnesCount32(rateBlocks)+3)/4*4 + signCS
	}
	cost[costHybrid] = min(cost[costW32TwoCS], cost[costRate32CSB])
	for _, gs := range []struct{ size, k int }{{16, costRate16CSB}, {64, costRate64CSB}, {8, costRate8CSB}} {
		var blk uint32
		words := 0 // in units of gs bits
		for g := 0; g < TileElems/gs.size; g++ {
			var or uint16
			for j := 0; j < gs.size; j++ {
				or |= c.mag[gs.size*g+j]
			}
			r := bits.Len16(or)
			if r > 0 {
				blk |= 1 << (g * gs.size / 128)
				words += r
			}
		}
		if blk != 0 {
			hdr := bits.OnesCount32(blk) * (128 / gs.size) * 4 / 8 // bytes of rates
			cost[gs.k] = 4 + (hdr+3)/4*4 + (words*gs.size+31)/32*4 + signCS
			if gs.size == 16 {
				ng := 0
				for g := 0; g < TileElems/16; g++ {
					var or uint16
					for j := 0; j < 16; j++ {
						or |= c.mag[16*g+j]
					}
					if or != 0 {
						ng++
					}
				}
				cost[costRate16SignUnits] = 4 + (hdr+3)/4*4 + ((words+ng)*16+31)/32*4
			}
		}
	}
	return
}

// TestFormatV2Candidates prints, for every compare.sh field and bound, the
// ratio each candidate coding would give (same sections otherwise), under
// v1's Lorenzo, under 1-D prediction, and with a per-tile choice of the two.
// FZ_EXPERIMENT_EVERY=k samples every k-th slab (default 1: exact).
func TestFormatV2Candidates(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	every := 1
	fmt.Sscan(os.Getenv("FZ_EXPERIMENT_EVERY"), &every)
	fields := peerFields(t, sharedData(t))
	var c predictedCodes
	for _, f := range fields {
		for i, rel := range []float64{1e-2, 1e-3, 1e-4} {
			var v1, nvals uint64
			var tot [3][nCosts]uint64 // pred 0, pred 1, per-tile min
			slabTiles(f, rel, every, func(s *tileScratch, l *layout, tt uint64, enc []byte) {
				_, _, _, lz, ly, lx := l.tileBox(tt)
				n := lz * ly * lx
				nvals += uint64(n)
				v1 += uint64(len(enc)) + 4
				pb, extra := v1Extra(enc)
				smap := l.slotMap(s, lz, ly, lx)
				var per [2][nCosts]int
				for pred := 0; pred < 2; pred++ {
					predictResiduals(&c, s.q[:n], lz, ly, lx, smap, pred)
					per[pred] = planeCosts(&c)
					base := 4 + 8 + extra
					if c.nesc > 0 {
						base += 4 + 4*c.nesc
					}
					for k := range per[pred] {
						per[pred][k] += base
						tot[pred][k] += uint64(per[pred][k])
					}
					if pred == 0 && per[0][costV1]-base != pb {
						t.Fatalf("model of v1 planes %d != encoder's %d", per[0][costV1]-base, pb)
					}
				}
				for k := 0; k < nCosts; k++ {
					tot[2][k] += uint64(min(per[0][k], per[1][k]))
				}
			})
			line := fmt.Sprintf("%-10.10s rel %g cuSZp %5.2f v1 %6.3f |", f.name, rel, f.cusz[i], float64(4*nvals)/float64(v1))
			for pred, nm := range []string{"L", "1D", "min"} {
				line += " " + nm + ":"
				for k := 0; k < nCosts; k++ {
					line += fmt.Sprintf(" %.3f", float64(4*nvals)/float64(tot[pred][k]))
				}
			}
			t.Log(line)
		}
	}
	t.Logf("columns per predictor: %v", costNames)
}

// modelTiles encodes every tile of a whole field with v1 and hands the
// scratch to fn, as slabTiles does for the tiled peer fields.
func modelTiles[T float](src []T, p Params, fn func(s *tileScratch, l *layout, t uint64, v1 []byte)) {
	_, _, _, rank := foldDims(p.Dims)
	l, err := newLayout(p.Dims, defaultShapeOf(rank), DefaultTilesPerChunk)
	if err != nil {
		panic(err)
	}
	qz := &quantizer{}
	if p.Fill != nil {
		qz.hasFill, qz.fillBits = true, bitsOf(T(*p.Fill))
	}
	lo, hi, have := valueRange(src, qz, 1)
	eb, step, err := DeriveBound(p, lo, hi, have)
	if err != nil {
		panic(err)
	}
	qz.step, qz.eb, qz.inv = step, eb, 1/step
	s := new(tileScratch)
	var st tileStats
	var out []byte
	for t := uint64(0); t < l.tiles; t++ {
		out = encodeTile(s, &st, src, l, t, qz, out[:0])
		fn(s, l, t, out)
	}
}

// TestFormatV2CandidatesRealFields prints v1 and the candidate codings
// (v1's Lorenzo) on every field of ../shared/data, untiled.
func TestFormatV2CandidatesRealFields(t *testing.T) {
	if os.Getenv("FZ_EXPERIMENT") == "" {
		t.Skip("measurement only; set FZ_EXPERIMENT=1")
	}
	dir := sharedData(t)
	var c predictedCodes
	for _, f := range realFields {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range []float64{1e-2, 1e-3, 1e-4} {
			p := Params{DType: f.dtype, Dims: f.dims, Mode: Rel, Bound: rel, Fill: f.fill}
			var v1 uint64
			var tot [nCosts]uint64
			fn := func(s *tileScratch, l *layout, tt uint64, enc []byte) {
				_, _, _, lz, ly, lx := l.tileBox(tt)
				n := lz * ly * lx
				v1 += uint64(len(enc)) + 4
				_, extra := v1Extra(enc)
				predictResiduals(&c, s.q[:n], lz, ly, lx, l.slotMap(s, lz, ly, lx), 0)
				base := 4 + 8 + extra
				if c.nesc > 0 {
					base += 4 + 4*c.nesc
				}
				for k, v := range planeCosts(&c) {
					tot[k] += uint64(v + base)
				}
			}
			if f.dtype == Float32 {
				modelTiles(asFloats[float32](raw), p, fn)
			} else {
				modelTiles(asFloats[float64](raw), p, fn)
			}
			line := fmt.Sprintf("%-34.34s rel %-6g v1 %8.3f |", f.name, rel, float64(len(raw))/float64(v1))
			for k := 0; k < nCosts; k++ {
				line += fmt.Sprintf(" %8.3f", float64(len(raw))/float64(tot[k]))
			}
			t.Log(line)
		}
	}
	t.Logf("columns: %v (container header and index left out)", costNames)
}
