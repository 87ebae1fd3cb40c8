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
	edgeRuns  bool             // edgeMap passes runsOf8
	exc       [excWords]uint64 // elements the quantize kernel left to scalar code
	zeroRow   [TileElems]int32 // stays zero: the neighbours outside a tile
	brow      [TileElems]int32 // decoder's running x,y-sums of one row
	flatD     [TileElems]int32 // encoder's residuals of a flat tile
	// A padded tile's box fill and raw lists while expand writes the full
	// tile's (the two sets of slices swap, so neither allocates once grown).
	boxFill, boxRaw []int32
	boxRawVal       []uint64
}

// tileStats accumulate per worker.
type tileStats struct {
	maxErr   float64
	outliers uint64
}

// tileFlags is word 0's bits for the tile's escape, fill and raw sections.
func tileFlags(s *tileScratch) uint32 {
	var f uint32
	if len(s.esc) > 0 {
		f |= tileHasEscapes
	}
	if len(s.fill) > 0 {
		f |= tileHasFill
	}
	if len(s.raw) > 0 {
		f |= tileHasRaw
	}
	return f
}

// encodeTile appends the encoding of tile t of src to dst.
func encodeTile[T float](s *tileScratch, st *tileStats, src []T, l *layout, t uint64, qz *quantizer, dst []byte) []byte {
	c := tileCodeBits(s, st, src, l, t, qz)

	// 5. Zero-block encoding.
	word0 := c.planeMask | tileFlags(s)
	dst = binary.LittleEndian.AppendUint32(dst, word0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(c.origin))
	for pm := c.planeMask; pm != 0; pm &= pm - 1 {
		p := bits.TrailingZeros32(pm)
		dst = appendZeroBlocks(dst, s.planes[p/8][p%8][:], blocksPerPlane)
	}
	return appendTileTail[T](s, &c, dst)
}

// tileBits is what tileCodeBits leaves for the tile coding: the codes are
// in s.lo and s.hi (slot order) and, after tileCodeBits, in s.planes (only
// the planes of planeMask are valid); the escape, fill and raw lists in s.
type tileBits struct {
	lz, ly, lx int
	smap       *[TileElems]uint16
	runs       bool // smap passes runsOf8
	origin     int32
	orLo, orHi byte   // OR of the low and of the high code bytes
	planeMask  uint32 // bit p: plane p has a set bit (set by shufflePlanes)
	// flat: a flat tile (lz, ly = 1, lx = n, smap the identity), run its
	// geometry; its residuals are in s.flatD.
	flat bool
	run  flatRun
}

// tileCodeBits runs stages 1–4 of encodeTile (quantize, holes, Lorenzo
// codes, bitshuffle) for tile t.
func tileCodeBits[T float](s *tileScratch, st *tileStats, src []T, l *layout, t uint64, qz *quantizer) tileBits {
	c := tileCodes(s, st, src, l, t, qz)
	shufflePlanes(s, &c)
	return c
}

// tileCodes runs stages 1–3 of encodeTile (quantize, holes, Lorenzo codes)
// for tile t: the codes go to s.lo and s.hi.
func tileCodes[T float](s *tileScratch, st *tileStats, src []T, l *layout, t uint64, qz *quantizer) tileBits {
	if l.flat {
		return flatTileCodes(s, st, src, l, t, qz)
	}
	z0, y0, x0, lz, ly, lx := l.tileBox(t)
	n := lz * ly * lx
	q := s.q[:n]
	s.holes, s.fill, s.raw, s.rawVal, s.esc = s.holes[:0], s.fill[:0], s.raw[:0], s.rawVal[:0], s.esc[:0]

	// 1. Pre-quantize, re-checking every value exactly as the decoder
	// reconstructs it.
	quantizeTile(s, st, src, l, z0, y0, x0, lz, ly, lx, qz)
	st.outliers += uint64(len(s.raw)) // the values the field has (not a padded tile's copies)
	if l.padded && n < TileElems {
		// §3.2: the full tile of the field padded by its edge values.
		// Each cell outside repeats one inside, and quantizing a value
		// is a function of the value: the box is quantized once and its
		// q and lists copied out to the full tile (as quantizing the
		// padded values would give them, in less time).
		pb := paddedBox{lz: lz, ly: ly, lx: lx, ty: l.ty, tx: l.tx}
		pb.expand(s, l.tz) // holes filled, with the full tile's placeholders
		lz, ly, lx, n = l.tz, l.ty, l.tx, TileElems
		q = s.q[:n]
	} else {
		fillHoles(q, s.holes, lz, ly, lx, 1, 1)
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
	smap := l.slotMap(s, lz, ly, lx)
	runs := l.mapRuns(s, lz, ly, lx)
	orLo, orHi := codesTile(s, q, lz, ly, lx, smap, runs)
	lo[0], hi[0] = 0, 0
	return tileBits{lz: lz, ly: ly, lx: lx, smap: smap, runs: runs, origin: origin, orLo: orLo, orHi: orHi}
}

// fillHoles gives the holes (sorted positions in q, a box of lz planes of
// ly rows of lx elements in element order) their placeholders, plane by
// plane (docs/FORMAT.md §4, "Holes"), so that holes disturb their
// neighbours' residuals as little as possible: the holes of plane z take
// p_z = trunc(Σq / count) over the plane's elements that have a q (int64
// sum, integer division truncating toward zero); a plane with none takes
// the p of the nearest earlier plane that has one, planes before the first
// plane that has one take that plane's p, and every hole gets 0 when no
// element has a q. A tile of one plane (rank 1 and 2, flat tiles, lz = 1)
// takes the mean q of the tile.
//
// wy and wx are how often the last row and the last column of a plane
// count: 1 for a box tile; a padded tile's box (§3.2) passes ty−ly+1 and
// tx−lx+1, its copies out to the full tile's edges (the corner counts
// wy·wx times), and the full tile's planes past the box repeat its last
// plane and so have its placeholder. q at the holes holds stale values
// until then (whatever an earlier tile left); they are summed and taken out
// again with the same weights, exactly.
func fillHoles(q, holes []int32, lz, ly, lx int, wy, wx int64) {
	if len(holes) == 0 {
		return
	}
	plane := ly * lx
	h := 0     // the first hole of plane z
	last := -1 // the last plane so far that has a q
	var lastP int32
	lastKnown := false // lastP is last's placeholder (else last has no holes and no p yet)
	for z := 0; z < lz; z++ {
		start := z * plane
		h2 := h
		for h2 < len(holes) && int(holes[h2]) < start+plane {
			h2++
		}
		if h2-h == plane { // no element of plane z has a q
			if last >= 0 {
				if !lastKnown {
					lastP, lastKnown = planeMean(q, nil, last*plane, ly, lx, wy, wx), true
				}
				for _, e := range holes[h:h2] {
					q[e] = lastP
				}
			}
			h = h2
			continue
		}
		if h2 > h || (last < 0 && h > 0) {
			p := planeMean(q, holes[h:h2], start, ly, lx, wy, wx)
			from := h
			if last < 0 {
				from = 0 // and the leading planes without a q, all holes
			}
			for _, e := range holes[from:h2] {
				q[e] = p
			}
			lastP, lastKnown = p, true
		} else {
			lastKnown = false
		}
		last, h = z, h2
	}
	if last < 0 { // no element has a q
		for _, e := range holes {
			q[e] = 0
		}
	}
}

// planeMean is fillHoles's p for the plane of q at start (ly rows of lx)
// whose holes are holes (sorted, in the plane), the last row counted wy
// times and the last column wx times: the caller makes sure the plane has
// an element with a q.
func planeMean(q, holes []int32, start, ly, lx int, wy, wx int64) int32 {
	var sum, holeW int64
	if wy == 1 && wx == 1 {
		for _, v := range q[start : start+ly*lx] {
			sum += int64(v)
		}
		for _, e := range holes {
			sum -= int64(q[e])
		}
		return int32(sum / int64(ly*lx-len(holes)))
	}
	h := 0
	for y := 0; y < ly; y++ {
		w := int64(1)
		if y == ly-1 {
			w = wy
		}
		rs0 := start + y*lx
		row := q[rs0 : rs0+lx]
		var rs int64
		for _, v := range row {
			rs += int64(v)
		}
		rs += (wx - 1) * int64(row[lx-1])
		for ; h < len(holes) && int(holes[h]) < rs0+lx; h++ {
			c := int64(1)
			if int(holes[h]) == rs0+lx-1 {
				c = wx
			}
			rs -= c * int64(q[holes[h]])
			holeW += w * c
		}
		sum += w * rs
	}
	return int32(sum / ((int64(ly)-1+wy)*(int64(lx)-1+wx) - holeW))
}

// recodes redoes the codes of c's tile with threshold maxMag and escape
// code esc (codesScalarMax's), from s.q or, for a flat tile, s.flatD.
func recodes(s *tileScratch, c *tileBits, maxMag uint32, esc uint16) (orLo, orHi byte) {
	n := c.lz * c.ly * c.lx
	if c.flat {
		return residualCodes(s, s.flatD[:n], maxMag, esc)
	}
	return codesScalarMax(s, s.q[:n], c.lz, c.ly, c.lx, c.smap, maxMag, esc)
}

// shufflePlanes runs stage 4 of encodeTile: it turns the codes of s.lo and
// s.hi into the bit planes of s.planes and sets c.planeMask. Planes outside
// the mask are left as they were.
func shufflePlanes(s *tileScratch, c *tileBits) {
	const ngroups = TileElems / 8
	orLo, orHi := c.orLo, c.orHi
	c.planeMask = uint32(orLo) | uint32(orHi)<<8
	lo, hi := &s.lo, &s.hi
	switch {
	case orLo == 0:
	case useSIMD:
		shuffleAVX2(lo, &s.planes[0])
	default:
		shuffleBytes(lo[:], &s.planes[0], ngroups)
	}
	switch {
	case orHi == 0:
	case orHi == 0x80 && useSIMD:
		shuffleTopAVX2(hi, &s.planes[1][7])
	case orHi == 0x80:
		shuffleTopBit(hi[:], &s.planes[1][7], ngroups)
	case useSIMD:
		shuffleAVX2(hi, &s.planes[1])
	default:
		shuffleBytes(hi[:], &s.planes[1], ngroups)
	}
}

// appendTileTail appends the sections after the codes: escapes, fill mask,
// raw mask and values.
func appendTileTail[T float](s *tileScratch, c *tileBits, dst []byte) []byte {
	lz, ly, lx := c.lz, c.ly, c.lx
	n := lz * ly * lx
	smap := c.smap
	if len(s.esc) > 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.esc)))
		for _, d := range s.esc {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
		}
	}
	mask := func(dst []byte, pos []int32) []byte {
		if c.flat {
			return appendFlatMask(dst, &s.mask, pos, &c.run)
		}
		return appendMask(dst, &s.mask, pos, smap[:n], c.runs, lz, ly, lx)
	}
	if len(s.fill) > 0 {
		dst = mask(dst, s.fill)
	}
	if len(s.raw) > 0 {
		dst = mask(dst, s.raw)
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

// quantizeTile runs stage 1 of encodeTile over the box: q for every
// element, the fill, raw and hole lists in element order, the tile's
// maxErr (q at the holes is left as it was: fillHoles gives them theirs).
func quantizeTile[T float](s *tileScratch, st *tileStats, src []T, l *layout, z0, y0, x0 uint64, lz, ly, lx int, qz *quantizer) {
	off := (z0*l.ny+y0)*l.nx + x0
	quantizeSpan(s, st, src, off, l.nx, l.ny*l.nx, lz, ly, lx, qz, l.nextTileDelta(z0, y0, x0))
}

// quantizeSpan is quantizeTile for the lz×ly×lx box of src whose first
// value is src[off], rows rowStride and planes planeStride values apart
// (a flat tile is one row of n values). next is the distance in values to
// the next tile's first value (a prefetch hint only; 0 for none).
func quantizeSpan[T float](s *tileScratch, st *tileStats, src []T, off, rowStride, planeStride uint64, lz, ly, lx int, qz *quantizer, next int) {
	q := s.q[:lz*ly*lx]
	maxErr := st.maxErr
	var zero T
	wide := unsafe.Sizeof(zero) == 8
	nv := lx &^ 7 // values per row the kernel takes: whole groups of 8 (f32) or 4 (f64)
	if wide {
		nv = lx &^ 3
	}
	if !useSIMD || nv == 0 {
		i := 0
		for z := 0; z < lz; z++ {
			for y := 0; y < ly; y++ {
				o := off + uint64(z)*planeStride + uint64(y)*rowStride
				maxErr = quantRow(s, src[o:o+uint64(lx)], i, q[i:i+lx], qz, maxErr)
				i += lx
			}
		}
		st.maxErr = maxErr
		return
	}
	// The kernel finishes every group of values that quantize, pass the
	// check and are not fill (almost all of them) and flags the others in
	// s.exc; row tails shorter than a group are flagged here. The flagged
	// elements then go, in element order, through quantRow itself, so the
	// lists and q are exactly those of the scalar loop.
	clear(s.exc[:])
	k := quantK{inv: qz.inv, step: qz.step, eb: qz.eb}
	if qz.hasFill {
		k.fill, k.fillOn = qz.fillBits, 1
	}
	// The kernel reads rows off + z·planeStride + y·rowStride + [0, nv):
	// check the last.
	_ = src[off+uint64(lz-1)*planeStride+uint64(ly-1)*rowStride+uint64(lx)-1]
	pf := int(unsafe.Sizeof(zero)) * next
	var km float64
	if wide {
		km = quantF64AVX2((*float64)(unsafe.Pointer(&src[off])), int(rowStride), int(planeStride), lz, ly, lx, nv, &s.exc, &s.q, &k, pf)
	} else {
		km = quantF32AVX2((*float32)(unsafe.Pointer(&src[off])), int(rowStride), int(planeStride), lz, ly, lx, nv, &s.exc, &s.q, &k, pf)
	}
	maxErr = max(maxErr, km)
	if nv < lx {
		for r := 0; r < lz*ly; r++ {
			for i := r*lx + nv; i < (r+1)*lx; i++ {
				s.exc[i>>6] |= 1 << (i & 63)
			}
		}
	}
	// The flagged elements in element order; their row's offset in src is
	// found once a row (fill fields flag nearly half of theirs), and a fill
	// value is listed here as quantRow would list it.
	rowFirst, rowEnd := 0, 0 // the current row's elements [rowFirst, rowEnd)
	var rowOff uint64
	for w, bitsw := range s.exc {
		for bitsw != 0 {
			i := w*64 + bits.TrailingZeros64(bitsw)
			bitsw &= bitsw - 1
			if i >= rowEnd {
				r := i / lx
				rowFirst, rowEnd = r*lx, r*lx+lx
				rowOff = off + uint64(r/ly)*planeStride + uint64(r%ly)*rowStride
			}
			o := rowOff + uint64(i-rowFirst)
			if qz.hasFill && bitsOf(src[o]) == qz.fillBits {
				s.listFill(i)
				continue
			}
			maxErr = quantRow(s, src[o:o+1], i, q[i:i+1], qz, maxErr)
		}
	}
	st.maxErr = maxErr
}

// quantRow is the reference quantizer: it quantizes and re-checks row,
// whose first value is element i0, into qr, appending to the fill, raw and
// hole lists; it returns the updated maxErr. The common path is
// branch-light; holes, fill and failed checks leave it.
func quantRow[T float](s *tileScratch, row []T, i0 int, qr []int32, qz *quantizer, maxErr float64) float64 {
	inv, step, eb := qz.inv, qz.step, qz.eb
	hasFill, fillBits := qz.hasFill, qz.fillBits
	qr = qr[:len(row)]
	for x, xv := range row {
		sv := float64(float64(xv) * inv)
		if hasFill && bitsOf(xv) == fillBits {
			s.listFill(i0 + x)
			continue
		}
		if !(math.Abs(sv) < qLimit) {
			s.raw = append(s.raw, int32(i0+x))
			s.rawVal = append(s.rawVal, bitsOf(xv))
			s.holes = append(s.holes, int32(i0+x))
			continue
		}
		qf := float64(float64(sv+rintMagic) - rintMagic)
		v := int32(qf)
		// qf is an integer, so qf·step equals float64(v)·step.
		e := math.Abs(float64(xv) - float64(T(float64(qf*step))))
		if !(e <= eb) {
			// Keep v for prediction; store the value itself.
			s.raw = append(s.raw, int32(i0+x))
			s.rawVal = append(s.rawVal, bitsOf(xv))
		} else if e > maxErr {
			maxErr = e
		}
		qr[x] = v
	}
	return maxErr
}

// listFill lists element i as a fill value: a fill position and a hole
// (its plane's placeholder gives it a q for its neighbours' residuals).
func (s *tileScratch) listFill(i int) {
	s.fill = append(s.fill, int32(i))
	s.holes = append(s.holes, int32(i))
}

// codesTile runs stages 2+3 of encodeTile: the Lorenzo residual of every
// element but the origin, as a sign-magnitude code split into s.lo and
// s.hi at its slot, large residuals to s.esc. It returns the OR of the low
// and of the high code bytes. runs says smap passes runsOf8.
func codesTile(s *tileScratch, q []int32, lz, ly, lx int, smap *[TileElems]uint16, runs bool) (orLo, orHi byte) {
	n8 := lx &^ 7
	if !useSIMD || !runs || n8 == 0 {
		return codesScalar(s, q, lz, ly, lx, smap)
	}
	or, esc := codesAVX2(&s.q[0], lz, ly, lx, n8, smap, &s.lo, &s.hi, &s.zeroRow)
	if esc != 0 {
		// Escapes are listed in element order: rare, so redo the tile.
		return codesScalar(s, q, lz, ly, lx, smap)
	}
	if n8 < lx {
		// Row tails: d = col(x) − col(x−1), x ≥ 8.
		plane := ly * lx
		col := func(e, y, z int) int32 {
			c := q[e]
			if y > 0 {
				c -= q[e-lx]
			}
			if z > 0 {
				c -= q[e-plane]
				if y > 0 {
					c += q[e-plane-lx]
				}
			}
			return c
		}
		for z := 0; z < lz; z++ {
			for y := 0; y < ly; y++ {
				e := (z*ly + y) * lx
				for x := n8; x < lx; x++ {
					d := col(e+x, y, z) - col(e+x-1, y, z)
					sg := d >> 31
					m := uint32((d ^ sg) - sg)
					if m > maxCode {
						return codesScalar(s, q, lz, ly, lx, smap)
					}
					slot := smap[e+x] & (TileElems - 1)
					s.lo[slot], s.hi[slot] = byte(m), byte(m>>8)|byte(sg)&0x80
					or |= m | uint32(sg)&0x8000
				}
			}
		}
	}
	return byte(or), byte(or >> 8)
}

// codesScalar is the reference for codesTile.
func codesScalar(s *tileScratch, q []int32, lz, ly, lx int, smap *[TileElems]uint16) (orLo, orHi byte) {
	return codesScalarMax(s, q, lz, ly, lx, smap, maxCode, escapeCode)
}

// codesScalarMax is codesScalar escaping every residual whose magnitude
// exceeds maxMag, with code esc in its slot (version 1: 0x8000; version 2:
// 0x7FFF, magnitude 32767 with sign 0).
func codesScalarMax(s *tileScratch, q []int32, lz, ly, lx int, smap *[TileElems]uint16, maxMag uint32, esc uint16) (orLo, orHi byte) {
	lo, hi := &s.lo, &s.hi
	s.esc = s.esc[:0]
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
				if m > maxMag {
					s.esc = append(s.esc, d)
					lo[slot], hi[slot] = byte(esc), byte(esc>>8)
					orLo |= byte(esc)
					orHi |= byte(esc >> 8)
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
	return orLo, orHi
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
func appendMask(dst []byte, m *[planeBytes]byte, pos []int32, smap []uint16, runs bool, lz, ly, lx int) []byte {
	var e [planeBytes]byte
	for _, p := range pos {
		e[p>>3] |= 1 << (p & 7)
	}
	xorLorenzo(&e, lz, ly, lx, false)
	clear(m[:])
	n := lz * ly * lx
	if runs && lx%8 == 0 {
		// Each byte of e is 8 elements of one row, on 8 consecutive
		// slots (runsOf8): where those start a byte of m, the byte moves
		// whole (the sub-block shapes this package writes).
		for i, b := range e[:n/8] {
			if b == 0 {
				continue
			}
			if s0 := smap[8*i] & (TileElems - 1); s0&7 == 0 {
				m[s0>>3] = b
				continue
			}
			for ; b != 0; b &= b - 1 {
				slot := smap[8*i+bits.TrailingZeros8(b)] & (TileElems - 1)
				m[slot>>3] |= 1 << (slot & 7)
			}
		}
		return appendZeroBlocks(dst, m[:], blocksPerPlane)
	}
	forEachBit(&e, n, func(p int) {
		slot := smap[p] & (TileElems - 1)
		m[slot>>3] |= 1 << (slot & 7)
	})
	return appendZeroBlocks(dst, m[:], blocksPerPlane)
}

// lorenzoInverse undoes the Lorenzo prediction by prefix sums along x, then y, then z.
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
