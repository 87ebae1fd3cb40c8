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
	// The element→slot map of the last edge-tile shape seen.
	edgeMap   [TileElems]uint16
	edgeKey   [3]int
	edgeOwner *layout
	zeroRow   [TileElems]int32 // stays zero: the neighbours outside a tile
	brow      [TileElems]int32 // decoder's running x,y-sums of one row
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
	// reconstructs it. The common path is branch-light; holes, fill and
	// failed checks leave it.
	var sum int64
	maxErr := st.maxErr
	inv, step, eb := qz.inv, qz.step, qz.eb
	hasFill, fillBits := qz.hasFill, qz.fillBits
	i := 0
	for z := 0; z < lz; z++ {
		for y := 0; y < ly; y++ {
			off := ((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx + x0
			row := src[off : off+uint64(lx)]
			qr := q[i : i+len(row)]
			for x, xv := range row {
				sv := float64(float64(xv) * inv)
				if !(math.Abs(sv) < qLimit) || (hasFill && bitsOf(xv) == fillBits) {
					if hasFill && bitsOf(xv) == fillBits {
						s.fill = append(s.fill, int32(i+x))
					} else {
						s.raw = append(s.raw, int32(i+x))
						s.rawVal = append(s.rawVal, bitsOf(xv))
					}
					s.holes = append(s.holes, int32(i+x))
					continue
				}
				qf := float64(float64(sv+rintMagic) - rintMagic)
				v := int32(qf)
				// qf is an integer, so qf·step equals float64(v)·step.
				e := math.Abs(float64(xv) - float64(T(float64(qf*step))))
				if !(e <= eb) {
					// Keep v for prediction; store the value itself.
					s.raw = append(s.raw, int32(i+x))
					s.rawVal = append(s.rawVal, bitsOf(xv))
				} else if e > maxErr {
					maxErr = e
				}
				qr[x] = v
				sum += int64(v)
			}
			i += lx
		}
	}
	st.maxErr = maxErr
	st.outliers += uint64(len(s.raw))
	// Holes take the tile's mean q so that they disturb their neighbours'
	// residuals as little as possible (integer division truncates).
	if len(s.holes) > 0 {
		var ph int32
		if cnt := int64(n - len(s.holes)); cnt > 0 {
			ph = int32(sum / cnt)
		}
		for _, h := range s.holes {
			q[h] = ph
		}
	}

	// 2+3. Lorenzo residuals (zero outside the tile), fused with the
	// sign-magnitude codes, which go to their slots split into low and high
	// bytes. The origin's residual is q itself and lives in the tile header.
	origin := q[0]
	lo, hi := &s.lo, &s.hi
	if n < TileElems {
		clear(lo[:])
		clear(hi[:])
	}
	var orLo, orHi byte
	smap := l.slotMap(s, lz, ly, lx)
	zero := s.zeroRow[:lx]
	plane := ly * lx
	e := 0
	for z := 0; z < lz; z++ {
		for y := 0; y < ly; y++ {
			cur := q[e : e+lx]
			nb, up, un := zero, zero, zero
			if y > 0 {
				nb = q[e-lx : e]
			}
			if z > 0 {
				up = q[e-plane : e-plane+lx]
				if y > 0 {
					un = q[e-plane-lx : e-plane]
				}
			}
			nb, up, un = nb[:len(cur)], up[:len(cur)], un[:len(cur)]
			sm := smap[e : e+len(cur)]
			// pw is the previous column's term, carried along the row.
			// Element 0 (the origin) has no code: start after it.
			var pw int32
			start := 0
			if e == 0 {
				pw, start = cur[0], 1
			}
			for x := start; x < len(cur); x++ {
				col := cur[x] - nb[x] - up[x] + un[x]
				d := col - pw
				pw = col
				slot := sm[x] & (TileElems - 1)
				sg := d >> 31
				m := uint32((d ^ sg) - sg)
				if m > maxCode {
					s.esc = append(s.esc, d)
					lo[slot], hi[slot] = 0, 0x80
					orHi |= 0x80
					continue
				}
				b0, b1 := byte(m), byte(m>>8)|byte(sg)&0x80
				lo[slot], hi[slot] = b0, b1
				orLo |= b0
				orHi |= b1
			}
			e += lx
		}
	}
	lo[0], hi[0] = 0, 0

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
		dst = appendMask(dst, &s.mask, s.fill, smap[:n], lz, ly, lx)
	}
	if len(s.raw) > 0 {
		dst = appendMask(dst, &s.mask, s.raw, smap[:n], lz, ly, lx)
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
func appendMask(dst []byte, m *[planeBytes]byte, pos []int32, smap []uint16, lz, ly, lx int) []byte {
	var e [planeBytes]byte
	for _, p := range pos {
		e[p>>3] |= 1 << (p & 7)
	}
	xorLorenzo(&e, lz, ly, lx, false)
	clear(m[:])
	forEachBit(&e, lz*ly*lx, func(p int) {
		slot := smap[p] & (TileElems - 1)
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
