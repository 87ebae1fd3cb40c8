package fz

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unsafe"
)

// Version 2 of the tile code section, "group rates" (docs/FORMAT.md §5.2).
// Quantization, holes, Lorenzo, the escape, fill and raw sections are
// version 1's; the codes differ in two ways:
//
//   - a residual of magnitude 32767 is an escape too (magnitude 32767, sign
//     0 in the code section; version 1 escapes from 32768 on, code 0x8000);
//   - the 4096 slots form 256 groups of 16; each group stores only its
//     rate r (the bit length of its largest magnitude) and r 16-bit units
//     (unit p: bit p of its 16 magnitudes), group after group; the signs
//     of non-zero magnitudes follow, packed.
//
// Both codecs keep version 1's 16-bit codes in s.lo/s.hi and bit planes in
// s.planes: group g's unit p is bytes 2g, 2g+1 of plane p.
const (
	v2Codes      = 1 << 0 // word0: the code section is present
	v2KnownFlags = v2Codes | tileHasEscapes | tileHasFill | tileHasRaw
	v2MaxMag     = maxCode - 1 // largest stored magnitude; 32767 is the escape
	v2EscapeCode = maxCode     // an escape's code: magnitude 32767, sign 0
	v2Group      = 16          // slots per group
	v2Groups     = TileElems / v2Group
	v2PerBlock   = 128 / v2Group // groups per 128-slot block (one rate word)
	v2Blocks     = v2Groups / v2PerBlock
	signPlane    = Planes - 1
)

// Per-16-bit-lane constants for four groups' units in a uint64.
const (
	lanes1    = 0x0001000100010001
	lanesLow  = 0x7FFF7FFF7FFF7FFF
	lanesHigh = 0x8000800080008000
)

// planeFlat views the 16 planes of a tile as one array: plane p at byte
// p·planeBytes, so group g's unit p is at p·planeBytes + 2g.
func planeFlat(s *tileScratch) *[Planes * planeBytes]byte {
	return (*[Planes * planeBytes]byte)(unsafe.Pointer(&s.planes))
}

// encodeTileV2 appends the version-2 encoding of tile t of src to dst.
func encodeTileV2[T float](s *tileScratch, st *tileStats, src []T, l *layout, t uint64, qz *quantizer, dst []byte) []byte {
	c := tileCodes(s, st, src, l, t, qz)
	n := c.lz * c.ly * c.lx
	if len(s.esc) > 0 || (c.orLo == 0xFF && c.orHi&0x7F == 0x7F && hasMag32767(s)) {
		// Rare: escapes, or a magnitude of exactly 32767, which version 2
		// escapes too. Redo the codes with version 2's threshold and code.
		if n < TileElems {
			clear(s.lo[:])
			clear(s.hi[:])
		}
		c.orLo, c.orHi = recodes(s, &c, v2MaxMag, v2EscapeCode)
		s.lo[0], s.hi[0] = 0, 0
	}
	shufflePlanes(s, &c)
	word0 := tileFlags(s)
	magMask := c.planeMask &^ (1 << signPlane)
	if magMask == 0 {
		// No magnitudes, so no signs either (a sign needs a magnitude).
		dst = binary.LittleEndian.AppendUint32(dst, word0)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(c.origin))
		return appendTileTail[T](s, &c, dst)
	}
	word0 |= v2Codes
	pf := planeFlat(s)
	// Planes below the top one may lie outside the mask (all zero, but not
	// written by shufflePlanes): clear them, units are read from every
	// plane below a group's rate.
	top := 32 - bits.LeadingZeros32(magMask)
	for p := 0; p < top; p++ {
		if magMask&(1<<p) == 0 {
			clear(pf[p*planeBytes : (p+1)*planeBytes])
		}
	}

	// Rates and non-zero slots of four groups at a time: lane j of rl[h]
	// is the rate of group 4h+j, of nzl[h] the OR of its magnitudes' units
	// (bit i set ⇔ slot 16(4h+j)+i has a non-zero magnitude).
	var rl, nzl [v2Groups / 4]uint64
	for pm := magMask; pm != 0; pm &= pm - 1 {
		p := bits.TrailingZeros32(pm)
		pl := (*[planeBytes]byte)(pf[p*planeBytes:])
		pv := uint64(p+1) * lanes1
		for h := range rl {
			w := binary.LittleEndian.Uint64(pl[8*h:])
			nzl[h] |= w
			// 0xFFFF in each lane whose unit is non-zero; p increases, so
			// the last plane that sets a lane gives its rate.
			m := ((((w & lanesLow) + lanesLow) | w) & lanesHigh) >> 15 * 0xFFFF
			rl[h] = rl[h]&^m | pv&m
		}
	}
	var blocks uint32
	w, nsign := 0, 0
	for k := 0; k < v2Blocks; k++ {
		a, b := rl[2*k], rl[2*k+1]
		if a|b != 0 {
			blocks |= 1 << k
			// Lanes hold at most 15: the sum of 8 fits a lane.
			w += int((a + b) * lanes1 >> 48)
			nsign += bits.OnesCount64(nzl[2*k]) + bits.OnesCount64(nzl[2*k+1])
		}
	}
	nrate := bits.OnesCount32(blocks)
	unitBytes := (2*w + 3) &^ 3
	size := 12 + 4*nrate + unitBytes + 4*((nsign+31)/32)
	at := len(dst)
	dst = slices.Grow(dst, size)[:at+size]
	out := dst[at:]
	binary.LittleEndian.PutUint32(out, word0)
	binary.LittleEndian.PutUint32(out[4:], uint32(c.origin))
	binary.LittleEndian.PutUint32(out[8:], blocks)
	ri := 12
	ui := 12 + 4*nrate
	units := out[ui : ui+unitBytes]
	signs := out[ui+unitBytes:]
	if w%2 != 0 {
		units[2*w], units[2*w+1] = 0, 0
	}
	for bm := blocks; bm != 0; bm &= bm - 1 {
		k := bits.TrailingZeros32(bm)
		binary.LittleEndian.PutUint32(out[ri:], rateWord(rl[2*k], rl[2*k+1]))
		ri += 4
	}
	// rl's lanes are the groups' rates in group order.
	gatherUnits(pf, (*[v2Groups]uint16)(unsafe.Pointer(&rl)), units[:2*w])
	// Signs of the non-zero magnitudes (nzl's lanes are the groups in
	// order), packed.
	nsw := (nsign + 31) / 32
	if c.planeMask&(1<<signPlane) != 0 {
		var buf [signBufWords]uint32
		packSigns((*[v2Groups]uint16)(unsafe.Pointer(&nzl)), (*[planeBytes]byte)(pf[signPlane*planeBytes:]), &buf)
		for i, x := range buf[:nsw] {
			binary.LittleEndian.PutUint32(signs[4*i:], x)
		}
	} else {
		clear(signs[:4*nsw])
	}
	return appendTileTail[T](s, &c, dst)
}

// gatherUnits writes the units of every group, group after group: unit p
// of group g (p < rates[g] ≤ 15) is bytes 2g, 2g+1 of plane p. out holds
// exactly Σ rates units.
func gatherUnits(pf *[Planes * planeBytes]byte, rates *[v2Groups]uint16, out []byte) {
	if useSIMD {
		gatherUnitsAsm(pf, rates, &out[0])
		return
	}
	gatherUnitsGo(pf, rates, out)
}

// gatherUnitsGo is the reference for gatherUnits.
func gatherUnitsGo(pf *[Planes * planeBytes]byte, rates *[v2Groups]uint16, out []byte) {
	u := 0
	for g, r := range rates {
		for p := 0; p < int(r); p++ {
			out[u], out[u+1] = pf[p*planeBytes+2*g], pf[p*planeBytes+2*g+1]
			u += 2
		}
	}
}

// signBufWords is a tile's sign stream in u32 words (at most 4096 bits)
// plus one, so that a kernel may access 8 bytes at any word.
const signBufWords = TileElems/32 + 1

// packSigns ORs into out (zero on entry) the sign bits of the slots of nz
// (bit j of nz[g]: slot 16g+j), in slot order, from bit 0 of out[0].
func packSigns(nz *[v2Groups]uint16, sign *[planeBytes]byte, out *[signBufWords]uint32) {
	if useSIMD && haveBMI2 {
		packSignsBMI2(nz, sign, out)
		return
	}
	packSignsGo(nz, sign, out)
}

// packSignsGo is the reference for packSigns.
func packSignsGo(nz *[v2Groups]uint16, sign *[planeBytes]byte, out *[signBufWords]uint32) {
	pos := 0
	for g, m := range nz {
		if m == 0 {
			continue
		}
		sg := uint16(sign[2*g]) | uint16(sign[2*g+1])<<8
		x := uint64(pext16(sg, m)) << (pos % 32)
		out[pos/32] |= uint32(x)
		out[pos/32+1] |= uint32(x >> 32)
		pos += bits.OnesCount16(m)
	}
}

// expandSigns is the inverse of packSigns: it writes the sign unit of
// every group (0 where nz is 0) from the stream in.
func expandSigns(nz *[v2Groups]uint16, in *[signBufWords + 1]uint32, sign *[planeBytes]byte) {
	if useSIMD && haveBMI2 {
		expandSignsBMI2(nz, in, sign)
		return
	}
	expandSignsGo(nz, in, sign)
}

// expandSignsGo is the reference for expandSigns.
func expandSignsGo(nz *[v2Groups]uint16, in *[signBufWords + 1]uint32, sign *[planeBytes]byte) {
	pos := 0
	for g, m := range nz {
		var sg uint16
		if m != 0 {
			w := uint64(in[pos/32]) | uint64(in[pos/32+1])<<32
			sg = pdep16(uint16(w>>(pos%32)), m)
			pos += bits.OnesCount16(m)
		}
		sign[2*g], sign[2*g+1] = byte(sg), byte(sg>>8)
	}
}

// rateWord packs the rates of groups 8k … 8k+7, lanes of a (groups 8k …
// 8k+3) and b, into nibbles.
func rateWord(a, b uint64) uint32 {
	return nibbles4(a) | nibbles4(b)<<16
}

// nibbles4 packs four 16-bit lanes holding 0 … 15 into 16 bits, lane j at
// bits 4j … 4j+3.
func nibbles4(x uint64) uint32 {
	y := x | x>>12 // lanes 0|1 in bits 0–7, lanes 2|3 in bits 32–39
	return uint32(y&0xFF) | uint32(y>>24)&0xFF00
}

// hasMag32767 reports whether some slot holds magnitude 32767 (low byte
// 0xFF, high byte 0x7F or 0xFF).
func hasMag32767(s *tileScratch) bool {
	const ones = 0x0101010101010101
	for i := 0; i < TileElems; i += 8 {
		a := binary.LittleEndian.Uint64(s.lo[i:])
		b := binary.LittleEndian.Uint64(s.hi[i:]) | 0x8080808080808080
		x := ^a | ^b // a zero byte ⇔ that slot has magnitude 32767
		if (x-ones)&^x&(ones<<7) != 0 {
			return true
		}
	}
	return false
}

// pext8 and pdep8 are PEXT and PDEP on bytes: pext8[m][x] packs the bits of
// x selected by m to the low end; pdep8[m][x] spreads the low bits of x to
// the positions of m's bits.
var pext8, pdep8 = func() (e, d *[256][256]uint8) {
	e, d = new([256][256]uint8), new([256][256]uint8)
	for m := 0; m < 256; m++ {
		var pos [8]uint
		np := 0
		for j := uint(0); j < 8; j++ {
			if m>>j&1 != 0 {
				pos[np] = j
				np++
			}
		}
		for x := 0; x < 256; x++ {
			var pe, pd uint8
			for k := 0; k < np; k++ {
				pe |= uint8(x>>pos[k]&1) << k
				pd |= uint8(x>>k&1) << pos[k]
			}
			e[m][x], d[m][x] = pe, pd
		}
	}
	return e, d
}()

// pext16 packs the bits of x selected by m to the low end.
func pext16(x, m uint16) uint32 {
	switch {
	case x == 0:
		return 0
	case m == 0xFFFF:
		return uint32(x)
	}
	lo := uint8(m)
	return uint32(pext8[lo][uint8(x)]) | uint32(pext8[m>>8][uint8(x>>8)])<<bits.OnesCount8(lo)
}

// pdep16 spreads the low bits of x to the positions of m's bits.
func pdep16(x, m uint16) uint16 {
	switch {
	case x == 0:
		return 0
	case m == 0xFFFF:
		return x
	}
	lo := uint8(m)
	return uint16(pdep8[lo][uint8(x)]) | uint16(pdep8[m>>8][uint8(x>>bits.OnesCount8(lo))])<<8
}
