package fz

import (
	"context"
	"math"
	"strconv"
	"testing"
)

// verify decodes blob and checks the strict bound against src value by
// value: NaN payloads, ±Inf and fill bits must match exactly.
func verify[T float](t testing.TB, src []T, blob []byte, eb float64, fill *float64) *Header {
	t.Helper()
	h, out, err := Decompress(context.Background(), blob)
	if err != nil {
		t.Fatalf("decompress: %v", err)
	}
	got := asFloats[T](out)
	if len(got) != len(src) {
		t.Fatalf("decoded %d values, want %d", len(got), len(src))
	}
	var fillBits uint64
	if fill != nil {
		fillBits = h.FillBits
	}
	bad := 0
	for i, x := range src {
		y := got[i]
		exact := x != x || math.IsInf(float64(x), 0) || (fill != nil && bitsOf(x) == fillBits)
		if exact {
			if bitsOf(x) != bitsOf(y) {
				if bad < 5 {
					t.Errorf("value %d: %v (bits %x) came back as %v (bits %x), want bit-exact", i, x, bitsOf(x), y, bitsOf(y))
				}
				bad++
			}
			continue
		}
		if e := math.Abs(float64(x) - float64(y)); !(e <= eb) {
			if bad < 5 {
				t.Errorf("value %d: %v came back as %v, error %g > bound %g", i, x, y, e, eb)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d values violate the bound", bad, len(src))
	}
	return h
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }
