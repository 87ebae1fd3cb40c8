package fz

import (
	"fmt"
	"math/big"
)

// layout is the geometry shared by encoder and decoder: the field folded to
// at most three dimensions, its tiles and its chunks.
type layout struct {
	n          uint64             // elements
	nz, ny, nx uint64             // folded shape, slowest → fastest
	tz, ty, tx int                // tile shape
	bz, by, bx int                // sub-block shape: 128 code slots, one zero-block
	full       *[TileElems]uint16 // element→slot map of an unclipped tile
	fullRuns   bool               // full passes runsOf8 (the vector kernels may use it)
	gz, gy, gx uint64             // tiles along each axis
	tiles      uint64
	perChunk   uint64 // tiles per chunk
	chunks     uint64
	// flat: tile t is the run of flat indices [4096t, 4096t+n) (header
	// flags bit 1, docs/FORMAT.md §3.1); the tile shape is flatShape and
	// gz, gy, gx are 1, 1, tiles. tileBox and nextTileDelta are for box
	// tiles only.
	flat bool
	// padded: a clipped box tile is coded as a full one whose cells outside
	// the field repeat the nearest cell inside (header flags bit 2,
	// docs/FORMAT.md §3.2): tileCodes and decodeTileTail.
	padded bool
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

// flatShape is the tile and sub-block shape of flat tiles (§3.1).
var flatShape = shape{[3]int{1, 1, TileElems}, [3]int{1, 1, 8 * BlockBytes}}

// newLayout is the box-tiled layout of dims.
func newLayout(dims []uint64, sh shape, perChunk uint64) (*layout, error) {
	return newLayoutOf(dims, sh, perChunk, false)
}

// newFlatLayout is the flat-tiled layout of dims (§3.1).
func newFlatLayout(dims []uint64, perChunk uint64) (*layout, error) {
	return newLayoutOf(dims, flatShape, perChunk, true)
}

// newLayoutOf is the layout of dims with tile shape sh, flat tiles when
// flat is set (sh must then be flatShape).
func newLayoutOf(dims []uint64, sh shape, perChunk uint64, flat bool) (*layout, error) {
	if flat && sh != flatShape {
		return nil, fmt.Errorf("flat tiles (flags bit 1) need tile shape 1x1x%d and sub-block 1x1x%d, not %dx%dx%d and %dx%dx%d",
			TileElems, 8*BlockBytes, sh.tile[0], sh.tile[1], sh.tile[2], sh.block[0], sh.block[1], sh.block[2])
	}
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
	l := &layout{n: n, tz: tz, ty: ty, tx: tx, bz: bz, by: by, bx: bx, perChunk: perChunk, flat: flat}
	l.full = new([TileElems]uint16)
	l.fillSlotMap(l.full, tz, ty, tx)
	l.fullRuns = runsOf8(l.full, tz, ty, tx)

	if n == 0 {
		return l, nil
	}
	l.nz, l.ny, l.nx, _ = foldDims(dims)
	if flat {
		l.gz, l.gy, l.gx = 1, 1, ceilDiv(n, TileElems)
		l.tiles = l.gx
		l.chunks = ceilDiv(l.tiles, perChunk)
		return l, nil
	}
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

// nextTileDelta is the distance in elements from the origin of the tile at
// (z0, y0, x0) to the origin of the next tile in tile order (0 for the
// last): the vector kernels prefetch the next tile's rows while working on
// this one. Only an address hint; it may point anywhere.
func (l *layout) nextTileDelta(z0, y0, x0 uint64) int {
	x1, y1, z1 := x0+uint64(l.tx), y0, z0
	if x1 >= l.nx {
		x1, y1 = 0, y0+uint64(l.ty)
		if y1 >= l.ny {
			y1, z1 = 0, z0+uint64(l.tz)
		}
	}
	if z1 >= l.nz {
		return 0
	}
	return int((z1*l.ny+y1)*l.nx+x1) - int((z0*l.ny+y0)*l.nx+x0)
}

// chunkTiles returns the tile range [first, end) of chunk c.
func (l *layout) chunkTiles(c uint64) (first, end uint64) {
	first = c * l.perChunk
	end = min(first+l.perChunk, l.tiles)
	return
}

// tileLen is the number of values of tile t.
func (l *layout) tileLen(t uint64) int {
	if l.flat {
		return int(min(TileElems, l.n-t*TileElems))
	}
	_, _, _, lz, ly, lx := l.tileBox(t)
	return lz * ly * lx
}

// tileSlots is the number of code slots tile t uses: its values, or all
// 4096 for a padded tile (§3.2), which is coded as a full one.
func (l *layout) tileSlots(t uint64) int {
	if l.padded {
		return TileElems
	}
	return l.tileLen(t)
}

// tileSpan returns the flat indices [first, end) from tile t's first
// value to just past its last (a box tile's span also holds values of
// other tiles).
func (l *layout) tileSpan(t uint64) (first, end uint64) {
	if l.flat {
		first = t * TileElems
		return first, first + uint64(l.tileLen(t))
	}
	z0, y0, x0, lz, ly, lx := l.tileBox(t)
	first = (z0*l.ny+y0)*l.nx + x0
	end = ((z0+uint64(lz)-1)*l.ny+y0+uint64(ly)-1)*l.nx + x0 + uint64(lx)
	return first, end
}

// chunkElems counts the values held by chunk c.
func (l *layout) chunkElems(c uint64) uint64 {
	first, end := l.chunkTiles(c)
	if l.flat && first < end {
		a, _ := l.tileSpan(first)
		_, b := l.tileSpan(end - 1)
		return b - a
	}
	var n uint64
	for t := first; t < end; t++ {
		n += uint64(l.tileLen(t))
	}
	return n
}

// flatWanted is TilingAuto's choice for dims (docs/FORMAT.md §3.1): flat
// tiles for a folded rank-3 field with ny·nx ≤ 2048 (every run of 4096
// values then spans at least two planes) whose box tiles would leave at
// least a quarter of the values in clipped tiles (lz < tz, ly < ty or
// lx < tx).
func flatWanted(dims []uint64) bool {
	n, err := NumElements(dims)
	if err != nil || n == 0 {
		return false
	}
	nz, ny, nx, rank := foldDims(dims)
	if rank != 3 || ny*nx > 2048 {
		return false
	}
	sh := defaultShapeOf(3).tile
	full := nz / uint64(sh[0]) * uint64(sh[0]) * (ny / uint64(sh[1]) * uint64(sh[1])) * (nx / uint64(sh[2]) * uint64(sh[2]))
	// clipped/n ≥ 1/4 ⇔ clipped ≥ ceil(n/4).
	quarter := n / 4
	if n%4 != 0 {
		quarter++
	}
	return n-full >= quarter
}

// paddedMaxGrowthNum/paddedMaxGrowthDen = 21/20 = 1.05 is the largest
// sub-block growth G (paddedWanted) at which TilingAuto takes padded box
// tiles (docs/FORMAT.md §3.1): the measured fields at or under it lose at
// most 1 % of ratio to padding (levitus G = 1, coads G ≈ 1.045),
// plot3d_post (G ≈ 1.108) loses 4–6 %.
const (
	paddedMaxGrowthNum = 21
	paddedMaxGrowthDen = 20
)

// paddedWanted is TilingAuto's second choice (docs/FORMAT.md §3.1, §3.2),
// taken where flatWanted declines: padded box tiles for a float32 field
// whose folded rank is 3 (the only fields a GPU codec walks padded; the
// others would go to the CPU codec) that has at least one clipped tile
// (without one, bit 2 would change nothing but keep older readers out)
// and whose sub-block growth
//
//	G = Π ceil(n_i/b_i)·b_i / Π n_i,  (n_z, n_y, n_x) the folded shape,
//	                                   (b_z, b_y, b_x) the sub-block (4×4×8)
//
// is at most 21/20: padded tiles code every sub-block the field's far
// edges cut as a whole one, box tiles pack its values densely, so G is
// how many more slots padded tiles code in edge sub-blocks.
//
// The test G ≤ 21/20 is done exactly, as 20·Π ceil(n_i/b_i)·b_i ≤
// 21·Π n_i in arbitrary-precision integers (no rounding, no overflow),
// and depends on nothing but dt and dims: every backend, and any other
// implementation of the rule, makes the same choice.
func paddedWanted(dt DType, dims []uint64) bool {
	if dt != Float32 {
		return false
	}
	n, err := NumElements(dims)
	if err != nil || n == 0 {
		return false
	}
	nz, ny, nx, rank := foldDims(dims)
	if rank != 3 {
		return false
	}
	sh := defaultShapeOf(3)
	ext := [3]uint64{nz, ny, nx}
	clipped := false
	grown, field := big.NewInt(paddedMaxGrowthDen), big.NewInt(paddedMaxGrowthNum)
	var f big.Int
	for i, e := range ext {
		t, b := uint64(sh.tile[i]), uint64(sh.block[i])
		clipped = clipped || e%t != 0
		grown.Mul(grown, f.SetUint64(ceilDiv(e, b)*b))
		field.Mul(field, f.SetUint64(e))
	}
	return clipped && grown.Cmp(field) <= 0
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
		s.edgeRuns = runsOf8(&s.edgeMap, lz, ly, lx)
	}
	return &s.edgeMap
}

// mapRuns reports whether the map slotMap returned for this box passes
// runsOf8. Call it after slotMap.
func (l *layout) mapRuns(s *tileScratch, lz, ly, lx int) bool {
	if lz == l.tz && ly == l.ty && lx == l.tx {
		return l.fullRuns
	}
	return s.edgeRuns
}

// runsOf8 reports whether every group of 8 elements starting at a multiple
// of 8 inside a row (x+8 ≤ lx) maps to 8 consecutive slots, all below
// TileElems. The vector kernels move such groups as one 8-byte load or
// store; the shapes this package writes (sub-block x extent 8 or 128)
// always pass, and a header with other shapes takes the scalar path.
func runsOf8(m *[TileElems]uint16, lz, ly, lx int) bool {
	for r := 0; r < lz*ly; r++ {
		for x := 0; x+8 <= lx; x += 8 {
			s0 := int(m[r*lx+x])
			if s0+8 > TileElems {
				return false
			}
			for j := 1; j < 8; j++ {
				if int(m[r*lx+x+j]) != s0+j {
					return false
				}
			}
		}
	}
	return true
}
