package cuda

import "testing"

// deviceLaneConfig is pure: no GPU needed.
func TestDeviceLaneConfig(t *testing.T) {
	const gib = 1 << 30
	per := func(streams int, tiles uint64) uint64 {
		return uint64(streams) * (boundPerTileF64*tiles + 44*tiles + ctxScratch)
	}
	for _, c := range []struct {
		name      string
		mem       uint64
		lanes     int
		tiles     uint64
		wantLanes int
		wantTiles uint64
	}{
		// 141 GB (H200) and an H100's 79 GiB: 8 lanes of 8192-tile jobs
		// (14.8 GB) fit in a fifth.
		{"h200", 141 * 1e9, 0, 0, 8, 8192},
		{"h100", 79 * gib, 0, 0, 8, 8192},
		// 64 GB: a fifth is 12.8 GB; 8 x 4096 (9 GB) fits
		{"64GB", 64 * 1e9, 0, 0, 8, 4096},
		// 40 GB: 8 x 2048 (6.1 GB) of 8
		{"40GB", 40 * 1e9, 0, 0, 8, 2048},
		// small GPU: jobs stop at 2048 tiles, then lanes shrink
		{"16GiB", 16 * gib, 0, 0, 4, 2048},
		{"tiny", 1 * gib, 0, 0, 2, 2048},
		// set values win
		{"set both", 1 * gib, 12, 16384, 12, 16384},
		{"set tiles", 40 * 1e9, 0, 8192, 4, 8192},
		{"set lanes", 40 * 1e9, 4, 0, 4, 8192},
	} {
		l, tl := deviceLaneConfig(c.mem, 3, c.lanes, c.tiles)
		if l != c.wantLanes || tl != c.wantTiles {
			t.Errorf("%s: deviceLaneConfig(%d, 3, %d, %d) = %d lanes x %d tiles, want %d x %d",
				c.name, c.mem, c.lanes, c.tiles, l, tl, c.wantLanes, c.wantTiles)
		}
		// What the defaults chose fits the budget, unless at the floor.
		if c.lanes == 0 && c.tiles == 0 && l > 2 && uint64(l)*per(3, tl) > c.mem/5 {
			t.Errorf("%s: %d lanes x %d tiles take %d bytes, over a fifth of %d", c.name, l, tl, uint64(l)*per(3, tl), c.mem)
		}
	}
}
