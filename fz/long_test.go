package fz

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// longValue is the generated field of TestLongInput, recomputed for
// verification so the original need not stay in memory.
func longValue(i uint64) float32 {
	return float32(math.Sin(float64(i%1000003)/500) * 100)
}

// TestLongInput compresses and decompresses a real field of more than
// 2^31 elements (8.6 GB of float32). Opt-in: FZ_LONG=1 (needs ~11 GB of
// memory and a few minutes).
func TestLongInput(t *testing.T) {
	if os.Getenv("FZ_LONG") == "" {
		t.Skip("opt-in: set FZ_LONG=1 to run the > 8 GiB round trip")
	}
	dims := []uint64{2, 1 << 15, 1<<15 + 17} // 2^31 + 2^16·17·… elements
	n, _ := NumElements(dims)
	if n <= 1<<31 {
		t.Fatalf("n = %d is not beyond 2^31", n)
	}
	src := make([]float32, n)
	for i := range src {
		src[i] = longValue(uint64(i))
	}
	blob, st, err := Compress(context.Background(), asBytes(src), Params{DType: Float32, Dims: dims, Mode: Abs, Bound: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	src = nil
	runtime.GC()
	debug.FreeOSMemory()
	t.Logf("%d values (%d bytes) -> %d bytes, ratio %.2f", n, st.RawBytes, st.CompressedBytes, st.Ratio())
	_, out, err := Decompress(context.Background(), blob)
	if err != nil {
		t.Fatal(err)
	}
	got := asFloats[float32](out)
	for i := range got {
		if e := math.Abs(float64(got[i]) - float64(longValue(uint64(i)))); !(e <= 0.01) {
			t.Fatalf("value %d: error %g > 0.01", i, e)
		}
	}
}
