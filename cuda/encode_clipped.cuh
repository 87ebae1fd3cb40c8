// Pre-coded clipped tiles (PCT, v24; rank 2 since v25): a job's clipped
// rank-3 and rank-2 tiles coded by a kernel of their own before the warp
// encoder runs, so that the warp encoder only copies them. H200, same call:
// compress era5 1.44-1.66x, plot3d 1.45-1.89x, coads 1.50-1.55x, levitus
// 1.21-1.24x (PERF.md v24); stageIV 1.35-1.38x (rank 2, PERF.md v25).
//
// Why (cuda/PERF.md v23): in the warp encoder a clipped tile takes the slow
// path while holding its place in tile order, and every later tile's prefix
// waits for its size (the scanner turns sizes into prefixes in order, and a
// warp takes its next tile only once its parked tile's prefix is known). On
// the H200 a clipped coads tile cost about six full ones, era5's clipped
// tiles (37 % of its values) about 90 % of its compress time, and making
// the slow path issue fewer instructions with a longer chain (masks by rows)
// made it slower: the slow tile's latency is what holds the job. Here the
// clipped tiles are coded in any order by every warp at once, waiting for
// nothing; the warp encoder then publishes each one's size at once and
// copies its bytes.
//
// encode_clipped_kernel: warps take the job's clipped tiles by ticket (clipped
// tile j is tile_order.cuh's dec_tile_of(nfull + j)), run the slow path and
// the layout, append the tile to `side` (16-byte aligned, by an atomic bump
// pointer), and leave its size, raw count and error in the job's tables and
// its offset in `side` in soffs (a table of its own, not tprefix: an
// optimistic warp kernel writes tile prefixes into tprefix as it goes, and
// the kernel after it, should it redo the job, still needs the offsets); a
// tile that does not fit in `side` gets size 0 and is
// walked by the warp encoder in tile order as before. Version 1 only.
// FAST: the standard tile shape's rank, 3 (the row walk, else the slow
// path) or 2 (the slow path: 64 x 64 tiles clipped at a 2-D field's edges,
// stageIV's and adk's, which held the scanner as rank 3's did).
#ifndef ENC_CLIPPED_MINB
// Blocks per SM the register budget is cut for. The kernel runs only the
// row walk, the slow path and the tail (no staged walk), so 80 registers do
// instead of the walks' 128: 24 warps per SM instead of 16. With v37's row
// walk the f32 kernel spills 196 / 488 bytes there (nvcc 11.8); 2 blocks
// (128 registers, no spills) against 3, on v37 call 2's walk (57db9c8):
// coads 0.97x, era5 0.98-1.03x, plot3d_post 1.02-1.06x compress (PERF.md).
#define ENC_CLIPPED_MINB 3
#endif
template <typename T, int FAST>
__global__ void __launch_bounds__(ENC_W * 32, ENC_CLIPPED_MINB)
    encode_clipped_kernel(const T *__restrict__ src, Geo g, const DevParams *__restrict__ prm, int has_fill,
                          unsigned long long fill_bits, unsigned long long tile0, unsigned long long nt, uint3 fl,
                          unsigned long long nfull, unsigned long long nclip, unsigned *side,
                          unsigned long long side_cap, unsigned long long *ctr, unsigned *tsize,
                          unsigned long long *soffs, unsigned *touts, double *terr, unsigned char *scratch) {
#ifndef ENC_CLIPPED_SMEM  // the host emulation (tools/encode_clipped_emu.cpp) names its own array
    extern __shared__ __align__(16) unsigned enc_smem[];
#define ENC_CLIPPED_SMEM enc_smem
#endif
    grid_wait();  // params from the kernels before (launch_dependent)
    const unsigned F = 0xffffffffu;
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    unsigned *pw = ENC_CLIPPED_SMEM + wib * PW_WORDS;
    unsigned char *sc = scratch + ((unsigned long long)blockIdx.x * ENC_W + wib) * SC_BYTES;
    const double eb = prm->eb, step = prm->step, inv = prm->inv;
    const float ebf = __double2float_rd(eb);  // e <= eb for a float e exactly when e <= ebf
    // the masks start zero for the row walk, which sets their bits as it goes
    // (the slow path clears them itself); a tile that used them clears them
    unsigned *const smf = (unsigned *)(sc + SC_MF), *const smr = (unsigned *)(sc + SC_MR);
    auto clear_masks = [&]() {
        for (int i = lane; i < 128; i += 32) {
            smf[i] = 0;
            smr[i] = 0;
        }
    };
    clear_masks();
    for (;;) {
        unsigned long long j = 0;
        if (lane == 0) j = atomicAdd(ctr + 1, 1ull);  // ctr[0]: the bump pointer, ctr[1]: the ticket
        j = __shfl_sync(F, j, 0);
        if (j >= nclip) break;
        const unsigned long long t = dec_tile_of(g, tile0, nt, nfull + j, fl), rel = t - tile0;
        unsigned long long z0, y0, x0;
        int lz, ly, lx;
        tile_box(g, t, z0, y0, x0, lz, ly, lx);
        prefetch_tile(src, g, (z0 * g.ny + y0) * g.nx + x0, lz, ly, lx, lane);
        TileSum ts;
        ts.nraw = ts.nfill = ts.wide = 0;
        // the row walk (encode_rows3.cuh); the slow path for holes in
        // fields without a fill value
        if (FAST != 3 || lx < ENC_ROWS3_MIN_LX ||
            !(has_fill ? enc_rows3<T, 1, true>(src, g, z0, y0, x0, lz, ly, lx, inv, step, eb, ebf, fill_bits, pw, sc, lane, ts)
                       : enc_rows3<T, 1, false>(src, g, z0, y0, x0, lz, ly, lx, inv, step, eb, ebf, 0ull, pw, sc, lane, ts)))
            enc_slow<T, FAST, 1>(src, g, z0, y0, x0, lz, ly, lx, inv, step, eb, has_fill, fill_bits, pw, sc, lane, ts);
        __syncwarp();
        const TileLayout L = tile_layout<T>(pw, sc, ts, lane);
        double M = ts.merr;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) M = fmax(M, __shfl_xor_sync(F, M, o));
        unsigned long long off = 0;
        if (lane == 0) off = atomicAdd(ctr, (unsigned long long)((L.size + 15u) & ~15u));
        off = __shfl_sync(F, off, 0);
        // side holds what clipped tiles of ratio 2 or more need: a tile that
        // does not fit is left to the warp encoder (size 0 in the table:
        // every coded tile has at least 8 bytes)
        const bool fits = off + L.size <= side_cap;
        if (fits)
            tile_write<T, 1, false>(TileStore<false>(false), side + off / 4, L, ts, pw, sc, src, g, z0, y0, x0, ly, lx,
                                    false, lane);
        __syncwarp();  // the write read the masks
        if (ts.nfill | ts.nraw) clear_masks();
        if (lane == 0) {
            tsize[rel] = fits ? L.size : 0u;
            touts[rel] = ts.nraw;
            terr[rel] = M;
            soffs[rel] = off;
        }
        __syncwarp();  // pw and scratch are reused by the next tile
    }
}
