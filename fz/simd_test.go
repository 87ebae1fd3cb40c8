package fz

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// setSIMD switches the vector kernels on or off for the rest of the test.
func setSIMD(t testing.TB, on bool) {
	t.Helper()
	old := useSIMD
	useSIMD = on && haveAVX2
	t.Cleanup(func() { useSIMD = old })
}

// needSIMD skips comparisons that would compare the reference with itself.
func needSIMD(t *testing.T) {
	t.Helper()
	if !haveAVX2 {
		t.Skip("no AVX2 on this machine: only the pure-Go path exists")
	}
}

// TestGoldenPureGo pins the pure-Go path to the golden files too, so both
// paths stay covered whatever machine runs the tests.
func TestGoldenPureGo(t *testing.T) {
	setSIMD(t, false)
	TestGolden(t)
}

// TestEdgeCasesPureGo runs the edge cases through the pure-Go path.
func TestEdgeCasesPureGo(t *testing.T) {
	setSIMD(t, false)
	TestEdgeCases(t)
	TestEdgeCasesV2(t)
}

// moreAdversarial adds patterns aimed at the kernels' slow paths: exact
// rounding ties, values around the q limit, values whose reconstruction
// sits right at the bound, NaN payloads and signed zeros.
func moreAdversarial[T float](r *rand.Rand, v []T, kind int) {
	for i := range v {
		switch kind {
		case 0: // ties: (k + 0.5)·step with step 1 (abs bound 0.5)
			v[i] = T(float64(r.IntN(2000)-1000) + 0.5)
		case 1: // around ±2^28·step (step 1)
			d := float64(r.IntN(200) - 100)
			v[i] = T(math.Copysign(1<<28, float64(r.IntN(2)*2-1)) + d*64)
		case 2: // zeros of both signs, NaNs with payloads, Inf, denormals
			switch r.IntN(6) {
			case 0:
				v[i] = T(math.Copysign(0, -1))
			case 1:
				v[i] = fromBits[T](bitsOf(T(math.NaN())) | uint64(r.IntN(1000)+1))
			case 2:
				v[i] = T(math.Inf(2*r.IntN(2) - 1))
			case 3:
				v[i] = fromBits[T](uint64(1 + r.IntN(1000))) // smallest denormals
			default:
				v[i] = T(r.NormFloat64())
			}
		case 3: // random bit patterns: every class of value at once
			v[i] = fromBits[T](r.Uint64())
		case 5: // a few ulps around the ties (k + 0.5)·0.3 (abs bound 0.15):
			// rounding of x·inv sends some to the wrong side, and the
			// re-check must catch them
			x := T((float64(r.IntN(4000)-2000) + 0.5) * 0.3)
			for j := r.IntN(7) - 3; j != 0; {
				dir := math.Inf(int(j))
				x = T(nextAfter(x, dir))
				if j > 0 {
					j--
				} else {
					j++
				}
			}
			v[i] = x
		case 6: // a quantizable fill value (−999) amid smooth data: only
			// the fill test can send these to the slow path
			v[i] = T(50 * math.Sin(float64(i)/40))
			if r.IntN(30) == 0 {
				v[i] = -999
			}
		case 4: // smooth with occasional huge jumps (escapes) and fill
			v[i] = T(50 * math.Sin(float64(i)/40))
			switch r.IntN(50) {
			case 0:
				v[i] = T(1e6 * r.Float64())
			case 1:
				v[i] = -1e34
			}
		}
	}
}

func compareCompress[T float](t *testing.T, v []T, p Params, what string) {
	t.Helper()
	for _, ver := range []int{1, 2} {
		compareCompressVersion(t, v, p, fmt.Sprintf("%s, version %d", what, ver), WithFormatVersion(ver))
	}
}

func compareCompressVersion[T float](t *testing.T, v []T, p Params, what string, ver Option) {
	t.Helper()
	ctx := context.Background()
	setSIMD(t, false)
	want, wst, werr := Compress(ctx, asBytes(v), p, WithWorkers(1), ver)
	useSIMD = haveAVX2
	got, gst, gerr := Compress(ctx, asBytes(v), p, WithWorkers(2), ver)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: errors differ: scalar %v, simd %v", what, werr, gerr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("%s: compressed bytes differ between the pure-Go and AVX2 paths (%d vs %d bytes)", what, len(want), len(got))
	}
	if wst != gst {
		t.Fatalf("%s: stats differ: scalar %+v, simd %+v", what, wst, gst)
	}
	// Both decoders give the same bytes.
	useSIMD = false
	_, wout, err := Decompress(ctx, want)
	if err != nil {
		t.Fatalf("%s: scalar decode: %v", what, err)
	}
	useSIMD = haveAVX2
	_, gout, err := Decompress(ctx, want)
	if err != nil {
		t.Fatalf("%s: simd decode: %v", what, err)
	}
	if !bytes.Equal(wout, gout) {
		t.Fatalf("%s: decoded bytes differ between the pure-Go and AVX2 paths", what)
	}
}

// TestSIMDMatchesScalar compresses and decompresses random and hostile
// fields of both dtypes, every rank and clipped edge tiles with both paths
// and requires identical bytes and stats.
func TestSIMDMatchesScalar(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(21, 22))
	shapes := [][]uint64{
		{8, 16, 32}, {16, 32, 64}, {9, 17, 33}, {13, 31, 20}, {3, 5, 8}, {7, 40, 12}, {2, 16, 96},
		{64, 64}, {70, 90}, {5, 8}, {64, 61}, {4096 * 2}, {5000}, {13}, {1, 300, 1, 24},
	}
	iters := 120
	if testing.Short() {
		iters = 40
	}
	for it := 0; it < iters; it++ {
		var dims []uint64
		if it < len(shapes) {
			dims = shapes[it]
		} else if r.IntN(2) == 0 {
			dims = shapes[r.IntN(len(shapes))]
		} else {
			dims = randomShape(r)
		}
		n, _ := NumElements(dims)
		p := Params{Dims: dims, Mode: Mode(1 + r.IntN(2))}
		p.Bound = []float64{1e-1, 1e-2, 1e-3, 1e-4, 1e-6}[r.IntN(5)]
		kind := r.IntN(15)
		if kind >= 8 && kind-8 <= 1 {
			p.Mode, p.Bound = Abs, 0.5 // ties and q-limit cases need step 1
		}
		if kind == 13 {
			p.Mode, p.Bound = Abs, 0.15
		}
		if r.IntN(3) == 0 || kind == 12 || kind == 5 || kind == 7 {
			p.Fill = ptr(-1e34)
		}
		if kind == 14 {
			p.Fill = ptr(-999)
		}
		what := FormatDims(dims) + " kind " + string(rune('a'+kind))
		if r.IntN(2) == 0 {
			p.DType = Float32
			v := make([]float32, n)
			fillKind(r, v, kind)
			compareCompress(t, v, p, "f32 "+what)
		} else {
			p.DType = Float64
			v := make([]float64, n)
			fillKind(r, v, kind)
			compareCompress(t, v, p, "f64 "+what)
		}
	}
}

func nextAfter[T float](x T, dir float64) T {
	if _, ok := any(x).(float32); ok {
		return T(math.Nextafter32(float32(x), float32(dir)))
	}
	return T(math.Nextafter(float64(x), dir))
}

func fillKind[T float](r *rand.Rand, v []T, kind int) {
	if kind < 8 {
		adversarial(r, v, kind)
	} else {
		moreAdversarial(r, v, kind-8)
	}
}

// TestSIMDDecodeHostile decodes mutated containers (checksums fixed) with
// both paths: the same error or the same bytes, and never a panic.
func TestSIMDDecodeHostile(t *testing.T) {
	needSIMD(t)
	_, blob := sampleContainer(t)
	simdDecodeHostile(t, blob, rand.New(rand.NewPCG(31, 32)))
}

// TestSIMDDecodeHostileV2 is TestSIMDDecodeHostile on a version-2
// container: the sign and unit kernels against their references.
func TestSIMDDecodeHostileV2(t *testing.T) {
	needSIMD(t)
	simdDecodeHostile(t, sampleContainerV2(t), rand.New(rand.NewPCG(31, 33)))
}

func simdDecodeHostile(t *testing.T, blob []byte, r *rand.Rand) {
	ctx := context.Background()
	for i := 0; i < 1500; i++ {
		b := append([]byte(nil), blob...)
		for k := 0; k < 1+r.IntN(4); k++ {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		fixCRCs(b)
		useSIMD = false
		_, wout, werr := Decompress(ctx, b, WithMaxRawSize(16<<20), WithWorkers(1))
		useSIMD = true
		_, gout, gerr := Decompress(ctx, b, WithMaxRawSize(16<<20), WithWorkers(1))
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("mutation %d: scalar error %v, simd error %v", i, werr, gerr)
		}
		if !bytes.Equal(wout, gout) {
			t.Fatalf("mutation %d: decoded bytes differ", i)
		}
	}
	useSIMD = haveAVX2
}

// testLayout builds a layout for a 3D box shape and returns a scratch.
func tileOf(t *testing.T, dims []uint64) (*layout, *tileScratch) {
	_, _, _, rank := foldDims(dims)
	l, err := newLayout(dims, defaultShape(rank), 1)
	if err != nil {
		t.Fatal(err)
	}
	return l, new(tileScratch)
}

// TestQuantizeKernel compares quantizeTile's two paths directly: q, the
// fill/raw/hole lists and maxErr, tile by tile (the placeholders are
// fillHoles's, from q and the hole list).
func TestQuantizeKernel(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(41, 42))
	for it := 0; it < 120; it++ {
		dims := [][]uint64{{16, 32, 64}, {9, 19, 45}, {100, 130}, {9000}}[it%4]
		n, _ := NumElements(dims)
		kind := r.IntN(15)
		qz := &quantizer{eb: 0.5, step: 1, inv: 1}
		if kind == 13 {
			qz.eb, qz.step, qz.inv = 0.15, 0.3, 1/0.3
		} else if kind != 8 && kind != 9 {
			qz.eb = []float64{1e-3, 0.01, 0.3}[r.IntN(3)]
			qz.step = 2 * qz.eb
			qz.inv = 1 / qz.step
		}
		if r.IntN(2) == 0 {
			qz.hasFill = true
		}
		l, _ := tileOf(t, dims)
		if it%2 == 0 {
			v := make([]float32, n)
			fillKind(r, v, kind)
			qz.fillBits = bitsOf(float32(-1e34))
			if kind == 14 {
				qz.fillBits = bitsOf(float32(-999))
			}
			compareQuantize(t, v, l, qz)
		} else {
			v := make([]float64, n)
			fillKind(r, v, kind)
			qz.fillBits = bitsOf(float64(-1e34))
			if kind == 14 {
				qz.fillBits = bitsOf(float64(-999))
			}
			compareQuantize(t, v, l, qz)
		}
	}
}

func compareQuantize[T float](t *testing.T, v []T, l *layout, qz *quantizer) {
	t.Helper()
	a, b := new(tileScratch), new(tileScratch)
	for tile := uint64(0); tile < l.tiles; tile++ {
		z0, y0, x0, lz, ly, lx := l.tileBox(tile)
		n := lz * ly * lx
		var sa, sb tileStats
		sa.maxErr, sb.maxErr = 1e-300, 1e-300
		for _, s := range []*tileScratch{a, b} {
			s.holes, s.fill, s.raw, s.rawVal = s.holes[:0], s.fill[:0], s.raw[:0], s.rawVal[:0]
			for i := range s.q {
				s.q[i] = -7 // holes keep whatever was there: make it equal
			}
		}
		useSIMD = false
		quantizeTile(a, &sa, v, l, z0, y0, x0, lz, ly, lx, qz)
		useSIMD = true
		quantizeTile(b, &sb, v, l, z0, y0, x0, lz, ly, lx, qz)
		useSIMD = haveAVX2
		switch {
		case sa != sb:
			t.Fatalf("tile %d: maxErr %g vs %g", tile, sa.maxErr, sb.maxErr)
		case !slices.Equal(a.q[:n], b.q[:n]):
			t.Fatalf("tile %d: q differs", tile)
		case !slices.Equal(a.fill, b.fill), !slices.Equal(a.raw, b.raw), !slices.Equal(a.rawVal, b.rawVal), !slices.Equal(a.holes, b.holes):
			t.Fatalf("tile %d: lists differ: fill %d/%d raw %d/%d holes %d/%d", tile, len(a.fill), len(b.fill), len(a.raw), len(b.raw), len(a.holes), len(b.holes))
		}
	}
}

// TestCodesKernel compares codesTile's two paths on random q, from small
// residuals to ones that need escapes, full and clipped tiles.
func TestCodesKernel(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(51, 52))
	for it := 0; it < 200; it++ {
		dims := [][]uint64{{8, 16, 32}, {5, 11, 24}, {7, 13, 29}, {64, 64}, {31, 40}, {4096}, {1000}}[it%7]
		l, _ := tileOf(t, dims)
		_, _, _, lz, ly, lx := l.tileBox(0)
		n := lz * ly * lx
		a, b := new(tileScratch), new(tileScratch)
		scale := []int32{1, 100, 20000, 1 << 27}[r.IntN(4)]
		for i := 0; i < n; i++ {
			q := int32(r.Int64N(2*int64(scale)+1)) - scale
			a.q[i], b.q[i] = q, q
		}
		smap := l.slotMap(a, lz, ly, lx)
		l.slotMap(b, lz, ly, lx)
		runs := l.mapRuns(a, lz, ly, lx)
		if !runs {
			t.Fatalf("%v: default shapes must pass runsOf8", dims)
		}
		useSIMD = false
		la, ha := codesTile(a, a.q[:n], lz, ly, lx, smap, runs)
		useSIMD = true
		lb, hb := codesTile(b, b.q[:n], lz, ly, lx, smap, runs)
		useSIMD = haveAVX2
		a.lo[0], a.hi[0], b.lo[0], b.hi[0] = 0, 0, 0, 0
		if la != lb || ha != hb || a.lo != b.lo || a.hi != b.hi || !slices.Equal(a.esc, b.esc) {
			t.Fatalf("%v scale %d: codes differ (or %x/%x vs %x/%x, %d vs %d escapes)", dims, scale, la, ha, lb, hb, len(a.esc), len(b.esc))
		}
	}
}

// TestShuffleKernels compares the vector bitshuffle and its inverse with
// the scalar ones on random bytes.
func TestShuffleKernels(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(61, 62))
	var b, back [TileElems]byte
	var p1, p2 [8][planeBytes]byte
	var t1, t2 [planeBytes]byte
	for it := 0; it < 50; it++ {
		for i := range b {
			b[i] = byte(r.Uint32())
			if it%2 == 1 {
				b[i] &= 0x80
			}
		}
		shuffleBytes(b[:], &p1, TileElems/8)
		shuffleAVX2(&b, &p2)
		if p1 != p2 {
			t.Fatal("shuffleAVX2 differs from shuffleBytes")
		}
		shuffleTopBit(b[:], &t1, TileElems/8)
		shuffleTopAVX2(&b, &t2)
		if t1 != t2 {
			t.Fatal("shuffleTopAVX2 differs from shuffleTopBit")
		}
		unshuffleAVX2(&p2, &back)
		if back != b {
			t.Fatal("unshuffleAVX2(shuffle(b)) != b")
		}
		if it%2 == 1 {
			back = [TileElems]byte{}
			unshuffleTopAVX2(&t2, &back)
			if back != b {
				t.Fatal("unshuffleTopAVX2(shuffleTop(b)) != b")
			}
		}
	}
}

// TestDecodeKernels compares residual gathering and the fused Lorenzo
// inverse + dequantization with the reference on random codes.
func TestDecodeKernels(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(71, 72))
	for it := 0; it < 100; it++ {
		dims := [][]uint64{{8, 16, 32}, {5, 11, 24}, {64, 64}, {31, 40}, {4096}, {7, 3, 16}}[it%6]
		l, s := tileOf(t, dims)
		_, _, _, lz, ly, lx := l.tileBox(0)
		n := lz * ly * lx
		for i := range s.lo {
			s.lo[i], s.hi[i] = byte(r.Uint32()), byte(r.Uint32())
			if s.hi[i] == 0x80 && s.lo[i] == 0 {
				s.lo[i] = 1 // no escapes here
			}
		}
		smap := l.slotMap(s, lz, ly, lx)
		want := make([]int32, n)
		useSIMD = false
		if err := gatherResiduals(s, want, smap, lz, ly, lx, true, nil, 0); err != nil {
			t.Fatal(err)
		}
		useSIMD = true
		got := make([]int32, n)
		if err := gatherResiduals(s, got, smap, lz, ly, lx, true, nil, 0); err != nil {
			t.Fatal(err)
		}
		useSIMD = haveAVX2
		if !slices.Equal(want, got) {
			t.Fatalf("%v: gathered residuals differ", dims)
		}
		if lx%8 != 0 {
			continue
		}
		// Large residuals make the int32 sums wrap, as hostile input may.
		for i := range got {
			if it%3 == 0 {
				got[i] = int32(r.Uint32())
			}
		}
		step := []float64{1e-3, 0.37, 1e30}[it%3]
		ref := slices.Clone(got)
		lorenzoInverse(ref, lz, ly, lx)
		copy(s.q[:], got)
		d32 := make([]float32, n)
		d64 := make([]float64, n)
		lorenzoDeqF32AVX2(&s.q, &s.brow, &s.zeroRow, lz, ly, lx, &d32[0], lx, ly*lx, step, 0)
		copy(s.q[:], got)
		lorenzoDeqF64AVX2(&s.q, &s.brow, &s.zeroRow, lz, ly, lx, &d64[0], lx, ly*lx, step, 0)
		for i, q := range ref {
			if bitsOf(d32[i]) != bitsOf(reconstruct[float32](q, step)) || bitsOf(d64[i]) != bitsOf(reconstruct[float64](q, step)) {
				t.Fatalf("%v: element %d: q %d decodes to %v/%v, want %v/%v", dims, i, q, d32[i], d64[i], reconstruct[float32](q, step), reconstruct[float64](q, step))
			}
		}
	}
}

// TestRangeKernel compares valueRange's two paths on adversarial arrays of
// awkward lengths.
func TestRangeKernel(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(81, 82))
	for it := 0; it < 300; it++ {
		n := []int{0, 1, 3, 7, 8, 9, 31, 1000, 4099}[it%9]
		kind := r.IntN(15)
		qz := &quantizer{}
		if r.IntN(2) == 0 {
			qz.hasFill = true
		}
		for _, wide := range []bool{false, true} {
			var a, b [3]float64
			var ha, hb bool
			if wide {
				v := make([]float64, n)
				fillKind(r, v, kind)
				qz.fillBits = bitsOf(float64(-1e34))
				useSIMD = false
				a[0], a[1], ha = valueRange(v, qz, 1+r.IntN(3))
				useSIMD = true
				b[0], b[1], hb = valueRange(v, qz, 1+r.IntN(3))
			} else {
				v := make([]float32, n)
				fillKind(r, v, kind)
				qz.fillBits = bitsOf(float32(-1e34))
				useSIMD = false
				a[0], a[1], ha = valueRange(v, qz, 1+r.IntN(3))
				useSIMD = true
				b[0], b[1], hb = valueRange(v, qz, 1+r.IntN(3))
			}
			useSIMD = haveAVX2
			if ha != hb || math.Float64bits(a[0]) != math.Float64bits(b[0]) || math.Float64bits(a[1]) != math.Float64bits(b[1]) {
				t.Fatalf("n %d kind %d wide %v: range %v..%v (%v) vs %v..%v (%v)", n, kind, wide, a[0], a[1], ha, b[0], b[1], hb)
			}
		}
	}
}

// TestNearTiesFailChecks makes sure the near-tie pattern really produces
// failed re-checks (raw values) in both dtypes, so the tests above cover
// the kernels' check lanes.
func TestNearTiesFailChecks(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	v32 := make([]float32, 5000)
	v64 := make([]float64, 5000)
	moreAdversarial(r, v32, 5)
	moreAdversarial(r, v64, 5)
	p := Params{DType: Float32, Dims: []uint64{5000}, Mode: Abs, Bound: 0.15}
	_, st32 := compressT(t, v32, p)
	p.DType = Float64
	_, st64 := compressT(t, v64, p)
	if st32.Outliers == 0 || st64.Outliers == 0 {
		t.Fatalf("near ties gave %d (f32) and %d (f64) failed checks, want some of each", st32.Outliers, st64.Outliers)
	}
}

// TestNextTileDelta: the prefetch hint points at the next tile's origin.
func TestNextTileDelta(t *testing.T) {
	for _, dims := range [][]uint64{{20, 33, 70}, {64, 64}, {130, 70}, {9000}, {8, 16, 32}} {
		l, _ := tileOf(t, dims)
		for tile := uint64(0); tile+1 < l.tiles; tile++ {
			z0, y0, x0, _, _, _ := l.tileBox(tile)
			z1, y1, x1, _, _, _ := l.tileBox(tile + 1)
			want := int((z1*l.ny+y1)*l.nx+x1) - int((z0*l.ny+y0)*l.nx+x0)
			if got := l.nextTileDelta(z0, y0, x0); got != want {
				t.Fatalf("%v tile %d: delta %d, want %d", dims, tile, got, want)
			}
		}
	}
}
