package fz

import (
	"encoding/binary"
	"unsafe"
)

// The masks' parity transform (docs/FORMAT.md §5.1): Lorenzo in XOR. A fill
// or raw mask, laid out like the tile's values (bit e of the little-endian
// bitmap is element e), is coded as d = Δz Δy Δx m, each Δ the XOR of a bit
// with its neighbour before it along that axis (none at the box's start);
// decoding undoes it by prefix XORs along x, y and z.

// xorLorenzo applies (inverse=false) or undoes (inverse=true) the parity
// Lorenzo transform of a bitmap laid out like the tile's values. Rows of 32
// or 64 bits (the x extent of full rank-3 and rank-2 tiles, and of padded
// tiles) are transformed a word at a time; other rows bit by bit.
func xorLorenzo(m *[planeBytes]byte, lz, ly, lx int, inverse bool) {
	switch lx {
	case 32:
		xorLorenzoRows[uint32](m, lz, ly, inverse)
	case 64:
		xorLorenzoRows[uint64](m, lz, ly, inverse)
	default:
		xorLorenzoBits(m, lz, ly, lx, inverse)
	}
}

// xorLorenzoRows is xorLorenzo for rows as long as a W: row r is the
// little-endian W at byte r·size(W), element x its bit x.
func xorLorenzoRows[W uint32 | uint64](m *[planeBytes]byte, lz, ly int, inverse bool) {
	size := int(unsafe.Sizeof(W(0)))
	var w [planeBytes / 4]W
	n := lz * ly
	for r := range n {
		if size == 4 {
			w[r] = W(binary.LittleEndian.Uint32(m[4*r:]))
		} else {
			w[r] = W(binary.LittleEndian.Uint64(m[8*r:]))
		}
	}
	if !inverse {
		// z, then y, from the last row down so that each reads its
		// neighbour's bits before they change; x within the word.
		for r := n - 1; r >= ly; r-- {
			w[r] ^= w[r-ly]
		}
		for r := n - 1; r > 0; r-- {
			if r%ly != 0 {
				w[r] ^= w[r-1]
			}
		}
		for r := range n {
			w[r] ^= w[r] << 1
		}
	} else {
		// x by a prefix XOR within the word, then y and z from the first
		// row up.
		for r := range n {
			v := w[r]
			for sh := 1; sh < 8*size; sh <<= 1 {
				v ^= v << sh
			}
			w[r] = v
		}
		for r := 1; r < n; r++ {
			if r%ly != 0 {
				w[r] ^= w[r-1]
			}
		}
		for r := ly; r < n; r++ {
			w[r] ^= w[r-ly]
		}
	}
	for r := range n {
		if size == 4 {
			binary.LittleEndian.PutUint32(m[4*r:], uint32(w[r]))
		} else {
			binary.LittleEndian.PutUint64(m[8*r:], uint64(w[r]))
		}
	}
}

// xorLorenzoBits is xorLorenzo one bit at a time, for any row length.
func xorLorenzoBits(m *[planeBytes]byte, lz, ly, lx int, inverse bool) {
	get := func(i int) byte { return (m[i>>3] >> (i & 7)) & 1 }
	flip := func(i int) { m[i>>3] ^= 1 << (i & 7) }
	plane := ly * lx
	n := lz * plane
	if !inverse {
		for i := n - 1; i >= plane; i-- {
			if get(i-plane) != 0 {
				flip(i)
			}
		}
		for z := 0; z < lz; z++ {
			for i := (z+1)*plane - 1; i >= z*plane+lx; i-- {
				if get(i-lx) != 0 {
					flip(i)
				}
			}
		}
		for r := 0; r < lz*ly; r++ {
			for i := (r+1)*lx - 1; i > r*lx; i-- {
				if get(i-1) != 0 {
					flip(i)
				}
			}
		}
		return
	}
	for r := 0; r < lz*ly; r++ {
		for i := r*lx + 1; i < (r+1)*lx; i++ {
			if get(i-1) != 0 {
				flip(i)
			}
		}
	}
	for z := 0; z < lz; z++ {
		for i := z*plane + lx; i < (z+1)*plane; i++ {
			if get(i-lx) != 0 {
				flip(i)
			}
		}
	}
	for i := plane; i < n; i++ {
		if get(i-plane) != 0 {
			flip(i)
		}
	}
}
