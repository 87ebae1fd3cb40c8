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
	n := l.tileSlots(t)
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
		clear(pf[:signPlane*planeBytes])
	} else {
		clear(pf[:8*planeBytes])
	}
	var nz, escGroups [v2Groups]uint16 // per group: non-zero magnitudes, escapes (slot bits)
	nsign, bad := scatterUnits(units[:2*w], &rw, pf, &nz, &escGroups)
	if bad >= 0 {
		rt := rw[bad/v2PerBlock] >> (4 * (bad % v2PerBlock)) & 15
		return fmt.Errorf("group %d has rate %d but its unit %d (top magnitude bits) is 0", bad, rt, rt-1)
	}
	if rest := n % v2Group; rest != 0 {
		// The last group is partly past n (the rates reject the rest).
		if g := n / v2Group; nz[g]>>rest != 0 {
			return fmt.Errorf("group %d has magnitude bits in slots %#04x at or past the tile's %d values", g, nz[g]>>rest<<rest, n)
		}
	}
	if nz[0]&1 != 0 {
		return fmt.Errorf("slot 0 (the origin) has a non-zero magnitude")
	}

	// Signs of the non-zero magnitudes, packed in slot order.
	nsw := (nsign + 31) / 32
	if len(r.b) < 4*nsw {
		return fmt.Errorf("sign bits: need %d bytes, only %d left", 4*nsw, len(r.b))
	}
	var sbuf [signBufWords + 1]uint32
	for i := range sbuf[:nsw] {
		sbuf[i] = binary.LittleEndian.Uint32(r.b[4*i:])
	}
	r.b = r.b[4*nsw:]
	if rest := nsign % 32; rest != 0 && sbuf[nsw-1]>>rest != 0 {
		return fmt.Errorf("sign bits: unused bits of the last word are %#x, expected 0", sbuf[nsw-1]>>rest)
	}
	sp := (*[planeBytes]byte)(pf[signPlane*planeBytes:])
	expandSigns(&nz, &sbuf, sp)
	nesc := 0 // groups with escapes (magnitude 32767, rate 15)
	if maxRate == 15 {
		for _, e := range escGroups {
			if e != 0 {
				nesc++
			}
		}
	}
	if nesc > 0 {
		for g, e := range escGroups {
			if e &= uint16(sp[2*g]) | uint16(sp[2*g+1])<<8; e != 0 {
				return fmt.Errorf("slot %d holds an escape (magnitude 32767) with sign 1", v2Group*g+bits.TrailingZeros16(e))
			}
		}
	}

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

// scatterUnits reads the units of every group (rates: nibble g%8 of
// rw[g/8]; units holds exactly their sum) into the planes of pf and sets,
// per group, nz (OR of its units: its non-zero magnitudes) and esc (AND of
// its units where the rate is 15: its escapes, else 0). It returns the
// number of non-zero magnitudes and the first group whose top unit is 0
// (−1: none).
func scatterUnits(units []byte, rw *[v2Blocks]uint32, pf *[Planes * planeBytes]byte, nz, esc *[v2Groups]uint16) (nsign, badGroup int) {
	if useSIMD {
		return scatterUnitsAsm(&units[0], rw, pf, nz, esc)
	}
	return scatterUnitsGo(units, rw, pf, nz, esc)
}

// scatterUnitsGo is the reference for scatterUnits.
func scatterUnitsGo(units []byte, rw *[v2Blocks]uint32, pf *[Planes * planeBytes]byte, nz, esc *[v2Groups]uint16) (nsign, badGroup int) {
	badGroup = -1
	u := 0
	for g := range nz {
		rt := int(rw[g/v2PerBlock] >> (4 * (g % v2PerBlock)) & 15)
		var or, unit uint16
		and := uint16(0xFFFF)
		for p := 0; p < rt; p++ {
			unit = uint16(units[u]) | uint16(units[u+1])<<8
			u += 2
			pf[p*planeBytes+2*g], pf[p*planeBytes+2*g+1] = byte(unit), byte(unit>>8)
			or |= unit
			and &= unit
		}
		if rt > 0 && unit == 0 && badGroup < 0 {
			badGroup = g
		}
		if rt != 15 {
			and = 0
		}
		nz[g], esc[g] = or, and
		nsign += bits.OnesCount16(or)
	}
	return nsign, badGroup
}
