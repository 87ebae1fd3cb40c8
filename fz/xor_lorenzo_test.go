package fz

import (
	"math/rand/v2"
	"testing"
)

// TestXorLorenzoWords: the word-at-a-time transform of 32- and 64-bit rows
// is the bit-by-bit one, both ways, on random masks of every box those rows
// fit (sparse, dense and region-like), and undoing it gives the mask back.
func TestXorLorenzoWords(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := 0
	for _, lx := range []int{32, 64} {
		for lz := 1; lz <= 8; lz++ {
			for ly := 1; lz*ly*lx <= TileElems; ly++ {
				n := lz * ly * lx
				for k := range 4 {
					var m [planeBytes]byte
					switch k {
					case 0: // sparse
						for range 1 + n/64 {
							p := r.IntN(n)
							m[p>>3] |= 1 << (p & 7)
						}
					case 1: // dense
						for i := range n / 8 {
							m[i] = byte(r.Uint32())
						}
					case 2: // a region: every element with x + y + z past a threshold
						th := r.IntN(lx + ly + lz)
						for e := range n {
							z, y, x := e/(ly*lx), e/lx%ly, e%lx
							if x+y+z >= th {
								m[e>>3] |= 1 << (e & 7)
							}
						}
					case 3: // all set
						for i := range n / 8 {
							m[i] = 0xFF
						}
					}
					for _, inv := range []bool{false, true} {
						want, got := m, m
						xorLorenzoBits(&want, lz, ly, lx, inv)
						xorLorenzo(&got, lz, ly, lx, inv)
						if got != want {
							t.Fatalf("%dx%dx%d kind %d inverse %v: words give another bitmap than bits", lz, ly, lx, k, inv)
						}
					}
					back := m
					xorLorenzo(&back, lz, ly, lx, false)
					xorLorenzo(&back, lz, ly, lx, true)
					if back != m {
						t.Fatalf("%dx%dx%d kind %d: the inverse does not undo the transform", lz, ly, lx, k)
					}
					cases++
				}
			}
		}
	}
	t.Logf("%d masks transformed alike by words and bits", cases)
}
