package fz

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// paddedShapes: clipped box tiles along every axis and their corners,
// tiny fields (one clipped tile), exact multiples (no clipped tile), rank 1
// and 2, folding.
var paddedShapes = [][]uint64{
	{9, 17, 33},          // clipped along z, y and x
	{74, 33, 49},         // era5-like: thin y and x edges
	{12, 90, 180},        // coads-like
	{20, 36, 72},         // levitus-like edges (4 and 8): whole sub-blocks
	{3, 5, 7},            // one clipped tile
	{16, 32, 64},         // no clipped tile
	{70, 100},            // rank 2
	{5000},               // rank 1, last tile clipped
	{3, 1, 20, 1, 2, 61}, // folds to 60×2×61
}

// TestPaddedRoundTrip: padded tiles (TilingPadded, §3.2) round-trip within
// the strict bound in both versions and both dtypes, with holes, escapes,
// raw values and fill masks at the edges (tiledRoundTrip's checks), and
// their full tiles are box tiling's. Both dtypes on every shape: the
// decoder takes a padded tile's box through the SIMD path where its x
// extent is a multiple of 8 (levitus-like edges) and the scalar one
// elsewhere.
func TestPaddedRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, dims := range paddedShapes {
		for kind := 0; kind < 6; kind++ {
			for _, ver := range []int{1, 2} {
				paddedRoundTrip[float32](t, r, dims, kind, ver)
				paddedRoundTrip[float64](t, r, dims, kind, ver)
			}
		}
	}
}

func paddedRoundTrip[T float](t *testing.T, r *rand.Rand, dims []uint64, kind, ver int) {
	t.Helper()
	h, blob, v, p, tpc := tiledRoundTrip[T](t, r, dims, kind, ver, TilingPadded)
	if !h.Padded || h.Flat || blob[11]&flagPaddedTiles == 0 || int(h.Version) != ver {
		t.Fatalf("%s: header padded %v flat %v flags %#x version %d", FormatDims(dims), h.Padded, h.Flat, blob[11], h.Version)
	}
	if g, _ := h.Geometry(); !g.Padded || g.Flat {
		t.Fatalf("%s: geometry %+v", FormatDims(dims), g)
	}
	// The full tiles are box tiling's bytes.
	box, _ := compressT(t, v, p, WithFormatVersion(ver), WithTilesPerChunk(tpc))
	hb, _ := ReadHeader(box)
	tp, tb := containerTiles(t, h, blob), containerTiles(t, hb, box)
	l, _ := h.layout()
	for i := range tp {
		if _, _, _, lz, ly, lx := l.tileBox(uint64(i)); lz*ly*lx == TileElems && !bytes.Equal(tp[i], tb[i]) {
			t.Fatalf("%s kind %d v%d: full tile %d differs from box tiling's", FormatDims(dims), kind, ver, i)
		}
	}
}

// padEdges is v (dims nz×ny×nx) padded to whole 8×16×32 tiles by
// repeating the nearest value inside: §3.2's padding done to the values.
func padEdges[T float](v []T, nz, ny, nx int) ([]T, int, int, int) {
	pz, py, px := (nz+7)/8*8, (ny+15)/16*16, (nx+31)/32*32
	out := make([]T, pz*py*px)
	for z := 0; z < pz; z++ {
		for y := 0; y < py; y++ {
			for x := 0; x < px; x++ {
				out[(z*py+y)*px+x] = v[(min(z, nz-1)*ny+min(y, ny-1))*nx+min(x, nx-1)]
			}
		}
	}
	return out, pz, py, px
}

// TestPaddedMatchesPaddedField checks §3.2 against an independent
// construction: a padded container's tiles are byte for byte the box
// tiling's tiles of the field padded by repeating its edge values (the same
// range, so the same step) — holes, placeholders, raw and fill values
// included.
func TestPaddedMatchesPaddedField(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	for _, d := range [][3]int{{9, 17, 33}, {74, 33, 49}, {3, 5, 7}, {12, 90, 180}, {8, 20, 40}} {
		for kind := 0; kind < 6; kind++ {
			for _, ver := range []int{1, 2} {
				nz, ny, nx := d[0], d[1], d[2]
				v := make([]float32, nz*ny*nx)
				flatField(r, v, kind)
				pv, pz, py, px := padEdges(v, nz, ny, nx)
				p := Params{DType: Float32, Dims: []uint64{uint64(nz), uint64(ny), uint64(nx)}, Mode: Abs, Bound: 1e-3}
				if kind == 2 || kind == 3 || kind == 5 {
					p.Mode, p.Bound = Rel, 1e-5
				}
				if kind != 0 {
					p.Fill = ptr(-1e34)
				}
				pp := p
				pp.Dims = []uint64{uint64(pz), uint64(py), uint64(px)}
				blob, _ := compressT(t, v, p, WithTiling(TilingPadded), WithFormatVersion(ver))
				ref, _ := compressT(t, pv, pp, WithFormatVersion(ver))
				h, _ := ReadHeader(blob)
				hr, _ := ReadHeader(ref)
				if h.Step != hr.Step {
					t.Fatalf("%v kind %d: step %g against the padded field's %g", d, kind, h.Step, hr.Step)
				}
				a, b := containerTiles(t, h, blob), containerTiles(t, hr, ref)
				if len(a) != len(b) {
					t.Fatalf("%v: %d tiles against %d", d, len(a), len(b))
				}
				for i := range a {
					if !bytes.Equal(a[i], b[i]) {
						t.Fatalf("%v kind %d v%d: tile %d (%d bytes) differs from the padded field's (%d bytes)", d, kind, ver, i, len(a[i]), len(b[i]))
					}
				}
			}
		}
	}
}
