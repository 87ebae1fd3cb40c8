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
			out = encodeTile(s, &st, src, l, t, qz, out[:0])
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
