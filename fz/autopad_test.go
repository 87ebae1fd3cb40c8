package fz

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// TestTilingAutoResolves: what TilingAuto takes (docs/FORMAT.md §3.1):
// flat tiles where flatWanted says so, else padded box tiles for a float32
// field of folded rank 3 with a clipped tile and a sub-block growth
// G = Π ceil(n_i/b_i)·b_i / Π n_i (b = 4×4×8) of at most 1.05, else boxes;
// and the geometry it plans is exactly the one of the tiling it takes.
func TestTilingAutoResolves(t *testing.T) {
	cases := []struct {
		name string
		dt   DType
		dims []uint64
		want Tiling
	}{
		{"levitus", Float32, []uint64{20, 180, 360}, TilingPadded},               // G = 1, clipped in z
		{"coads", Float32, []uint64{12, 90, 180}, TilingPadded},                  // G = 92/90·184/180 ≈ 1.045
		{"plot3d_post", Float32, []uint64{38, 76, 38}, TilingBoxes},              // G ≈ 1.108 (ny·nx > 2048: not flat)
		{"csm_b020", Float32, []uint64{18, 64, 128}, TilingBoxes},                // G = 20/18 ≈ 1.111
		{"csm_b003", Float32, []uint64{100, 64, 128}, TilingPadded},              // G = 1, clipped in z
		{"no clipped tile", Float32, []uint64{64, 128, 128}, TilingBoxes},        // bit 2 would change nothing
		{"one full tile", Float32, []uint64{8, 16, 32}, TilingBoxes},             // the same
		{"clipped in x only", Float32, []uint64{16, 16, 40}, TilingPadded},       // G = 1 (40 = 5·8), not a quarter clipped
		{"levitus f64", Float64, []uint64{20, 180, 360}, TilingBoxes},            // the GPU walks only f32 padded
		{"coads f64", Float64, []uint64{12, 90, 180}, TilingBoxes},               // the same
		{"era5", Float32, []uint64{744, 33, 49}, TilingFlat},                     // flatWanted comes first
		{"era5 f64", Float64, []uint64{744, 33, 49}, TilingFlat},                 // and does not look at the dtype
		{"plot3d_comb", Float32, []uint64{25, 33, 57}, TilingFlat},               // the same
		{"stageIV (rank 2)", Float32, []uint64{881, 1121}, TilingBoxes},          // rank 2: clipped, G small
		{"rank 2, G = 1", Float32, []uint64{100, 40}, TilingBoxes},               // rank 2 tiles are 64×64
		{"rank 2 after folding", Float32, []uint64{1, 180, 1, 360}, TilingBoxes}, // folds to 180×360
		{"rank 1", Float32, []uint64{107857}, TilingBoxes},                       //
		{"levitus folded", Float32, []uint64{2, 10, 1, 180, 360}, TilingPadded},  // folds to 20×180×360
		{"no values", Float32, []uint64{0, 180, 360}, TilingBoxes},               //
		{"G just under 1.05", Float32, []uint64{171, 185, 257}, TilingPadded},    // G = 2845568/2710065 = 1.05 − 9.2e-8
		{"G just over 1.05", Float32, []uint64{66, 171, 379}, TilingBoxes},       // G = 748544/712899 = 1.05 + 7.0e-8
	}
	for _, c := range cases {
		g, err := PlanGeometryFor(c.dt, c.dims, DefaultTilesPerChunk, TilingAuto)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if g.Tiling() != c.want {
			t.Errorf("auto on %s %v %s: %v, want %v", c.name, c.dt, FormatDims(c.dims), g.Tiling(), c.want)
		}
		if w, err := PlanGeometryFor(c.dt, c.dims, DefaultTilesPerChunk, c.want); err != nil || w != g {
			t.Errorf("auto on %s: geometry %+v, %v's %+v (%v)", c.name, g, c.want, w, err)
		}
		if !flatWanted(c.dims) && paddedWanted(c.dt, c.dims) != (c.want == TilingPadded) {
			t.Errorf("paddedWanted(%v, %s) = %v", c.dt, FormatDims(c.dims), !(c.want == TilingPadded))
		}
	}
	// A dtype the codec does not know is refused, whatever the tiling.
	for _, tl := range []Tiling{TilingBoxes, TilingFlat, TilingAuto, TilingPadded} {
		if _, err := PlanGeometryFor(DType(0), []uint64{20, 180, 360}, DefaultTilesPerChunk, tl); err == nil {
			t.Errorf("PlanGeometryFor dtype 0 %v: no error", tl)
		}
	}
	// Extents near 2^59 values: exact, no overflow (the growth products
	// pass 2^64).
	for _, c := range []struct {
		dims []uint64
		want bool
	}{{[]uint64{1 << 19, 1 << 20, 1<<20 - 8}, true}, {[]uint64{3, 1 << 27, 1<<28 + 1}, false}} {
		if got := paddedWanted(Float32, c.dims); got != c.want {
			t.Errorf("paddedWanted(f32, %s) = %v, want %v", FormatDims(c.dims), got, c.want)
		}
	}
}

// autoField is a smooth float32 field of dims (folded rank 3) with noise,
// and, with fill set, a "land" region of it set to *fill that reaches the
// field's far edges (so clipped and padded tiles hold it).
func autoField(dims []uint64, fill *float64, seed uint64) []float32 {
	nz, ny, nx, _ := foldDims(dims)
	r := rand.New(rand.NewPCG(seed, seed+1))
	v := make([]float32, nz*ny*nx)
	i := 0
	for z := range nz {
		for y := range ny {
			for x := range nx {
				fz, fy, fx := float64(z), float64(y), float64(x)
				v[i] = float32(20*math.Sin(fy/17)*math.Cos(fx/23) - fz/3 + 0.05*r.Float64())
				if fill != nil && (x > nx*2/3 && y > ny/3 || z+4 > nz && x%7 < 3) {
					v[i] = float32(*fill)
				}
				i++
			}
		}
	}
	return v
}

// TestTilingAutoCompress: Compress under TilingAuto writes exactly the bytes
// of the tiling it resolves to (padded on levitus- and coads-shaped float32
// fields, with and without a fill value, header flags bit 2 set; boxes on a
// plot3d_post-shaped one and on a float64 levitus-shaped one), in both
// versions, and what it writes decompresses within the bound.
func TestTilingAutoCompress(t *testing.T) {
	for _, c := range []struct {
		name string
		dims []uint64
		fill *float64
		want Tiling
	}{
		{"levitus-shaped, fill -1e10", []uint64{20, 180, 360}, ptr(-1e10), TilingPadded},
		{"coads-shaped, fill -1e34", []uint64{12, 90, 180}, ptr(-1e34), TilingPadded},
		{"coads-shaped, no fill", []uint64{12, 90, 180}, nil, TilingPadded},
		{"plot3d_post-shaped", []uint64{38, 76, 38}, nil, TilingBoxes},
	} {
		v := autoField(c.dims, c.fill, 7)
		for _, ver := range []int{1, 2} {
			p := Params{DType: Float32, Dims: c.dims, Mode: Rel, Bound: 1e-3, Fill: c.fill}
			auto, st := compressT(t, v, p, WithTiling(TilingAuto), WithFormatVersion(ver))
			want, _ := compressT(t, v, p, WithTiling(c.want), WithFormatVersion(ver))
			if !bytes.Equal(auto, want) {
				t.Errorf("%s v%d: auto wrote %d bytes, not %v's %d", c.name, ver, len(auto), c.want, len(want))
			}
			other := map[Tiling]Tiling{TilingPadded: TilingBoxes, TilingBoxes: TilingPadded}[c.want]
			if o, _ := compressT(t, v, p, WithTiling(other), WithFormatVersion(ver)); bytes.Equal(auto, o) {
				t.Errorf("%s v%d: auto wrote %v's bytes too: the test cannot tell them apart", c.name, ver, other)
			}
			if bit := auto[11]&flagPaddedTiles != 0; bit != (c.want == TilingPadded) || auto[11]&flagFlatTiles != 0 {
				t.Errorf("%s v%d: header flags %#x, want bit 2 %v and not bit 1", c.name, ver, auto[11], c.want == TilingPadded)
			}
			h := verify(t, v, auto, st.AbsEB, c.fill)
			if h.Padded != (c.want == TilingPadded) || h.Flat || int(h.Version) != ver {
				t.Errorf("%s v%d: header padded %v flat %v version %d", c.name, ver, h.Padded, h.Flat, h.Version)
			}
			if st.MaxAbsErr > st.AbsEB {
				t.Errorf("%s v%d: max error %g above the bound %g", c.name, ver, st.MaxAbsErr, st.AbsEB)
			}
		}
	}
	// float64: boxes, whatever the shape.
	v32 := autoField([]uint64{20, 180, 360}, ptr(-1e10), 9)
	v := make([]float64, len(v32))
	for i, x := range v32 {
		v[i] = float64(x)
	}
	p := Params{DType: Float64, Dims: []uint64{20, 180, 360}, Mode: Rel, Bound: 1e-3, Fill: ptr(-1e10)}
	auto, st := compressT(t, v, p, WithTiling(TilingAuto))
	if boxes, _ := compressT(t, v, p); !bytes.Equal(auto, boxes) || auto[11]&flagPaddedTiles != 0 {
		t.Errorf("f64 levitus-shaped: auto did not write the default box tiles (flags %#x)", auto[11])
	}
	verify(t, v, auto, st.AbsEB, p.Fill)
}
