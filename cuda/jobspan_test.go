package cuda

import (
	"testing"

	"github.com/fzsidecar/fzsidecar/fz"
)

// TestJobSpan: the source values a streamed job reads (jobSpan) are exactly
// those of its chunks' tiles, for box tiles (rank 1-3, clipped edges) and
// flat tiles (runs of 4096 values, docs/FORMAT.md 3.1), against a brute
// force over every element. No GPU needed.
func TestJobSpan(t *testing.T) {
	for _, c := range []struct {
		dims   []uint64
		tiling fz.Tiling
	}{
		{[]uint64{20, 40, 70}, fz.TilingBoxes}, {[]uint64{300, 200}, fz.TilingBoxes}, {[]uint64{50000}, fz.TilingBoxes},
		{[]uint64{20, 40, 70}, fz.TilingFlat}, {[]uint64{30, 33, 49}, fz.TilingFlat}, {[]uint64{300, 200}, fz.TilingFlat},
	} {
		for _, per := range []uint64{1, 3} {
			g, err := fz.PlanGeometryFor(fz.Float32, c.dims, per, c.tiling)
			if err != nil {
				t.Fatal(err)
			}
			// the tile of each element
			tileOf := func(i uint64) uint64 {
				if g.Flat {
					return i / fz.TileElems
				}
				x, y, z := i%g.NX, i/g.NX%g.NY, i/(g.NX*g.NY)
				tz, ty, tx := uint64(g.Tile[0]), uint64(g.Tile[1]), uint64(g.Tile[2])
				gx, gy := (g.NX+tx-1)/tx, (g.NY+ty-1)/ty
				return (z/tz*gy+y/ty)*gx + x/tx
			}
			for first := uint64(0); first < g.Chunks; first += 2 {
				n := min(uint64(2), g.Chunks-first)
				t0, _ := g.ChunkTiles(first)
				_, t1 := g.ChunkTiles(first + n - 1)
				lo, hi := g.Elements, uint64(0)
				for i := uint64(0); i < g.Elements; i++ {
					if tl := tileOf(i); tl >= t0 && tl < t1 {
						lo, hi = min(lo, i), max(hi, i+1)
					}
				}
				if glo, ghi := jobSpan(g, first, n); glo != lo || ghi != hi {
					t.Errorf("%v %v per %d chunks %d+%d: span [%d, %d), its tiles' values span [%d, %d)", c.dims, c.tiling, per, first, n, glo, ghi, lo, hi)
				}
			}
		}
	}
}
