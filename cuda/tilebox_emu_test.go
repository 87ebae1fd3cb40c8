package cuda

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestTileBoxEmulated checks tile_box (device_common.cuh: a tile's corner
// and extent from its index) on the host through tools/tile_box_emu.cpp
// against the arithmetic here, for the three ranks' standard tiles, on
// fields below 2^32 tiles (the 32-bit quotients by magic multipliers) and
// above (the 64-bit quotients: no GPU test reaches them), first, last,
// clipped and random tiles.
func TestTileBoxEmulated(t *testing.T) {
	emu := buildEmu(t, "tile_box_emu.cpp")
	type rec struct{ rank, nz, ny, nx, t uint64 }
	shape := map[uint64][3]uint64{3: {8, 16, 32}, 2: {1, 64, 64}, 1: {1, 1, 4096}}
	r := rand.New(rand.NewPCG(40, 1))
	var recs []rec
	for _, f := range [][4]uint64{
		{3, 20, 180, 360}, {3, 9, 17, 33}, {3, 744, 33, 49},
		{3, 8 << 20, 16 << 8, 32<<6 + 5},    // 2^34 + tiles, x clipped
		{3, 8<<21 + 3, 16<<10 + 1, 32 << 3}, // 2^35 + tiles, z and y clipped
		{2, 1, 64 << 17, 64<<16 + 7},        // 2^33 + tiles
		{2, 1, 881, 1121},
		{1, 1, 1, 4096<<33 + 100}, // 2^33 + 1 tiles
		{1, 1, 1, 107857},
	} {
		rank, nz, ny, nx := f[0], f[1], f[2], f[3]
		s := shape[rank]
		n := (nz + s[0] - 1) / s[0] * ((ny + s[1] - 1) / s[1]) * ((nx + s[2] - 1) / s[2])
		ts := []uint64{0, n - 1, n / 2, 1<<32 - 1, 1 << 32, 1<<32 + 1}
		for range 40 {
			ts = append(ts, r.Uint64N(n))
		}
		for _, ti := range ts {
			if ti < n {
				recs = append(recs, rec{rank, nz, ny, nx, ti})
			}
		}
	}
	var in bytes.Buffer
	for _, x := range recs {
		binary.Write(&in, binary.LittleEndian, []uint64{x.rank, x.nz, x.ny, x.nx, x.t})
	}
	out := runEmu(t, emu, in.Bytes())
	if len(out) != 48*len(recs) {
		t.Fatalf("tile_box_emu wrote %d bytes for %d records, want %d", len(out), len(recs), 48*len(recs))
	}
	big := 0
	for i, x := range recs {
		s := shape[x.rank]
		gy, gx := (x.ny+s[1]-1)/s[1], (x.nx+s[2]-1)/s[2]
		ix, iy, iz := x.t%gx, x.t/gx%gy, x.t/gx/gy
		z0, y0, x0 := iz*s[0], iy*s[1], ix*s[2]
		want := []uint64{z0, y0, x0, min(s[0], x.nz-z0), min(s[1], x.ny-y0), min(s[2], x.nx-x0)}
		for k, w := range want {
			if got := binary.LittleEndian.Uint64(out[48*i+8*k:]); got != w {
				t.Fatalf("rank %d field %dx%dx%d tile %d: %s = %d, want %d", x.rank, x.nz, x.ny, x.nx, x.t,
					[]string{"z0", "y0", "x0", "lz", "ly", "lx"}[k], got, w)
			}
		}
		if ((x.nz+s[0]-1)/s[0])*gy*gx > 1<<32-1 {
			big++
		}
	}
	if big == 0 {
		t.Fatal("no record of a field with 2^32 tiles or more: the 64-bit branch went untested")
	}
	t.Logf("%d tiles' boxes (%d of fields with 2^32 tiles or more) as computed here", len(recs), big)
}
