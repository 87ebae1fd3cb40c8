package fz

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// flatShapes are the shapes the flat-tile tests run on: narrow grids
// (nx < 32, nx not dividing 4096, so runs start mid-row), ny·nx below and
// above 4096, rank 1 and 2, folding, last partial tiles, single values.
var flatShapes = [][]uint64{
	{74, 33, 49},         // era5-like: ny·nx = 1617, 19 tiles, last partial
	{25, 33, 57},         // plot3d-like: ny·nx = 1881
	{6, 70, 90},          // ny·nx = 6300 > 4096: no z-neighbour inside a run
	{9, 7, 3},            // nx < 32, one partial tile
	{40, 13, 100},        // nx does not divide 4096
	{3, 1, 20, 1, 2, 61}, // folds to 60×2×61
	{12000},              // rank 1
	{4096},               // rank 1, exactly one tile
	{30, 300},            // rank 2
	{2, 4097},            // rank 2, rows longer than a tile
	{5000, 1},            // rank 1 after dropping 1
	{1},
	{8191},
}

// flatField fills v with a smooth field and, by kind, specials: 0 smooth;
// 1 NaN, ±Inf, fill and huge values (holes); 2 spikes whose residuals
// escape; 3 values that fail the check (raw, keeping q; float32 only);
// 4 everything at once; 5 mostly fill, like a land mask.
func flatField[T float](r *rand.Rand, v []T, kind int) {
	for i := range v {
		v[i] = T(100*math.Sin(float64(i)/37) + 20*math.Cos(float64(i)/5) + r.Float64())
		k := kind
		if kind == 4 {
			k = 1 + r.IntN(3)
		}
		switch k {
		case 1:
			switch r.IntN(25) {
			case 0:
				v[i] = fromBits[T](bitsOf(T(math.NaN())) | 3)
			case 1:
				v[i] = T(math.Inf(1))
			case 2:
				v[i] = T(math.Inf(-1))
			case 3:
				v[i] = -1e34
			case 4:
				v[i] = 1e30
			}
		case 2:
			if r.IntN(40) == 0 {
				v[i] += T(1e4 * (r.Float64() - 0.5))
			}
		case 3:
			if r.IntN(30) == 0 {
				v[i] = T(1e5 + r.Float64())
			}
		case 5:
			if (i/23)%4 != 0 {
				v[i] = -1e34
			}
		}
	}
}

// TestFlatRoundTrip: flat tiles round-trip within the strict bound in
// both versions, for both dtypes, with and without the vector kernels,
// and write the same bytes for any worker count and either path.
func TestFlatRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	for si, dims := range flatShapes {
		for kind := 0; kind < 6; kind++ {
			for _, ver := range []int{1, 2} {
				if si%2 == 0 {
					flatRoundTrip[float32](t, r, dims, kind, ver)
				} else {
					flatRoundTrip[float64](t, r, dims, kind, ver)
				}
			}
		}
	}
}

func flatRoundTrip[T float](t *testing.T, r *rand.Rand, dims []uint64, kind, ver int) {
	t.Helper()
	h, _, _, _, _ := tiledRoundTrip[T](t, r, dims, kind, ver, TilingFlat)
	n, _ := NumElements(dims)
	if !h.Flat || h.Padded || h.Tile != [3]int{1, 1, 4096} || h.Block != [3]int{1, 1, 128} || int(h.Version) != ver {
		t.Fatalf("%s: header flat %v padded %v tile %v block %v version %d", FormatDims(dims), h.Flat, h.Padded, h.Tile, h.Block, h.Version)
	}
	if g, _ := h.Geometry(); g.Tiles != ceilDiv(n, TileElems) || !g.Flat {
		t.Fatalf("%s: geometry %+v", FormatDims(dims), g)
	}
}

// tiledRoundTrip compresses a flatField of kind with tiling and checks
// what every tiling must hold: the strict bound, bytes that do not depend on
// the worker count or the vector path, a container that checks clean, and
// regions that decode as the whole does. It returns the header, the
// container, the values, their parameters and the tiles per chunk used.
func tiledRoundTrip[T float](t *testing.T, r *rand.Rand, dims []uint64, kind, ver int, tiling Tiling) (*Header, []byte, []T, Params, int) {
	t.Helper()
	n, _ := NumElements(dims)
	v := make([]T, n)
	flatField(r, v, kind)
	dt := Float32
	if _, ok := any(v).([]float64); ok {
		dt = Float64
	}
	p := Params{DType: dt, Dims: dims, Mode: Abs, Bound: 1e-3}
	if kind == 2 || kind == 3 || kind == 5 {
		// (kinds 1 and 4 hold 1e30: a rel bound would quantize all to 0)
		p.Mode, p.Bound = Rel, 1e-5
	}
	if kind != 0 {
		p.Fill = ptr(-1e34)
	}
	tpc := []int{1, 3, 256}[r.IntN(3)]
	opts := []Option{WithTiling(tiling), WithFormatVersion(ver), WithTilesPerChunk(tpc)}
	blob, st := compressT(t, v, p, append(opts, WithWorkers(8))...)
	h := verify(t, v, blob, st.AbsEB, p.Fill)
	if st.MaxAbsErr > st.AbsEB {
		t.Fatalf("%s: max error %g above the bound %g", FormatDims(dims), st.MaxAbsErr, st.AbsEB)
	}
	if blob1, _ := compressT(t, v, p, append(opts, WithWorkers(1))...); !bytes.Equal(blob, blob1) {
		t.Fatalf("%s %v kind %d v%d: bytes depend on the worker count", FormatDims(dims), tiling, kind, ver)
	}
	if haveAVX2 {
		useSIMD = false
		blobGo, _ := compressT(t, v, p, opts...)
		_, outGo, errGo := Decompress(context.Background(), blob)
		useSIMD = true
		_, out, err := Decompress(context.Background(), blob)
		if !bytes.Equal(blob, blobGo) {
			t.Fatalf("%s %v kind %d v%d: the pure-Go path writes other bytes", FormatDims(dims), tiling, kind, ver)
		}
		if err != nil || errGo != nil || !bytes.Equal(out, outGo) {
			t.Fatalf("%s %v kind %d v%d: the pure-Go path decodes otherwise (%v, %v)", FormatDims(dims), tiling, kind, ver, err, errGo)
		}
	}
	// The whole container checks clean, and every region decodes to what
	// the full decode gives.
	if bad, err := CheckContainer(context.Background(), h, blob, 2); err != nil || len(bad) != 0 {
		t.Fatalf("%s: CheckContainer: %v %v", FormatDims(dims), bad, err)
	}
	_, full, _ := Decompress(context.Background(), blob)
	sz := uint64(dt.Size())
	per := n / dims[0] * sz
	for k := 0; k < 3 && n > 0; k++ {
		lo := uint64(r.IntN(int(dims[0])))
		hi := lo + 1 + uint64(r.IntN(int(dims[0]-lo)))
		got, err := DecodeRegion(context.Background(), h, Region{lo, hi}, func(c int) ([]byte, error) {
			ch := h.Chunks[c]
			return blob[ch.Offset : ch.Offset+ch.Size], nil
		})
		if err != nil || !bytes.Equal(got, full[lo*per:hi*per]) {
			t.Fatalf("%s: region %d:%d: %v", FormatDims(dims), lo, hi, err)
		}
	}
	return h, blob, v, p, tpc
}

// naiveFlatQ quantizes tile [first, first+n) of v as docs/FORMAT.md §4
// says, written out without the codec's code: q per element, holes
// (fill, or |x/step| not below 2^28) taking trunc(Σq/count) over the
// others (0 when there are none): a flat tile is one plane, so §4's
// per-plane placeholder is the run's mean q.
func naiveFlatQ[T float](v []T, first uint64, n int, step float64, fill *T) []int32 {
	q := make([]int32, n)
	hole := make([]bool, n)
	var sum, cnt int64
	inv := 1 / step
	for e := 0; e < n; e++ {
		x := v[first+uint64(e)]
		s := float64(x) * inv
		if (fill != nil && bitsOf(x) == bitsOf(*fill)) || !(math.Abs(s) < 1<<28) {
			hole[e] = true
			continue
		}
		a := s + 6755399441055744.0
		q[e] = int32(a - 6755399441055744.0)
		sum += int64(q[e])
		cnt++
	}
	var ph int32
	if cnt > 0 {
		ph = int32(sum / cnt)
	}
	for e := range q {
		if hole[e] {
			q[e] = ph
		}
	}
	return q
}

// naiveFlatResidual is §3.1's residual of element e of the tile whose run
// starts at flat index first (q: the run's values), by the 8-corner sum
// with the existence rule, deliberately without any of the codec's
// factoring.
func naiveFlatResidual(q []int32, first uint64, e int, ny, nx uint64) int32 {
	i := first + uint64(e)
	z, y, x := i/(ny*nx), i/nx%ny, i%nx
	var d int32
	for a := uint64(0); a < 2; a++ {
		for b := uint64(0); b < 2; b++ {
			for c := uint64(0); c < 2; c++ {
				if z < a || y < b || x < c {
					continue
				}
				j := i - a*ny*nx - b*nx - c
				if j < first {
					continue
				}
				if (a+b+c)%2 == 0 {
					d += q[j-first]
				} else {
					d -= q[j-first]
				}
			}
		}
	}
	return d
}

// naiveFlatParity is the masks' transform of bitmap bits (the run's
// elements) at element e: the XOR of the existing corners.
func naiveFlatParity(bits []bool, first uint64, e int, ny, nx uint64) bool {
	i := first + uint64(e)
	z, y, x := i/(ny*nx), i/nx%ny, i%nx
	var p bool
	for a := uint64(0); a < 2; a++ {
		for b := uint64(0); b < 2; b++ {
			for c := uint64(0); c < 2; c++ {
				if z < a || y < b || x < c {
					continue
				}
				if j := i - a*ny*nx - b*nx - c; j >= first {
					p = p != bits[j-first]
				}
			}
		}
	}
	return p
}

// containerTiles splits a container into its tiles' bytes, in tile order.
func containerTiles(t *testing.T, h *Header, blob []byte) [][]byte {
	t.Helper()
	l, err := h.layout()
	if err != nil {
		t.Fatal(err)
	}
	return containerTilesOf(h, l, blob)
}

// TestFlatReference compares the codec with the naive §3.1 formulas on
// random small fields: the code in every slot of every tile (as written in
// the container, both versions) is the sign-magnitude code of the naive
// residual, the decoder's q is the naive q, and the masks' transform is
// the naive corner parity.
func TestFlatReference(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	var seen uint32 // OR of every tile's word0
	defer func() {
		if all := uint32(tileHasEscapes | tileHasFill | tileHasRaw); seen&all != all {
			t.Errorf("the random fields never had every tile section: word0s OR to %#x", seen)
		}
	}()
	for it := 0; it < 150; it++ {
		dims := []uint64{uint64(1 + r.IntN(6)), uint64(1 + r.IntN(40)), uint64(1 + r.IntN(70))}
		switch it % 5 {
		case 0:
			dims = []uint64{uint64(1 + r.IntN(3)), uint64(20 + r.IntN(80)), uint64(40 + r.IntN(100))}
		case 1:
			dims = dims[1:] // rank 2
		case 2:
			dims[0] *= uint64(1 + r.IntN(30))
		}
		n, _ := NumElements(dims)
		v := make([]float32, n)
		flatField(r, v, r.IntN(5))
		fill := float32(-1e34)
		p := Params{DType: Float32, Dims: dims, Mode: Abs, Bound: []float64{1e-3, 0.05, 0.5}[r.IntN(3)], Fill: ptr(-1e34)}
		ver := 1 + it%2
		setSIMD(t, it%4 < 2)
		blob, st := compressT(t, v, p, WithTiling(TilingFlat), WithFormatVersion(ver), WithTilesPerChunk(1+r.IntN(4)))
		verify(t, v, blob, st.AbsEB, p.Fill)
		h, err := ReadHeader(blob)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := h.layout()
		nz, ny, nx, _ := foldDims(dims)
		if l.nz != nz || l.ny != ny || l.nx != nx {
			t.Fatalf("layout folds %v to %d×%d×%d", dims, l.nz, l.ny, l.nx)
		}
		s := new(tileScratch)
		dst := make([]float32, n)
		for ti, tb := range containerTiles(t, h, blob) {
			seen |= binary.LittleEndian.Uint32(tb)
			first := uint64(ti) * TileElems
			tn := int(min(TileElems, n-first))
			var err error
			if ver == 2 {
				err = decodeTileV2(s, tb, dst, 0, l, uint64(ti), h.Step, fill)
			} else {
				err = decodeTile(s, tb, dst, 0, l, uint64(ti), h.Step, fill)
			}
			if err != nil {
				t.Fatalf("%v tile %d: %v", dims, ti, err)
			}
			q := naiveFlatQ(v, first, tn, h.Step, &fill)
			for e := 0; e < tn; e++ {
				if s.q[e] != q[e] {
					t.Fatalf("%v v%d tile %d element %d: decoded q %d, naive q %d", dims, ver, ti, e, s.q[e], q[e])
				}
				var want uint16
				if e > 0 {
					d := naiveFlatResidual(q, first, e, ny, nx)
					m := int64(d)
					if m < 0 {
						m = -m
					}
					lim := int64(32767)
					if ver == 2 {
						lim = 32766
					}
					switch {
					case m > lim:
						want = 0x8000 // the decoder's form of an escape
					case d < 0:
						want = 0x8000 | uint16(m)
					default:
						want = uint16(m)
					}
				}
				if got := uint16(s.lo[e]) | uint16(s.hi[e])<<8; got != want {
					t.Fatalf("%v v%d tile %d slot %d: code %#04x, naive %#04x", dims, ver, ti, e, got, want)
				}
			}
			// The masks' parity transform against the naive corner XOR.
			f := l.flatRun(uint64(ti))
			set := make([]bool, tn)
			var m [planeBytes]byte
			for e := range set {
				if r.IntN(7) == 0 || (e/11)%3 == 0 {
					set[e] = true
					m[e>>3] |= 1 << (e & 7)
				}
			}
			flatXor(&m, &f, false)
			for e := range set {
				if got := m[e>>3]>>(e&7)&1 == 1; got != naiveFlatParity(set, first, e, ny, nx) {
					t.Fatalf("%v tile %d bit %d: parity %v, naive %v", dims, ti, e, got, !got)
				}
			}
			flatXor(&m, &f, true)
			for e := range set {
				if m[e>>3]>>(e&7)&1 == 1 != set[e] {
					t.Fatalf("%v tile %d bit %d: the inverse transform does not restore the bitmap", dims, ti, e)
				}
			}
		}
	}
}

// TestFlatLorenzoWraps: flatLorenzoInverse undoes the naive residuals for
// arbitrary int32 values (wrapping arithmetic), on runs that start
// anywhere in a row, with huge and tiny strides.
func TestFlatLorenzoWraps(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	for it := 0; it < 300; it++ {
		ny, nx := uint64(1+r.IntN(50)), uint64(1+r.IntN(90))
		if it%10 == 0 {
			nx = uint64(5000 + r.IntN(3000))
		}
		nz := uint64(1 + r.IntN(8000/int(ny*nx)+3))
		dims := []uint64{nz, ny, nx}
		l, err := newFlatLayout(dims, 1)
		if err != nil {
			t.Fatal(err)
		}
		ti := uint64(r.IntN(int(l.tiles)))
		f := l.flatRun(ti)
		q := make([]int32, f.n)
		for i := range q {
			q[i] = int32(r.Uint32())
		}
		d := make([]int32, f.n)
		for e := range d {
			d[e] = naiveFlatResidual(q, f.first, e, l.ny, l.nx)
		}
		fwd := append([]int32(nil), q...)
		flatLorenzo(fwd, &f)
		for e := range d {
			if fwd[e] != d[e] {
				t.Fatalf("%v tile %d element %d: residual %d, naive %d", dims, ti, e, fwd[e], d[e])
			}
		}
		flatLorenzoInverse(d, &f)
		for e := range d {
			if d[e] != q[e] {
				t.Fatalf("%v tile %d element %d: inverse %d, want %d", dims, ti, e, d[e], q[e])
			}
		}
	}
}

// TestFlatRank1MatchesBoxes: for a rank-1 field flat tiles are the box
// tiles; the containers differ only in flags bit 1 and the header CRC.
func TestFlatRank1MatchesBoxes(t *testing.T) {
	r := rand.New(rand.NewPCG(75, 76))
	for _, ver := range []int{1, 2} {
		v := make([]float32, 10000)
		flatField(r, v, 4)
		p := Params{DType: Float32, Dims: []uint64{1, 10000}, Mode: Rel, Bound: 1e-4, Fill: ptr(-1e34)}
		box, _ := compressT(t, v, p, WithFormatVersion(ver))
		flat, _ := compressT(t, v, p, WithFormatVersion(ver), WithTiling(TilingFlat))
		if len(box) != len(flat) || box[11]|flagFlatTiles != flat[11] {
			t.Fatalf("v%d: sizes %d, %d; flags %#x, %#x", ver, len(box), len(flat), box[11], flat[11])
		}
		hs := fixedSize(2)
		b2 := append([]byte(nil), box...)
		b2[11] = flat[11]
		copy(b2[hs-4:hs], flat[hs-4:hs])
		if !bytes.Equal(b2, flat) {
			t.Fatalf("v%d: flat rank-1 container differs from the box one beyond the flag", ver)
		}
	}
}

// TestFlatHeader: flags bit 1 needs the flat tile shape; unknown bits are
// still rejected; Flat survives a header round trip.
func TestFlatHeader(t *testing.T) {
	v := make([]float32, 4*30*40)
	flatField(rand.New(rand.NewPCG(1, 2)), v, 0)
	p := Params{DType: Float32, Dims: []uint64{4, 30, 40}, Mode: Abs, Bound: 0.01}
	box, _ := compressT(t, v, p)
	flat, _ := compressT(t, v, p, WithTiling(TilingFlat))
	if h, err := ReadHeader(flat); err != nil || !h.Flat || flat[11] != flagFlatTiles {
		t.Fatalf("flat header: %v, %v", h, err)
	}
	if h, err := ReadHeader(box); err != nil || h.Flat {
		t.Fatalf("box header: %v, %v", h, err)
	}
	mutate := func(blob []byte, f func(b []byte)) error {
		b := append([]byte(nil), blob...)
		f(b)
		fixCRCs(b)
		_, err := ReadHeader(b)
		return err
	}
	// Bit 1 on a box container (tile 8×16×32).
	err := mutate(box, func(b []byte) { b[11] |= flagFlatTiles })
	if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "flat tiles") || !strings.Contains(err.Error(), "8x16x32") {
		t.Fatalf("bit 1 with box tiles: %v", err)
	}
	// The flat tile with another sub-block, and another tile with the
	// flat sub-block.
	err = mutate(flat, func(b []byte) { binary.LittleEndian.PutUint16(b[22:], 64); binary.LittleEndian.PutUint16(b[20:], 2) })
	if err == nil || !strings.Contains(err.Error(), "flat tiles") {
		t.Fatalf("bit 1 with sub-block 1x2x64: %v", err)
	}
	err = mutate(flat, func(b []byte) {
		binary.LittleEndian.PutUint16(b[14:], 2)
		binary.LittleEndian.PutUint16(b[16:], 2048)
	})
	if err == nil || !strings.Contains(err.Error(), "flat tiles") {
		t.Fatalf("bit 1 with tile 1x2x2048: %v", err)
	}
	// Bit 2 (padded box tiles, §3.2) is known, but not beside bit 1.
	if err := mutate(flat, func(b []byte) { b[11] |= flagPaddedTiles }); err == nil || !strings.Contains(err.Error(), "both set") {
		t.Fatalf("bits 1 and 2: %v", err)
	}
	for _, bit := range []byte{1 << 3, 1 << 7} {
		for _, blob := range [][]byte{box, flat} {
			if err := mutate(blob, func(b []byte) { b[11] |= bit }); err == nil || !strings.Contains(err.Error(), "unknown bits") {
				t.Fatalf("flags bit %#x: %v", bit, err)
			}
		}
	}
	// Clearing bit 1 of a flat container leaves a valid header (tile
	// 1×1×4096 is a valid box shape) that now means box tiles: it must
	// still decode without a panic, to other values or an error.
	b := append([]byte(nil), flat...)
	b[11] &^= flagFlatTiles
	fixCRCs(b)
	if h, err := ReadHeader(b); err != nil || h.Flat {
		t.Fatalf("bit 1 cleared: %v %v", h, err)
	}
	Decompress(context.Background(), b) //nolint:errcheck // only panics matter
}

// TestTilingAuto: the decision of docs/FORMAT.md §3.1, and Compress
// following it.
func TestTilingAuto(t *testing.T) {
	cases := []struct {
		dims []uint64
		flat bool
	}{
		{[]uint64{744, 33, 49}, true},       // era5: 37 % clipped, ny·nx = 1617
		{[]uint64{100, 64, 128}, false},     // no clipped tile
		{[]uint64{25, 33, 57}, true},        // 48 % clipped, ny·nx = 1881
		{[]uint64{38, 76, 38}, false},       // ny·nx = 2888 > 2048
		{[]uint64{10000}, false},            // rank 1
		{[]uint64{33, 49}, false},           // rank 2
		{[]uint64{1, 33, 1, 49}, false},     // rank 2 after folding
		{[]uint64{2, 3, 744, 33, 49}, true}, // folds to 4464×33×49: era5's shares
		{[]uint64{8, 16, 32}, false},        // one full tile
		{[]uint64{7, 16, 32}, true},         // every tile clipped in z
		{[]uint64{0, 33, 49}, false},        // no values
		{[]uint64{64, 16, 36}, false},       // 4/36 = 11 % clipped
		{[]uint64{16, 16, 40}, false},       // 8/40 = 20 %
		{[]uint64{16, 16, 48}, true},        // 16/48 = 33 %
		{[]uint64{41, 18, 37}, false},       // 24.998 %: just below a quarter
		{[]uint64{89, 18, 75}, true},        // 25.0004 %: just above
		{[]uint64{100, 2, 1024}, true},      // ny·nx = 2048 (ny = 2: every tile clipped in y)
		{[]uint64{100, 3, 683}, false},      // ny·nx = 2049
	}
	for _, c := range cases {
		g, err := PlanGeometryFor(Float32, c.dims, DefaultTilesPerChunk, TilingAuto)
		if err != nil {
			t.Fatal(err)
		}
		if g.Flat != c.flat {
			t.Errorf("auto on %s: flat %v, want %v", FormatDims(c.dims), g.Flat, c.flat)
		}
		gb, _ := PlanGeometryFor(Float32, c.dims, DefaultTilesPerChunk, TilingBoxes)
		gp, _ := PlanGeometry(c.dims, DefaultTilesPerChunk)
		gf, _ := PlanGeometryFor(Float32, c.dims, DefaultTilesPerChunk, TilingFlat)
		if gb.Flat || gp != gb || !gf.Flat || gf.Tile != [3]int{1, 1, 4096} || gf.Block != [3]int{1, 1, 128} {
			t.Errorf("%s: boxes %+v, PlanGeometry %+v, flat %+v", FormatDims(c.dims), gb, gp, gf)
		}
		if n, _ := NumElements(c.dims); gf.Tiles != ceilDiv(n, TileElems) || gf.Chunks != ceilDiv(gf.Tiles, DefaultTilesPerChunk) {
			t.Errorf("%s: flat geometry %+v", FormatDims(c.dims), gf)
		}
	}
	// Compress writes what PlanGeometryFor plans.
	for _, c := range cases[:6] {
		n, _ := NumElements(c.dims)
		v := make([]float32, n)
		flatField(rand.New(rand.NewPCG(3, 4)), v, 0)
		blob, _ := compressT(t, v, Params{DType: Float32, Dims: c.dims, Mode: Rel, Bound: 1e-2}, WithTiling(TilingAuto))
		if h, err := ReadHeader(blob); err != nil || h.Flat != c.flat {
			t.Errorf("Compress auto on %s: flat %v (%v), want %v", FormatDims(c.dims), h.Flat, err, c.flat)
		}
	}
}

// TestTilingOptions: names, parsing, settings, and invalid values.
func TestTilingOptions(t *testing.T) {
	for _, c := range []struct {
		s string
		t Tiling
	}{{"boxes", TilingBoxes}, {"flat", TilingFlat}, {"auto", TilingAuto}, {"FLAT", TilingFlat}, {" auto ", TilingAuto}, {"padded", TilingPadded}} {
		got, err := ParseTiling(c.s)
		if err != nil || got != c.t {
			t.Errorf("ParseTiling(%q) = %v, %v", c.s, got, err)
		}
		if got.String() != strings.ToLower(strings.TrimSpace(c.s)) {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	for _, s := range []string{"", "box", "flat-tiles", "1", "Auto2"} {
		if _, err := ParseTiling(s); err == nil || !strings.Contains(err.Error(), "boxes (the default), flat, auto or padded") {
			t.Errorf("ParseTiling(%q): %v", s, err)
		}
	}
	if TilingBoxes != 0 || (Settings{}).Tiling != TilingBoxes {
		t.Errorf("the zero Tiling is not boxes")
	}
	if s := SettingsOf(WithTiling(TilingAuto)); s.Tiling != TilingAuto {
		t.Errorf("SettingsOf: %v", s.Tiling)
	}
	if s := SettingsOf(); s.Tiling != TilingBoxes {
		t.Errorf("SettingsOf default: %v", s.Tiling)
	}
	p := Params{DType: Float32, Dims: []uint64{4}, Mode: Abs, Bound: 1}
	for _, bad := range []Tiling{-1, 4, 99} {
		_, _, err := Compress(context.Background(), make([]byte, 16), p, WithTiling(bad))
		if err == nil || !strings.Contains(err.Error(), "tiling") {
			t.Errorf("Compress with tiling %d: %v", bad, err)
		}
		if _, err := PlanGeometryFor(Float32, []uint64{4}, 1, bad); err == nil {
			t.Errorf("PlanGeometryFor with tiling %d: no error", bad)
		}
		if bad.String() == "" {
			t.Errorf("empty name")
		}
	}
	// Box bytes do not depend on whether TilingBoxes is given.
	v := make([]float32, 9*17*33)
	flatField(rand.New(rand.NewPCG(5, 6)), v, 4)
	pp := Params{DType: Float32, Dims: []uint64{9, 17, 33}, Mode: Rel, Bound: 1e-3, Fill: ptr(-1e34)}
	a, _ := compressT(t, v, pp)
	b, _ := compressT(t, v, pp, WithTiling(TilingBoxes))
	if !bytes.Equal(a, b) {
		t.Errorf("WithTiling(TilingBoxes) changed the bytes")
	}
}

// sampleFlat is a flat container with every tile section: escapes, fill,
// raw values, a last partial tile, several chunks.
func sampleFlat(t testing.TB, ver int) ([]float32, []byte) {
	v := make([]float32, 12*33*49)
	flatField(rand.New(rand.NewPCG(81, 82)), v, 4)
	blob, _, err := Compress(context.Background(), asBytes(v), Params{DType: Float32, Dims: []uint64{12, 33, 49}, Mode: Abs, Bound: 1e-3, Fill: ptr(-1e34)},
		WithTiling(TilingFlat), WithTilesPerChunk(2), WithFormatVersion(ver))
	if err != nil {
		t.Fatal(err)
	}
	return v, blob
}

// TestFlatCorruption: flipped bytes and truncations of flat containers
// are ErrFormat errors; hostile tile bytes behind fixed checksums give
// errors or values, never a panic.
func TestFlatCorruption(t *testing.T) {
	ctx := context.Background()
	for _, ver := range []int{1, 2} {
		_, blob := sampleFlat(t, ver)
		flipsDetected(t, blob, uint64(90+ver), 800)
		for _, n := range []int{0, 3, 60, 100, 200, len(blob) / 2, len(blob) - 4, len(blob) - 1} {
			if _, _, err := Decompress(ctx, blob[:n]); err == nil || !errors.Is(err, ErrFormat) {
				t.Fatalf("v%d: truncation to %d bytes: %v", ver, n, err)
			}
		}
		decodeMutations(blob, uint64(95+ver))
		setSIMD(t, false)
		decodeMutations(blob, uint64(97+ver))
		useSIMD = haveAVX2
		// Every tile truncated at every 4-byte boundary is an error.
		h, _ := ReadHeader(blob)
		l, _ := h.layout()
		s := new(tileScratch)
		out := make([]float32, h.Elements())
		var sections uint32
		for _, tb := range containerTiles(t, h, blob) {
			sections |= binary.LittleEndian.Uint32(tb)
		}
		if all := uint32(tileHasEscapes | tileHasFill | tileHasRaw); sections&all != all {
			t.Fatalf("v%d: the sample's tiles lack sections: word0s OR to %#x", ver, sections)
		}
		for ti, tb := range containerTiles(t, h, blob) {
			for cut := 0; cut < len(tb); cut += 4 {
				var err error
				if ver == 2 {
					err = decodeTileV2(s, tb[:cut], out, 0, l, uint64(ti), h.Step, -1e34)
				} else {
					err = decodeTile(s, tb[:cut], out, 0, l, uint64(ti), h.Step, -1e34)
				}
				if err == nil {
					t.Fatalf("v%d tile %d cut to %d of %d bytes: no error", ver, ti, cut, len(tb))
				}
			}
		}
	}
}

// TestFlatMaskPastN: a fill or raw mask marking slots at or past the last
// partial tile's n is rejected, as is a mask within n that disagrees with
// the raw count.
func TestFlatMaskPastN(t *testing.T) {
	const n = 5000 // tile 1 holds 904 values
	l, err := newFlatLayout([]uint64{n}, DefaultTilesPerChunk)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	mask := func(slot int) []byte {
		b := le.AppendUint32(nil, 1<<(slot/128))
		blk := make([]byte, 16)
		blk[(slot%128)/8] = 1 << (slot % 8)
		return append(b, blk...)
	}
	for _, ver := range []int{1, 2} {
		for _, c := range []struct {
			slot int
			want string
		}{{904, "fill mask marks 1 slots outside"}, {4095, "fill mask marks 1 slots outside"}, {903, ""}} {
			b := le.AppendUint32(nil, tileHasFill)
			b = le.AppendUint32(b, 7) // origin; no codes (v1: plane mask 0; v2: bit 0 clear)
			b = append(b, mask(c.slot)...)
			out := make([]float32, n)
			s := new(tileScratch)
			if ver == 2 {
				err = decodeTileV2(s, b, out, 0, l, 1, 1, -5)
			} else {
				err = decodeTile(s, b, out, 0, l, 1, 1, -5)
			}
			if c.want == "" {
				if err != nil {
					t.Fatalf("v%d slot %d: %v", ver, c.slot, err)
				}
				// One bit at 903 (the last element, x has no neighbour
				// after it) is a fill at 903 only.
				for i := 4096; i < n; i++ {
					want := float32(7)
					if i == n-1 {
						want = -5
					}
					if out[i] != want {
						t.Fatalf("v%d: value %d = %v, want %v", ver, i, out[i], want)
					}
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("v%d slot %d: %v, want %q", ver, c.slot, err, c.want)
			}
		}
		// A raw mask past n.
		b := le.AppendUint32(nil, tileHasRaw)
		b = le.AppendUint32(b, 0)
		b = append(b, mask(1000)...)
		b = le.AppendUint32(b, 1)
		b = le.AppendUint32(b, 0x3F800000)
		s := new(tileScratch)
		out := make([]float32, n)
		if ver == 2 {
			err = decodeTileV2(s, b, out, 0, l, 1, 1, 0)
		} else {
			err = decodeTile(s, b, out, 0, l, 1, 1, 0)
		}
		if err == nil || !strings.Contains(err.Error(), "raw-value mask marks 1 slots outside") {
			t.Fatalf("v%d raw mask past n: %v", ver, err)
		}
	}
}

// TestFlatNoValues: flat tiling of a field without values writes no
// chunks and decodes.
func TestFlatNoValues(t *testing.T) {
	for _, dims := range [][]uint64{{0}, {3, 0, 5}} {
		blob, _, err := Compress(context.Background(), nil, Params{DType: Float64, Dims: dims, Mode: Rel, Bound: 1e-3}, WithTiling(TilingFlat))
		if err != nil {
			t.Fatal(err)
		}
		h, out, err := Decompress(context.Background(), blob)
		if err != nil || len(out) != 0 || !h.Flat || len(h.Chunks) != 0 {
			t.Fatalf("%v: %v %d %v", dims, h, len(out), err)
		}
	}
}

// FuzzDecodeFlatTile feeds arbitrary bytes to both versions' tile
// decoders on flat layouts (full and partial runs, runs starting mid-row):
// errors are fine, panics and hangs are not.
func FuzzDecodeFlatTile(f *testing.F) {
	for ver := 1; ver <= 2; ver++ {
		_, blob := sampleFlat(f, ver)
		h, err := ReadHeader(blob)
		if err != nil {
			f.Fatal(err)
		}
		l, _ := h.layout()
		for ti, tb := range containerTilesOf(h, l, blob) {
			f.Add(tb, uint8(4*(ver-1)), ti == int(l.tiles)-1)
		}
	}
	shapes := [][]uint64{{12, 33, 49}, {5000}, {6, 70, 90}, {9, 7, 3}}
	layouts := make([]*layout, len(shapes))
	for i, d := range shapes {
		var err error
		if layouts[i], err = newFlatLayout(d, DefaultTilesPerChunk); err != nil {
			f.Fatal(err)
		}
	}
	s := new(tileScratch)
	f.Fuzz(func(t *testing.T, b []byte, which uint8, last bool) {
		l := layouts[int(which)%len(layouts)]
		tt := uint64(0)
		if last {
			tt = l.tiles - 1
		}
		out := make([]float32, l.n)
		var err error
		if which&4 != 0 {
			err = decodeTileV2(s, b, out, 0, l, tt, 0.5, float32(math.NaN()))
		} else {
			err = decodeTile(s, b, out, 0, l, tt, 0.5, float32(math.NaN()))
		}
		if err == nil && len(b) < 8 {
			t.Fatalf("a %d-byte tile decoded", len(b))
		}
	})
}

// containerTilesOf splits a container into its tiles' bytes.
func containerTilesOf(h *Header, l *layout, blob []byte) [][]byte {
	var tiles [][]byte
	for c, ch := range h.Chunks {
		b := blob[ch.Offset : ch.Offset+ch.Size]
		first, end := l.chunkTiles(uint64(c))
		pos := 4 * int(end-first)
		for i := 0; i < int(end-first); i++ {
			sz := int(binary.LittleEndian.Uint32(b[4*i:]))
			tiles = append(tiles, b[pos:pos+sz])
			pos += sz
		}
	}
	return tiles
}
