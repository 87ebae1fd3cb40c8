package fz

import "fmt"

// layout is the geometry shared by encoder and decoder: the field folded to
// at most three dimensions, its tiles and its chunks.
type layout struct {
	n          uint64             // elements
	nz, ny, nx uint64             // folded shape, slowest → fastest
	tz, ty, tx int                // tile shape
	bz, by, bx int                // sub-block shape: 128 code slots, one zero-block
	full       *[TileElems]uint16 // element→slot map of an unclipped tile
	gz, gy, gx uint64             // tiles along each axis
	tiles      uint64
	perChunk   uint64 // tiles per chunk
	chunks     uint64
}

// foldDims drops dimensions of extent 1 and folds all leading dimensions
// beyond three into the slowest one. Lorenzo prediction sees the result.
func foldDims(dims []uint64) (nz, ny, nx uint64, rank int) {
	var kept []uint64
	for _, d := range dims {
		if d != 1 {
			kept = append(kept, d)
		}
	}
	switch len(kept) {
	case 0:
		return 1, 1, 1, 1
	case 1:
		return 1, 1, kept[0], 1
	case 2:
		return 1, kept[0], kept[1], 2
	}
	nz = 1
	for _, d := range kept[:len(kept)-2] {
		nz *= d
	}
	return nz, kept[len(kept)-2], kept[len(kept)-1], 3
}

// defaultTile is the tile shape for a folded rank; docs/FORMAT.md records
// the measurements behind each choice.
type shape struct{ tile, block [3]int }

var defaultShape = defaultShapeOf

func defaultShapeOf(rank int) shape {
	switch rank {
	case 1:
		return shape{[3]int{1, 1, 4096}, [3]int{1, 1, 128}}
	case 2:
		return shape{[3]int{1, 64, 64}, [3]int{1, 16, 8}}
	}
	return shape{[3]int{8, 16, 32}, [3]int{4, 4, 8}}
}

func newLayout(dims []uint64, sh shape, perChunk uint64) (*layout, error) {
	n, err := NumElements(dims)
	if err != nil {
		return nil, err
	}
	tz, ty, tx := sh.tile[0], sh.tile[1], sh.tile[2]
	bz, by, bx := sh.block[0], sh.block[1], sh.block[2]
	if tz < 1 || ty < 1 || tx < 1 || tz*ty*tx != TileElems {
		return nil, fmt.Errorf("tile shape %dx%dx%d: expected positive extents with %d elements", tz, ty, tx, TileElems)
	}
	if bz < 1 || by < 1 || bx < 1 || bz*by*bx != 8*BlockBytes || tz%bz != 0 || ty%by != 0 || tx%bx != 0 {
		return nil, fmt.Errorf("sub-block shape %dx%dx%d: expected %d elements dividing the tile %dx%dx%d", bz, by, bx, 8*BlockBytes, tz, ty, tx)
	}
	if perChunk < 1 || perChunk > MaxTilesPerChunk {
		return nil, fmt.Errorf("tiles per chunk %d: expected 1..%d", perChunk, MaxTilesPerChunk)
	}
	l := &layout{n: n, tz: tz, ty: ty, tx: tx, bz: bz, by: by, bx: bx, perChunk: perChunk}
	l.full = new([TileElems]uint16)
	l.fillSlotMap(l.full, tz, ty, tx)

	if n == 0 {
		return l, nil
	}
	l.nz, l.ny, l.nx, _ = foldDims(dims)
	l.gz = ceilDiv(l.nz, uint64(tz))
	l.gy = ceilDiv(l.ny, uint64(ty))
	l.gx = ceilDiv(l.nx, uint64(tx))
	l.tiles = l.gz * l.gy * l.gx
	l.chunks = ceilDiv(l.tiles, perChunk)
	return l, nil
}

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// tileBox returns the origin and clipped extents of tile t.
func (l *layout) tileBox(t uint64) (z0, y0, x0 uint64, lz, ly, lx int) {
	ix := t % l.gx
	iy := (t / l.gx) % l.gy
	iz := t / (l.gx * l.gy)
	z0, y0, x0 = iz*uint64(l.tz), iy*uint64(l.ty), ix*uint64(l.tx)
	lz = int(min(uint64(l.tz), l.nz-z0))
	ly = int(min(uint64(l.ty), l.ny-y0))
	lx = int(min(uint64(l.tx), l.nx-x0))
	return
}

// chunkTiles returns the tile range [first, end) of chunk c.
func (l *layout) chunkTiles(c uint64) (first, end uint64) {
	first = c * l.perChunk
	end = min(first+l.perChunk, l.tiles)
	return
}

// chunkElems counts the values held by chunk c.
func (l *layout) chunkElems(c uint64) uint64 {
	first, end := l.chunkTiles(c)
	var n uint64
	for t := first; t < end; t++ {
		_, _, _, lz, ly, lx := l.tileBox(t)
		n += uint64(lz * ly * lx)
	}
	return n
}

// fillSlotMap writes, for each element of a tile clipped to lz×ly×lx (in
// row-major order of that box), its code slot. Slots visit the clipped box
// sub-block by sub-block (each bz×by×bx, clipped at the box's edges),
// row-major inside each, with no gaps: a zero-block of 128 slots then
// covers a compact patch of the field, and edge tiles stay dense.
func (l *layout) fillSlotMap(dst *[TileElems]uint16, lz, ly, lx int) {
	bz, by, bx := l.bz, l.by, l.bx
	full := lx / bx * bx
	e := 0
	for z := 0; z < lz; z++ {
		i, dz := z/bz, z%bz
		ez := min(bz, lz-i*bz)
		for y := 0; y < ly; y++ {
			j, dy := y/by, y%by
			ey := min(by, ly-j*by)
			a := i*bz*ly*lx + ez*j*by*lx // values in earlier slabs and row bands
			band := ez * ey              // values per unit of x in this band
			r := dz*ey + dy              // row inside its sub-blocks
			for k0 := 0; k0 < full; k0 += bx {
				base := a + band*k0 + r*bx
				for dx := 0; dx < bx; dx++ {
					dst[e] = uint16(base + dx)
					e++
				}
			}
			if full < lx {
				base := a + band*full + r*(lx-full)
				for x := full; x < lx; x++ {
					dst[e] = uint16(base + x - full)
					e++
				}
			}
		}
	}
}

// slotMap returns the element→slot map for a tile clipped to lz×ly×lx,
// reusing the layout's full-tile map or the scratch's last edge map.
func (l *layout) slotMap(s *tileScratch, lz, ly, lx int) *[TileElems]uint16 {
	if lz == l.tz && ly == l.ty && lx == l.tx {
		return l.full
	}
	if k := [3]int{lz, ly, lx}; s.edgeKey != k || s.edgeOwner != l {
		l.fillSlotMap(&s.edgeMap, lz, ly, lx)
		s.edgeKey, s.edgeOwner = k, l
	}
	return &s.edgeMap
}
