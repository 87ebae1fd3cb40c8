// encode_rank2_emu: cuda/encode_rank2.cuh's staged rank-2 walk
// (enc_fast2s) run on the host, so a bug in it is caught without a GPU
// (cuda/encrank2_emu_test.go builds and drives it and checks the results
// against the CPU codec). The header itself is included, not copied, with
// what it builds on (encode_common.cuh, encode_rank3.cuh: staging, coders,
// quant_f32) as encode_warp.cuh includes them; the CUDA intrinsics, warp
// operations and encode_ptx.cuh's inline-PTX primitives are walk_emu.h's
// host versions. 32 threads play the warp's lanes; shuffles, ballots,
// votes, reductions and __syncwarp go through a barrier (warp_emu.h), so a
// warp-wide call that not every lane makes deadlocks the run instead of
// passing. Built with AddressSanitizer and UBSan, and with
// -ffp-contract=off: every floating operation is one IEEE operation,
// rounded to nearest, as the GPU build's explicit intrinsics and -fmad=false.
//
// The emulated hardware:
//  - shared memory: the warp's staging buffer is its row of stage_buf()'s
//    array (static here, which AddressSanitizer does not guard: the lanes
//    play a warp in the middle of the block, so the rows on either side are
//    guards); the whole array is filled with 0xFF bytes (NaN, a hole to the
//    walk) before each tile, so a value read before its copy landed, or from
//    outside the warp's row, leaves the tile to the slow path (done = 0),
//    and the other warps' rows must still hold them after the walk;
//  - cp.async: each lane's copies are queued per commit group and land
//    either at issue ("early") or only when cp_async_wait<N> retires their
//    group ("late"): every tile is walked once in each mode and both
//    results must be identical, so a missing wait or a buffer reloaded while
//    still read shows as a difference; a copy must be aligned to its size
//    and lie inside the buffer, and no copy may be pending when the walk
//    returns (it would land in a buffer the next tile uses);
//  - the plane buffer (16 rows of PW_STRIDE words, 16-byte aligned) is
//    filled with 0xDEADBEEF before each tile: the walk must write all 128
//    words of every plane (it zeroes planes 1-14 itself; the coders write
//    planes 0 and 15 of each segment) and leave the pad words 128-131 of
//    every row alone (row 0's hold the parked tile's state on the GPU);
//  - sesc and sraw (128 words each) are zeroed before each tile (the GPU
//    clears them once per warp and the tail after each tile); sq (4096
//    ints) is filled with 0x7F7F7F7F;
//  - every lane's TileSum and return value must agree (they are warp-
//    uniform on the GPU).
//
// Input (stdin, or the file argv[1]): records, each a field:
//   {u32 ny, u32 nx, u32 V (1 or 2), u32 has_fill, u32 fill_bits, f64 inv,
//    f64 step, f64 eb} then ny * nx float32 values, row-major.
// Each full 64 x 64 tile (ty, tx) (base ty * 64 * nx + tx * 64; clipped
// tiles are skipped) is walked by enc_fast2s<V> (AL16 where its rows are
// 16-byte aligned, as fzgpu.cu dispatches) with ebf = the largest
// float <= eb, as the GPU's __double2float_rd(eb).
// Output (stdout, or the file argv[2]): per full tile, in tile order:
//   u32 tile (ty * gx + tx, gx = ceil(nx / 64)), u32 done (1 or 0), and
//   if done: i32 origin, u32 nesc, u32 nraw, u32 merr (f32 bits), the 16
//   planes x 128 words (plane p word w = pw[p * PW_STRIDE + (w ^ ((p >> 2)
//   & 3))]), the 128 sraw words, the 128 sesc words, then the nesc escape
//   residuals in element order (sq[e] for each set bit e of sesc).
#include <algorithm>

#include "walk_emu.h"

#include "../encode_common.cuh"  // as encode_warp.cuh: configuration, scratch layout, TileSum
#include "../encode_rank3.cuh"   // the staging and coders the rank-2 walk builds on
#include "../encode_rank2.cuh"

// ------------------------------------------------------------ the runner

struct Field {
    unsigned ny, nx, V, has_fill, fill_bits;
    double inv, step, eb;
    float *v;  // heap block of exactly ny * nx floats, 16-byte aligned
};

static bool read_field(FILE *f, Field &F) {
    unsigned h[5];
    double d[3];
    if (!read_header(f, h, 5, d)) return false;
    F.ny = h[0], F.nx = h[1], F.V = h[2], F.has_fill = h[3], F.fill_bits = h[4];
    F.inv = d[0], F.step = d[1], F.eb = d[2];
    if ((F.V != 1 && F.V != 2) || (unsigned long long)F.ny * F.nx > (1ull << 28)) {
        fprintf(stderr, "bad record: ny %u nx %u V %u\n", F.ny, F.nx, F.V);
        exit(1);
    }
    char shape[32];
    snprintf(shape, sizeof shape, "%u x %u", F.ny, F.nx);
    F.v = read_values(f, (size_t)F.ny * F.nx, shape);
    return true;
}

// One walk of a tile: what the lanes leave.
struct Result {
    bool done;
    TileSum ts;
    std::vector<unsigned> pw, sesc, sraw;
    std::vector<int> sq;
};

int main(int argc, char **argv) {
    FILE *in, *out;
    if (const int rc = open_io(argc, argv, "encode_rank2_emu", in, out)) return rc;
    // the lanes play a warp with rows on both sides; its row of stage_buf() is the arena
    const WalkBufs B = walk_bufs<ENC_W>(4 * 2 * STG_PLANE, PW_STRIDE, [] { return stage_buf(); });
    unsigned *const pw = B.pw;
    std::vector<int> sq(4096);
    std::vector<unsigned> sesc(128), sraw(128);
    std::barrier<> b(32);
    bar = &b;
    int failed = 0;
    Field F;
    while (read_field(in, F)) {
        const unsigned gy = F.ny / 64, gx = (F.nx + 63) / 64, fgx = F.nx / 64;
        const float ebf = __double2float_rd(F.eb);
        Geo g{};
        g.ny = F.ny;
        g.nx = F.nx;
        for (unsigned ty = 0; ty < gy; ty++)
            for (unsigned tx = 0; tx < fgx; tx++) {
                const unsigned long long base = (unsigned long long)ty * 64 * F.nx + 64ull * tx;
                const unsigned tile = ty * gx + tx;
                char what[32];
                snprintf(what, sizeof what, "tile %u", tile);
                Result res[2];
                for (int mode = 0; mode < 2; mode++) {
                    late_landing = mode == 1;
                    poison(B);
                    std::fill(sq.begin(), sq.end(), 0x7F7F7F7F);
                    std::fill(sesc.begin(), sesc.end(), 0u);
                    std::fill(sraw.begin(), sraw.end(), 0u);
                    bool rets[32];
                    TileSum tss[32];
                    int pending[32];
                    // as fzgpu.cu dispatches: without the 4-byte copies (AL16)
                    // where every row of the tile is 16-byte aligned
                    const bool rows16 = ((uintptr_t)(F.v + base) & 15) == 0 && g.nx % 4 == 0;
                    run_warp([&](int l) {
                            TileSum ts{};
                            auto walk = F.V == 1 ? (rows16 ? enc_fast2s<1, true> : enc_fast2s<1>)
                                                 : (rows16 ? enc_fast2s<2, true> : enc_fast2s<2>);
                            const bool r = walk(F.v, g, base, F.inv, F.step, ebf, (int)F.has_fill, F.fill_bits, pw,
                                                sq.data(), sesc.data(), sraw.data(), l, ts);
                            rets[l] = r;
                            tss[l] = ts;
                            pending[l] = pending_copies();
                        });
                    failed |= check_other_rows(B, what);
                    failed |= check_pending(pending, what, mode == 1);
                    for (int l = 0; l < 32; l++)
                        if (rets[l] != rets[0] ||
                            (rets[0] && (tss[l].nesc != tss[0].nesc || tss[l].nraw != tss[0].nraw ||
                                         tss[l].origin != tss[0].origin || memcmp(&tss[l].merr, &tss[0].merr, 8)))) {
                            fprintf(stderr, "tile %u: lane %d's result differs from lane 0's (not warp-uniform)\n", tile, l);
                            failed = 1;
                        }
                    if (rets[0]) failed |= check_pads(B, what);
                    Result &R = res[mode];
                    R.done = rets[0];
                    R.ts = tss[0];
                    R.pw.assign(pw, pw + 16 * PW_STRIDE);
                    R.sesc = sesc;
                    R.sraw = sraw;
                    R.sq = sq;
                }
                const Result &R = res[0], &L = res[1];
                bool same = R.done == L.done;
                if (same && R.done) {
                    same = R.ts.nesc == L.ts.nesc && R.ts.nraw == L.ts.nraw && R.ts.origin == L.ts.origin &&
                           !memcmp(&R.ts.merr, &L.ts.merr, 8) && R.pw == L.pw && R.sesc == L.sesc && R.sraw == L.sraw;
                    for (int e = 0; same && e < 4096; e++)
                        if ((R.sesc[e >> 5] >> (e & 31)) & 1) same = R.sq[e] == L.sq[e];
                }
                if (!same) {
                    fprintf(stderr, "tile %u: the walk's result depends on when cp.async copies land (early/late)\n", tile);
                    failed = 1;
                }
                unsigned hdr[2] = {tile, R.done ? 1u : 0u};
                fwrite(hdr, 4, 2, out);
                if (!R.done) continue;
                unsigned rec[4] = {(unsigned)R.ts.origin, R.ts.nesc, R.ts.nraw, merr_bits(R.ts.merr, what, failed)};
                fwrite(rec, 4, 4, out);
                write_planes(out, R.pw.data(), PW_STRIDE);
                fwrite(R.sraw.data(), 4, 128, out);
                fwrite(R.sesc.data(), 4, 128, out);
                unsigned listed = 0;
                for (int e = 0; e < 4096; e++)
                    if ((R.sesc[e >> 5] >> (e & 31)) & 1) {
                        fwrite(&R.sq[e], 4, 1, out);
                        listed++;
                    }
                if (listed != R.ts.nesc) {
                    fprintf(stderr, "tile %u: nesc %u but %u escape bits\n", tile, R.ts.nesc, listed);
                    failed = 1;
                }
            }
        free(F.v);
    }
    free(pw);
    if (fclose(out)) return 1;
    return failed;
}
