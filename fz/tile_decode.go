package fz

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unsafe"
)

// decodeTile decodes one tile from src (exactly its bytes) into dst, which
// holds the field's elements from element base on (0: the whole field).
// Every field of src is untrusted.
func decodeTile[T float](s *tileScratch, src []byte, dst []T, base uint64, l *layout, t uint64, step float64, fill T) error {
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
		if err := r.zeroBlocks(s.planes[p/8][p%8][:], blocksPerPlane, planeNames[p]); err != nil {
			return err
		}
	}
	if loMask != 0 {
		for k := 0; k < 8; k++ {
			if loMask&(1<<k) == 0 {
				clear(s.planes[0][k][:])
			}
		}
		if useSIMD {
			unshuffleAVX2(&s.planes[0], &s.lo)
		} else {
			unshuffleBytes(&s.planes[0], lo, ngroups)
		}
	} else {
		clear(lo)
	}
	switch {
	case hiMask == 0x80 && useSIMD:
		unshuffleTopAVX2(&s.planes[1][7], &s.hi)
	case hiMask == 0x80:
		unshuffleTopBit(&s.planes[1][7], hi, ngroups)
	case hiMask != 0:
		for k := 0; k < 8; k++ {
			if hiMask&(1<<k) == 0 {
				clear(s.planes[1][k][:])
			}
		}
		if useSIMD {
			unshuffleAVX2(&s.planes[1], &s.hi)
		} else {
			unshuffleBytes(&s.planes[1], hi, ngroups)
		}
	default:
		clear(hi)
	}
	return decodeTileTail(s, &r, word0, int32(origin), dst, base, l, t, step, fill)
}

// decodeTileTail finishes a tile whose codes are in s.lo and s.hi (slot
// order; escapes as 0x8000): it reads the sections after the codes from r
// (escapes, fill, raw), undoes the prediction and writes the values.
func decodeTileTail[T float](s *tileScratch, r *reader, word0 uint32, origin int32, dst []T, base uint64, l *layout, t uint64, step float64, fill T) error {
	var z0, y0, x0 uint64
	var lz, ly, lx int
	var fr flatRun
	if l.flat {
		fr = l.flatRun(t)
		lz, ly, lx = 1, 1, fr.n
	} else {
		z0, y0, x0, lz, ly, lx = l.tileBox(t)
	}
	// A padded tile (§3.2) is decoded as the full tile; pb says which part
	// of it is written.
	var pb *paddedBox
	if l.padded && !l.flat && lz*ly*lx < TileElems {
		pb = &paddedBox{lz: lz, ly: ly, lx: lx, ty: l.ty, tx: l.tx}
		lz, ly, lx = l.tz, l.ty, l.tx
	}
	n := lz * ly * lx
	lo, hi := s.lo[:], s.hi[:]
	var err error

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
	var smapA *[TileElems]uint16
	var runs bool
	if l.flat {
		smapA, runs = l.full, l.fullRuns // the identity: slot e is element e
	} else {
		smapA, runs = l.slotMap(s, lz, ly, lx), l.mapRuns(s, lz, ly, lx)
	}
	smap := smapA[:n]
	if err := gatherResiduals(s, q, smapA, lz, ly, lx, runs, esc, nesc); err != nil {
		return err
	}
	q[0] = origin

	// Undo Lorenzo and dequantize into place. A padded tile's cells inside
	// the field are its box's lower corner, whose prefix sums only sum cells
	// inside, so its residuals are moved to the box's own row layout and
	// the box is undone as a clipped tile would be (the cells outside are
	// never computed).
	var zero T
	dz, dy, dx := lz, ly, lx // the box the values go to
	if pb != nil {
		dz, dy, dx = pb.lz, pb.ly, pb.lx
		pb.compact(q)
	}
	switch {
	case l.flat:
		flatLorenzoInverse(q, &fr)
		row := dst[fr.first-base : fr.first-base+uint64(n)]
		for x, v := range q {
			row[x] = reconstruct[T](v, step)
		}
	case useSIMD && dx%8 == 0:
		// The kernel writes rows off + z·ny·nx + y·nx + [0, dx): check
		// the last one.
		off := (z0*l.ny+y0)*l.nx + x0 - base
		_ = dst[off+(uint64(dz-1)*l.ny+uint64(dy-1))*l.nx+uint64(dx)-1]
		pf := int(unsafe.Sizeof(zero)) * l.nextTileDelta(z0, y0, x0)
		if unsafe.Sizeof(zero) == 4 {
			lorenzoDeqF32AVX2(&s.q, &s.brow, &s.zeroRow, dz, dy, dx, (*float32)(unsafe.Pointer(&dst[off])), int(l.nx), int(l.ny*l.nx), step, pf)
		} else {
			lorenzoDeqF64AVX2(&s.q, &s.brow, &s.zeroRow, dz, dy, dx, (*float64)(unsafe.Pointer(&dst[off])), int(l.nx), int(l.ny*l.nx), step, pf)
		}
	default:
		lorenzoInverse(q[:dz*dy*dx], dz, dy, dx)
		i := 0
		for z := 0; z < dz; z++ {
			for y := 0; y < dy; y++ {
				off := ((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx + x0 - base
				row := dst[off : off+uint64(dx)]
				qr := q[i : i+len(row)]
				for x, v := range qr {
					row[x] = reconstruct[T](v, step)
				}
				i += dx
			}
		}
	}

	// Lossless positions.
	put := func(p int, v T) {
		if l.flat {
			dst[fr.first+uint64(p)-base] = v
			return
		}
		if pb != nil { // cells outside the field are written nowhere
			z, y, x, ok := pb.inside(p)
			if ok {
				dst[((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx+x0+uint64(x)-base] = v
			}
			return
		}
		z, rem := p/(ly*lx), p%(ly*lx)
		y, x := rem/lx, rem%lx
		dst[((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx+x0+uint64(x)-base] = v
	}
	mask := func(what string) error {
		if l.flat {
			return r.flatMask(&s.mask, &fr, what)
		}
		return r.mask(&s.mask, smap, runs, lz, ly, lx, what)
	}
	if word0&tileHasFill != 0 {
		if err := mask("fill mask"); err != nil {
			return err
		}
		if l.flat {
			forEachBit(&s.mask, n, func(p int) { put(p, fill) })
		} else {
			// Row by row over the box the values go to (a padded tile's
			// rows are the full tile's, tx apart): a row's bits are read
			// a word at a time, with no position arithmetic a cell.
			for z := 0; z < dz; z++ {
				for y := 0; y < dy; y++ {
					row := dst[((z0+uint64(z))*l.ny+y0+uint64(y))*l.nx+x0-base:][:dx]
					p := (z*ly + y) * lx // the row's first bit
					for c := 0; c < dx; c += 57 {
						w := maskBits(&s.mask, p+c, min(57, dx-c))
						for w != 0 {
							row[c+bits.TrailingZeros64(w)] = fill
							w &= w - 1
						}
					}
				}
			}
		}
	}
	if word0&tileHasRaw != 0 {
		if err := mask("raw-value mask"); err != nil {
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

// gatherResiduals turns the codes of s.lo and s.hi (slot order) into the
// residuals of q (element order), taking escapes from esc (nesc of them).
func gatherResiduals(s *tileScratch, q []int32, smap *[TileElems]uint16, lz, ly, lx int, runs bool, esc []byte, nesc uint32) error {
	n8 := lx &^ 7
	if useSIMD && runs && n8 > 0 && nesc == 0 {
		// Without escapes every code maps to its residual on its own; a
		// stray 0x8000 code sends the tile to the reference loop, which
		// reports it.
		if gatherAVX2(&s.lo, &s.hi, smap, lz*ly, lx, n8, &q[0]) == 0 {
			ok := true
			if n8 < lx {
			rows:
				for r := 0; r < lz*ly; r++ {
					for e := r*lx + n8; e < (r+1)*lx; e++ {
						slot := smap[e] & (TileElems - 1)
						h, lb := s.hi[slot], s.lo[slot]
						if h == 0x80 && lb == 0 {
							ok = false
							break rows
						}
						sg := int32(h >> 7)
						q[e] = (int32(lb) | int32(h&0x7F)<<8 ^ -sg) + sg
					}
				}
			}
			if ok {
				return nil
			}
		}
	}
	used := uint32(0)
	lo, hi := &s.lo, &s.hi
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
	return nil
}

// planeNames name the bit planes in errors without formatting a string per
// plane and tile on the hot path.
var planeNames = func() (n [Planes]string) {
	for p := range n {
		n[p] = fmt.Sprintf("bit plane %d", p)
	}
	return
}()

// maskBits is the k ≤ 57 bits of m from bit p on, bit p lowest: one
// unaligned little-endian load (57 = 64 − 7, what a load at p's byte always
// holds).
func maskBits(m *[planeBytes]byte, p, k int) uint64 {
	b := p >> 3
	var w uint64
	if b+8 <= planeBytes {
		w = binary.LittleEndian.Uint64(m[b:])
	} else {
		for i := planeBytes - 1; i >= b; i-- {
			w = w<<8 | uint64(m[i])
		}
	}
	return w >> uint(p&7) & (1<<uint(k) - 1)
}

// forEachBit calls f with each set bit of the first n bits of m, in order.
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

// zeroBlocks reads a block mask and its blocks into plane. Error texts
// are built only on error: this runs for every plane of every tile.
func (r *reader) zeroBlocks(plane []byte, used int, what string) error {
	if len(r.b) < 4 {
		return fmt.Errorf("%s block mask: need %d bytes, only %d left", what, 4, len(r.b))
	}
	mask := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	if used < 32 && mask>>used != 0 {
		return fmt.Errorf("%s block mask %#08x names blocks past the tile's %d", what, mask, used)
	}
	nb := bits.OnesCount32(mask) * BlockBytes
	if nb > len(r.b) {
		return fmt.Errorf("%s blocks: need %d bytes, only %d left", what, nb, len(r.b))
	}
	blocks := r.b[:nb]
	r.b = r.b[nb:]
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
func (r *reader) mask(m *[planeBytes]byte, smap []uint16, runs bool, lz, ly, lx int, what string) error {
	var slots [planeBytes]byte
	if err := r.zeroBlocks(slots[:], blocksPerPlane, what); err != nil {
		return err
	}
	clear(m[:])
	set := 0
	if runs && lx%8 == 0 {
		// appendMask's byte moves the other way: 8 elements of a row on
		// 8 consecutive slots that start a byte take that byte whole.
		for i := range len(smap) / 8 {
			s0 := smap[8*i] & (TileElems - 1)
			if s0&7 == 0 {
				b := slots[s0>>3]
				m[i] = b
				set += bits.OnesCount8(b)
				continue
			}
			for j := 8 * i; j < 8*i+8; j++ {
				slot := smap[j] & (TileElems - 1)
				if slots[slot>>3]&(1<<(slot&7)) != 0 {
					m[j>>3] |= 1 << (j & 7)
					set++
				}
			}
		}
	} else {
		for e, slot := range smap {
			slot &= TileElems - 1
			if slots[slot>>3]&(1<<(slot&7)) != 0 {
				m[e>>3] |= 1 << (e & 7)
				set++
			}
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
