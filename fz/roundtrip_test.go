package fz

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func compressT[T float](t testing.TB, v []T, p Params, opts ...Option) ([]byte, Stats) {
	t.Helper()
	blob, st, err := Compress(context.Background(), asBytes(v), p, opts...)
	if err != nil {
		t.Fatalf("compress %v %s: %v", p.DType, FormatDims(p.Dims), err)
	}
	return blob, st
}

// randomShape draws 1 to 5 dims with extents that exercise clipped edge
// tiles of every rank and dims of extent 1.
func randomShape(r *rand.Rand) []uint64 {
	nd := 1 + r.IntN(5)
	dims := make([]uint64, nd)
	for {
		n := uint64(1)
		for i := range dims {
			switch r.IntN(4) {
			case 0:
				dims[i] = 1
			case 1:
				dims[i] = uint64(1 + r.IntN(8))
			default:
				dims[i] = uint64(1 + r.IntN(80))
			}
			n *= dims[i]
		}
		if n <= 300000 {
			return dims
		}
	}
}

// adversarial fills v with one of several hostile patterns.
func adversarial[T float](r *rand.Rand, v []T, kind int) {
	big := 3e38
	if _, ok := any(v).([]float64); ok {
		big = 1.7e308
	}
	for i := range v {
		switch kind {
		case 0: // smooth
			v[i] = T(100*math.Sin(float64(i)/50) + 0.01*r.NormFloat64())
		case 1: // noise
			v[i] = T(r.Float64()*2 - 1)
		case 2: // alternating signs with huge magnitudes
			v[i] = T(big * float64(1-2*(i%2)) * r.Float64())
		case 3: // constant
			v[i] = 42.5
		case 4: // denormals and zeros
			v[i] = T(float64(r.IntN(5)) * 1e-310)
			if _, ok := any(v).([]float32); ok {
				v[i] = T(float32(r.IntN(5)) * 1e-40)
			}
		case 5: // specials sprinkled in a smooth field
			v[i] = T(1000 + math.Sin(float64(i)/7))
			switch r.IntN(20) {
			case 0:
				v[i] = fromBits[T](bitsOf(T(math.NaN())) | 0x5) // NaN with payload
			case 1:
				v[i] = T(math.Inf(1))
			case 2:
				v[i] = T(math.Inf(-1))
			case 3:
				v[i] = -1e34 // fill
			case 4:
				v[i] = T(big)
			}
		case 6: // steps that overflow 16-bit residuals
			v[i] = T(float64((i/3)%2) * 1e6 * r.Float64())
		case 7: // mostly fill, like a land mask
			if (i/37)%3 != 0 {
				v[i] = -1e34
			} else {
				v[i] = T(280 + 10*math.Cos(float64(i)/100))
			}
		}
	}
}

func checkRoundTrip[T float](t *testing.T, r *rand.Rand, dt DType, it int, ver int) {
	dims := randomShape(r)
	n, _ := NumElements(dims)
	v := make([]T, n)
	kind := r.IntN(8)
	adversarial(r, v, kind)
	p := Params{DType: dt, Dims: dims, Mode: Mode(1 + r.IntN(2))}
	p.Bound = []float64{1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 10}[r.IntN(6)]
	if p.Mode == Abs {
		p.Bound *= 100
	}
	if kind >= 5 || r.IntN(4) == 0 {
		p.Fill = ptr(-1e34)
	}
	blob, st, err := Compress(context.Background(), asBytes(v), p, WithTilesPerChunk(1+r.IntN(300)), WithFormatVersion(ver))
	if err != nil {
		// Only a rel bound whose exact value overflows may be refused.
		qz := &quantizer{}
		if p.Fill != nil {
			qz.hasFill, qz.fillBits = true, bitsOf(T(*p.Fill))
		}
		lo, hi, _ := valueRange(v, qz, 1)
		if ref, _ := refRelBound(p.Bound, lo, hi); p.Mode != Rel || !math.IsInf(ref, 0) || !strings.Contains(err.Error(), "exceeds the largest float64") {
			t.Fatalf("iteration %d: compress %v %s: %v", it, dt, FormatDims(dims), err)
		}
		return
	}
	if math.IsInf(st.AbsEB, 0) || math.IsNaN(st.AbsEB) {
		t.Fatalf("iteration %d: abs eb %v", it, st.AbsEB)
	}
	h := verify(t, v, blob, st.AbsEB, p.Fill)
	if st.MaxAbsErr > st.AbsEB {
		t.Fatalf("iteration %d: reported max error %g above bound %g", it, st.MaxAbsErr, st.AbsEB)
	}
	if h.DType != dt || FormatDims(h.Dims) != FormatDims(dims) || int(h.Version) != ver {
		t.Fatalf("header says %v %v version %d, want %v %v version %d", h.DType, h.Dims, h.Version, dt, dims, ver)
	}
	// Same bytes whatever the worker count.
	blob2, _ := compressT(t, v, p, WithTilesPerChunk(int(h.TilesPerChunk)), WithWorkers(1+r.IntN(7)), WithFormatVersion(ver))
	if !bytes.Equal(blob, blob2) {
		t.Fatalf("iteration %d (%s kind %d): output depends on the worker count", it, FormatDims(dims), kind)
	}
}

// TestRoundTripProperty: random shapes, dtypes, modes, bounds, chunk sizes
// and adversarial values all round-trip within the strict bound, with
// specials and fill bit-exact, and identical bytes for any worker count.
func TestRoundTripProperty(t *testing.T) { roundTripProperty(t, 1, 300, rand.NewPCG(7, 11)) }

// TestRoundTripPropertyV2 is TestRoundTripProperty writing version 2.
func TestRoundTripPropertyV2(t *testing.T) { roundTripProperty(t, 2, 200, rand.NewPCG(7, 12)) }

func roundTripProperty(t *testing.T, ver, iters int, src rand.Source) {
	r := rand.New(src)
	if testing.Short() {
		iters = 60
	}
	for it := 0; it < iters; it++ {
		if r.IntN(2) == 0 {
			checkRoundTrip[float32](t, r, Float32, it, ver)
		} else {
			checkRoundTrip[float64](t, r, Float64, it, ver)
		}
	}
}

func TestEdgeCases(t *testing.T) { edgeCases(t, 1) }

// TestEdgeCasesV2 is TestEdgeCases writing version 2.
func TestEdgeCasesV2(t *testing.T) { edgeCases(t, 2) }

func edgeCases(t *testing.T, ver int) {
	ctx := context.Background()
	compressT := func(t testing.TB, v any, p Params) ([]byte, Stats) {
		t.Helper()
		var raw []byte
		switch v := v.(type) {
		case []float32:
			raw = asBytes(v)
		case []float64:
			raw = asBytes(v)
		}
		blob, st, err := Compress(ctx, raw, p, WithFormatVersion(ver))
		if err != nil {
			t.Fatalf("compress %v %s: %v", p.DType, FormatDims(p.Dims), err)
		}
		if got := int(blob[4]); got != ver {
			t.Fatalf("version %d written, want %d", got, ver)
		}
		return blob, st
	}
	t.Run("constant field rel is exact", func(t *testing.T) {
		v := make([]float32, 10000)
		for i := range v {
			v[i] = 3.14159
		}
		blob, st := compressT(t, v, Params{DType: Float32, Dims: []uint64{100, 100}, Mode: Rel, Bound: 1e-3})
		verify(t, v, blob, 0, nil)
		if st.Ratio() < 100 {
			t.Errorf("constant field ratio %.1f, want > 100", st.Ratio())
		}
	})
	t.Run("all zero", func(t *testing.T) {
		v := make([]float64, 5000)
		blob, _ := compressT(t, v, Params{DType: Float64, Dims: []uint64{5000}, Mode: Rel, Bound: 1e-3})
		verify(t, v, blob, 0, nil)
	})
	t.Run("one element", func(t *testing.T) {
		v := []float32{-7.25}
		blob, _ := compressT(t, v, Params{DType: Float32, Dims: []uint64{1, 1, 1}, Mode: Abs, Bound: 0.1})
		verify(t, v, blob, 0.1, nil)
	})
	t.Run("empty dims", func(t *testing.T) {
		blob, st, err := Compress(ctx, nil, Params{DType: Float32, Dims: []uint64{0, 10}, Mode: Rel, Bound: 1e-3}, WithFormatVersion(ver))
		if err != nil {
			t.Fatal(err)
		}
		h, out, err := Decompress(ctx, blob)
		if err != nil || len(out) != 0 || h.Elements() != 0 || st.RawBytes != 0 {
			t.Fatalf("empty field: %v, %d bytes out", err, len(out))
		}
	})
	t.Run("eb larger than range", func(t *testing.T) {
		v := make([]float32, 3000)
		for i := range v {
			v[i] = float32(i % 17)
		}
		blob, st := compressT(t, v, Params{DType: Float32, Dims: []uint64{3000}, Mode: Rel, Bound: 50})
		verify(t, v, blob, st.AbsEB, nil)
	})
	t.Run("only specials", func(t *testing.T) {
		v := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -1e34}
		blob, _ := compressT(t, v, Params{DType: Float32, Dims: []uint64{4}, Mode: Rel, Bound: 1e-3, Fill: ptr(-1e34)})
		verify(t, v, blob, 0, ptr(-1e34))
	})
	t.Run("nan fill", func(t *testing.T) {
		v := make([]float64, 4096*3)
		for i := range v {
			v[i] = float64(i % 100)
			if i%5 == 0 {
				v[i] = math.Float64frombits(0x7FF8000000000000)
			}
		}
		nan := math.NaN()
		blob, st := compressT(t, v, Params{DType: Float64, Dims: []uint64{uint64(len(v))}, Mode: Rel, Bound: 1e-3, Fill: &nan})
		verify(t, v, blob, st.AbsEB, &nan)
		if st.Outliers != 0 {
			t.Errorf("NaN fill: %d values stored raw, want 0 (they are fill)", st.Outliers)
		}
	})
	t.Run("fill leaves the range", func(t *testing.T) {
		v := []float32{-1e34, 10, 20, -1e34, 15}
		_, st := compressT(t, v, Params{DType: Float32, Dims: []uint64{5}, Mode: Rel, Bound: 1e-2, Fill: ptr(-1e34)})
		if math.Abs(st.AbsEB-0.1) > 1e-12 {
			t.Errorf("abs eb %g, want 0.1 (range 10..20, fill excluded)", st.AbsEB)
		}
	})
	t.Run("nan and inf leave the range", func(t *testing.T) {
		v := []float64{math.NaN(), 1, 3, math.Inf(1), math.Inf(-1), 2}
		_, st := compressT(t, v, Params{DType: Float64, Dims: []uint64{6}, Mode: Rel, Bound: 1e-1})
		if math.Abs(st.AbsEB-0.2) > 1e-12 {
			t.Errorf("abs eb %g, want 0.2", st.AbsEB)
		}
	})
}

func TestBadParams(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		src  []byte
		p    Params
	}{
		{"size mismatch", make([]byte, 10), Params{DType: Float32, Dims: []uint64{3}, Mode: Abs, Bound: 1}},
		{"zero bound", make([]byte, 12), Params{DType: Float32, Dims: []uint64{3}, Mode: Abs, Bound: 0}},
		{"nan bound", make([]byte, 12), Params{DType: Float32, Dims: []uint64{3}, Mode: Rel, Bound: math.NaN()}},
		{"bad dtype", make([]byte, 12), Params{DType: 9, Dims: []uint64{3}, Mode: Abs, Bound: 1}},
		{"bad mode", make([]byte, 12), Params{DType: Float32, Dims: []uint64{3}, Mode: 0, Bound: 1}},
		{"no dims", make([]byte, 12), Params{DType: Float32, Mode: Abs, Bound: 1}},
		{"overflowing dims", make([]byte, 12), Params{DType: Float32, Dims: []uint64{1 << 40, 1 << 40}, Mode: Abs, Bound: 1}},
	}
	for _, c := range cases {
		if _, _, err := Compress(ctx, c.src, c.p); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestLargeIndexArithmetic covers the 64-bit paths of the geometry for
// fields beyond 2^31 (and 2^32) elements without allocating them.
func TestLargeIndexArithmetic(t *testing.T) {
	dims := []uint64{3, 1 << 20, 1 << 12} // 3·2^32 elements
	l, err := newLayout(dims, defaultShapeOf(3), DefaultTilesPerChunk)
	if err != nil {
		t.Fatal(err)
	}
	if l.n != 3<<32 {
		t.Fatalf("n = %d", l.n)
	}
	last := l.tiles - 1
	z0, y0, x0, lz, ly, lx := l.tileBox(last)
	end := ((z0+uint64(lz)-1)*l.ny+y0+uint64(ly)-1)*l.nx + x0 + uint64(lx) - 1
	if end != l.n-1 {
		t.Fatalf("last tile ends at element %d, want %d", end, l.n-1)
	}
	var sum uint64
	for c := uint64(0); c < l.chunks; c += l.chunks / 7 {
		sum += l.chunkElems(c)
	}
	if sum == 0 || l.chunkElems(l.chunks-1) == 0 {
		t.Fatal("chunk element counts are zero")
	}
	h := &Header{Version: DefaultVersion, DType: Float32, Mode: Abs, Dims: dims, Bound: 1, AbsEB: 1, Step: 2,
		Tile: [3]int{8, 16, 32}, Block: [3]int{4, 4, 8}, TilesPerChunk: DefaultTilesPerChunk,
		RangeMin: math.NaN(), RangeMax: math.NaN(), Chunks: make([]Chunk, l.chunks)}
	if h.RawSize() != 3<<34 {
		t.Fatalf("raw size %d", h.RawSize())
	}
	// A header claiming this field but without its chunks must be refused
	// before anything of that size is allocated.
	b := h.appendHeader(nil)
	if _, err := ReadHeader(b[:100]); err == nil {
		t.Fatal("truncated index accepted")
	}
	if _, _, err := Decompress(context.Background(), b); !errors.Is(err, ErrFormat) {
		t.Fatalf("want a format error, got %v", err)
	}
}
