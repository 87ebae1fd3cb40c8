package fz

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// decodeTileV2 decodes one version-2 tile (exactly its bytes) into dst, as
// decodeTile does for version 1. Every field of src is untrusted; the
// rejects are docs/FORMAT.md §7's, so every tile has exactly one encoding.
func decodeTileV2[T float](s *tileScratch, src []byte, dst []T, base uint64, l *layout, t uint64, step float64, fill T) error {
	_, _, _, lz, ly, lx := l.tileBox(t)
	n := lz * ly * lx
	r := reader{b: src}
	word0, err := r.u32("tile header")
	if err != nil {
		return err
	}
	if word0&^v2KnownFlags != 0 {
		return fmt.Errorf("tile header has unknown flags %#x (version 2 knows %#x)", word0&^v2KnownFlags, v2KnownFlags)
	}
	origin, err := r.u32("tile origin")
	if err != nil {
		return err
	}
	if word0&v2Codes == 0 {
		clear(s.lo[:])
		clear(s.hi[:])
		return decodeTileTail(s, &r, word0, int32(origin), dst, base, l, t, step, fill)
	}

	// Block mask and rates.
	blocks, err := r.u32("group-rate block mask")
	if err != nil {
		return err
	}
	used := (n + 127) / 128
	if blocks == 0 {
		return fmt.Errorf("group-rate block mask is 0 but word0 says codes are present")
	}
	if used < 32 && blocks>>used != 0 {
		return fmt.Errorf("group-rate block mask %#08x names blocks past the tile's %d", blocks, used)
	}
	nrate := bits.OnesCount32(blocks)
	rb, err := r.take(4*nrate, "group rates")
	if err != nil {
		return err
	}
	var rw [v2Blocks]uint32
	w, maxRate := 0, 0
	for bm, i := blocks, 0; bm != 0; bm, i = bm&(bm-1), i+1 {
		k := bits.TrailingZeros32(bm)
		v := binary.LittleEndian.Uint32(rb[4*i:])
		if v == 0 {
			return fmt.Errorf("group rates of block %d are all 0 but the block mask lists it", k)
		}
		if end := v2Group * v2PerBlock * (k + 1); end > n {
			// Groups at or past n must have rate 0.
			first := (n - v2Group*v2PerBlock*k + v2Group - 1) / v2Group // first group of the block at or past n
			if v>>(4*first) != 0 {
				g := v2PerBlock*k + first + bits.TrailingZeros32(v>>(4*first))/4
				return fmt.Errorf("group %d (slots %d…%d) lies past the tile's %d values but has rate %d",
					g, v2Group*g, v2Group*g+v2Group-1, n, v>>(4*(g-v2PerBlock*k))&15)
			}
		}
		rw[k] = v
		// Sum of the 8 nibbles, and their maximum.
		x := v&0x0F0F0F0F + v>>4&0x0F0F0F0F
		w += int(x * 0x01010101 >> 24)
		for j := 0; j < v2PerBlock; j++ {
			maxRate = max(maxRate, int(v>>(4*j)&15))
		}
	}

	// Magnitude units, group after group.
	unitBytes := (2*w + 3) &^ 3
	units, err := r.take(unitBytes, "magnitude units")
	if err != nil {
		return err
	}
	if w%2 != 0 && (units[2*w] != 0 || units[2*w+1] != 0) {
		return fmt.Errorf("magnitude units: padding u16 is %#04x, expected 0", binary.LittleEndian.Uint16(units[2*w:]))
	}
	pf := planeFlat(s)
	// Every plane the unshuffle reads starts at zero; the units overwrite
	// their groups' bytes.
	if maxRate > 8 {
		clear(pf[:])
	} else {
		clear(pf[:8*planeBytes])
		clear(pf[signPlane*planeBytes:])
	}
	var nz [v2Groups]uint16 // non-zero magnitudes per group (slot bits)
	var escGroups [v2Groups]uint16
	nesc := 0 // groups with escapes (magnitude 32767)
	u := 0
	for bm := blocks; bm != 0; bm &= bm - 1 {
		k := bits.TrailingZeros32(bm)
		v := rw[k]
		for j := 0; j < v2PerBlock; j++ {
			rt := int(v >> (4 * j) & 15)
			if rt == 0 {
				continue
			}
			g := v2PerBlock*k + j
			var or uint16
			and := uint16(0xFFFF)
			var unit uint16
			for p := 0; p < rt; p++ {
				unit = uint16(units[u]) | uint16(units[u+1])<<8
				u += 2
				pf[p*planeBytes+2*g], pf[p*planeBytes+2*g+1] = byte(unit), byte(unit>>8)
				or |= unit
				and &= unit
			}
			if unit == 0 {
				return fmt.Errorf("group %d has rate %d but its unit %d (top magnitude bits) is 0", g, rt, rt-1)
			}
			if v2Group*g+v2Group > n && or>>(n-v2Group*g) != 0 {
				return fmt.Errorf("group %d has magnitude bits in slots %#04x at or past the tile's %d values", g, or>>(n-v2Group*g)<<(n-v2Group*g), n)
			}
			if g == 0 && or&1 != 0 {
				return fmt.Errorf("slot 0 (the origin) has a non-zero magnitude")
			}
			nz[g] = or
			if rt == 15 && and != 0 {
				escGroups[g] = and
				nesc++
			}
		}
	}

	// Signs of the non-zero magnitudes, packed in slot order.
	var acc uint64 // bits not yet used, nacc of them
	var nacc uint
	sb := r.b
	si := 0
	for bm := blocks; bm != 0; bm &= bm - 1 {
		k := bits.TrailingZeros32(bm)
		for g := v2PerBlock * k; g < v2PerBlock*(k+1); g++ {
			m := nz[g]
			if m == 0 {
				continue
			}
			c := uint(bits.OnesCount16(m))
			if nacc < c {
				if si+4 > len(sb) {
					return fmt.Errorf("sign bits: need at least %d bytes, only %d left", si+4, len(sb))
				}
				acc |= uint64(binary.LittleEndian.Uint32(sb[si:])) << nacc
				si += 4
				nacc += 32
			}
			sg := pdep16(uint16(acc), m)
			acc >>= c
			nacc -= c
			if e := escGroups[g] & sg; e != 0 {
				return fmt.Errorf("slot %d holds an escape (magnitude 32767) with sign 1", v2Group*g+bits.TrailingZeros16(e))
			}
			pf[signPlane*planeBytes+2*g], pf[signPlane*planeBytes+2*g+1] = byte(sg), byte(sg>>8)
		}
	}
	if acc != 0 {
		return fmt.Errorf("sign bits: unused bits of the last word are %#x, expected 0", acc)
	}
	r.b = sb[si:]

	// Back to code bytes (escapes as version 1's 0x8000), then version 1's
	// tail.
	switch {
	case useSIMD && maxRate <= 8:
		unshuffleAVX2(&s.planes[0], &s.lo)
		unshuffleTopAVX2(&s.planes[1][7], &s.hi)
	case useSIMD:
		unshuffleAVX2(&s.planes[0], &s.lo)
		unshuffleAVX2(&s.planes[1], &s.hi)
	case maxRate <= 8:
		unshuffleBytes(&s.planes[0], s.lo[:], TileElems/8)
		unshuffleTopBit(&s.planes[1][7], s.hi[:], TileElems/8)
	default:
		unshuffleBytes(&s.planes[0], s.lo[:], TileElems/8)
		unshuffleBytes(&s.planes[1], s.hi[:], TileElems/8)
	}
	if nesc > 0 {
		for g, e := range escGroups {
			for ; e != 0; e &= e - 1 {
				i := v2Group*g + bits.TrailingZeros16(e)
				s.lo[i], s.hi[i] = 0, 0x80
			}
		}
	}
	return decodeTileTail(s, &r, word0, int32(origin), dst, base, l, t, step, fill)
}
