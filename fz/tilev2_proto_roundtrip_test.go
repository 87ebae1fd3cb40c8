package fz

import (
	"math"
	"math/rand/v2"
	"testing"
)

// checkV2MatchesV1 encodes src with both tile codings and requires the
// version-2 prototype to decode to exactly the values version 1 decodes to
// (both store the same codes losslessly), and version 1 to meet the bound.
func checkV2MatchesV1[T float](t *testing.T, src []T, p Params) *v2Field[T] {
	t.Helper()
	f, err := encodeBoth(src, p)
	if err != nil {
		t.Fatalf("%v %v: %v", p.DType, p.Dims, err)
	}
	want, err := f.decode(false)
	if err != nil {
		t.Fatalf("v1 decode: %v", err)
	}
	got, err := f.decode(true)
	if err != nil {
		t.Fatalf("v2 decode: %v", err)
	}
	for i := range want {
		if bitsOf(got[i]) != bitsOf(want[i]) {
			t.Fatalf("%v %v bound %g: value %d: v2 decodes %v, v1 %v", p.DType, p.Dims, p.Bound, i, got[i], want[i])
		}
		x := src[i]
		exact := x != x || math.IsInf(float64(x), 0) || (f.qz.hasFill && bitsOf(x) == f.qz.fillBits)
		if exact && bitsOf(x) != bitsOf(got[i]) || !exact && !(math.Abs(float64(x)-float64(got[i])) <= f.qz.eb) {
			t.Fatalf("value %d: %v came back as %v (bound %g)", i, x, got[i], f.qz.eb)
		}
	}
	return f
}

func TestTileV2PrototypeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 2))
	for it := 0; it < 150; it++ {
		dims := randomShape(r)
		n, _ := NumElements(dims)
		kind := r.IntN(8)
		p := Params{Dims: dims, Mode: Mode(1 + r.IntN(2)), Bound: []float64{1e-1, 1e-2, 1e-3, 1e-4, 1e-6}[r.IntN(5)]}
		if kind >= 5 || r.IntN(4) == 0 {
			p.Fill = ptr(-1e34)
		}
		if r.IntN(2) == 0 {
			v := make([]float32, n)
			adversarial(r, v, kind)
			p.DType = Float32
			if _, err := encodeBoth(v, p); err != nil {
				continue // a rel bound that overflows: refused as Compress refuses it
			}
			checkV2MatchesV1(t, v, p)
		} else {
			v := make([]float64, n)
			adversarial(r, v, kind)
			p.DType = Float64
			if _, err := encodeBoth(v, p); err != nil {
				continue
			}
			checkV2MatchesV1(t, v, p)
		}
	}
}

// TestTileV2PrototypeEscapes covers residuals at and around the escape
// threshold, which moved from 32768 (v1) to 32767 (v2).
func TestTileV2PrototypeEscapes(t *testing.T) {
	v := make([]float32, 5000)
	for i := range v {
		switch i % 8 {
		case 1:
			v[i] = 32767
		case 3:
			v[i] = -32766
		case 5:
			v[i] = 32768
		}
	}
	// abs 0.5: step 1, q = value.
	f := checkV2MatchesV1(t, v, Params{DType: Float32, Dims: []uint64{5000}, Mode: Abs, Bound: 0.5})
	escapes := 0
	for _, b := range f.v2 {
		if len(b) >= 4 && b[2]&1 != 0 { // word0 bit 16
			escapes++
		}
	}
	if escapes == 0 {
		t.Fatal("no v2 tile has escapes; the test lost its point")
	}

	// |d| = 32767 exactly: a code in v1, an escape in v2.
	w := make([]float32, 300)
	for i := range w {
		w[i] = float32(32767 * (i % 2))
	}
	g := checkV2MatchesV1(t, w, Params{DType: Float32, Dims: []uint64{300}, Mode: Abs, Bound: 0.5})
	if g.v1[0][2]&1 != 0 || g.v2[0][2]&1 == 0 {
		t.Fatalf("escape flags v1 %v, v2 %v; want only v2's set", g.v1[0][2]&1 != 0, g.v2[0][2]&1 != 0)
	}
}

// TestTileV2PrototypeCorrupt: every truncation of a tile is an error and
// bit flips never panic.
func TestTileV2PrototypeCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	v := make([]float32, 64*70)
	adversarial(r, v, 5)
	p := Params{DType: Float32, Dims: []uint64{64, 70}, Mode: Rel, Bound: 1e-3, Fill: ptr(-1e34)}
	f := checkV2MatchesV1(t, v, p)
	out := make([]float32, f.l.n)
	s := new(tileScratch)
	for tt, b := range f.v2 {
		for cut := 0; cut < len(b); cut++ {
			if err := decodeTileV2(s, b[:cut], out, 0, f.l, uint64(tt), f.qz.step, f.fill); err == nil {
				t.Fatalf("tile %d cut to %d of %d bytes decoded without error", tt, cut, len(b))
			}
		}
		for k := 0; k < 2000; k++ {
			c := append([]byte(nil), b...)
			c[r.IntN(len(c))] ^= 1 << r.IntN(8)
			_ = decodeTileV2(s, c, out, 0, f.l, uint64(tt), f.qz.step, f.fill)
		}
	}
}
