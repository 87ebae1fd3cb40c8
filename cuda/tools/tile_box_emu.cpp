// tile_box_emu: device_common.cuh's tile_box (a tile's corner and extent
// from its index) run on the host (TestTileBoxEmulated in
// cuda/tilebox_emu_test.go builds and drives it), for fields below 2^32
// tiles (the magic-multiplier quotients) and above (the 64-bit ones, which
// no GPU test reaches: 2^32 tiles are 64 TiB of f32).
//
// Input (stdin, or the file argv[1]): records {u64 rank, nz, ny, nx, t}.
// Output (stdout, or the file argv[2]): per record {u64 z0, y0, x0, lz, ly,
// lx} of tile t of the rank's standard tiling (emu_geo.h).
#define EMU_WITH_DEVICE_COMMON  // walk_emu.h leaves Geo to it
#include "walk_emu.h"

#include "../device_common.cuh"
#include "emu_geo.h"

int main(int argc, char **argv) {
    FILE *in, *out;
    if (const int rc = open_io(argc, argv, "tile_box_emu", in, out)) return rc;
    unsigned long long r[5];
    while (fread(r, 8, 5, in) == 5) {
        const Geo g = emu_geo((int)r[0], r[1], r[2], r[3]);
        unsigned long long z0, y0, x0;
        int lz, ly, lx;
        tile_box(g, r[4], z0, y0, x0, lz, ly, lx);
        const unsigned long long o[6] = {z0, y0, x0, (unsigned long long)lz, (unsigned long long)ly, (unsigned long long)lx};
        fwrite(o, 8, 6, out);
    }
    return 0;
}
