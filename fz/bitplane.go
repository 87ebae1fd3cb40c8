package fz

import "encoding/binary"

// transpose8 transposes an 8×8 bit matrix held in a uint64 whose byte i is
// row i and bit j of that byte is column j (Hacker's Delight, 7-3). It is
// its own inverse: it turns 8 code bytes into 8 bit-plane bytes and back.
func transpose8(x uint64) uint64 {
	t := (x ^ (x >> 7)) & 0x00AA00AA00AA00AA
	x = x ^ t ^ (t << 7)
	t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCC
	x = x ^ t ^ (t << 14)
	t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0
	return x ^ t ^ (t << 28)
}

// shuffleBytes turns the byte array b (one byte per code, ngroups×8 codes)
// into 8 bit planes: planes[k][m] holds bit k of codes 8m..8m+7.
func shuffleBytes(b []byte, planes *[8][planeBytes]byte, ngroups int) {
	b = b[:ngroups*8]
	for m := 0; m < ngroups; m++ {
		y := transpose8(binary.LittleEndian.Uint64(b[8*m:]))
		planes[0][m] = byte(y)
		planes[1][m] = byte(y >> 8)
		planes[2][m] = byte(y >> 16)
		planes[3][m] = byte(y >> 24)
		planes[4][m] = byte(y >> 32)
		planes[5][m] = byte(y >> 40)
		planes[6][m] = byte(y >> 48)
		planes[7][m] = byte(y >> 56)
	}
}

// shuffleTopBit extracts only bit 7 of every byte of b into plane: the
// common case of the high code byte, where only the sign plane is in use.
func shuffleTopBit(b []byte, plane *[planeBytes]byte, ngroups int) {
	b = b[:ngroups*8]
	for m := 0; m < ngroups; m++ {
		x := (binary.LittleEndian.Uint64(b[8*m:]) >> 7) & 0x0101010101010101
		plane[m] = byte((x * 0x0102040810204080) >> 56)
	}
}

// unshuffleBytes is the inverse of shuffleBytes.
func unshuffleBytes(planes *[8][planeBytes]byte, b []byte, ngroups int) {
	b = b[:ngroups*8]
	for m := 0; m < ngroups; m++ {
		y := uint64(planes[0][m]) | uint64(planes[1][m])<<8 | uint64(planes[2][m])<<16 |
			uint64(planes[3][m])<<24 | uint64(planes[4][m])<<32 | uint64(planes[5][m])<<40 |
			uint64(planes[6][m])<<48 | uint64(planes[7][m])<<56
		binary.LittleEndian.PutUint64(b[8*m:], transpose8(y))
	}
}

// unshuffleTopBit is the inverse of shuffleTopBit: it writes 0x80 or 0 per byte.
func unshuffleTopBit(plane *[planeBytes]byte, b []byte, ngroups int) {
	b = b[:ngroups*8]
	for m := 0; m < ngroups; m++ {
		// Spread the 8 bits of one byte to the top bit of 8 bytes.
		// Replicate the byte into all 8, keep bit i in byte i, then turn
		// each non-zero byte into 0x80 (the add never carries across bytes).
		y := (uint64(plane[m]) * 0x0101010101010101) & 0x8040201008040201
		binary.LittleEndian.PutUint64(b[8*m:], ((y+0x7F7F7F7F7F7F7F7F)|y)&0x8080808080808080)
	}
}
