package fz

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// refPlanePlaceholders is docs/FORMAT.md §4's placeholder rule written out
// plainly for a tile of nz planes of plane elements each (element order),
// q and hole per element: the placeholder of each plane. Plane z's is
// trunc(Σq / count) over its elements that are not holes; a plane with
// none takes the nearest earlier plane's that has one, planes before the
// first such plane take that plane's, and all are 0 when no element has a q.
func refPlanePlaceholders(q []int32, hole []bool, nz, plane int) []int32 {
	p := make([]int32, nz)
	has := make([]bool, nz)
	first := -1
	for z := 0; z < nz; z++ {
		var sum, cnt int64
		for e := z * plane; e < (z+1)*plane; e++ {
			if !hole[e] {
				sum += int64(q[e])
				cnt++
			}
		}
		if cnt > 0 {
			p[z], has[z] = int32(sum/cnt), true
			if first < 0 {
				first = z
			}
		}
	}
	if first < 0 {
		return p
	}
	for z := 0; z < nz; z++ {
		switch {
		case has[z]:
		case z < first:
			p[z] = p[first]
		default:
			p[z] = p[z-1] // already the nearest earlier plane's with a q
		}
	}
	return p
}

// holeList is the sorted hole list of hole, with stale values (what an
// earlier tile left) written into q at the holes.
func holeList(r *rand.Rand, q []int32, hole []bool) []int32 {
	var holes []int32
	for e, h := range hole {
		if h {
			holes = append(holes, int32(e))
			q[e] = r.Int32N(1<<28) - 1<<27
		}
	}
	return holes
}

// TestFillHolesPerPlane checks fillHoles on hand-made box tiles of three
// planes of 2×3: each plane's holes take trunc of that plane's mean q
// (toward zero for a negative odd sum), leading all-hole planes the first
// plane with a q's, an all-hole middle plane the previous plane's, and all
// holes 0 when no element has a q. The holes' stale values do not count.
func TestFillHolesPerPlane(t *testing.T) {
	const H = math.MinInt32 // a hole in the cases' q
	for _, c := range []struct {
		name string
		q    []int32 // 3 planes of 2×3
		want [3]int32
	}{
		{"planes with different means, negative odd sum",
			[]int32{10, H, 11, 12, 13, H, // 46 / 4 = 11
				-5, H, H, -2, H, H, // −7 / 2 = −3.5 → −3 (not −4)
				H, 100, 101, 102, 103, H}, // 406 / 4 = 101
			[3]int32{11, -3, 101}},
		{"negative mean truncates toward zero",
			[]int32{-1, -2, H, -2, -2, -2, // −9 / 5 = −1.8 → −1
				-7, -7, -7, -7, -7, H, // −7
				H, H, H, H, H, 1}, // 1
			[3]int32{-1, -7, 1}},
		{"leading all-hole plane takes the first plane with a q",
			[]int32{H, H, H, H, H, H,
				4, 5, H, 6, 8, 9, // 32 / 5 = 6
				-20, H, -21, -22, -23, -24}, // −110 / 5 = −22
			[3]int32{6, 6, -22}},
		{"two leading all-hole planes",
			[]int32{H, H, H, H, H, H,
				H, H, H, H, H, H,
				3, H, 3, 4, 4, 4}, // 18 / 5 = 3
			[3]int32{3, 3, 3}},
		{"all-hole middle plane takes the previous plane's",
			[]int32{1, 2, 3, H, 5, 6, // 17 / 5 = 3
				H, H, H, H, H, H,
				-9, -9, -9, -9, -9, H},
			[3]int32{3, 3, -9}},
		{"all-hole last plane, the previous plane without holes",
			[]int32{1, 2, 3, H, 5, 6,
				7, 8, 9, 10, 11, 13, // 58 / 6 = 9 (its p is only needed for the next plane)
				H, H, H, H, H, H},
			[3]int32{3, 9, 9}},
		{"all holes",
			[]int32{H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H},
			[3]int32{0, 0, 0}},
	} {
		r := rand.New(rand.NewPCG(1, 2))
		q := append([]int32(nil), c.q...)
		hole := make([]bool, len(q))
		for e, v := range q {
			hole[e] = v == H
		}
		holes := holeList(r, q, hole)
		if ref := refPlanePlaceholders(q, hole, 3, 6); [3]int32(ref) != c.want {
			t.Fatalf("%s: the reference gives %v, the case says %v", c.name, ref, c.want)
		}
		fillHoles(q, holes, 3, 2, 3, 1, 1)
		for e := range q {
			want := c.q[e]
			if hole[e] {
				want = c.want[e/6]
			}
			if q[e] != want {
				t.Errorf("%s: q[%d] (plane %d) = %d, want %d", c.name, e, e/6, q[e], want)
			}
		}
	}
}

// randomHoles marks holes in a tile of nz planes of plane elements: none,
// a few, most, or whole planes (leading, middle, last) of holes.
func randomHoles(r *rand.Rand, nz, plane int) []bool {
	hole := make([]bool, nz*plane)
	density := []float64{0, 0.02, 0.5, 0.97, 1}[r.IntN(5)]
	for e := range hole {
		hole[e] = r.Float64() < density
	}
	for z := 0; z < nz; z++ {
		switch r.IntN(5) {
		case 0: // a plane of holes
			for e := z * plane; e < (z+1)*plane; e++ {
				hole[e] = true
			}
		case 1: // a plane without
			for e := z * plane; e < (z+1)*plane; e++ {
				hole[e] = false
			}
		}
	}
	return hole
}

// TestFillHolesRandom compares fillHoles on box tiles (weights 1) of many
// shapes with the plain reference, q near ±2^28 included.
func TestFillHolesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 3000; it++ {
		lz, ly, lx := 1+r.IntN(8), 1+r.IntN(16), 1+r.IntN(32)
		if it%5 == 0 {
			lz, ly, lx = 8, 16, 32
		}
		n, plane := lz*ly*lx, ly*lx
		q := make([]int32, n)
		scale := []int32{3, 1000, 1<<28 - 1}[r.IntN(3)]
		for e := range q {
			q[e] = r.Int32N(2*scale+1) - scale
		}
		hole := randomHoles(r, lz, plane)
		holes := holeList(r, q, hole)
		ref := refPlanePlaceholders(q, hole, lz, plane)
		want := append([]int32(nil), q...)
		for e := range want {
			if hole[e] {
				want[e] = ref[e/plane]
			}
		}
		fillHoles(q, holes, lz, ly, lx, 1, 1)
		for e := range q {
			if q[e] != want[e] {
				t.Fatalf("it %d %d×%d×%d: q[%d] (plane %d, hole %v) = %d, want %d", it, lz, ly, lx, e, e/plane, hole[e], q[e], want[e])
			}
		}
	}
}

// TestFillHolesPaddedWeights checks a padded tile's placeholders (§3.2)
// against the full tile built literally: the clipped box's q and holes
// repeated out to 8×16×32 (each cell outside takes its nearest box cell's),
// the rule applied per full plane. fillHoles with the box's weights must
// give every box hole its full plane's placeholder, and the full planes
// past the box (copies of its last) have the last box plane's.
func TestFillHolesPaddedWeights(t *testing.T) {
	const tz, ty, tx = 8, 16, 32
	r := rand.New(rand.NewPCG(5, 6))
	for it := 0; it < 3000; it++ {
		lz, ly, lx := 1+r.IntN(tz), 1+r.IntN(ty), 1+r.IntN(tx)
		n, plane := lz*ly*lx, ly*lx
		q := make([]int32, n)
		scale := []int32{3, 1000, 1<<28 - 1}[r.IntN(3)]
		for e := range q {
			q[e] = r.Int32N(2*scale+1) - scale
		}
		if it%3 == 0 { // the far row and column apart from the rest: their weight shows
			for z := 0; z < lz; z++ {
				for y := 0; y < ly; y++ {
					q[(z*ly+y)*lx+lx-1] += 500
				}
				for x := 0; x < lx; x++ {
					q[(z*ly+ly-1)*lx+x] -= 300
				}
			}
		}
		hole := randomHoles(r, lz, plane)
		holes := holeList(r, q, hole)

		fq := make([]int32, tz*ty*tx)
		fh := make([]bool, len(fq))
		for z := 0; z < tz; z++ {
			for y := 0; y < ty; y++ {
				for x := 0; x < tx; x++ {
					b := (min(z, lz-1)*ly+min(y, ly-1))*lx + min(x, lx-1)
					fq[(z*ty+y)*tx+x], fh[(z*ty+y)*tx+x] = q[b], hole[b]
				}
			}
		}
		ref := refPlanePlaceholders(fq, fh, tz, ty*tx)
		for z := lz; z < tz; z++ {
			if ref[z] != ref[lz-1] {
				t.Fatalf("it %d: full plane %d's placeholder %d, the box's last plane's %d", it, z, ref[z], ref[lz-1])
			}
		}
		want := append([]int32(nil), q...)
		for e := range want {
			if hole[e] {
				want[e] = ref[e/plane]
			}
		}
		fillHoles(q, holes, lz, ly, lx, int64(ty-ly+1), int64(tx-lx+1))
		for e := range q {
			if q[e] != want[e] {
				t.Fatalf("it %d box %d×%d×%d: q[%d] (plane %d, hole %v) = %d, want %d", it, lz, ly, lx, e, e/plane, hole[e], q[e], want[e])
			}
		}
	}
}

// TestTileCodesPlaceholders runs tileCodes itself (quantize, holes, and for
// a padded tile the expansion) on every tile of fields of integers (abs
// 0.5: step 1, q = value) with fill values and NaN, and compares the
// tile's q with the reference built from the values: a box tile's planes;
// a clipped padded tile's full planes, from its box repeated out to the
// full tile; a tile of one plane (rank 2, a box with lz = 1: the fields'
// z-extents 9 and 17 leave a last z-tile of one plane) and a flat tile the
// mean q of the whole tile, as before per-plane placeholders.
func TestTileCodesPlaceholders(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	qz := &quantizer{eb: 0.5, step: 1, inv: 1, hasFill: true, fillBits: bitsOf(float32(-1e34))}
	fill := float32(-1e34)
	onePlane := 0
	for it := 0; it < 300; it++ {
		var dims []uint64
		switch it % 3 {
		case 0: // rank 3
			dims = []uint64{uint64(2 + r.IntN(18)), uint64(2 + r.IntN(40)), uint64(2 + r.IntN(70))}
		case 1: // rank 3 with a last z-tile of one plane
			dims = []uint64{[]uint64{9, 17}[r.IntN(2)], uint64(2 + r.IntN(20)), uint64(2 + r.IntN(40))}
		case 2: // rank 2
			dims = []uint64{uint64(2 + r.IntN(100)), uint64(2 + r.IntN(100))}
		}
		_, _, _, rank := foldDims(dims)
		l, err := newLayout(dims, defaultShape(rank), 1)
		if err != nil {
			t.Fatal(err)
		}
		nz, ny, nx := int(l.nz), int(l.ny), int(l.nx)
		v := make([]float32, nz*ny*nx)
		hole := randomHoles(r, nz, ny*nx)
		for i := range v {
			v[i] = float32(r.IntN(2001) - 1000 + 300*(i/(ny*nx)))
			if hole[i] {
				v[i] = fill
				if r.IntN(4) == 0 {
					v[i] = float32(math.NaN())
				}
			}
		}
		s := new(tileScratch)
		for i := range s.q {
			s.q[i] = 1<<27 - int32(i) // stale
		}
		for _, padded := range []bool{false, true} {
			l.padded = padded
			for ti := uint64(0); ti < l.tiles; ti++ {
				z0, y0, x0, lz, ly, lx := l.tileBox(ti)
				var st tileStats
				c := tileCodes(s, &st, v, l, ti, qz)
				// The tile as coded: the box, or the full padded tile.
				cz, cy, cx := lz, ly, lx
				if padded && lz*ly*lx < TileElems {
					cz, cy, cx = l.tz, l.ty, l.tx
				}
				if c.lz != cz || c.ly != cy || c.lx != cx {
					t.Fatalf("%v padded %v tile %d: %d×%d×%d, want %d×%d×%d", dims, padded, ti, c.lz, c.ly, c.lx, cz, cy, cx)
				}
				fq := make([]int32, cz*cy*cx)
				fh := make([]bool, len(fq))
				for z := 0; z < cz; z++ {
					for y := 0; y < cy; y++ {
						for x := 0; x < cx; x++ {
							i := ((int(z0)+min(z, lz-1))*ny+int(y0)+min(y, ly-1))*nx + int(x0) + min(x, lx-1)
							e := (z*cy+y)*cx + x
							fh[e] = hole[i]
							if !hole[i] {
								fq[e] = int32(v[i])
							}
						}
					}
				}
				ref := refPlanePlaceholders(fq, fh, cz, cy*cx)
				if cz == 1 {
					onePlane++
				}
				for e := range fq {
					want := fq[e]
					if fh[e] {
						want = ref[e/(cy*cx)]
					}
					if s.q[e] != want {
						t.Fatalf("%v padded %v tile %d: q[%d] (plane %d, hole %v) = %d, want %d", dims, padded, ti, e, e/(cy*cx), fh[e], s.q[e], want)
					}
				}
			}
		}
		// Flat tiles: a run is one plane, its mean q (naiveFlatQ).
		fl, err := newLayoutOf(dims, flatShape, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		for ti := uint64(0); ti < fl.tiles; ti++ {
			var st tileStats
			c := tileCodes(s, &st, v, fl, ti, qz)
			first := ti * TileElems
			tn := int(min(TileElems, uint64(len(v))-first))
			if !c.flat || c.lx != tn {
				t.Fatalf("%v tile %d: flat %v of %d values, want %d", dims, ti, c.flat, c.lx, tn)
			}
			want := naiveFlatQ(v, first, tn, 1, &fill)
			for e := range want {
				if s.q[e] != want[e] {
					t.Fatalf("%v flat tile %d: q[%d] = %d, want %d", dims, ti, e, s.q[e], want[e])
				}
			}
		}
	}
	if onePlane == 0 {
		t.Fatal("no tile of one plane")
	}
}

// TestPlaceholderInContainer reads placeholders back from written
// containers: a tile whose element 0 is a hole stores its placeholder as
// the origin (§5). One clipped 5×7×9 tile (abs 0.5: step 1, q = value):
// plane 0 holds −5 but for a 2 at its far corner, the other planes 40 and
// more; element 0 is a fill value and element 10 NaN. Box tiles take plane
// 0's mean, trunc(−298 / 61) = −4 (truncated toward zero; the tile's mean
// would be above 30); a padded tile plane 0's over its 16×32 cells, where
// the box's last row counts 10 times, its last column 24 times and so the
// 2 240 times, trunc(−870 / 510) = −1. With plane 0 all fill and NaN both
// take plane 1's (41). A flat tile is one plane: the run's mean. A field of
// fill and NaN alone has 0 everywhere.
func TestPlaceholderInContainer(t *testing.T) {
	const nz, ny, nx = 5, 7, 9
	const plane = ny * nx
	base := make([]float32, nz*plane)
	for i := range base {
		base[i] = float32(40 + i/plane)
		if i < plane {
			base[i] = -5
		}
	}
	base[plane-1] = 2
	base[0] = -1e34
	base[10] = float32(math.NaN())
	leading := append([]float32(nil), base...)
	for i := 0; i < plane; i++ {
		leading[i] = -1e34
	}
	leading[3] = float32(math.NaN())
	allHoles := make([]float32, len(base))
	for i := range allHoles {
		allHoles[i] = -1e34
	}
	allHoles[3] = float32(math.NaN())
	allHoles[len(allHoles)-1] = float32(math.Inf(1))
	mean := func(v []float32) int32 {
		var sum, cnt int64
		for _, x := range v {
			if x == x && x > -1e30 {
				sum, cnt = sum+int64(x), cnt+1
			}
		}
		if cnt == 0 {
			return 0
		}
		return int32(sum / cnt)
	}
	p := Params{DType: Float32, Dims: []uint64{nz, ny, nx}, Mode: Abs, Bound: 0.5, Fill: ptr(-1e34)}
	for _, c := range []struct {
		name              string
		v                 []float32
		box, padded, flat int32
	}{
		{"plane 0's mean", base, -4, -1, mean(base)},
		{"leading all-hole plane", leading, 41, 41, mean(leading)},
		{"all holes", allHoles, 0, 0, 0},
	} {
		for _, tiling := range []Tiling{TilingBoxes, TilingPadded, TilingFlat} {
			want := map[Tiling]int32{TilingBoxes: c.box, TilingPadded: c.padded, TilingFlat: c.flat}[tiling]
			for _, ver := range []int{1, 2} {
				blob, st := compressT(t, c.v, p, WithTiling(tiling), WithFormatVersion(ver))
				if st.AbsEB != 0.5 {
					t.Fatalf("abs bound %g, want 0.5", st.AbsEB)
				}
				h, err := ReadHeader(blob)
				if err != nil {
					t.Fatal(err)
				}
				if h.Step != 1 {
					t.Fatalf("step %g, want 1", h.Step)
				}
				tiles := containerTiles(t, h, blob)
				if len(tiles) != 1 {
					t.Fatalf("%v: %d tiles, want 1", tiling, len(tiles))
				}
				if got := int32(binary.LittleEndian.Uint32(tiles[0][4:])); got != want {
					t.Errorf("%s %v v%d: origin (element 0's placeholder) %d, want %d", c.name, tiling, ver, got, want)
				}
				verify(t, c.v, blob, 0.5, p.Fill)
			}
		}
	}
}
