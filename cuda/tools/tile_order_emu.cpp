// tile_order_emu: cuda/tile_order.cuh run on the host (TestTileOrderEmulated
// in cuda/tileorder_test.go builds and drives it), so the warp decoder's
// tile order is checked on machines without a GPU. Geo and div_m are
// device_common.cuh's own, Geo filled as fzgpu.cu's make_geo fills it.
//
// Input (stdin, or the file argv[1]): records {u64 nz, ny, nx, tz, ty, tx,
// tile0, nt}, the last two a
// job. For each, every warp rel < nt is mapped to its tile; the emulator
// checks that the map is a permutation of [tile0, tile0 + nt), that the full
// tiles come first, and that each group keeps tile order; it then writes
// the record's u64 count of full tiles in the job, or exits 1 naming what
// failed.
#define EMU_WITH_DEVICE_COMMON  // walk_emu.h leaves Geo to it
#include "walk_emu.h"

#include "../device_common.cuh"
#include "emu_geo.h"
#include "../tile_order.cuh"

int main(int argc, char **argv) {
    // files in and out (runEmu), else stdin and stdout
    if (argc == 3 && (!freopen(argv[1], "rb", stdin) || !freopen(argv[2], "wb", stdout))) {
        perror("tile_order_emu");
        return 2;
    }
    unsigned long long r[8];
    while (fread(r, 8, 8, stdin) == 8) {
        Geo g{};
        g.nz = r[0], g.ny = r[1], g.nx = r[2];
        g.tz = (int)r[3], g.ty = (int)r[4], g.tx = (int)r[5];
        g.gz = (g.nz + g.tz - 1) / g.tz, g.gy = (g.ny + g.ty - 1) / g.ty, g.gx = (g.nx + g.tx - 1) / g.tx;
        g.tiles = g.gz * g.gy * g.gx;
        g.mgx = emu_magic(g.gx), g.mgy = emu_magic(g.gy);
        const unsigned long long tile0 = r[6], nt = r[7];
        const uint3 fl = {(unsigned)(g.nz / g.tz), (unsigned)(g.ny / g.ty), (unsigned)(g.nx / g.tx)};
        if (!fl.x || !fl.y || !fl.z || g.tiles > 0xFFFFFFFFull || tile0 + nt > g.tiles || nt == 0) {
            fprintf(stderr, "tile_order_emu: record outside the header's domain\n");
            return 2;
        }
        auto full = [&](unsigned long long t) {
            const unsigned long long ix = t % g.gx, iy = t / g.gx % g.gy, iz = t / (g.gx * g.gy);
            return iz < fl.x && iy < fl.y && ix < fl.z;
        };
        std::vector<char> seen(nt, 0);
        unsigned long long nfull = 0, prev = 0;
        bool in_full = true;
        for (unsigned long long rel = 0; rel < nt; rel++) {
            const unsigned long long t = dec_tile_of(g, tile0, nt, rel, fl);
            if (t < tile0 || t >= tile0 + nt || seen[t - tile0]) {
                fprintf(stderr, "tile_order_emu: %llux%llux%llu job %llu+%llu: warp %llu takes tile %llu (%s)\n", g.nz, g.ny,
                        g.nx, tile0, nt, rel, t, t < tile0 || t >= tile0 + nt ? "outside the job" : "taken twice");
                return 1;
            }
            seen[t - tile0] = 1;
            const bool f = full(t);
            if (f && !in_full) {
                fprintf(stderr, "tile_order_emu: job %llu+%llu: full tile %llu after a clipped one\n", tile0, nt, t);
                return 1;
            }
            if (rel > 0 && f == in_full && t <= prev) {
                fprintf(stderr, "tile_order_emu: job %llu+%llu: tile %llu after %llu\n", tile0, nt, t, prev);
                return 1;
            }
            if (!f) in_full = false;
            nfull += f;
            prev = t;
        }
        fwrite(&nfull, 8, 1, stdout);
    }
    return 0;
}
