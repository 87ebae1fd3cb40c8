package cuda

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestTileOrderEmulated checks the warp decoder's tile order (tile_order.cuh:
// a job's full tiles first, then its clipped ones) without a GPU:
// tools/tile_order_emu.cpp maps every warp of a job to its tile and checks
// that the map is a permutation of the job's tiles with the full ones first,
// each group in tile order; this test checks its count of full tiles against
// one taken here. Geometries: the real fields' (levitus, coads, era5,
// plot3d, as tiled by the bench), fields with one clipped dimension or all
// three, a field of 2^32 - 1 tiles' worth of rows, and random ones; jobs:
// the whole field, one chunk, runs starting and ending mid-row and mid-slab.
func TestTileOrderEmulated(t *testing.T) {
	emu := buildEmu(t, "tile_order_emu.cpp")
	type job struct{ nz, ny, nx, tile0, nt uint64 }
	var jobs []job
	tiles := func(nz, ny, nx uint64) uint64 { return ((nz + 7) / 8) * ((ny + 15) / 16) * ((nx + 31) / 32) }
	r := rand.New(rand.NewPCG(7, 30))
	add := func(nz, ny, nx uint64) {
		n := tiles(nz, ny, nx)
		jobs = append(jobs, job{nz, ny, nx, 0, n})
		for range 6 {
			a := r.Uint64N(n)
			jobs = append(jobs, job{nz, ny, nx, a, 1 + r.Uint64N(n-a)})
		}
		if n > 256 {
			jobs = append(jobs, job{nz, ny, nx, 256, min(256, n-256)}) // the bench's chunks: 256 tiles
		}
	}
	for _, d := range [][3]uint64{
		{20 * 54, 180, 360}, {12 * 1100, 90, 180}, {744 * 10, 33, 49}, {25, 33, 57}, {38, 76, 38},
		{8, 16, 33}, {8, 17, 32}, {9, 16, 32}, {9, 17, 33}, {64, 64, 64}, {8, 16, 32},
	} {
		add(d[0], d[1], d[2])
	}
	for range 40 {
		add(8+r.Uint64N(200), 16+r.Uint64N(200), 32+r.Uint64N(300))
	}
	// a long field: tile indices near 2^32 (the header's 32-bit quotients)
	jobs = append(jobs, job{8 * ((1<<32 - 1) / 6), 33, 49, (1<<32-1)/6*6 - 1000, 1000})
	var in bytes.Buffer
	for _, j := range jobs {
		for _, v := range []uint64{j.nz, j.ny, j.nx, 8, 16, 32, j.tile0, j.nt} {
			in.Write(binary.LittleEndian.AppendUint64(nil, v))
		}
	}
	out := runEmu(t, emu, in.Bytes())
	if len(out) != 8*len(jobs) {
		t.Fatalf("tile_order_emu answered %d jobs of %d", len(out)/8, len(jobs))
	}
	for i, j := range jobs {
		gy, gx := (j.ny+15)/16, (j.nx+31)/32
		var want uint64
		for tt := j.tile0; tt < j.tile0+j.nt; tt++ {
			if tt%gx < j.nx/32 && tt/gx%gy < j.ny/16 && tt/(gx*gy) < j.nz/8 {
				want++
			}
		}
		if got := binary.LittleEndian.Uint64(out[8*i:]); got != want {
			t.Errorf("%dx%dx%d job %d+%d: %d full tiles first, want %d", j.nz, j.ny, j.nx, j.tile0, j.nt, got, want)
		}
	}
	t.Logf("%d jobs: every warp's tile once, full tiles first", len(jobs))
}
