package fz

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
)

// TestDecodeRegion: every region of random shapes decodes to exactly the
// bytes the full decode gives, fetching only the chunks RegionChunks names.
func TestDecodeRegion(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for it := 0; it < 60; it++ {
		dims := randomShape(r)
		n, _ := NumElements(dims)
		v := make([]float32, n)
		adversarial(r, v, r.IntN(8))
		p := Params{DType: Float32, Dims: dims, Mode: Rel, Bound: 1e-3, Fill: ptr(-1e34)}
		blob, _ := compressT(t, v, p, WithTilesPerChunk(1+r.IntN(20)))
		h, full, err := Decompress(context.Background(), blob)
		if err != nil {
			t.Fatal(err)
		}
		per := n / dims[0] * 4
		for k := 0; k < 5; k++ {
			lo := uint64(r.IntN(int(dims[0])))
			hi := lo + 1 + uint64(r.IntN(int(dims[0]-lo)))
			first, end, err := h.RegionChunks(Region{lo, hi})
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeRegion(context.Background(), h, Region{lo, hi}, func(c int) ([]byte, error) {
				if c < first || c >= end {
					t.Fatalf("fetched chunk %d outside %d:%d", c, first, end)
				}
				ch := h.Chunks[c]
				return blob[ch.Offset : ch.Offset+ch.Size], nil
			})
			if err != nil {
				t.Fatalf("dims %v region %d:%d: %v", dims, lo, hi, err)
			}
			if !bytes.Equal(got, full[lo*per:hi*per]) {
				t.Fatalf("dims %v region %d:%d differs from the full decode", dims, lo, hi)
			}
		}
		if _, err := DecodeRegion(context.Background(), h, Region{0, dims[0] + 1}, nil); err == nil {
			t.Fatal("region past the end accepted")
		}
	}
}
