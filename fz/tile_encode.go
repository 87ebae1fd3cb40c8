package fz

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

// tileScratch is one worker's reusable memory for tiles; nothing in the hot
// path allocates.
type tileScratch struct {
	q      [TileElems]int32
	lo, hi [TileElems]byte
	planes [Planes / 8][8][planeBytes]byte
	holes  []int32  // non-quantizable positions (fill or raw)
	fill   []int32  // fill positions
	raw    []int32  // losslessly stored positions
	rawVal []uint64 // their bits
	esc    []int32  // escaped residuals
	mask   [planeBytes]byte
	slots  [TileElems]int32
}

// tileStats accumulate per worker.
type tileStats struct {
	maxErr   float64
	outliers uint64
}

// encodeTile appends the encoding of tile t of src to dst.
func encodeTile[T float](s *tileScratch, st *tileStats, src []T, l *layout, t uint64, qz *quantizer, dst []byte) []byte {
	z0, y0, x0, lz, ly, lx := l.tileBox(t)
	n := lz * ly * lx
	q := s.q[:n]
	s.holes, s.fill, s.raw, s.rawVal, s.esc = s.holes[:0], s.fill[:0], s.raw[:0], s.rawVal[:0], s.esc[:0]

	// 1. Pre-quantize, re-checking every value exactly as the decoder
	// reconstructs it.
	var sum, cnt int64
	maxErr := st.maxErr
	i := 0
	for z := 0; z < lz; z++ {
		for y := 0; y < ly; y++ {
			off := ((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx + x0
			row := src[off : off+uint64(lx)]
			for _, x := range row {
				if qz.hasFill && bitsOf(x) == qz.fillBits {
					s.fill = append(s.fill, int32(i))
					s.holes = append(s.holes, int32(i))
					i++
					continue
				}
				v, ok := qz.quantize(float64(x))
				if !ok {
					s.raw = append(s.raw, int32(i))
					s.rawVal = append(s.rawVal, bitsOf(x))
					s.holes = append(s.holes, int32(i))
					i++
					continue
				}
				e := math.Abs(float64(x) - float64(reconstruct[T](v, qz.step)))
				if !(e <= qz.eb) {
					// Keep v for prediction; store the value itself.
					s.raw = append(s.raw, int32(i))
					s.rawVal = append(s.rawVal, bitsOf(x))
				} else if e > maxErr {
					maxErr = e
				}
				q[i] = v
				sum += int64(v)
				cnt++
				i++
			}
		}
	}
	st.maxErr = maxErr
	st.outliers += uint64(len(s.raw))
	// Holes take the tile's mean q so that they disturb their neighbours'
	// residuals as little as possible (integer division truncates).
	if len(s.holes) > 0 {
		var ph int32
		if cnt > 0 {
			ph = int32(sum / cnt)
		}
		for _, h := range s.holes {
			q[h] = ph
		}
	}

	// 2. Lorenzo prediction, zero outside the tile.
	lorenzoForward(q, lz, ly, lx)

	// 3. Sign-magnitude codes, split into low and high bytes and placed in
	// sub-block order. The origin is stored in the tile header instead.
	origin := q[0]
	q[0] = 0
	lo, hi := &s.lo, &s.hi
	if n < TileElems {
		clear(lo[:])
		clear(hi[:])
	}
	var orLo, orHi byte
	slots := s.slots[:lx]
	i = 0
	for z := 0; z < lz; z++ {
		for y := 0; y < ly; y++ {
			l.rowSlots(slots, z, y, lz, ly, lx)
			row := q[i : i+lx]
			i += lx
			for x, d := range row {
				slot := int(slots[x])
				sg := d >> 31
				m := uint32((d ^ sg) - sg)
				if m > maxCode {
					s.esc = append(s.esc, d)
					lo[slot&(TileElems-1)], hi[slot&(TileElems-1)] = 0, 0x80
					orHi |= 0x80
					continue
				}
				b0, b1 := byte(m), byte(m>>8)|byte(sg)&0x80
				lo[slot&(TileElems-1)], hi[slot&(TileElems-1)] = b0, b1
				orLo |= b0
				orHi |= b1
			}
		}
	}

	// 4. Bitshuffle.
	const ngroups = TileElems / 8
	planeMask := uint32(orLo) | uint32(orHi)<<8
	if orLo != 0 {
		shuffleBytes(lo[:], &s.planes[0], ngroups)
	}
	switch {
	case orHi == 0x80:
		shuffleTopBit(hi[:], &s.planes[1][7], ngroups)
	case orHi != 0:
		shuffleBytes(hi[:], &s.planes[1], ngroups)
	}

	// 5. Zero-block encoding.
	word0 := planeMask
	if len(s.esc) > 0 {
		word0 |= tileHasEscapes
	}
	if len(s.fill) > 0 {
		word0 |= tileHasFill
	}
	if len(s.raw) > 0 {
		word0 |= tileHasRaw
	}
	dst = binary.LittleEndian.AppendUint32(dst, word0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(origin))
	for pm := planeMask; pm != 0; pm &= pm - 1 {
		p := bits.TrailingZeros32(pm)
		dst = appendZeroBlocks(dst, s.planes[p/8][p%8][:], blocksPerPlane)
	}
	if len(s.esc) > 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.esc)))
		for _, d := range s.esc {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
		}
	}
	if len(s.fill) > 0 {
		dst = appendMask(dst, &s.mask, s.fill, l, lz, ly, lx)
	}
	if len(s.raw) > 0 {
		dst = appendMask(dst, &s.mask, s.raw, l, lz, ly, lx)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.raw)))
		var zero T
		for _, b := range s.rawVal {
			if unsafe.Sizeof(zero) == 4 {
				dst = binary.LittleEndian.AppendUint32(dst, uint32(b))
			} else {
				dst = binary.LittleEndian.AppendUint64(dst, b)
			}
		}
	}
	return dst
}

// appendZeroBlocks writes the block mask of a plane (only its first used
// blocks can be non-zero) and then its non-zero blocks.
func appendZeroBlocks(dst []byte, plane []byte, used int) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var mask uint32
	for k := 0; k < used; k++ {
		b := plane[k*BlockBytes : (k+1)*BlockBytes]
		if binary.LittleEndian.Uint64(b)|binary.LittleEndian.Uint64(b[8:]) != 0 {
			mask |= 1 << k
			dst = append(dst, b...)
		}
	}
	binary.LittleEndian.PutUint32(dst[at:], mask)
	return dst
}

// appendMask encodes a set of positions (tile-local, element order) as a
// bitmap: XOR-Lorenzo predicted so that regions (land masks) cost only
// their corners, then placed in slot order and zero-block coded like a code
// plane.
func appendMask(dst []byte, m *[planeBytes]byte, pos []int32, l *layout, lz, ly, lx int) []byte {
	var e [planeBytes]byte
	for _, p := range pos {
		e[p>>3] |= 1 << (p & 7)
	}
	xorLorenzo(&e, lz, ly, lx, false)
	clear(m[:])
	var slots [TileElems]int32
	forEachBit(&e, lz*ly*lx, func(p int) {
		z, r := p/(ly*lx), p%(ly*lx)
		l.rowSlots(slots[:lx], z, r/lx, lz, ly, lx)
		slot := slots[r%lx]
		m[slot>>3] |= 1 << (slot & 7)
	})
	return appendZeroBlocks(dst, m[:], blocksPerPlane)
}

// lorenzoForward replaces q by its Lorenzo residuals (zero outside the box).
// The n-D Lorenzo operator is a product of 1-D differences, applied one axis
// at a time from the back so every subtrahend is still the original.
func lorenzoForward(q []int32, lz, ly, lx int) {
	plane := ly * lx
	for z := lz - 1; z > 0; z-- {
		cur := q[z*plane : (z+1)*plane]
		prev := q[(z-1)*plane : z*plane]
		for i := range cur {
			cur[i] -= prev[i]
		}
	}
	for z := 0; z < lz; z++ {
		pl := q[z*plane : (z+1)*plane]
		for y := ly - 1; y > 0; y-- {
			cur := pl[y*lx : (y+1)*lx]
			prev := pl[(y-1)*lx : y*lx]
			for i := range cur {
				cur[i] -= prev[i]
			}
		}
	}
	for r := 0; r < lz*ly; r++ {
		row := q[r*lx : (r+1)*lx]
		for x := lx - 1; x > 0; x-- {
			row[x] -= row[x-1]
		}
	}
}

// lorenzoInverse undoes lorenzoForward by prefix sums along each axis.
func lorenzoInverse(q []int32, lz, ly, lx int) {
	for r := 0; r < lz*ly; r++ {
		row := q[r*lx : (r+1)*lx]
		acc := row[0]
		for x := 1; x < len(row); x++ {
			acc += row[x]
			row[x] = acc
		}
	}
	plane := ly * lx
	for z := 0; z < lz; z++ {
		pl := q[z*plane : (z+1)*plane]
		for y := 1; y < ly; y++ {
			cur := pl[y*lx : (y+1)*lx]
			prev := pl[(y-1)*lx : y*lx]
			for i := range cur {
				cur[i] += prev[i]
			}
		}
	}
	for z := 1; z < lz; z++ {
		cur := q[z*plane : (z+1)*plane]
		prev := q[(z-1)*plane : z*plane]
		for i := range cur {
			cur[i] += prev[i]
		}
	}
}

// xorLorenzo applies (inverse=false) or undoes (inverse=true) the parity
// Lorenzo transform of a bitmap laid out like the tile's values.
func xorLorenzo(m *[planeBytes]byte, lz, ly, lx int, inverse bool) {
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
