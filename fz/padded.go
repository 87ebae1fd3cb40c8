package fz

import "unsafe"

// Padded box tiles (header flags bit 2, docs/FORMAT.md §3.2): a clipped tile
// is coded exactly as the full tile of the field extended past its far
// edges by repeating the nearest value inside. Every residual of a cell
// outside is then 0 (Lorenzo's differences of a value repeated along an
// axis vanish), and so is every bit of the masks' parity transform there.
// A GPU codec walks such a tile with its full-tile walk from clamped loads;
// the ratio only pays where the field's edges leave thin sub-blocks
// (cuda/PERF.md item 1, cuda/tools/clipped_pad_size.py).

// padValues is the full tz×ty×tx tile at (z0, y0, x0) of src, the cells past
// the field (z ≥ lz, y ≥ ly or x ≥ lx from the corner) taking the value of
// cell (min(z, lz−1), min(y, ly−1), min(x, lx−1)); in s.padv.
func padValues[T float](s *tileScratch, src []T, l *layout, z0, y0, x0 uint64, lz, ly, lx int) []T {
	var zero T
	pv := asFloats[T](s.padv[:TileElems*int(unsafe.Sizeof(zero))])
	i := 0
	for z := 0; z < l.tz; z++ {
		for y := 0; y < l.ty; y++ {
			o := ((z0+uint64(min(z, lz-1)))*l.ny+y0+uint64(min(y, ly-1)))*l.nx + x0
			row := src[o : o+uint64(lx)]
			copy(pv[i:i+lx], row)
			last := row[lx-1]
			for x := lx; x < l.tx; x++ {
				pv[i+x] = last
			}
			i += l.tx
		}
	}
	return pv
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

// forEachInside calls f for each set bit of m (a mask of the full tile in
// element order) that lies inside the field, row by row.
func (b *paddedBox) forEachInside(m *[planeBytes]byte, f func(z, y, x int)) {
	for z := 0; z < b.lz; z++ {
		for y := 0; y < b.ly; y++ {
			p := (z*b.ty + y) * b.tx
			for x := 0; x < b.lx; x++ {
				if m[(p+x)>>3]&(1<<((p+x)&7)) != 0 {
					f(z, y, x)
				}
			}
		}
	}
}

// rawInside counts the raw positions of s (full-tile element order) inside
// the field: the values stored losslessly that the field has (a padded
// tile stores an edge value again for each cell outside that repeats it).
func (b *paddedBox) rawInside(raw []int32) uint64 {
	var n uint64
	for _, p := range raw {
		if _, _, _, ok := b.inside(int(p)); ok {
			n++
		}
	}
	return n
}
