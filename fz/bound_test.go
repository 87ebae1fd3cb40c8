package fz

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// refRelBound is rel·(hi − lo) with each operation rounded to the nearest
// 53-bit float and no exponent limit (math/big), then converted to f64:
// the rule of docs/FORMAT.md §8, computed independently of fz's code.
func refRelBound(rel, lo, hi float64) (float64, big.Accuracy) {
	d := new(big.Float).SetPrec(53).SetMode(big.ToNearestEven)
	d.Sub(big.NewFloat(hi), big.NewFloat(lo))
	d.Mul(d, big.NewFloat(rel))
	return d.Float64()
}

// TestRelBoundRangeOverflow: a rel field whose max − min exceeds the
// largest float64 must get the exact finite bound rel·(max−min) (issue
// #27.1: it got +Inf and 5e307 came back as 0), or a clear refusal.
func TestRelBoundRangeOverflow(t *testing.T) {
	ctx := context.Background()
	v := make([]float64, 5000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range v {
		v[i] = (r.Float64()*2 - 1) * 1.7e308
	}
	v[10], v[11], v[12] = 5e307, -1.79e308, 1.75e308
	for _, rel := range []float64{1e-3, 1e-6, 0.3, 0.5} {
		blob, st := compressT(t, v, Params{DType: Float64, Dims: []uint64{uint64(len(v))}, Mode: Rel, Bound: rel})
		want, _ := refRelBound(rel, -1.79e308, 1.75e308)
		if st.AbsEB != want || math.IsInf(st.AbsEB, 0) {
			t.Fatalf("rel %g: abs eb %v, want %v = rel·(max−min)", rel, st.AbsEB, want)
		}
		h := verify(t, v, blob, want, nil)
		if h.AbsEB != want || math.IsInf(h.Step, 0) || !(h.Step > 0) {
			t.Fatalf("rel %g: header abs_eb %v step %v", rel, h.AbsEB, h.Step)
		}
		_, out, _ := Decompress(ctx, blob)
		if got := asFloats[float64](out)[10]; rel == 1e-3 && math.Abs(got-5e307) > want {
			t.Fatalf("5e307 came back as %v under rel 1e-3", got)
		}
	}

	// A bound whose product overflows is refused with a clear message.
	for _, c := range []struct {
		rel    float64
		lo, hi float64
	}{{1.5, -1.7e308, 1.7e308}, {1e300, -1e10, 1e10}} {
		src := []float64{c.lo, c.hi, 0}
		_, _, err := Compress(ctx, asBytes(src), Params{DType: Float64, Dims: []uint64{3}, Mode: Rel, Bound: c.rel})
		if err == nil || !strings.Contains(err.Error(), "exceeds the largest float64") {
			t.Fatalf("rel %g over [%g, %g]: err %v, want a refusal", c.rel, c.lo, c.hi, err)
		}
	}
	// f32 with a huge range and a large rel bound: finite and honoured.
	f := []float32{-3.4e38, 3.4e38, 1e38, -2e37, 12345}
	for _, rel := range []float64{0.25, 0.6, 1e4} {
		blob, st := compressT(t, f, Params{DType: Float32, Dims: []uint64{5}, Mode: Rel, Bound: rel})
		want, _ := refRelBound(rel, float64(float32(-3.4e38)), float64(float32(3.4e38)))
		if st.AbsEB != want {
			t.Fatalf("f32 rel %g: abs eb %v, want %v", rel, st.AbsEB, want)
		}
		verify(t, f, blob, want, nil)
	}
}

// TestDeriveBoundMatchesReference checks DeriveBound against math/big on
// ranges near and past the overflow edge, bit for bit.
func TestDeriveBoundMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		hi := math.Ldexp(r.Float64()+0.5, 1000+r.IntN(24))
		lo := -math.Ldexp(r.Float64()+0.5, 960+r.IntN(64))
		if i%3 == 0 {
			lo, hi = r.Float64()*100, 100+r.Float64()*1e6
		}
		rel := math.Ldexp(r.Float64()+0.5, -r.IntN(60))
		want, acc := refRelBound(rel, lo, hi)
		eb, step, err := DeriveBound(Params{Mode: Rel, Bound: rel}, lo, hi, true)
		if math.IsInf(want, 0) || (want == math.MaxFloat64 && acc == big.Below) {
			if err == nil {
				t.Fatalf("rel %v over [%v, %v]: got %v, want a refusal (exact bound %v)", rel, lo, hi, eb, want)
			}
			continue
		}
		if err != nil || eb != want {
			t.Fatalf("rel %v over [%v, %v]: got %v (%v), want %v", rel, lo, hi, eb, err, want)
		}
		wantStep := 2 * want
		if math.IsInf(wantStep, 0) {
			wantStep = math.MaxFloat64
		}
		if step != wantStep {
			t.Fatalf("rel %v over [%v, %v]: step %v, want %v", rel, lo, hi, step, wantStep)
		}
	}
}

// TestHugeFiniteBounds: under any finite bound, however large, every value
// comes back within it (codes never overflow; values whose reconstruction
// leaves the dtype's range are stored raw).
func TestHugeFiniteBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	v64 := make([]float64, 3000)
	v32 := make([]float32, 3000)
	for i := range v64 {
		v64[i] = math.Ldexp(r.Float64()*2-1, r.IntN(2048)-1074)
		v32[i] = float32(math.Ldexp(r.Float64()*2-1, r.IntN(256)-149))
	}
	v64[0], v64[1], v32[0], v32[1] = math.MaxFloat64, -math.MaxFloat64, math.MaxFloat32, -math.MaxFloat32
	for _, eb := range []float64{1e30, 1e38, 3e38, 1e300, 8.9e307, 1e308, math.MaxFloat64} {
		blob, st := compressT(t, v64, Params{DType: Float64, Dims: []uint64{3000}, Mode: Abs, Bound: eb})
		verify(t, v64, blob, eb, nil)
		if st.MaxAbsErr > eb {
			t.Fatalf("f64 abs %g: reported max error %g", eb, st.MaxAbsErr)
		}
		blob, _ = compressT(t, v32, Params{DType: Float32, Dims: []uint64{3000}, Mode: Abs, Bound: eb})
		verify(t, v32, blob, eb, nil)
	}
}

// setHeaderF64 overwrites the f64 at off in blob's header and fixes its CRC.
func setHeaderF64(blob []byte, off int, v float64) []byte {
	b := append([]byte(nil), blob...)
	binary.LittleEndian.PutUint64(b[off:], math.Float64bits(v))
	hs := fixedSize(int(b[10]))
	binary.LittleEndian.PutUint32(b[hs-4:], crc32c(b[:hs-4]))
	return b
}

// TestHeaderRejectsInvalidBound: untrusted headers with a non-finite or
// inconsistent bound, step or range are refused with a clear error.
func TestHeaderRejectsInvalidBound(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	rel, _ := compressT(t, v, Params{DType: Float64, Dims: []uint64{8}, Mode: Rel, Bound: 1e-2})
	abs, _ := compressT(t, v, Params{DType: Float64, Dims: []uint64{8}, Mode: Abs, Bound: 1e-2})
	inf, nan := math.Inf(1), math.NaN()
	cases := []struct {
		name string
		blob []byte
		off  int
		v    float64
		msg  string
	}{
		{"abs_eb +Inf", rel, 40, inf, "abs_eb"},
		{"abs_eb NaN", rel, 40, nan, "abs_eb"},
		{"abs_eb inconsistent (rel)", rel, 40, 1e-9, "abs_eb"},
		{"abs_eb inconsistent (abs)", abs, 40, 0.5, "abs_eb"},
		{"bound +Inf", abs, 32, inf, "bound"},
		{"bound 0", rel, 32, 0, "bound"},
		{"bound NaN", rel, 32, nan, "bound"},
		{"step +Inf", rel, 48, inf, "step"},
		{"range_max NaN, min set", rel, 72, nan, "range"},
		{"range_min NaN, max set", rel, 64, nan, "range"},
		{"range_max +Inf", rel, 72, inf, "range"},
		{"range reversed", rel, 64, 100, "range"},
		{"range in abs mode", abs, 64, 1, "range"},
	}
	for _, c := range cases {
		b := setHeaderF64(c.blob, c.off, c.v)
		_, err := ReadHeader(b)
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err %v, want a format error naming %q", c.name, err, c.msg)
		}
		if _, _, err := Decompress(context.Background(), b); err == nil {
			t.Errorf("%s: Decompress accepted it", c.name)
		}
	}
}
