package fz

import (
	"math/rand/v2"
	"testing"
)

func TestTranspose8(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 1000; it++ {
		x := r.Uint64()
		y := transpose8(x)
		for i := 0; i < 8; i++ {
			for j := 0; j < 8; j++ {
				if (x>>(8*i+j))&1 != (y>>(8*j+i))&1 {
					t.Fatalf("transpose8(%#x) = %#x: bit (%d,%d) wrong", x, y, i, j)
				}
			}
		}
		if transpose8(y) != x {
			t.Fatalf("transpose8 is not an involution at %#x", x)
		}
	}
}

func TestShuffleRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var b, back [TileElems]byte
	var planes [8][planeBytes]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	shuffleBytes(b[:], &planes, TileElems/8)
	for i := range b {
		for k := 0; k < 8; k++ {
			if (b[i]>>k)&1 != (planes[k][i/8]>>(i%8))&1 {
				t.Fatalf("plane %d bit of code %d wrong", k, i)
			}
		}
	}
	unshuffleBytes(&planes, back[:], TileElems/8)
	if back != b {
		t.Fatal("unshuffle(shuffle(b)) != b")
	}
	// Top-bit only path.
	for i := range b {
		b[i] &= 0x80
	}
	var top [planeBytes]byte
	shuffleTopBit(b[:], &top, TileElems/8)
	shuffleBytes(b[:], &planes, TileElems/8)
	if top != planes[7] {
		t.Fatal("shuffleTopBit disagrees with shuffleBytes plane 7")
	}
	unshuffleTopBit(&top, back[:], TileElems/8)
	if back != b {
		t.Fatal("unshuffleTopBit(shuffleTopBit(b)) != b")
	}
}
