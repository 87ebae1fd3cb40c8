package fz

// Padded box tiles (header flags bit 2, docs/FORMAT.md §3.2): a clipped tile
// is coded exactly as the full tile of the field extended past its far
// edges by repeating the nearest value inside. Every residual of a cell
// outside is then 0 (Lorenzo's differences of a value repeated along an
// axis vanish), and so is every bit of the masks' parity transform there.
// A GPU codec walks such a tile with its full-tile walk from clamped loads;
// the ratio only pays where the field's edges leave thin sub-blocks
// (cuda/PERF.md item 1, cuda/tools/clipped_pad_size.py).

// expand turns the quantized box of s (q in s.q in the box's row layout,
// the hole, fill and raw lists in box element order) into the full tile of
// tz planes that quantizing the padded values would give, holes already
// filled: the placeholders (per plane of the full tile, §4: the mean q of
// the plane's other cells, each box cell counted as often as it is
// repeated; fillHoles's weights) go into the box's holes, q of every cell
// outside is its nearest inside cell's, and the fill and raw lists name
// every copy of a listed cell, in full-tile element order (a raw value's
// bits repeated with it). s.holes is left empty.
func (b *paddedBox) expand(s *tileScratch, tz int) {
	if len(s.holes) > 0 {
		// The full tile's planes past the box repeat its last plane,
		// holes and placeholder with it.
		fillHoles(s.q[:b.lz*b.ly*b.lx], s.holes, b.lz, b.ly, b.lx, int64(b.ty-b.ly+1), int64(b.tx-b.lx+1))
		s.holes = s.holes[:0]
	}
	// q, in place from the last full row down: rows past the box's last
	// plane are written above the whole box, and a row f of the box's
	// planes takes box row r ≤ f and writes [f·tx, f·tx+tx), at or above the
	// end of every box row the rows below it still need (rows before r;
	// ly ≤ ty, lx ≤ tx).
	for z := tz - 1; z >= 0; z-- {
		for y := b.ty - 1; y >= 0; y-- {
			src := (min(z, b.lz-1)*b.ly + min(y, b.ly-1)) * b.lx
			dst := (z*b.ty + y) * b.tx
			copy(s.q[dst:dst+b.lx], s.q[src:src+b.lx])
			last := s.q[dst+b.lx-1]
			for x := dst + b.lx; x < dst+b.tx; x++ {
				s.q[x] = last
			}
		}
	}
	if len(s.fill) == 0 && len(s.raw) == 0 {
		return
	}
	s.boxFill, s.fill = s.fill, s.boxFill[:0]
	s.boxRaw, s.raw = s.raw, s.boxRaw[:0]
	s.boxRawVal, s.rawVal = s.rawVal, s.boxRawVal[:0]
	// Each list is sorted by box element, so a box row's entries are one
	// run, and a cursor per list moves on to it when the box row changes.
	// Full rows past the box's last plane go back to that plane's first
	// row, whose cursors are kept.
	var cf, cr, lastF, lastR int
	prev, lastPlane := -1, (b.lz-1)*b.ly
	for z := 0; z < tz; z++ {
		for y := 0; y < b.ty; y++ {
			r := min(z, b.lz-1)*b.ly + min(y, b.ly-1)
			start, end := r*b.lx, (r+1)*b.lx
			if r != prev {
				if r < prev {
					cf, cr = lastF, lastR
				}
				cf, cr = skipBelow(s.boxFill, cf, start), skipBelow(s.boxRaw, cr, start)
				if r == lastPlane {
					lastF, lastR = cf, cr
				}
				prev = r
			}
			base := int32((z*b.ty+y)*b.tx - start) // box element → full-tile element, this row
			s.fill = b.appendRun(s.fill, s.boxFill[cf:], end, base)
			for i := cr; i < len(s.boxRaw) && int(s.boxRaw[i]) < end; i++ {
				s.raw = append(s.raw, s.boxRaw[i]+base)
				s.rawVal = append(s.rawVal, s.boxRawVal[i])
				if int(s.boxRaw[i]) == end-1 { // the row's last cell repeats to the tile's edge
					for p := s.boxRaw[i] + base + 1; p < base+int32(start+b.tx); p++ {
						s.raw = append(s.raw, p)
						s.rawVal = append(s.rawVal, s.boxRawVal[i])
					}
				}
			}
		}
	}
}

// skipBelow moves cursor i of the sorted list on to its first entry at or
// above start.
func skipBelow(list []int32, i, start int) int {
	for i < len(list) && int(list[i]) < start {
		i++
	}
	return i
}

// appendRun appends to dst the entries of run (a sorted list from the
// cursor on) below end, shifted by base into the full tile's row, and, when
// the row's last box cell (end−1) is among them, its copies out to the
// tile's edge.
func (b *paddedBox) appendRun(dst, run []int32, end int, base int32) []int32 {
	for _, e := range run {
		if int(e) >= end {
			break
		}
		dst = append(dst, e+base)
		if int(e) == end-1 {
			for p := e + base + 1; p < int32(end-b.lx+b.tx)+base; p++ {
				dst = append(dst, p)
			}
		}
	}
	return dst
}

// paddedBox is how decodeTileTail reads a padded tile: the full tile's
// extents for its codes and masks, the clipped box for what it writes.
type paddedBox struct {
	lz, ly, lx int // the part inside the field
	ty, tx     int // the full tile's rows and planes
}

// inside says whether element p of the full tile lies in the field, and
// where.
func (b *paddedBox) inside(p int) (z, y, x int, ok bool) {
	z, r := p/(b.ty*b.tx), p%(b.ty*b.tx)
	y, x = r/b.tx, r%b.tx
	return z, y, x, z < b.lz && y < b.ly && x < b.lx
}

// compact moves the cells inside the field of q (the full tile in element
// order) to the front, in the box's own element order (rows of lx): the
// layout a clipped box tile has. Every cell moves to an index no larger
// than its own, so the copy goes in place.
func (b *paddedBox) compact(q []int32) {
	i := 0
	for z := 0; z < b.lz; z++ {
		for y := 0; y < b.ly; y++ {
			p := (z*b.ty + y) * b.tx
			copy(q[i:i+b.lx], q[p:p+b.lx])
			i += b.lx
		}
	}
}
