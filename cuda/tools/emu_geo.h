// emu_geo.h: a field's Geo as fzgpu.cu's make_geo fills it, for the
// emulators that include device_common.cuh (after it): the standard tile and
// sub-block shape of rank 1, 2 or 3, the tile counts, the quotients' magic
// multipliers, chunks of 256 tiles.
#pragma once

static unsigned long long emu_magic(unsigned long long d) {  // make_geo's
    return d >= 2 && d <= 0xFFFFFFFFull ? ~0ull / d + (~0ull % d == d - 1 ? 2 : 1) : 0ull;
}

static Geo emu_geo(int rank, unsigned long long nz, unsigned long long ny, unsigned long long nx) {
    Geo g{};
    g.nz = nz, g.ny = ny, g.nx = nx;
    g.tz = rank == 3 ? 8 : 1, g.ty = rank == 3 ? 16 : rank == 2 ? 64 : 1, g.tx = rank == 3 ? 32 : rank == 2 ? 64 : 4096;
    g.bz = rank == 3 ? 4 : 1, g.by = rank == 3 ? 4 : rank == 2 ? 16 : 1, g.bx = rank == 1 ? 128 : 8;
    g.gz = (nz + g.tz - 1) / g.tz, g.gy = (ny + g.ty - 1) / g.ty, g.gx = (nx + g.tx - 1) / g.tx;
    g.tiles = g.gz * g.gy * g.gx;
    g.mgx = emu_magic(g.gx), g.mgy = emu_magic(g.gy);
    g.per_chunk = 256, g.mpc = emu_magic(256);
    g.fast3 = rank == 3, g.fast2 = rank == 2, g.fast1 = rank == 1;
    return g;
}

// A flat-tiled field's Geo (FORMAT.md 3.1), as make_geo fills it: a rank-1
// field of every value to the kernels, with the plane and row lengths.
static Geo emu_geo_flat(unsigned long long nz, unsigned long long ny, unsigned long long nx) {
    Geo g = emu_geo(1, 1, 1, nz * ny * nx);
    g.flat = 1;
    g.fnx = (unsigned)nx, g.fP = (unsigned)(ny * nx);
    g.mfnx = emu_magic(g.fnx), g.mfP = emu_magic(g.fP);
    return g;
}
