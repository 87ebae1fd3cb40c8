package fz

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Prototype of the version-2 tile coding proposed in docs/FORMAT-v2-proposal.md
// ("group rates"). Test code only: the product writes and reads version 1.
// Everything before and after the code section (quantization, holes,
// Lorenzo, escapes, fill and raw sections) is version 1's.
//
// The 4096 slots form 256 groups of 16 (group g: slots 16g … 16g+15); 8
// groups make a block of 128 slots. A group's rate r is the bit length of
// the largest code magnitude in it (0 … 15). Tile layout:
//
//	word0   u32  bit 0: codes present; bits 16/17/18: escapes/fill/raw as v1
//	origin  i32
//	if bit 0:
//	  block mask  u32  bit k ⇔ some group of slots 128k … 128k+127 has r > 0 (≠ 0)
//	  rates       u32 per set bit k (increasing k): bits 4j … 4j+3 = rate of group 8k+j
//	  magnitudes  for p = 0, 1, …: for each group with r > p (increasing g) one u16,
//	              bit p of the magnitudes of its 16 slots (bit j ⇔ slot 16g+j);
//	              a zero u16 pads the section to a multiple of 4 bytes
//	  signs       one bit per slot with a non-zero magnitude, in slot order, packed
//	              LSB first into u32 words; unused high bits of the last word 0
//	then v1's escape, fill and raw sections. An escape is magnitude 32767 with
//	sign 0; codes hold magnitudes 0 … 32766.
const (
	v2Codes      = 1 << 0
	v2KnownFlags = v2Codes | tileHasEscapes | tileHasFill | tileHasRaw
	v2MaxMag     = maxCode - 1 // 32767 is the escape
	v2Group      = 16          // slots per group
	v2Groups     = TileElems / v2Group
	v2PerBlock   = 128 / v2Group // groups per 128-slot block
)

// planeUnit returns group g's 16 bits of bit plane p.
func planeUnit(s *tileScratch, p, g int) uint16 {
	return binary.LittleEndian.Uint16(s.planes[p/8][p%8][2*g:])
}

// encodeTileV2 appends the version-2 encoding of tile t of src to dst.
func encodeTileV2[T float](s *tileScratch, st *tileStats, src []T, l *layout, t uint64, qz *quantizer, dst []byte) []byte {
	c := tileCodeBits(s, st, src, l, t, qz)
	n := c.lz * c.ly * c.lx
	orLo, orHi := byte(c.planeMask), byte(c.planeMask>>8)
	if len(s.esc) > 0 || (orLo == 0xFF && orHi&0x7F == 0x7F) {
		// Rare: escapes, or maybe a magnitude of exactly 32767 (an escape
		// here). Redo the codes with v2's threshold and turn escape codes
		// into magnitude 32767, sign 0.
		if n < TileElems {
			clear(s.lo[:])
			clear(s.hi[:])
		}
		orLo, orHi = codesScalarMax(s, s.q[:n], c.lz, c.ly, c.lx, c.smap, v2MaxMag)
		s.lo[0], s.hi[0] = 0, 0
		if len(s.esc) > 0 {
			for i := range s.lo {
				if s.lo[i] == 0 && s.hi[i] == 0x80 {
					s.lo[i], s.hi[i] = 0xFF, 0x7F
				}
			}
			orLo, orHi = 0xFF, orHi|0x7F
		}
		shuffleBytes(s.lo[:], &s.planes[0], TileElems/8)
		shuffleBytes(s.hi[:], &s.planes[1], TileElems/8)
		c.planeMask = uint32(orLo) | uint32(orHi)<<8
	}

	word0 := tileFlags(s)
	// Rates and non-zero masks: scan the magnitude planes in use.
	var rate [v2Groups]uint8
	var nz [v2Groups]uint16
	for pm := c.planeMask & 0x7FFF; pm != 0; pm &= pm - 1 {
		p := bits.TrailingZeros32(pm)
		pl := &s.planes[p/8][p%8]
		for g := range v2Groups {
			w := binary.LittleEndian.Uint16(pl[2*g:])
			nz[g] |= w
			// rate = p+1 where w ≠ 0, without a branch on the data.
			on := uint8((uint32(-int32(w)) >> 31))
			rate[g] ^= (rate[g] ^ uint8(p+1)) & -on
		}
	}
	var blocks uint32
	nw, maxRate := 0, 0
	for g, r := range rate {
		if r > 0 {
			blocks |= 1 << (g / v2PerBlock)
		}
		nw += int(r)
		maxRate = max(maxRate, int(r))
	}
	if blocks != 0 {
		word0 |= v2Codes
	}
	dst = binary.LittleEndian.AppendUint32(dst, word0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(c.origin))
	if blocks == 0 {
		return appendTileTail[T](s, &c, dst)
	}
	dst = binary.LittleEndian.AppendUint32(dst, blocks)
	for bm := blocks; bm != 0; bm &= bm - 1 {
		k := bits.TrailingZeros32(bm)
		var v uint32
		for j := 0; j < v2PerBlock; j++ {
			v |= uint32(rate[v2PerBlock*k+j]) << (4 * j)
		}
		dst = binary.LittleEndian.AppendUint32(dst, v)
	}
	at := len(dst)
	dst = append(dst, make([]byte, (2*nw+3)&^3)...)
	sets := groupSets(&rate)
	for p := 0; p < maxRate; p++ {
		pl := &s.planes[p/8][p%8]
		act := sets[p]
		for h, a := range act {
			for ; a != 0; a &= a - 1 {
				g := 64*h + bits.TrailingZeros64(a)
				dst[at], dst[at+1] = pl[2*g], pl[2*g+1]
				at += 2
			}
		}
	}
	// Signs of the non-zero magnitudes, packed.
	var acc uint64
	var nacc uint
	hasSign := c.planeMask&0x8000 != 0
	for g := 0; g < v2Groups; g++ {
		m := uint32(nz[g])
		if m == 0 {
			continue
		}
		var packed uint32
		if hasSign {
			packed = pext16(planeUnit(s, 15, g), uint16(m))
		}
		acc |= uint64(packed) << nacc
		nacc += uint(bits.OnesCount32(m))
		if nacc >= 32 {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(acc))
			acc >>= 32
			nacc -= 32
		}
	}
	if nacc > 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(acc))
	}
	return appendTileTail[T](s, &c, dst)
}

// decodeTileV2 decodes one version-2 tile (exactly its bytes) into dst, as
// decodeTile does for version 1. Every field of src is untrusted.
func decodeTileV2[T float](s *tileScratch, src []byte, dst []T, base uint64, l *layout, t uint64, step float64, fill T) error {
	_, _, _, lz, ly, lx := l.tileBox(t)
	n := lz * ly * lx
	r := reader{b: src}
	word0, err := r.u32("tile header")
	if err != nil {
		return err
	}
	if word0&^v2KnownFlags != 0 {
		return fmt.Errorf("tile header has unknown flags %#x", word0&^v2KnownFlags)
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
	blocks, err := r.u32("rate block mask")
	if err != nil {
		return err
	}
	used := (n + 127) / 128
	if blocks == 0 || (used < 32 && blocks>>used != 0) {
		return fmt.Errorf("rate block mask %#08x: expected a non-zero mask of the tile's %d blocks", blocks, used)
	}
	rb, err := r.take(4*bits.OnesCount32(blocks), "group rates")
	if err != nil {
		return err
	}
	var rate [v2Groups]uint8
	maxRate, nw := 0, 0
	for bm := blocks; bm != 0; bm &= bm - 1 {
		k := bits.TrailingZeros32(bm)
		v := binary.LittleEndian.Uint32(rb)
		rb = rb[4:]
		if v == 0 {
			return fmt.Errorf("group rates of block %d are all 0 but the block mask lists it", k)
		}
		for j := 0; j < v2PerBlock; j++ {
			g := v2PerBlock*k + j
			rt := uint8(v >> (4 * j) & 15)
			if rt > 0 && v2Group*g >= n {
				return fmt.Errorf("group %d past the tile's %d values has rate %d", g, n, rt)
			}
			rate[g] = rt
			maxRate = max(maxRate, int(rt))
			nw += int(rt)
		}
	}
	for p := 0; p < maxRate; p++ {
		clear(s.planes[p/8][p%8][:])
	}
	// Magnitude units, plane by plane: unit p of every group whose rate
	// exceeds p.
	wb, err := r.take((2*nw+3)&^3, "magnitude bits")
	if err != nil {
		return err
	}
	if nw%2 != 0 && binary.LittleEndian.Uint16(wb[2*nw:]) != 0 {
		return fmt.Errorf("magnitude bits: padding is not zero")
	}
	var nz [v2Groups]uint16
	sets := groupSets(&rate)
	for p := 0; p < maxRate; p++ {
		pl := &s.planes[p/8][p%8]
		act := sets[p]
		for h, a := range act {
			for ; a != 0; a &= a - 1 {
				g := 64*h + bits.TrailingZeros64(a)
				w := binary.LittleEndian.Uint16(wb)
				wb = wb[2:]
				if w == 0 && int(rate[g]) == p+1 {
					return fmt.Errorf("group %d: rate %d but its top magnitude bits are 0", g, p+1)
				}
				pl[2*g], pl[2*g+1] = byte(w), byte(w>>8)
				nz[g] |= w
			}
		}
	}
	nsign := 0
	for g, m := range nz {
		if m != 0 {
			if v2Group*g+v2Group > n && m>>(n-v2Group*g) != 0 {
				return fmt.Errorf("group %d has magnitudes past the tile's %d values", g, n)
			}
			nsign += bits.OnesCount16(m)
		}
	}
	sb, err := r.take((nsign+31)/32*4, "sign bits")
	if err != nil {
		return err
	}
	if nsign%32 != 0 && binary.LittleEndian.Uint32(sb[len(sb)-4:])>>(nsign%32) != 0 {
		return fmt.Errorf("sign bits: unused bits of the last word are not 0")
	}
	sp := &s.planes[1][7]
	clear(sp[:])
	pos := 0
	for g, m := range nz {
		if m == 0 {
			continue
		}
		// The group's packed signs start at bit pos of the stream.
		w := uint64(binary.LittleEndian.Uint32(sb[pos/32*4:]))
		if pos/32*4+4 < len(sb) {
			w |= uint64(binary.LittleEndian.Uint32(sb[pos/32*4+4:])) << 32
		}
		sg := pdep16(uint16(w>>(pos%32)), m)
		sp[2*g], sp[2*g+1] = byte(sg), byte(sg>>8)
		pos += bits.OnesCount16(m)
	}
	// Back to code bytes; planes up to maxRate and the sign plane are valid.
	for p := maxRate; p < 15; p++ {
		clear(s.planes[p/8][p%8][:])
	}
	switch {
	case useSIMD && maxRate <= 8:
		unshuffleAVX2(&s.planes[0], &s.lo)
		unshuffleTopAVX2(&s.planes[1][7], &s.hi)
	case useSIMD:
		unshuffleAVX2(&s.planes[0], &s.lo)
		unshuffleAVX2(&s.planes[1], &s.hi)
	default:
		unshuffleBytes(&s.planes[0], s.lo[:], TileElems/8)
		unshuffleBytes(&s.planes[1], s.hi[:], TileElems/8)
	}
	if maxRate == 15 {
		// Magnitude 32767 is an escape (sign 0): v1's tail reads 0x8000.
		for i := range s.lo {
			if s.lo[i] == 0xFF && s.hi[i]&0x7F == 0x7F {
				if s.hi[i] != 0x7F {
					return fmt.Errorf("slot %d: escape with sign bit set", i)
				}
				s.lo[i], s.hi[i] = 0, 0x80
			}
		}
	}
	return decodeTileTail(s, &r, word0, int32(origin), dst, base, l, t, step, fill)
}

// v2Field is a field encoded tile by tile with both codings.
type v2Field[T float] struct {
	l      *layout
	qz     *quantizer
	fill   T
	v1, v2 [][]byte // per tile
}

// encodeBoth quantizes src as Compress does and encodes every tile with
// version 1 and with the version-2 prototype.
func encodeBoth[T float](src []T, p Params) (*v2Field[T], error) {
	_, _, _, rank := foldDims(p.Dims)
	l, err := newLayout(p.Dims, defaultShape(rank), DefaultTilesPerChunk)
	if err != nil {
		return nil, err
	}
	f := &v2Field[T]{l: l, qz: &quantizer{}}
	if p.Fill != nil {
		f.qz.hasFill, f.qz.fillBits = true, bitsOf(T(*p.Fill))
		f.fill = T(*p.Fill)
	}
	lo, hi, have := valueRange(src, f.qz, 1)
	if p.Mode == Abs {
		have = false
	}
	eb, step, err := DeriveBound(p, lo, hi, have)
	if err != nil {
		return nil, err
	}
	f.qz.step, f.qz.eb, f.qz.inv = step, eb, 1/step
	s := new(tileScratch)
	var st tileStats
	for t := uint64(0); t < l.tiles; t++ {
		f.v1 = append(f.v1, encodeTile(s, &st, src, l, t, f.qz, nil))
		f.v2 = append(f.v2, encodeTileV2(s, &st, src, l, t, f.qz, nil))
	}
	return f, nil
}

// decode decodes every tile of one coding.
func (f *v2Field[T]) decode(v2 bool) ([]T, error) {
	out := make([]T, f.l.n)
	s := new(tileScratch)
	for t := uint64(0); t < f.l.tiles; t++ {
		var err error
		if v2 {
			err = decodeTileV2(s, f.v2[t], out, 0, f.l, t, f.qz.step, f.fill)
		} else {
			err = decodeTile(s, f.v1[t], out, 0, f.l, t, f.qz.step, f.fill)
		}
		if err != nil {
			return nil, fmt.Errorf("tile %d: %w", t, err)
		}
	}
	return out, nil
}

func (f *v2Field[T]) size(v2 bool) (n int) {
	tiles := f.v1
	if v2 {
		tiles = f.v2
	}
	for _, b := range tiles {
		n += len(b) + 4
	}
	return n
}

// pext8[m][x] packs the bits of x selected by m to the low end; pdep8[m][x]
// spreads the low bits of x to the positions of m's bits (BMI2's PEXT and
// PDEP on bytes; a GPU lane needs neither, see the proposal).
var pext8, pdep8 = func() (e, d [256][256]uint8) {
	for m := 0; m < 256; m++ {
		for x := 0; x < 256; x++ {
			k := 0
			for j := 0; j < 8; j++ {
				if m>>j&1 != 0 {
					e[m][x] |= uint8(x>>j&1) << k
					d[m][x] |= uint8(x>>k&1) << j
					k++
				}
			}
		}
	}
	return
}()

func pext16(x, m uint16) uint32 {
	lo := uint8(m)
	return uint32(pext8[lo][uint8(x)]) | uint32(pext8[m>>8][uint8(x>>8)])<<bits.OnesCount8(lo)
}

func pdep16(x, m uint16) uint16 {
	lo := uint8(m)
	return uint16(pdep8[lo][uint8(x)]) | uint16(pdep8[m>>8][uint8(x>>bits.OnesCount8(lo))])<<8
}

// groupSets returns, for each p, the set of groups whose rate exceeds p
// (bit g%64 of word g/64).
func groupSets(rate *[v2Groups]uint8) (above [16][v2Groups / 64]uint64) {
	var by [16][v2Groups / 64]uint64
	for g, r := range rate {
		by[r&15][g/64] |= 1 << (g % 64)
	}
	for p := 14; p >= 0; p-- {
		for h := range above[p] {
			above[p][h] = above[p+1][h] | by[p+1][h]
		}
	}
	return above
}
