// The warp decoder: one warp per tile, for every tile of the three
// standard tile shapes (FORMAT.md section 3; included by decode.cuh).
//
// The mirror of encode_warp.cuh's walks. A warp reads word0, stages the
// tile in shared memory (coalesced) when it is a full tile without escapes
// whose bytes fit the stage buffer, finds where each bit plane starts (a
// serial walk over the plane masks), and walks the tile:
//   dec_fast3 / dec_fast2 / dec_fast1 (decode_fast.cuh)  full staged tiles (rank 1 also with
//       escapes, clipped, or read from global memory when too big: X).
//       32 slots per step: lanes 16h + p load plane p of a pair of words
//       and one 32x32 bit transpose gives each lane two codes, which land
//       in a per-warp plane buffer at their element; the Lorenzo prefix
//       sums run through that buffer ("v7 walks"), fill and raw masks are
//       rebuilt row by row on the way out.
//   dec_gen3 / dec_gen2 (decode_generic.cuh)  every other rank-3 / rank-2 tile (clipped boxes,
//       escapes, too big to stage), read from global memory: the codes of
//       a window of slots are transposed into the stage buffer, and each
//       element of the box reads its code at its slot.
// No block barriers, no per-element tables.
//
// A tile whose structure does not check out (sizes, counts, a code in
// slot 0, more escape codes than escapes, a raw count that disagrees with
// its mask, mask bits past the box) goes on a list for the block decoder
// (decode_list_kernel in decode.cuh), which rejects it with the CPU
// decoder's reason, or decodes it if the warp was wrong to give up. A warp
// that gives up may have written part of its tile; the block decoder runs
// after it on the same stream and rewrites all of it. Output does not
// depend on which decoder took a tile.

#include "tile_order.cuh"   // which tile a warp takes: full tiles first
#include "stage_words.cuh"  // a tile into the stage buffer by cp.async

#define DEC_W 4         // warps per block
#ifndef DEC_STAGE
// words staged per warp (7.25 KiB); larger tiles take the generic walks,
// several times slower a tile. 1856 is the most that keeps 6 blocks an SM
// on an H100/H200: 4 x (1856 + 512) words + the 1 KiB the system keeps, 6
// times, is 228 KiB (an A100's 164 KiB hold 4 blocks with 1536 or 1856).
// From 1536 (v45): coads's largest tiles at 1e-4 (6.5 % of them, up to 6480
// bytes) staged, decompress 1.52x (PERF.md item 4).
#define DEC_STAGE 1856
#endif
#ifndef DEC_MINB_W
#define DEC_MINB_W 6    // blocks per SM the register budget is cut for: 80 registers, 24 warps (5: 96, 3 % slower)
#endif
#ifndef DEC_MINB_W_FILL
// ... for the fill fields' kernels (FK), whose masked walks spill at 80:
// 96 registers, 20 warps, no spills (H200, PERF.md v56: coads and levitus
// decompress 1.015-1.04x of 80 registers; smooth3d's kernels at 96 lost 3-5 %,
// so the others keep DEC_MINB_W; 128 registers, 4 blocks, lost to 96). Timed
// on the padded fill kernels only; the box-tiled ones (FK too) were not.
#define DEC_MINB_W_FILL 5
#endif

// Sign-magnitude code to residual (the escape code 0x8000 gives 0). For
// c >= 0x8000 the residual -(c - 0x8000) is 0x8000 - c: a compare, a
// subtract and a select (v34; the mask, test and negation before took more).
__device__ __forceinline__ int resid(unsigned c) { return c >= 0x8000u ? 0x8000 - (int)c : (int)c; }

// resid in walks of tiles without escapes (no X): an escape code sets bad.
__device__ __forceinline__ int resid_of(unsigned c, bool &bad) {
    bad |= c == 0x8000u;
    return resid(c);
}

// The staged walks' codes, a word at a time (v35): a word's codes to their
// residuals in the same lanes, in two's complement: m, or (m ^ ones) + 1
// where the sign is set (for m >= 1 no carry leaves the code's byte or
// half). The escape code (sign set, magnitude 0) would carry into the next
// code; esc collects escapes (a set top bit where one was) and the caller
// rejects the tile, as resid_of's bad does. One prmt a code then takes it
// out sign-extended (sext8, sext16). The word costs 7 instructions where
// resid_of took ~7 a code (compare, subtract, select, the escape's compare,
// the extraction). prmt with sign replication: encode_ptx.cuh, which
// fzgpu.cu includes before decode.cuh; tools/walk_emu.h on the host.
// Four 8-bit codes (bit 7 the sign, bits 0-6 the magnitude):
__device__ __forceinline__ unsigned resid8x4(unsigned c, unsigned &esc) {
    const unsigned sm = prmt(c, 0, 0xBA98u);  // 0xFF on each byte whose sign is set
    const unsigned x = c ^ 0x80808080u;        // a zero byte where c holds an escape
    esc |= (x - 0x01010101u) & ~x & 0x80808080u;
    return ((c & 0x7F7F7F7Fu) ^ sm) + (sm & 0x01010101u);
}
__device__ __forceinline__ int sext8(unsigned r, int b) {
    return (int)prmt(r, 0, b | (8 | b) << 4 | (8 | b) << 8 | (8 | b) << 12);
}
// Two 16-bit codes (bit 15 the sign):
__device__ __forceinline__ unsigned resid16x2(unsigned c, unsigned &esc) {
    const unsigned sm = prmt(c, 0, 0xBB99u);  // 0xFFFF on each half whose sign is set
    const unsigned x = c ^ 0x80008000u;        // a zero half where c holds an escape
    esc |= (x - 0x00010001u) & ~x & 0x80008000u;
    return ((c & 0x7FFF7FFFu) ^ sm) + (sm & 0x00010001u);
}
__device__ __forceinline__ int sext16(unsigned r, int h) { return (int)prmt(r, 0, h ? 0xBB32u : 0x9910u); }

__device__ __forceinline__ int wadd(int a, int b) { return (int)((unsigned)a + (unsigned)b); }

// Fill and raw masks of a tile (FORMAT.md section 5, "masks"): where each
// zero-block coded bitmap starts (0: absent), and the raw values.
struct TileMasks {
    unsigned fat, rat;    // word of the fill / raw mask's block mask, 0 if absent
    unsigned rvat, nraw;  // first raw value word, raw count
    unsigned escat, nesc; // first escaped residual word, escape count (0: none)
};

// Word W of a mask (0 when the mask is absent).
__device__ __forceinline__ unsigned mask_word(const unsigned *tb, unsigned at, int W) {
    return at ? zb_word(tb, tb[at], at + 1, W) : 0u;
}

// Inclusive prefix XOR over the bits of m (bit i = XOR of bits 0..i):
// undoes the parity transform along x within a word.
__device__ __forceinline__ unsigned pxor(unsigned m) {
    m ^= m << 1;
    m ^= m << 2;
    m ^= m << 4;
    m ^= m << 8;
    m ^= m << 16;
    return m;
}

template <typename T> __device__ __forceinline__ T raw_value(const unsigned *tb, unsigned rvat, unsigned r);
template <> __device__ __forceinline__ float raw_value<float>(const unsigned *tb, unsigned rvat, unsigned r) {
    return __uint_as_float(tb[rvat + r]);
}
template <> __device__ __forceinline__ double raw_value<double>(const unsigned *tb, unsigned rvat, unsigned r) {
    return __longlong_as_double((long long)((unsigned long long)tb[rvat + 2 * r] |
                                            (unsigned long long)tb[rvat + 2 * r + 1] << 32));
}

#include "decode_fast.cuh"     // the fast walks: full staged tiles (v7 walks)
#include "decode_generic.cuh"  // the generic walks: any box, escapes, big tiles
#include "decode_flat.cuh"     // the walk of flat tiles (R = 4)

// X tiles clipped to n < 4096 elements: a mask bit at a slot >= n (the
// CPU decoder rejects it; the walks would not see it).
__device__ __forceinline__ bool mask_past_n(const unsigned *tb, unsigned at, int n, int lane) {
    bool bad = false;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int W = 32 * q + lane, lo = 32 * W;
        const unsigned w = mask_word(tb, at, W);
        bad |= lo >= n ? w != 0 : n - lo < 32 && (w >> (n - lo)) != 0;
    }
    return bad;
}

__device__ __forceinline__ void prefetch_l1(const void *p) {
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// One warp per tile, for the standard tile shape of rank R (R = 4: flat
// tiles whose walk applies, flat_dec_walkable). Full tiles
// without escapes whose bytes fit the stage buffer are staged and take
// the fast walks (rank 1: every tile, X when needed); every other tile
// reads its bytes from global memory (L1) and takes a generic walk. The
// generic walks in a kernel of their own, over a list this one filled,
// measured slower on the fill fields (PERF.md, dec v20).
//
// FK: the field has a fill value, and every tile takes the walks that
// apply masks (a tile without them has none to apply): one walk's code
// per tile shape in the instruction cache instead of two, where fill
// tiles and tiles without fill alternate (H200, PERF.md dec v23: levitus
// +14-15 %, coads +13-16 % decompress).
// fl: full tiles along z, y, x when the warps take the job's full tiles
// first (tile_order.cuh; rank-3 fields with a fill value, fzgpu.cu);
// 0, 0, 0: tile order.
// mcount: the job's tiles with a fill or raw mask (mask_census_kernel), or
// null. Where they are at least DEC_MASKS_ALL_PCT % of the tiles, every
// tile takes the masked walks, as FK does for fill fields: era5's raw
// values put a mask in 9 / 27 / 77 % of its tiles at REL 1e-2 / 1e-3 /
// 1e-4 (the CPU codec's tiles), so masked and unmasked walks alternate on
// an SM, and era5 decoded at 1e-3 slower than at 1e-4 (288 against 311
// GB/s, PERF.md v25), the instruction-fetch pattern FK removed from the
// fill fields (+13-16 %).
#ifndef DEC_MASKS_ALL_PCT
#define DEC_MASKS_ALL_PCT 20  // 101: never (A/B)
#endif
//
// PAD: the field has padded box tiles (FORMAT.md 3.2; f32 rank 3 only,
// fzgpu.cu): every tile is coded whole and takes the full-tile walks, which
// store only the tile's box. The box kernels do not compile that code in.
template <typename T, int R, bool FK, bool PAD = false>
__global__ void __launch_bounds__(DEC_W * 32, FK ? DEC_MINB_W_FILL : DEC_MINB_W)
    decode_warp_kernel(Geo g, const unsigned char *__restrict__ blob, unsigned long long tile0,
                       unsigned long long nt, double step, const unsigned long long *__restrict__ toff,
                       const unsigned *__restrict__ tsz, T *__restrict__ dst, unsigned *list, unsigned *count,
                       unsigned long long fill_bits, uint3 fl, const unsigned *mcount) {
    // per warp: the stage buffer (words 0 .. DEC_STAGE - 1) and the v7 plane
    // buffer (512 words after it); the generic walks use the first part for
    // codes and masks; flat tiles (R = 4) dec_flat's q ring and chunk (FLAT_SMEM: 8.5 KiB
    // a warp, 24 warps an SM still fit)
    __shared__ __align__(16) unsigned smem[DEC_W][R == 4 ? FLAT_SMEM : DEC_STAGE + 512];
    grid_wait();  // toff, tsz and the counts from the kernels before (launch_dependent)
    const T fill = Bits<T>::from(fill_bits);
    const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
    unsigned long long rel = (unsigned long long)blockIdx.x * DEC_W + wi;
    if (rel >= nt) return;
    if (R == 3 && fl.z) rel = dec_tile_of(g, tile0, nt, rel, fl) - tile0;
    const unsigned sz = tsz[rel];
    if (sz == 0) return;  // its size was invalid, already reported by the chunk scan
    unsigned long long z0, y0, x0;
    int lz, ly, lx;
    tile_box(g, tile0 + rel, z0, y0, x0, lz, ly, lx);
    const Box3 box{lz, ly, lx};  // PAD: what of the whole tile is stored
    if (PAD) {
        lz = g.tz;
        ly = g.ty;
        lx = g.tx;
    }
    const int n = lz * ly * lx;
    const unsigned nw = sz / 4;
    const unsigned *gp = (const unsigned *)(blob + toff[rel]);
    unsigned *sw = smem[wi];
    // word0 first: it says whether the tile is staged
    const unsigned w0 = __ldg(gp);
    bool ok = (w0 & ~0x7FFFFu) == 0;
    const bool flags = (w0 >> 16) & 7;
    // flat tiles (R = 4) are read from global memory: the warp's shared
    // memory holds dec_flat's q ring and chunk buffer
    const bool staged = R != 4 && nw <= DEC_STAGE && (R == 1 || (n == TILE && !((w0 >> 16) & 1)));
    const unsigned *tb = gp;
    if (ok && staged) {
        stage_words(sw, gp, nw, lane);
        tb = sw;
    } else if (ok) {
        // the walk over the plane masks below is a chain of dependent loads
        for (unsigned i = 32 * lane; i < nw + 31; i += 1024) prefetch_l1(gp + min(i, nw - 1));
    }
    // where each plane's blocks start: serial over the masks; lanes p
    // and 16 + p keep plane p's
    unsigned at = 2, bm = 0, pat = 0;
    for (int pl = 0; pl < 16 && ok; pl++) {
        if (!((w0 >> pl) & 1)) continue;
        if (at >= nw) {
            ok = false;
            break;
        }
        const unsigned m = tb[at];
        if ((lane & 15) == pl) {
            bm = m;
            pat = at + 1;
        }
        at += 1 + 4 * __popc(m);
    }
    // then the escapes, the fill mask, the raw mask, the raw count and values
    TileMasks mk = {0, 0, 0, 0, 0, 0};
    unsigned long long end = at;
    if (ok && ((w0 >> 16) & 1)) {
        ok = end < nw;
        if (ok) {
            mk.nesc = tb[end];
            mk.escat = (unsigned)end + 1;
            ok = mk.nesc != 0 && mk.nesc < (unsigned)n;
            end += 1 + (unsigned long long)mk.nesc;
        }
    }
    if (ok && ((w0 >> 17) & 1)) {
        ok = end < nw;
        if (ok) {
            mk.fat = (unsigned)end;
            end += 1 + 4 * __popc(tb[end]);
        }
    }
    if (ok && ((w0 >> 18) & 1)) {
        ok = end < nw;
        if (ok) {
            mk.rat = (unsigned)end;
            end += 1 + 4 * __popc(tb[end]);
            ok = end < nw;
        }
        if (ok) {
            mk.nraw = tb[end];
            mk.rvat = (unsigned)end + 1;
            end += 1 + (unsigned long long)mk.nraw * (sizeof(T) / 4);
            ok = mk.nraw != 0;
        }
    }
    ok = ok && end == nw;
    if (ok && n < TILE && ((w0 >> 17) & 3))
        ok = !__any_sync(0xffffffffu, mask_past_n(tb, mk.fat, n, lane) || mask_past_n(tb, mk.rat, n, lane));
    if (ok) {
        const unsigned long long base = (z0 * g.ny + y0) * g.nx + x0;
        const int origin = (int)tb[1];
        int *pb = (int *)(sw + DEC_STAGE);
        // the masked walks for every tile (the same for every warp of the
        // job); read here, where the walk is chosen, so that no register
        // holds it through the staging (nvcc 11.8: spills otherwise)
        const bool allm = FK || (mcount && 100ull * *mcount >= DEC_MASKS_ALL_PCT * nt);
        // the staged walks are handed sw (= tb when staged), not tb: tb may
        // point to either memory, so every read through it was a generic
        // load with a 64-bit address; through sw the compiler emits shared
        // loads (LDS). (The generic walks handed gp, global loads, spilled
        // more: nvcc 11.8, the f32 rank-2 kernel 4 -> 48 bytes of stores.)
        const bool few = !(w0 & 0x7F80u);  // the staged walks' 8-bit layout: no planes 7-14
        if (R == 3) {
            if (staged)
                ok = allm || (w0 >> 17) & 3
                         ? dec_fast3<T, true, FK, PAD>(sw, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill, few, box)
                         : dec_fast3<T, false, false, PAD>(sw, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill, few,
                                                           box);
            else
                ok = allm || flags ? dec_gen3<T, true, PAD>(tb, bm, pat, origin, g, base, step, dst, pb, sw, lane, mk, fill,
                                                           lz, ly, lx, box)
                       : dec_gen3<T, false, PAD>(tb, bm, pat, origin, g, base, step, dst, pb, sw, lane, mk, fill, lz, ly, lx,
                                                 box);
        } else if (R == 2) {
            if (staged)
                ok = allm || (w0 >> 17) & 3
                         ? dec_fast2<T, true>(sw, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill, few)
                         : dec_fast2<T, false>(sw, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill, few);
            else
                ok = allm || flags ? dec_gen2<T, true>(tb, bm, pat, origin, g, base, step, dst, sw, lane, mk, fill, ly, lx)
                   : dec_gen2<T, false>(tb, bm, pat, origin, g, base, step, dst, sw, lane, mk, fill, ly, lx);
        } else if (R == 4) {
            ok = allm || flags || n < TILE ? dec_flat<T, true>(tb, bm, pat, origin, g, base, step, dst, sw, lane, mk, fill, n)
                   : dec_flat<T, false>(tb, bm, pat, origin, g, base, step, dst, sw, lane, mk, fill, n);
        } else {
            ok = allm || flags || n < TILE ? dec_fast1<T, true>(tb, bm, pat, origin, base, step, dst, pb, lane, mk, fill, n)
                   : dec_fast1<T, false>(tb, bm, pat, origin, base, step, dst, pb, lane, mk, fill, n);
        }
    }
    if (!ok && lane == 0) list[atomicAdd(count, 1u)] = (unsigned)rel;
}
