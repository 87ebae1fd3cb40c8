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
		streams   int
		lanes     int
		tiles     uint64
		wantLanes int
		wantTiles uint64
	}{
		// Device assembly's default of 1 stream per lane:
		// 141 GB (H200) and an H100's 79 GiB: 4 lanes of 65536-tile jobs
		// (15.9 GB) fit in a fifth.
		{"h200", 141 * 1e9, 1, 0, 0, 4, 65536},
		{"h100", 79 * gib, 1, 0, 0, 4, 65536},
		// 64 GB: a fifth is 12.8 GB; 4 x 32768 (8.2 GB) fits
		{"64GB", 64 * 1e9, 1, 0, 0, 4, 32768},
		// 40 GB: 4 x 16384 (4.4 GB) of 8
		{"40GB", 40 * 1e9, 1, 0, 0, 4, 16384},
		{"16GiB", 16 * gib, 1, 0, 0, 4, 8192},
		// small GPU: jobs stop at 2048 tiles, then lanes shrink
		{"tiny", 1 * gib, 1, 0, 0, 2, 2048},
		// set values win
		{"set both", 1 * gib, 1, 12, 16384, 12, 16384},
		{"set tiles", 40 * 1e9, 1, 0, 8192, 4, 8192},
		{"set lanes", 40 * 1e9, 1, 4, 0, 4, 16384},
		// 3 streams (FZ_GPU_GATHER=0): a third of the job size
		{"h100 3 streams", 79 * gib, 3, 0, 0, 4, 16384},
	} {
		l, tl := deviceLaneConfig(c.mem, c.streams, c.lanes, c.tiles)
		if l != c.wantLanes || tl != c.wantTiles {
			t.Errorf("%s: deviceLaneConfig(%d, %d, %d, %d) = %d lanes x %d tiles, want %d x %d",
				c.name, c.mem, c.streams, c.lanes, c.tiles, l, tl, c.wantLanes, c.wantTiles)
		}
		// What the defaults chose fits the budget, unless at the floor.
		if c.lanes == 0 && c.tiles == 0 && l > 2 && uint64(l)*per(c.streams, tl) > c.mem/5 {
			t.Errorf("%s: %d lanes x %d tiles take %d bytes, over a fifth of %d", c.name, l, tl, uint64(l)*per(c.streams, tl), c.mem)
		}
	}
}
