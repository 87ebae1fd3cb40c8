package fz

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unsafe"
)

// decodeTile decodes one tile from src (exactly its bytes) into dst, the
// whole output field. Every field of src is untrusted.
func decodeTile[T float](s *tileScratch, src []byte, dst []T, l *layout, t uint64, step float64, fill T) error {
	z0, y0, x0, lz, ly, lx := l.tileBox(t)
	n := lz * ly * lx
	const ngroups = TileElems / 8
	r := reader{b: src}
	word0, err := r.u32("tile header")
	if err != nil {
		return err
	}
	if word0&^tileKnownFlags != 0 {
		return fmt.Errorf("tile header has unknown flags %#x", word0&^tileKnownFlags)
	}
	origin, err := r.u32("tile origin")
	if err != nil {
		return err
	}
	planeMask := word0 & 0xFFFF

	// Planes: scatter non-zero blocks, then transpose back to code bytes.
	lo, hi := s.lo[:], s.hi[:]
	loMask, hiMask := byte(planeMask), byte(planeMask>>8)
	for pm := planeMask; pm != 0; pm &= pm - 1 {
		p := bits.TrailingZeros32(pm)
		if err := r.zeroBlocks(s.planes[p/8][p%8][:], blocksPerPlane, fmt.Sprintf("bit plane %d", p)); err != nil {
			return err
		}
	}
	if loMask != 0 {
		for k := 0; k < 8; k++ {
			if loMask&(1<<k) == 0 {
				clear(s.planes[0][k][:])
			}
		}
		unshuffleBytes(&s.planes[0], lo, ngroups)
	} else {
		clear(lo)
	}
	switch {
	case hiMask == 0x80:
		unshuffleTopBit(&s.planes[1][7], hi, ngroups)
	case hiMask != 0:
		for k := 0; k < 8; k++ {
			if hiMask&(1<<k) == 0 {
				clear(s.planes[1][k][:])
			}
		}
		unshuffleBytes(&s.planes[1], hi, ngroups)
	default:
		clear(hi)
	}

	// Escaped residuals.
	var esc []byte
	var nesc uint32
	if word0&tileHasEscapes != 0 {
		if nesc, err = r.u32("escape count"); err != nil {
			return err
		}
		if nesc == 0 || nesc >= uint32(n) {
			return fmt.Errorf("escape count %d out of range 1..%d", nesc, n-1)
		}
		if esc, err = r.take(int(nesc)*4, "escaped residuals"); err != nil {
			return err
		}
	}

	// Codes to residuals (element order), then prefix sums back to q.
	if lo[0] != 0 || hi[0] != 0 {
		return fmt.Errorf("tile origin slot holds code %#04x, expected 0", uint16(lo[0])|uint16(hi[0])<<8)
	}
	q := s.q[:n]
	used := uint32(0)
	smap := l.slotMap(s, lz, ly, lx)[:n]
	for e := range q {
		slot := smap[e] & (TileElems - 1)
		h, lb := hi[slot], lo[slot]
		// Branch-free sign: residual signs are random, a branch on them
		// mispredicts half the time. Escapes are rare.
		sg := int32(h >> 7)
		d := (int32(lb) | int32(h&0x7F)<<8 ^ -sg) + sg
		if h == 0x80 && lb == 0 {
			if used >= nesc {
				return fmt.Errorf("tile has more escape codes than its %d escaped residuals", nesc)
			}
			d = int32(binary.LittleEndian.Uint32(esc[4*used:]))
			used++
		}
		q[e] = d
	}
	if used != nesc {
		return fmt.Errorf("tile lists %d escaped residuals but has %d escape codes", nesc, used)
	}
	q[0] = int32(origin)
	lorenzoInverse(q, lz, ly, lx)

	// Dequantize into place.
	i := 0
	for z := 0; z < lz; z++ {
		for y := 0; y < ly; y++ {
			off := ((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx + x0
			row := dst[off : off+uint64(lx)]
			qr := q[i : i+len(row)]
			for x, v := range qr {
				row[x] = reconstruct[T](v, step)
			}
			i += lx
		}
	}

	// Lossless positions.
	put := func(p int, v T) {
		z, rem := p/(ly*lx), p%(ly*lx)
		y, x := rem/lx, rem%lx
		dst[((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx+x0+uint64(x)] = v
	}
	if word0&tileHasFill != 0 {
		if err := r.mask(&s.mask, smap, lz, ly, lx, "fill mask"); err != nil {
			return err
		}
		forEachBit(&s.mask, n, func(p int) { put(p, fill) })
	}
	if word0&tileHasRaw != 0 {
		if err := r.mask(&s.mask, smap, lz, ly, lx, "raw-value mask"); err != nil {
			return err
		}
		nraw, err := r.u32("raw-value count")
		if err != nil {
			return err
		}
		cnt := 0
		for _, b := range s.mask[:(n+7)/8] {
			cnt += bits.OnesCount8(b)
		}
		if nraw == 0 || uint32(cnt) != nraw {
			return fmt.Errorf("raw-value count %d does not match its mask (%d positions)", nraw, cnt)
		}
		var zero T
		sz := int(unsafe.Sizeof(zero))
		vals, err := r.take(int(nraw)*sz, "raw values")
		if err != nil {
			return err
		}
		k := 0
		forEachBit(&s.mask, n, func(p int) {
			var b uint64
			if sz == 4 {
				b = uint64(binary.LittleEndian.Uint32(vals[4*k:]))
			} else {
				b = binary.LittleEndian.Uint64(vals[8*k:])
			}
			put(p, fromBits[T](b))
			k++
		})
	}
	if len(r.b) != 0 {
		return fmt.Errorf("tile has %d trailing bytes", len(r.b))
	}
	return nil
}

func forEachBit(m *[planeBytes]byte, n int, f func(int)) {
	for i, b := range m[:(n+7)/8] {
		for b != 0 {
			k := bits.TrailingZeros8(b)
			f(i*8 + k)
			b &= b - 1
		}
	}
}

// reader consumes a byte slice with bounds checks that become errors.
type reader struct{ b []byte }

func (r *reader) take(n int, what string) ([]byte, error) {
	if n < 0 || n > len(r.b) {
		return nil, fmt.Errorf("%s: need %d bytes, only %d left", what, n, len(r.b))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v, nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

// zeroBlocks reads a block mask and its blocks into plane.
func (r *reader) zeroBlocks(plane []byte, used int, what string) error {
	mask, err := r.u32(what + " block mask")
	if err != nil {
		return err
	}
	if used < 32 && mask>>used != 0 {
		return fmt.Errorf("%s block mask %#08x names blocks past the tile's %d", what, mask, used)
	}
	blocks, err := r.take(bits.OnesCount32(mask)*BlockBytes, what+" blocks")
	if err != nil {
		return err
	}
	for k := 0; k < used; k++ {
		b := plane[k*BlockBytes : (k+1)*BlockBytes]
		if mask&(1<<k) != 0 {
			copy(b, blocks[:BlockBytes])
			blocks = blocks[BlockBytes:]
		} else {
			clear(b)
		}
	}
	return nil
}

// mask reads an XOR-Lorenzo coded position bitmap into element order.
func (r *reader) mask(m *[planeBytes]byte, smap []uint16, lz, ly, lx int, what string) error {
	var slots [planeBytes]byte
	if err := r.zeroBlocks(slots[:], blocksPerPlane, what); err != nil {
		return err
	}
	clear(m[:])
	set := 0
	for e, slot := range smap {
		slot &= TileElems - 1
		if slots[slot>>3]&(1<<(slot&7)) != 0 {
			m[e>>3] |= 1 << (e & 7)
			set++
		}
	}
	total := 0
	for _, b := range slots {
		total += bits.OnesCount8(b)
	}
	if total != set {
		return fmt.Errorf("%s marks %d slots outside the tile's values", what, total-set)
	}
	xorLorenzo(m, lz, ly, lx, true)
	return nil
}
