package synth

import (
	"math"
	"testing"
)

func TestEvolving(t *testing.T) {
	dims := []uint64{8, 16, 32}
	a := make([]float32, 8*16*32)
	b := make([]float32, len(a))
	Fill32(a, dims, 1, 10)
	Fill32(b, dims, 1, 11)
	var diff, jump float64
	for i := range a {
		if math.IsNaN(float64(a[i])) || math.Abs(float64(a[i])) > 10 {
			t.Fatalf("value %d = %v", i, a[i])
		}
		diff = max(diff, math.Abs(float64(a[i]-b[i])))
		if i%32 != 0 {
			jump = max(jump, math.Abs(float64(a[i]-a[i-1])))
		}
	}
	if diff == 0 || diff > 0.5 {
		t.Fatalf("step-to-step change %v: want small but nonzero", diff)
	}
	if jump > 0.5 {
		t.Fatalf("neighbour jump %v: field not smooth", jump)
	}
	c := make([]float64, len(a))
	Fill64(c, dims, 1, 10)
	for i := range c {
		if math.Abs(c[i]-float64(a[i])) > 1e-6 {
			t.Fatalf("f64 and f32 fields differ at %d", i)
		}
	}
}
