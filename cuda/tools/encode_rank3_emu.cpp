// encode_rank3_emu: cuda/encode_rank3.cuh's staged f32 rank-3 walk
// (enc_fast3), with fill values too (FILLP: two passes, the first of
// which finds each z-plane's placeholder), run on the host, so a bug in
// them is caught without a GPU (cuda/encrank3_emu_test.go builds and drives it and checks the
// results against the CPU codec). The header itself is included, not
// copied, after encode_common.cuh (the scratch layout, TileSum, esc_max,
// HOT_RV_MAX: the real ones), as encode_warp.cuh includes them; the CUDA
// intrinsics, the warp operations and encode_ptx.cuh's inline-PTX
// primitives are walk_emu.h's host versions. 32 threads play the warp's
// lanes (a warp-wide call that not every lane makes deadlocks the run).
// Built with AddressSanitizer and UBSan, and with -ffp-contract=off.
//
// The walks, as encode_warp_kernel calls them on a full tile (walks bits):
//   1 plain  enc_fast3<false, false, false, V>  (records escapes)
//   2 hot    enc_fast3<false, true, false, V>   (the no-fill kernels: false
//            for an escape or more than HOT_RV_MAX(_V2) raw values)
//   4 no16   enc_fast3<false, true, true, V>    (the narrow optimistic
//            kernel: also false, with ts.wide = 1, at a z-plane of 16-bit codes)
//   8 fillp  enc_fast3<true, false, false, V, true> (the placeholders
//            show in the codes and, where element 0 is fill, the origin;
//            two passes)
//  16 fillhot enc_fast3<true, true, false, V, true> (the fill fields'
//            optimistic kernel, HF 5: one pass (ENC_FILL_1P); false for a
//            tile with a |q| > 32767, an escape or more than
//            HOT_RV_MAX_FILL(_V2) raw values)
// Walks 1, 2 and 4 get fill32 = 0 (as the kernels pass), walks 8 and 16
// fill_bits.
//
// The emulated hardware (walk_emu.h, and per walk):
//  - the lanes play a warp in the middle of the block: their staging buffer
//    is its row of stage_buf()'s array (static here, which AddressSanitizer
//    does not guard: the rows on either side are the guards); the whole
//    array is filled with 0xFF bytes (NaN, a hole to the walk) before each
//    walk, so a value read before its copy landed, or from outside the
//    warp's row, leaves the tile to the slow path or changes its codes, and
//    the other warps' rows must still hold them after it;
//  - cp.async copies land at issue ("early") or only when their group is
//    waited for ("late"): every walk runs once in each mode and both results
//    must be identical, so a missing wait or a buffer reloaded while still
//    read shows as a difference; no copy may be pending when the walk
//    returns (true or false: it would land in a buffer the next tile uses);
//  - the plane buffer (16 rows of PW_STRIDE words) is filled with 0xDEADBEEF:
//    a walked tile's 16 x 128 plane words must all be written, and the pad
//    words 128-131 of every row never (row 0's hold the parked tile's state);
//  - the warp's scratch (SC_BYTES, encode_common.cuh's layout, a heap block
//    of exactly that size) is filled with a pattern that differs between
//    the two modes, except sesc and sraw (SC_ESC, SC_RAW), zeroed as the
//    kernel leaves them before a tile. A walked tile may change only sesc,
//    sraw, sq at its escapes (SC_Q), the first min(nraw, SC_RV_MAX) words
//    of the listed raw values (SC_RV) and, FILLP's two passes only, sq's
//    first 2 KiB (the lanes' plane sums); no walk writes SC_UNUSED..
//    (FILLP's fill bitmap, there until v60, is in the staging rows'
//    padding, stage_pad, since v61); a walk that returns false must leave
//    at least the parked tile (SC_PARK) alone. What a walked tile leaves
//    is compared between the modes, so a word of it that the walk does not
//    write shows as a difference;
//  - the TileSum starts with nesc, origin and merr set to a pattern per mode
//    (the kernel leaves them unset, and nraw, nfill, wide 0);
//  - every lane's return values, TileSum and placeholder must agree (they
//    are warp-uniform on the GPU).
//
// Input (stdin, or the file argv[1]): records, each a field:
//   {u32 nz, u32 ny, u32 nx, u32 V (1 or 2), u32 walks, u32 fill_bits,
//    f64 inv, f64 step, f64 eb} then nz * ny * nx float32 values, C order.
// Each full 8 x 16 x 32 tile (iz, iy, ix) (base (iz * 8 * ny + iy * 16) *
// nx + ix * 32; clipped tiles are skipped) is walked by each walk of the
// record's bits, in increasing bit order, with ebf = the largest float <=
// eb, as the GPU's __double2float_rd(eb).
// Output (stdout, or the file argv[2]): u32 SC_RV_MAX, u32 HOT_RV_MAX,
// u32 HOT_RV_MAX_V2, u32 HOT_RV_MAX_FILL, u32 HOT_RV_MAX_FILL_V2, then per
// full tile and walk:
//   u32 tile ((iz * gy + iy) * gx + ix, g* = ceil(n* / t*)), u32 walk (its
//   bit), u32 done, u32 wide (ts.wide);
//   if done: i32 origin, u32 nesc, u32 nraw, u32 nfill, u32 merr (f32
//   bits), the 16 planes x 128 words (plane p word w = pw[p * PW_STRIDE +
//   (w ^ ((p >> 2) & 3))]), the 128 sraw words, the 128 sesc words, the
//   nesc escape residuals in element order (sq[e] for each set bit e of
//   sesc), the first min(nraw, SC_RV_MAX) listed raw values, and for walks 8
//   and 16 the 128 words of the fill bitmap (stage_pad(0..127)).
#include <algorithm>
#include <climits>

#include "walk_emu.h"

#include "../encode_common.cuh"  // as encode_warp.cuh: configuration, scratch layout, TileSum
#include "../encode_rank3.cuh"

// ------------------------------------------------------------ the runner

enum { W_PLAIN = 1, W_HOT = 2, W_NO16 = 4, W_FILLP = 8, W_FILLHOT = 16 };

struct Field {
    unsigned nz, ny, nx, V, walks, fill_bits;
    double inv, step, eb;
    float *v;  // heap block of exactly nz * ny * nx floats, 16-byte aligned
};

static bool read_field(FILE *f, Field &F) {
    unsigned h[6];
    double d[3];
    if (!read_header(f, h, 6, d)) return false;
    F.nz = h[0], F.ny = h[1], F.nx = h[2], F.V = h[3], F.walks = h[4], F.fill_bits = h[5];
    F.inv = d[0], F.step = d[1], F.eb = d[2];
    if ((F.V != 1 && F.V != 2) || (F.walks & ~31u) || (unsigned long long)F.nz * F.ny * F.nx > (1ull << 28)) {
        fprintf(stderr, "bad record: %u x %u x %u V %u walks %u\n", F.nz, F.ny, F.nx, F.V, F.walks);
        exit(1);
    }
    char shape[48];
    snprintf(shape, sizeof shape, "%u x %u x %u", F.nz, F.ny, F.nx);
    F.v = read_values(f, (size_t)F.nz * F.ny * F.nx, shape);
    return true;
}

// One walk of a tile: what the lanes leave.
struct Result {
    bool done;
    TileSum ts;
    std::vector<unsigned> pw, sesc, sraw, srv, sfe;
    std::vector<int> esc;  // sq at the escape bits, element order
};

// What byte i of the warp's scratch holds (encode_common.cuh's layout), for
// the report of a byte the walk should not have changed.
static const char *scratch_region(size_t i) {
    if (i >= SC_PARK && i < SC_PARK + SC_PARK_BYTES) return "the parked tile";
    if (i >= SC_UNUSED) return "the unused tail (the fill bitmap's until v61)";
    if (i >= SC_RV && i < SC_RV + 4ull * SC_RV_MAX) return "a listed raw value past nraw";
    if (i >= SC_RV + 4ull * SC_RV_MAX && i < SC_ESC) return "past SC_RV_MAX listed raw values";
    if (i < SC_Q + 16384) return "sq of an element without an escape";
    return "outside what the walk writes";
}

// The walk `walk` of version V by lane l.
template <int V>
static bool walk_lane(int walk, const Field &F, const Geo &g, unsigned long long base, float ebf, unsigned *pw,
                      unsigned char *sc, int l, TileSum &ts) {
    int *const sq = (int *)(sc + SC_Q);
    unsigned *const sesc = (unsigned *)(sc + SC_ESC), *const sraw = (unsigned *)(sc + SC_RAW);
    switch (walk) {
    case W_PLAIN:
        return enc_fast3<false, false, false, V>(F.v, g, base, F.inv, F.step, ebf, 0, pw, sq, sesc, sraw, l, ts);
    case W_HOT:
        return enc_fast3<false, true, false, V>(F.v, g, base, F.inv, F.step, ebf, 0, pw, sq, sesc, sraw, l, ts);
    case W_NO16:
        return enc_fast3<false, true, true, V>(F.v, g, base, F.inv, F.step, ebf, 0, pw, sq, sesc, sraw, l, ts);
    case W_FILLP:  // as encode_warp_kernel with has_fill
        return enc_fast3<true, false, false, V, true>(F.v, g, base, F.inv, F.step, ebf, F.fill_bits, pw, sq, sesc,
                                                      sraw, l, ts);
    default:  // W_FILLHOT: as the fill fields' optimistic kernel (HF 5)
        return enc_fast3<true, true, false, V, true>(F.v, g, base, F.inv, F.step, ebf, F.fill_bits, pw, sq, sesc,
                                                     sraw, l, ts);
    }
}

int main(int argc, char **argv) {
    FILE *in, *out;
    if (const int rc = open_io(argc, argv, "encode_rank3_emu", in, out)) return rc;
    // the lanes play a warp with rows on both sides; its row of stage_buf() is the arena
    const WalkBufs B = walk_bufs<ENC_W>(4 * 2 * STG_PLANE, PW_STRIDE, [] { return stage_buf(); });
    unsigned *const pw = B.pw;
    unsigned char *sc = nullptr;
    {
        void *p = nullptr;
        if (posix_memalign(&p, 16, SC_BYTES)) abort();
        sc = (unsigned char *)p;
    }
    std::vector<unsigned char> pat(SC_BYTES);
    std::barrier<> b(32);
    bar = &b;
    int failed = 0;
    const unsigned consts[5] = {SC_RV_MAX, HOT_RV_MAX, HOT_RV_MAX_V2, HOT_RV_MAX_FILL, HOT_RV_MAX_FILL_V2};
    fwrite(consts, 4, 5, out);
    Field F;
    while (read_field(in, F)) {
        const unsigned gy = (F.ny + 15) / 16, gx = (F.nx + 31) / 32;
        const float ebf = __double2float_rd(F.eb);
        Geo g{};
        g.nz = F.nz;
        g.ny = F.ny;
        g.nx = F.nx;
        for (unsigned iz = 0; iz < F.nz / 8; iz++)
            for (unsigned iy = 0; iy < F.ny / 16; iy++)
                for (unsigned ix = 0; ix < F.nx / 32; ix++)
                    for (int walk = 1; walk <= 16; walk <<= 1) {
                        if (!(F.walks & walk)) continue;
                        const unsigned long long base =
                            ((unsigned long long)iz * 8 * F.ny + iy * 16ull) * F.nx + 32ull * ix;
                        const unsigned tile = (iz * gy + iy) * gx + ix;
                        const bool fillp = walk == W_FILLP || walk == W_FILLHOT;
                        char what[48];
                        snprintf(what, sizeof what, "tile %u walk %d", tile, walk);
                        Result res[2];
                        for (int mode = 0; mode < 2; mode++) {
                            late_landing = mode == 1;
                            const unsigned char pb = mode ? 0xC3 : 0x5A;  // the scratch pattern
                            poison(B);
                            // the staging rows' padding (stage_pad: FILLP's fill bitmap) a pattern per
                            // mode, so that a word of the bitmap the walk does not write shows
                            for (int w = 0; w < 256; w++) *stage_pad(w) = mode ? 0x5A5A5A5Au : 0xA5A5A5A5u;
                            memset(sc, pb, SC_BYTES);
                            memset(sc + SC_ESC, 0, 512);
                            memset(sc + SC_RAW, 0, 512);
                            memcpy(pat.data(), sc, SC_BYTES);
                            bool rets[32];
                            TileSum tss[32];
                            int pending[32];
                            run_warp([&](int l) {
                                TileSum ts;
                                ts.nraw = ts.nfill = ts.wide = 0;  // as the kernel
                                ts.nesc = 0xBAD00000u + mode;      // unset there: a pattern per mode
                                ts.origin = 0x5EED0000 + mode;
                                ts.merr = mode ? -3.0 : -7.0;
                                rets[l] = F.V == 1 ? walk_lane<1>(walk, F, g, base, ebf, pw, sc, l, ts)
                                                   : walk_lane<2>(walk, F, g, base, ebf, pw, sc, l, ts);
                                tss[l] = ts;
                                pending[l] = pending_copies();
                            });
                            const char *const mname = mode ? "late" : "early";
                            failed |= check_pending(pending, what, mode == 1);
                            for (int l = 0; l < 32; l++) {
                                const TileSum &a = tss[l], &z = tss[0];
                                if (rets[l] != rets[0] || a.wide != z.wide ||
                                    (rets[0] && (a.nesc != z.nesc || a.nraw != z.nraw || a.nfill != z.nfill ||
                                                 a.origin != z.origin || memcmp(&a.merr, &z.merr, 8)))) {
                                    fprintf(stderr, "tile %u walk %d: lane %d's result differs from lane 0's (not warp-uniform)\n",
                                            tile, walk, l);
                                    failed = 1;
                                }
                            }
                            failed |= check_pads(B, what);
                            failed |= check_other_rows(B, what);
                            const bool done = rets[0];
                            const TileSum &ts = tss[0];
                            unsigned *const sesc = (unsigned *)(sc + SC_ESC), *const sraw = (unsigned *)(sc + SC_RAW);
                            const unsigned nlist = done ? std::min<unsigned>(ts.nraw, SC_RV_MAX) : 0;
                            // what the walk may have changed in the scratch
                            std::vector<bool> may(SC_BYTES, false);
                            auto allow = [&](size_t from, size_t n) {
                                for (size_t i = from; i < from + n && i < SC_BYTES; i++) may[i] = true;
                            };
                            allow(SC_ESC, 512);
                            allow(SC_RAW, 512);
                            // the lanes' int64 sums of the 8 z-planes (two passes; one pass writes none)
                            if (fillp && walk == W_FILLP) allow(SC_Q, 8 * 32 * 8);
                            if (done) {
                                for (int e = 0; e < 4096; e++)
                                    if ((sesc[e >> 5] >> (e & 31)) & 1) allow(SC_Q + 4 * e, 4);
                                allow(SC_RV, 4ull * nlist);
                            } else {
                                allow(0, SC_PARK);  // the slow path rewrites these
                            }
                            for (size_t i = 0; i < SC_BYTES; i++)
                                if (!may[i] && sc[i] != pat[i]) {
                                    fprintf(stderr, "tile %u walk %d (%s): scratch byte %zu changed (%s)\n", tile, walk, mname, i,
                                            scratch_region(i));
                                    failed = 1;
                                    break;
                                }
                            Result &R = res[mode];
                            R.done = done;
                            R.ts = ts;
                            R.pw.assign(pw, pw + 16 * PW_STRIDE);
                            R.sesc.assign(sesc, sesc + 128);
                            R.sraw.assign(sraw, sraw + 128);
                            const unsigned *const srv = sraw + (SC_RV - SC_RAW) / 4;
                            R.srv.assign(srv, srv + nlist);
                            if (fillp) {
                                for (int i = 0; i < 128; i++) R.sfe.push_back(*stage_pad(i));
                            }
                            const int *const sq = (const int *)(sc + SC_Q);
                            if (done)
                                for (int e = 0; e < 4096; e++)
                                    if ((sesc[e >> 5] >> (e & 31)) & 1) R.esc.push_back(sq[e]);
                        }
                        const Result &R = res[0], &L = res[1];
                        bool same = R.done == L.done && R.ts.wide == L.ts.wide;
                        if (same && R.done)
                            same = R.ts.nesc == L.ts.nesc && R.ts.nraw == L.ts.nraw && R.ts.nfill == L.ts.nfill &&
                                   R.ts.origin == L.ts.origin && !memcmp(&R.ts.merr, &L.ts.merr, 8) && R.pw == L.pw &&
                                   R.sesc == L.sesc && R.sraw == L.sraw && R.srv == L.srv && R.sfe == L.sfe && R.esc == L.esc;
                        if (!same) {
                            fprintf(stderr,
                                    "tile %u walk %d: the result depends on when cp.async copies land (early/late) or on "
                                    "what the buffers held before (a word the walk does not write)\n",
                                    tile, walk);
                            failed = 1;
                        }
                        unsigned hdr[4] = {tile, (unsigned)walk, R.done ? 1u : 0u, R.ts.wide};
                        fwrite(hdr, 4, 4, out);
                        if (!R.done) continue;
                        const unsigned rec[5] = {(unsigned)R.ts.origin, R.ts.nesc, R.ts.nraw, R.ts.nfill,
                                                 merr_bits(R.ts.merr, what, failed)};
                        fwrite(rec, 4, 5, out);
                        write_planes(out, R.pw.data(), PW_STRIDE);
                        fwrite(R.sraw.data(), 4, 128, out);
                        fwrite(R.sesc.data(), 4, 128, out);
                        if (R.esc.size() != R.ts.nesc) {
                            fprintf(stderr, "tile %u walk %d: nesc %u but %zu escape bits\n", tile, walk, R.ts.nesc,
                                    R.esc.size());
                            failed = 1;
                        }
                        if (!R.esc.empty()) fwrite(R.esc.data(), 4, R.esc.size(), out);
                        if (!R.srv.empty()) fwrite(R.srv.data(), 4, R.srv.size(), out);
                        if (fillp) fwrite(R.sfe.data(), 4, 128, out);
                    }
        free(F.v);
    }
    free(pw);
    free(sc);
    if (fclose(out)) return 1;
    return failed;
}
