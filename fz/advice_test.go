package fz

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// temperatures is a smooth field in [250, 310] K with every 5th value set
// to fill (nil: none).
func temperatures(n int, fill *float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(280 + 30*math.Sin(float64(i)/40))
		if fill != nil && i%5 == 0 {
			v[i] = *fill
		}
	}
	return v
}

func f32p(x float32) *float32 { return &x }

func TestDetectFill(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	p32 := func(n int) Params { return Params{DType: Float32, Dims: []uint64{uint64(n)}, Mode: Rel, Bound: 1e-3} }
	precip := make([]float32, 10000)
	for i := range precip {
		if r.IntN(10) < 4 {
			precip[i] = float32(r.ExpFloat64() * 5)
		}
	}
	mask := make([]float32, 10000)
	cat := make([]float32, 10000)
	for i := range mask {
		mask[i] = float32(r.IntN(2))
		cat[i] = float32(r.IntN(3))
		if i%2 == 0 {
			cat[i] = 0
		}
	}
	astro := make([]float64, 10000)
	for i := range astro {
		astro[i] = math.Pow(10, 33+2*r.Float64())
	}
	spike := temperatures(10000, nil)
	spike[77] = 1e30
	withNaN := temperatures(10000, f32p(-999))
	withNaN[3] = float32(math.NaN())
	cases := []struct {
		name   string
		src    []byte
		p      Params
		want   float64 // 0: no suspect
		reason string
	}{
		{"-1e34 fill", asBytes(temperatures(10000, f32p(-1e34))), p32(10000), float64(float32(-1e34)), "magnitude"},
		{"netcdf default fill at max", asBytes(temperatures(10000, f32p(9.96921e36))), p32(10000), float64(float32(9.96921e36)), "magnitude"},
		{"-999 over 20%", asBytes(withNaN), p32(10000), -999, "20% of the values"},
		{"zero fill below kelvin", asBytes(temperatures(10000, f32p(0))), p32(10000), 0, "20% of the values"},
		{"single 1e30 spike", asBytes(spike), p32(10000), float64(float32(1e30)), "magnitude"},
		{"declared fill", asBytes(temperatures(10000, f32p(-1e34))), func() Params { p := p32(10000); p.Fill = ptr(-1e34); return p }(), 0, ""},
		{"smooth", asBytes(temperatures(10000, nil)), p32(10000), 0, ""},
		{"precipitation zeros", asBytes(precip), p32(10000), 0, ""},
		{"binary mask", asBytes(mask), p32(10000), 0, ""},
		{"categories", asBytes(cat), p32(10000), 0, ""},
		{"astrophysics 1e33..1e35", asBytes(astro), Params{DType: Float64, Dims: []uint64{10000}, Mode: Rel, Bound: 1e-3}, 0, ""},
		{"constant", asBytes(make([]float64, 100)), Params{DType: Float64, Dims: []uint64{100}, Mode: Rel, Bound: 1e-3}, 0, ""},
		{"empty", nil, Params{DType: Float64, Dims: []uint64{0}, Mode: Rel, Bound: 1e-3}, 0, ""},
	}
	for _, c := range cases {
		s, ok := DetectFill(c.src, c.p)
		if c.reason == "" {
			if ok {
				t.Errorf("%s: suspect %+v, want none", c.name, s)
			}
			continue
		}
		if !ok || s.Value != c.want || !strings.Contains(s.Reason, c.reason) {
			t.Errorf("%s: suspect %+v (found %v), want %g for %q", c.name, s, ok, c.want, c.reason)
		}
	}
	s, _ := DetectFill(asBytes(temperatures(10000, f32p(-1e34))), p32(10000))
	if s.Count != 2000 || s.Share != 0.2 || s.AtMax {
		t.Errorf("-1e34 fill: count %d share %g atMax %v, want 2000, 0.2, false", s.Count, s.Share, s.AtMax)
	}
}

// TestEdgesParallel checks the parallel edge scan against a serial one on
// fields with many ties, large enough for several workers.
func TestEdgesParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for it := 0; it < 20; it++ {
		v := make([]float64, 200_000+r.IntN(100_000))
		k := 3 + r.IntN(50)
		for i := range v {
			v[i] = float64(r.IntN(k))
		}
		// Extremes somewhere, sometimes only in the last part.
		v[len(v)-1-r.IntN(1000)] = -5
		if it%2 == 0 {
			v[r.IntN(len(v))] = 99
		}
		got := edgesOf(v, Params{DType: Float64})
		want := edges{lo: math.Inf(1), lo2: math.Inf(1), hi: math.Inf(-1), hi2: math.Inf(-1)}
		for _, x := range v {
			want.n++
			want.lo, want.hi = min(want.lo, x), max(want.hi, x)
		}
		for _, x := range v {
			if x == want.lo {
				want.cLo++
			} else {
				want.lo2 = min(want.lo2, x)
			}
			if x == want.hi {
				want.cHi++
			} else {
				want.hi2 = max(want.hi2, x)
			}
		}
		if got != want {
			t.Fatalf("iteration %d: edges %+v, want %+v", it, got, want)
		}
	}
}

// TestMeasureWithout: forgetting the fill turns the real values into
// garbage while Verify sees a perfect result; MeasureWithout shows it
// (issue #27.9).
func TestMeasureWithout(t *testing.T) {
	v := temperatures(20000, f32p(-1e34))
	p := Params{DType: Float32, Dims: []uint64{20000}, Mode: Rel, Bound: 1e-3}
	blob, _ := compressT(t, v, p)
	h, out, err := Decompress(context.Background(), blob)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Verify(h, asBytes(v), out)
	if err != nil || q.Violations != 0 || q.MaxAbsErr > h.AbsEB {
		t.Fatalf("verify: %+v %v (the bound over the whole range holds)", q, err)
	}
	s, ok := DetectFill(asBytes(v), p)
	if !ok {
		t.Fatal("the -1e34 fill was not detected")
	}
	m, err := MeasureWithout(h, asBytes(v), out, s.Value)
	if err != nil {
		t.Fatal(err)
	}
	if m.Values != 16000 || m.Lo < 249 || m.Hi > 311 {
		t.Fatalf("measured %+v, want 16000 values in [250, 310]", m)
	}
	if want, _, _ := DeriveBound(p, m.Lo, m.Hi, true); m.AbsEB != want {
		t.Fatalf("intended bound %g, want %g", m.AbsEB, want)
	}
	if m.MaxAbsErr/m.AbsEB < 100 {
		t.Fatalf("max err / intended eb = %g: the real values should be far off", m.MaxAbsErr/m.AbsEB)
	}
	// With the fill declared, the same measure is within the bound.
	p.Fill = ptr(-1e34)
	blob, _ = compressT(t, v, p)
	h, out, _ = Decompress(context.Background(), blob)
	m, _ = MeasureWithout(h, asBytes(v), out, s.Value)
	if !(m.MaxAbsErr <= m.AbsEB) || m.AbsEB != h.AbsEB {
		t.Fatalf("with --fill: %+v, header eb %g", m, h.AbsEB)
	}
}

func TestExpansionWarning(t *testing.T) {
	v := temperatures(20000, nil)
	p := Params{DType: Float32, Dims: []uint64{20000}, Mode: Abs, Bound: 1e-10}
	blob, st := compressT(t, v, p)
	if len(blob) <= 4*len(v) {
		t.Fatalf("abs 1e-10 on f32 temperatures: %d bytes, expected more than the input's %d", len(blob), 4*len(v))
	}
	w := ExpansionWarning(asBytes(v), p, st)
	if !strings.Contains(w, "larger than the input") || !strings.Contains(w, "below the data's precision") || !strings.Contains(w, "at least 3.05e-05") {
		t.Fatalf("warning %q", w)
	}
	p.Bound = 1e-2
	_, st = compressT(t, v, p)
	if w := ExpansionWarning(asBytes(v), p, st); w != "" {
		t.Fatalf("ordinary compression warned: %q", w)
	}
	// f64: the code range (2^28 steps) sets the floor, not the spacing.
	v64 := make([]float64, len(v))
	for i := range v64 {
		v64[i] = float64(v[i]) + 1e-9*float64(i%7)
	}
	p = Params{DType: Float64, Dims: []uint64{uint64(len(v64))}, Mode: Abs, Bound: 1e-9}
	_, st = compressT(t, v64, p)
	if w := ExpansionWarning(asBytes(v64), p, st); !strings.Contains(w, "below the data's precision") || !strings.Contains(w, "at least 1.15e-06") {
		t.Fatalf("f64: %q (%d -> %d bytes)", w, st.RawBytes, st.CompressedBytes)
	}
}
