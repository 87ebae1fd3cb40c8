package fz

import (
	"context"
	"math/rand/v2"
	"testing"
)

// TestCheckContainerAgreesWithDecompress: CheckContainer finds a problem
// exactly when Decompress fails, on hostile payloads behind fixed
// checksums, flipped bytes and truncations, and names the chunk.
func TestCheckContainerAgreesWithDecompress(t *testing.T) {
	ctx := context.Background()
	_, blob := sampleContainer(t)
	r := rand.New(rand.NewPCG(10, 11))
	found := 0 // containers past the header with a problem
	check := func(name string, b []byte) {
		t.Helper()
		h, err := ReadHeader(b)
		if err != nil {
			return // both refuse at the header
		}
		bad, err := CheckContainer(ctx, h, b, 1+r.IntN(4))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, _, derr := Decompress(ctx, b)
		if (derr == nil) != (len(bad) == 0) {
			t.Fatalf("%s: Decompress says %v, CheckContainer %v", name, derr, bad)
		}
		if len(bad) > 0 {
			found++
		}
		for _, e := range bad {
			if e.Chunk < -1 || e.Chunk >= len(h.Chunks) || e.Err == nil {
				t.Fatalf("%s: bad report %+v", name, e)
			}
		}
	}
	check("intact", blob)
	for i := 0; i < 1500; i++ {
		b := append([]byte(nil), blob...)
		for k := 0; k < 1+r.IntN(3); k++ {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		if i%2 == 0 {
			fixCRCs(b)
		}
		check("mutated", b)
	}
	for _, n := range []int{len(blob) - 1, len(blob) - 100} {
		check("truncated", blob[:n])
	}
	if found < 500 {
		t.Fatalf("only %d of the damaged containers got past the header: the test lost its teeth", found)
	}
	h, _ := ReadHeader(blob)
	if bad, _ := CheckContainer(ctx, h, blob, 2); len(bad) != 0 {
		t.Fatalf("intact container: %v", bad)
	}
}
