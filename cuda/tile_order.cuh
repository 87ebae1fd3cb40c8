// Which tile each warp of the warp decoder takes (decode_warp.cuh): a
// job's full tiles first, then its clipped ones, each group in tile order.
//
// Why: blocks start roughly in index order, so with this order an SM's
// warps mostly run the same walk at a time. In tile order a rank-3 field
// with clipped edges interleaves the full tiles' walk and the clipped
// tiles' generic walk on every SM (coads: 31 % of tiles clipped, levitus
// 16 %), and in ncu 45-54 % of the decoder's stalls on levitus and era5
// were instruction fetch. Measured on an H200 (cuda/PERF.md, dec v23),
// on top of the masked walks (FK): levitus +38-42 %, coads +23-53 %; in
// place of tile order elsewhere: era5 +8-42 %, but plot3d -17 to -36 %
// at five of its six cases and stageIV (rank 2) -11 %. The cost is DRAM
// reads: where rows are not a multiple of 32 bytes (plot3d 228, era5 196),
// a tile's first and last row pieces share 32-byte sectors with its x
// neighbours; in tile order the neighbour completes the sector in L2
// soon after, here only once every full tile is done, and L2 merges the
// partial sectors with DRAM by reading them (ncu, 256 MiB at 1e-2: DRAM
// reads plot3d 71 -> 161 MB, era5 39 -> 178 MB). So fzgpu.cu takes this order for
// rank-3 fields with a fill value only, where every measured case gained
// (levitus' rows are 1440 bytes; coads' 720-byte rows gained anyway).
//
// Included by decode_warp.cuh after device_common.cuh (Geo, div_m), and by
// tools/tile_order_emu.cpp on the host (TestTileOrderEmulated checks that
// the order is a permutation of every job's tiles, full ones first).
#pragma once
#ifndef TILE_ORDER_FN
#define TILE_ORDER_FN __device__ __forceinline__  // the host emulation: inline
#endif

// The number of full tiles with index < t, for t <= g.tiles < 2^32; fz, fy,
// fx: full tiles along z, y and x (nz / tz, ...). Tile t is (iz, iy, ix)
// with t = (iz gy + iy) gx + ix; it is full when iz < fz, iy < fy, ix < fx.
TILE_ORDER_FN unsigned long long full_before(const Geo &g, unsigned long long t, unsigned fz, unsigned fy, unsigned fx) {
    const unsigned tt = (unsigned)t, gx = (unsigned)g.gx, gy = (unsigned)g.gy;
    const unsigned r = (unsigned)div_m(tt, gx, g.mgx), iz = (unsigned)div_m(r, gy, g.mgy);
    const unsigned ix = tt - r * gx, iy = r - iz * gy;
    unsigned long long f = (unsigned long long)(iz < fz ? iz : fz) * fy * fx;
    // iy <= fy and ix <= fx (a dimension has at most one clipped tile)
    if (iz < fz) f += (unsigned long long)iy * fx + (iy < fy ? ix : 0u);
    return f;
}

// The tile (field index) that warp rel of the job of tiles [tile0, tile0 +
// nt) decodes (and encode_clipped_kernel's warp codes, rel = nfull + j);
// fl = (fz, fy, fx), g.tiles < 2^32. Full tile k of the job and clipped
// tile j are both found directly, with 32-bit quotients. (Until v38 clipped
// tile j came from a binary search over the count of clipped tiles before
// t, t - full_before(t): log2(nt) steps of two quotients, 5.9 % of the
// clipped kernel's instructions on era5; direct, era5 and plot3d_post
// compress 6-8 % faster, the fill fields' decompress 2-3 %: H200, v39 call 3.)
TILE_ORDER_FN unsigned long long dec_tile_of(const Geo &g, unsigned long long tile0, unsigned long long nt,
                                     unsigned long long rel, uint3 fl) {
    const unsigned fz = fl.x, fy = fl.y, fx = fl.z;
    const unsigned long long f0 = full_before(g, tile0, fz, fy, fx);
    const unsigned long long nf = full_before(g, tile0 + nt, fz, fy, fx) - f0;
    if (rel < nf) {
        const unsigned k = (unsigned)(f0 + rel), fyx = fy * fx;
        const unsigned iz = k / fyx, r = k - iz * fyx, iy = r / fx, ix = r - iy * fx;
        return ((unsigned long long)iz * g.gy + iy) * g.gx + ix;
    }
    // Clipped tile c of the field (the clipped tiles before tile0, then j):
    // a z-layer of full tiles (iz < fz) holds cl = gy gx - fy fx clipped
    // tiles, in tile order (iy, fx) for iy < fy where gx = fx + 1 (dx = 1),
    // then the gx tiles of row fy where gy = fy + 1 (a dimension has at most
    // one clipped tile); the layer iz = fz, where nz is not a multiple of
    // tz, is clipped whole.
    const unsigned gx = (unsigned)g.gx, gy = (unsigned)g.gy, dx = gx - fx, cl = gy * gx - fy * fx;
    const unsigned c = (unsigned)(tile0 - f0 + (rel - nf));
    if (c < fz * cl) {
        const unsigned iz = c / cl, r = c - iz * cl;
        const bool col = r < fy * dx;  // in column fx of a row iy < fy
        return ((unsigned long long)iz * gy + (col ? r : fy)) * gx + (col ? fx : r - fy * dx);
    }
    return (unsigned long long)fz * gy * gx + (c - fz * cl);
}
