// The warp decoder: one warp per tile, for every tile of the three
// standard tile shapes (FORMAT.md section 3; included by decode.cuh).
//
// The mirror of encode_warp.cuh's walks. A warp reads word0, stages the
// tile in shared memory (coalesced) when it is a full tile without escapes
// whose bytes fit the stage buffer, finds where each bit plane starts (a
// serial walk over the plane masks), and walks the tile:
//   dec_fast3 / dec_fast2 / dec_fast1  full staged tiles (rank 1 also with
//       escapes, clipped, or read from global memory when too big: X).
//       32 slots per step: lanes 16h + p load plane p of a pair of words
//       and one 32x32 bit transpose gives each lane two codes, which land
//       in a per-warp plane buffer at their element; the Lorenzo prefix
//       sums run through that buffer ("v7 walks"), fill and raw masks are
//       rebuilt row by row on the way out.
//   dec_gen3 / dec_gen2  every other rank-3 / rank-2 tile (clipped boxes,
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

#include "tile_order.cuh"  // which tile a warp takes: full tiles first

#define DEC_W 4         // warps per block
#define DEC_STAGE 1536  // words staged per warp (6 KiB); larger tiles go to the block decoder
#ifndef DEC_MINB_W
#define DEC_MINB_W 6    // blocks per SM the register budget is cut for: 80 registers, 24 warps (5: 96, 3 % slower)
#endif

// Sign-magnitude code to residual; an escape code (0x8000) sets bad.
__device__ __forceinline__ int resid_of(unsigned c, bool &bad) {
    const int mag = (int)(c & 0x7FFFu);
    bad |= c == 0x8000u;
    return (c & 0x8000u) ? -mag : mag;
}

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

// ---- v7 walks: the prefix sums run through a per-warp 2 KiB plane buffer
// instead of warp shuffles. A shuffle and a shared-memory word cost the
// same (an SM moves 32 of either per clock), but a scan over lanes needs
// 3-5 dependent shuffles per value while one store and one load put the
// run a scan needs into one lane, where it is a chain of adds.

// Element (lane) of a 32-element row whose fill and raw mask words are fm
// and rm: the fill value, the next raw value (nr raws came before this
// row; bad if the mask marks more than the count), or val from its q.
template <typename T>
__device__ __forceinline__ T apply_masks(T val, unsigned fm, unsigned rm, unsigned &nr, const TileMasks &mk,
                                         const unsigned *tb, T fill, int lane, bool &bad) {
    if ((fm >> lane) & 1) val = fill;
    if ((rm >> lane) & 1) {
        const unsigned r = nr + __popc(rm & ((1u << lane) - 1));
        if (r < mk.nraw) val = raw_value<T>(tb, mk.rvat, r);
        else bad = true;
    }
    nr += __popc(rm);
    return val;
}

// One 16-byte piece of the plane buffer into (or out of) v[0..3].
__device__ __forceinline__ void ld4(int *v, const int *p) {
    const int4 w = *(const int4 *)p;
    v[0] = w.x;
    v[1] = w.y;
    v[2] = w.z;
    v[3] = w.w;
}
__device__ __forceinline__ void st4(int *p, const int *v, int add) {
    *(int4 *)p = make_int4(wadd(v[0], add), wadd(v[1], add), wadd(v[2], add), wadd(v[3], add));
}

// Inclusive prefix sum of a lane's 16-value run, in registers.
__device__ __forceinline__ void scan16(int *v) {
#pragma unroll
    for (int i = 1; i < 16; i++) v[i] = wadd(v[i], v[i - 1]);
}

// Rank 3, element (y, x) of a z-plane lives at word 32y + (x ^ swz3(y)).
// The XOR keeps every access pattern below on 32 distinct banks: the
// transpose's (dy, dx) words, the rows' 16-byte pieces (one quarter-warp
// of 8 lanes per wavefront) and the columns.
__device__ __forceinline__ int swz3(int y) { return 20 * (y & 1) + 8 * ((y >> 1) & 1); }

// Rank 3: per z-plane, (A) codes -> residuals d into the buffer at (y, x);
// (B) lane (y = l/2, half h = l%2) takes 16 x of a row: prefix over x in
// registers, plus the first half's total for h = 1; (C) lane x takes a
// column: prefix over y, then over z with a carried register per y, and
// stores rows of 32 consecutive values. q = Pz Py Px d, FORMAT.md section 7.
//
// With M (the tile has a fill or raw mask), each z-plane first rebuilds
// the plane's element masks: lane 16m + y takes row y of mask m (fill,
// raw), gathers its 32 bits from the four words of the row's sub-blocks,
// and undoes the parity transform along x (pxor), y (an XOR scan over the
// 16 lanes) and z (a carried register). A row's masks are then one
// broadcast each, and a raw value's index is the raws before it in
// element order: the rows before, plus the lanes before in this row.
template <typename T, bool M>
__device__ __forceinline__ bool dec_fast3(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                          unsigned long long base, double step, T *__restrict__ dst, int *pb,
                                          int lane, const TileMasks &mk, T fill) {
    const unsigned F = 0xffffffffu;
    const int dy = lane >> 3, dx = lane & 7, hsel = (lane >> 4) * 16;
    const int ry = lane >> 1, rh = lane & 1;
    int *rowp = pb + 32 * ry;
    const int rsw = swz3(ry);
    int zc[16];
#pragma unroll
    for (int y = 0; y < 16; y++) zc[y] = 0;
    bool bad = false;
    T *col = dst + base + lane;
    const unsigned long long plane = g.ny * g.nx;
    unsigned zm = 0, nr = 0;  // M: this lane's mask row, carried over z; raws so far
    unsigned run0 = 0, run1 = 0, at0 = 0, at1 = 0;
#pragma unroll 1
    for (int z = 0; z < 8; z++) {
        if (M) {
            const int my = lane & 15, mdy = my & 3;
            const unsigned at = lane < 16 ? mk.fat : mk.rat;
            unsigned r = 0;
#pragma unroll
            for (int k = 0; k < 4; k++)
                r |= ((mask_word(tb, at, (z >> 2) * 64 + 16 * (my >> 2) + 4 * k + (z & 3)) >> (8 * mdy)) & 0xFFu)
                     << (8 * k);
            r = pxor(r);
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) {
                const unsigned u = __shfl_up_sync(F, r, o, 16);
                if (my >= o) r ^= u;
            }
            zm ^= r;
        }
        // This z reads word z % 4 of blocks 16 (z / 4) + 4h + k (run 0) and
        // 16 (z / 4) + 8 + 4h + k (run 1), k = 0..3: each run's offset
        // advances by the blocks present, instead of a popc per word.
        if ((z & 3) == 0) {
            const int k0 = 16 * (z >> 2) + hsel / 4;
            run0 = (bm >> k0) & 15u;
            run1 = (bm >> (k0 + 8)) & 15u;
            at0 = pat + 4 * __popc(bm & ((1u << k0) - 1));
            at1 = pat + 4 * __popc(bm & ((1u << (k0 + 8)) - 1));
        }
        unsigned o0 = at0 + (z & 3), o1 = at1 + (z & 3);
#pragma unroll
        for (int kp = 0; kp < 4; kp += 2) {
            unsigned t[4];  // words of runs 0 and 1 for k = kp, kp + 1: four transposes in step
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const unsigned p0 = (run0 >> (kp + u)) & 1u, p1 = (run1 >> (kp + u)) & 1u;
                t[2 * u] = p0 ? tb[o0] : 0u;
                t[2 * u + 1] = p1 ? tb[o1] : 0u;
                o0 += 4 * p0;
                o1 += 4 * p1;
            }
            transpose32n<4>(t, lane);
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int k = kp + u;
                const unsigned c[4] = {t[2 * u] & 0xFFFFu, t[2 * u] >> 16, t[2 * u + 1] & 0xFFFFu, t[2 * u + 1] >> 16};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int d = resid_of(c[j], bad);
                    if (z == 0 && k == 0 && j == 0 && lane == 0) {
                        bad |= c[j] != 0;  // slot 0 holds code 0; its residual is the origin
                        d = origin;
                    }
                    const int y = 4 * j + dy;
                    pb[32 * y + ((8 * k + dx) ^ swz3(y))] = d;
                }
            }
        }
        __syncwarp();
        int v[16];
#pragma unroll
        for (int c = 0; c < 4; c++) ld4(v + 4 * c, rowp + ((16 * rh + 4 * c) ^ rsw));
        scan16(v);
        const int lo = __shfl_sync(F, v[15], lane & ~1);
        if (rh) {
#pragma unroll
            for (int i = 0; i < 16; i++) v[i] = wadd(v[i], lo);
        }
#pragma unroll
        for (int c = 0; c < 4; c++) st4(rowp + ((16 * rh + 4 * c) ^ rsw), v + 4 * c, 0);
        __syncwarp();
        T *out = col + z * plane;
        int Y = 0;
#pragma unroll
        for (int y = 0; y < 16; y++) {
            Y = wadd(Y, pb[32 * y + (lane ^ swz3(y))]);
            zc[y] = wadd(zc[y], Y);
            T val = Bits<T>::rec(zc[y], step);
            if (M) {
                const unsigned fm = __shfl_sync(F, zm, y), rm = __shfl_sync(F, zm, 16 + y);
                val = apply_masks<T>(val, fm, rm, nr, mk, tb, fill, lane, bad);
            }
            out[(unsigned long long)y * g.nx] = val;
        }
        __syncwarp();
    }
    if (M && nr != mk.nraw) bad = true;
    return !__any_sync(F, bad);
}

// Rank 2, full 64x64 tile (16x8 sub-blocks): block kb = 8j + k is the
// sub-block (j, k), rows 16j .. 16j+15 and columns 8k .. 8k+7, and its
// word w holds rows 4w .. 4w+3 (lane l: row 4w + l/8, column 8k + l%8),
// the lane layout of dec_fast3's sub-blocks. Per band j (16 rows) and
// half hx (32 columns) the walk is dec_fast3's per z-plane: (A) four
// transposes per word pair into the 16x32 plane buffer; (B) row prefix,
// plus the left half's row totals for hx = 1; (C) lane x runs down column
// 32hx + x, carrying the column's sum over the bands, and stores rows of
// 32 values.
//
// With M, the band's mask rows are built first for both halves (lane
// 16m + y: row y of mask m): pxor within the half, flipped for hx = 1 when
// the left half's row has odd parity, an XOR scan over y plus the last
// row of the band before. A raw value's index counts, in element order,
// the raws of the band's earlier rows (both halves), of the left half of
// its row (hx = 1), and the lanes before it.
template <typename T, bool M>
__device__ __forceinline__ bool dec_fast2(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                          unsigned long long base, double step, T *__restrict__ dst, int *pb,
                                          int lane, const TileMasks &mk, T fill) {
    const unsigned F = 0xffffffffu;
    const int dy = lane >> 3, dx = lane & 7, h = lane >> 4;
    const int ry = lane >> 1, rh = lane & 1;
    int *rowp = pb + 32 * ry;
    const int rsw = swz3(ry);
    int Y0 = 0, Y1 = 0;  // the column sums over the bands before, per half
    unsigned yc0 = 0, yc1 = 0, nrb = 0;  // M: mask rows carried over bands, per half; raws of the bands before
    bool bad = false;
    T *col = dst + base + lane;
#pragma unroll 1
    for (int j = 0; j < 4; j++) {
        unsigned zm0 = 0, zm1 = 0, rb0 = 0, rb1 = 0;  // M: rows' masks per half; lanes 16 + y: raws before row y's half
        if (M) {
            const int y = lane & 15;
            const unsigned at = lane < 16 ? mk.fat : mk.rat;
            unsigned lp = 0;
#pragma unroll
            for (int hx = 0; hx < 2; hx++) {
                unsigned r = 0;
#pragma unroll
                for (int k = 0; k < 4; k++)
                    r |= ((mask_word(tb, at, 4 * (8 * j + 4 * hx + k) + (y >> 2)) >> (8 * (y & 3))) & 0xFFu) << (8 * k);
                r = pxor(r);
                if (hx == 0) lp = r >> 31;
                else if (lp) r = ~r;
#pragma unroll
                for (int o = 1; o < 16; o <<= 1) {
                    const unsigned u = __shfl_up_sync(F, r, o, 16);
                    if (y >= o) r ^= u;
                }
                unsigned &yc = hx ? yc1 : yc0;
                r ^= yc;
                yc = __shfl_sync(F, r, (lane & 16) + 15);
                (hx ? zm1 : zm0) = r;
            }
            // lanes 16 + y: the raws of the band's rows before y
            const unsigned cnt = __popc(zm0) + __popc(zm1);
            unsigned inc = cnt;
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) {
                const unsigned u = __shfl_up_sync(F, inc, o, 16);
                if (y >= o) inc += u;
            }
            rb0 = nrb + inc - cnt;
            rb1 = rb0 + __popc(zm0);
            nrb += __shfl_sync(F, inc, 31);
        }
        int rt = 0;  // row ry's total over the left half
        // not unrolled: unrolled, the compiler kept the 8 blocks' offsets
        // of the band live through the prefix sums and spilled
#pragma unroll 1
        for (int hx = 0; hx < 2; hx++) {
#pragma unroll
            for (int mp = 0; mp < 2; mp++) {
                unsigned t[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int kb = 8 * j + 4 * hx + k;
                    const bool pr = (bm >> kb) & 1u;
                    t[k] = pr ? tb[pat + 4 * __popc(bm & ((1u << kb) - 1)) + 2 * mp + h] : 0u;
                }
                transpose32n<4>(t, lane);
#pragma unroll
                for (int k = 0; k < 4; k++) {
#pragma unroll
                    for (int hh = 0; hh < 2; hh++) {
                        const unsigned c = hh ? t[k] >> 16 : t[k] & 0xFFFFu;
                        int d = resid_of(c, bad);
                        if (j == 0 && hx == 0 && mp == 0 && k == 0 && hh == 0 && lane == 0) {
                            bad |= c != 0;  // slot 0 holds code 0; its residual is the origin
                            d = origin;
                        }
                        const int y = 4 * (2 * mp + hh) + dy;
                        pb[32 * y + ((8 * k + dx) ^ swz3(y))] = d;
                    }
                }
            }
            __syncwarp();
            int v[16];
#pragma unroll
            for (int c = 0; c < 4; c++) ld4(v + 4 * c, rowp + ((16 * rh + 4 * c) ^ rsw));
            scan16(v);
            const int lo = __shfl_sync(F, v[15], lane & ~1), hi = __shfl_sync(F, v[15], lane | 1);
#pragma unroll
            for (int c = 0; c < 4; c++) st4(rowp + ((16 * rh + 4 * c) ^ rsw), v + 4 * c, wadd(rh ? lo : 0, rt));
            rt = wadd(rt, wadd(lo, hi));
            __syncwarp();
            T *out = col + (unsigned long long)16 * j * g.nx + 32 * hx;
            int Yh = hx ? Y1 : Y0;
            const unsigned zm = hx ? zm1 : zm0, rb = hx ? rb1 : rb0;
#pragma unroll
            for (int y = 0; y < 16; y++) {
                Yh = wadd(Yh, pb[32 * y + (lane ^ swz3(y))]);
                T val = Bits<T>::rec(Yh, step);
                if (M) {
                    const unsigned fm = __shfl_sync(F, zm, y), rm = __shfl_sync(F, zm, 16 + y);
                    unsigned nr = __shfl_sync(F, rb, 16 + y);
                    val = apply_masks<T>(val, fm, rm, nr, mk, tb, fill, lane, bad);
                }
                out[(unsigned long long)y * g.nx] = val;
            }
            if (hx) Y1 = Yh;
            else Y0 = Yh;
            __syncwarp();
        }
    }
    if (M && nrb != mk.nraw) bad = true;
    return !__any_sync(F, bad);
}

// Rank 1, element e (0-511) of a 512-element chunk lives at word
// sw1(e): 16-byte pieces XOR-rotated by (e / 32) % 4, so the
// transpose's 32 consecutive elements and the lanes' 16-element runs
// (16-byte loads, a quarter-warp per wavefront) both hit 32 banks.
__device__ __forceinline__ int sw1(int e) { return (e & ~15) | ((((e >> 2) ^ (e >> 5)) & 3) << 2) | (e & 3); }

// Rank 1: word 16ch + lane/2 of the mask at `at` with the parity transform
// undone: pxor within the word, flipped when the words before it in the
// chunk (their parities, one ballot over the even lanes) and the chunks
// before (par, carried and updated here) leave a 1.
__device__ __forceinline__ unsigned chunk_mask_word(const unsigned *tb, unsigned at, int ch, int lane, unsigned &par) {
    unsigned w = pxor(mask_word(tb, at, 16 * ch + (lane >> 1)));
    const unsigned p = __ballot_sync(0xffffffffu, w >> 31) & 0x55555555u;
    if ((__popc(p & ((1u << (lane & ~1)) - 1)) & 1) ^ par) w = ~w;
    par ^= __popc(p) & 1;
    return w;
}


// Residual of a code that is not an escape.
__device__ __forceinline__ int resid(unsigned c) {
    const int mag = (int)(c & 0x7FFFu);
    return (c & 0x8000u) ? -mag : mag;
}

// X walks (escapes present): the residual of element (lane) of a run of 32
// in element order whose code is c (in: the element lies in the box). An
// escape takes the next escaped residual: ne came before this run, plus
// the escapes of the lanes below; more escape codes than listed set bad.
__device__ __forceinline__ int esc_resid(unsigned c, bool in, unsigned &ne, const TileMasks &mk,
                                         const unsigned *tb, int lane, bool &bad) {
    const bool es = in && c == 0x8000u;
    const unsigned b = __ballot_sync(0xffffffffu, es);
    int d = in ? resid(c) : 0;
    if (es) {
        const unsigned r = ne + __popc(b & ((1u << lane) - 1));
        if (r < mk.nesc) d = (int)tb[mk.escat + r];
        else bad = true;
    }
    ne += __popc(b);
    return d;
}

// Rank 1: tile 1x1x4096, slot = element, 8 chunks of 512: (A) codes ->
// residuals into the buffer; (B) lane l takes elements 16l .. 16l+15:
// prefix in registers, an exclusive warp scan of the lanes' totals and
// the previous chunk's last q, back into the buffer; (C) word i of the
// chunk from lane l = element 32i + l, so each store is 32 consecutive
// values (a lane's own 16-value run, stored directly, halved the f64
// throughput: every store instruction touched 32 lines).
//
// With X (fill or raw mask, escapes, or a tile clipped to n < 4096
// elements, the field's last), lane l holds mask word 16ch + l/2
// (chunk_mask_word) and step C broadcasts word i; escapes are taken in
// element order as step A meets them; slots >= n are ignored (their
// codes) or checked empty (the masks, by the caller).
template <typename T, bool X>
__device__ __forceinline__ bool dec_fast1(const unsigned *tb, unsigned bm, unsigned pat, int origin,
                                          unsigned long long base, double step, T *__restrict__ dst, int *pb,
                                          int lane, const TileMasks &mk, T fill, int n) {
    const unsigned F = 0xffffffffu;
    const int hsel = lane >> 4;
    const int nn = X ? n : TILE, nch = X ? (n + 511) >> 9 : 8;
    T *p0 = dst + base + lane;
    int carry = 0;
    unsigned fpar = 0, rpar = 0, nr = 0, ne = 0;  // X: mask parities carried over chunks, raws and escapes so far
    bool bad = false;
#pragma unroll 1
    for (int ch = 0; ch < nch; ch++) {
        // words h, h + 2 of blocks 4ch + k, k = 0..3 (see dec_fast3)
        const unsigned run = (bm >> (4 * ch)) & 15u;
        unsigned o = pat + 4 * __popc(bm & ((1u << (4 * ch)) - 1)) + hsel;
#pragma unroll
        for (int w4 = 0; w4 < 16; w4 += 8) {
            unsigned t[4];  // word pairs wp = w4, w4 + 2, w4 + 4, w4 + 6: four transposes in step
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int wp = w4 + 2 * u;
                const unsigned pr = (run >> (wp >> 2)) & 1u;
                t[u] = pr ? tb[o + (wp & 2)] : 0u;
                if (wp & 2) o += 4 * pr;
            }
            transpose32n<4>(t, lane);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int wp = w4 + 2 * u;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const unsigned c = h ? t[u] >> 16 : t[u] & 0xFFFFu;
                    int d;
                    if (X) d = esc_resid(c, 512 * ch + 32 * (wp + h) + lane < nn, ne, mk, tb, lane, bad);
                    else d = resid_of(c, bad);
                    if (ch == 0 && wp == 0 && h == 0 && lane == 0) {
                        bad |= c != 0;
                        d = origin;
                    }
                    pb[sw1(32 * (wp + h) + lane)] = d;
                }
            }
        }
        __syncwarp();
        int v[16];
#pragma unroll
        for (int c = 0; c < 4; c++) ld4(v + 4 * c, pb + sw1(16 * lane + 4 * c));
        scan16(v);
        int s = v[15], u;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            u = __shfl_up_sync(F, s, o);
            if (lane >= o) s = wadd(s, u);
        }
        const int off = wadd(wadd(s, -v[15]), carry);  // exclusive, plus the chunk before
        carry = wadd(__shfl_sync(F, s, 31), carry);
#pragma unroll
        for (int c = 0; c < 4; c++) st4(pb + sw1(16 * lane + 4 * c), v + 4 * c, off);
        unsigned fw = 0, rw = 0;
        if (X) {
            fw = chunk_mask_word(tb, mk.fat, ch, lane, fpar);
            rw = chunk_mask_word(tb, mk.rat, ch, lane, rpar);
        }
        __syncwarp();
        T *out = p0 + 512 * ch;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            T val = Bits<T>::rec(pb[sw1(32 * i + lane)], step);
            if (X) {
                // elements past n: the parity prefix runs on there, cut it
                const int e0 = 512 * ch + 32 * i;
                const unsigned vm = e0 + 32 <= nn ? F : e0 >= nn ? 0u : (1u << (nn - e0)) - 1;
                const unsigned fm = __shfl_sync(F, fw, 2 * i) & vm, rm = __shfl_sync(F, rw, 2 * i) & vm;
                val = apply_masks<T>(val, fm, rm, nr, mk, tb, fill, lane, bad);
                if (e0 + lane < nn) out[32 * i] = val;
            } else
                out[32 * i] = val;
        }
        __syncwarp();
    }
    if (X && (nr != mk.nraw || ne != mk.nesc)) bad = true;
    return !__any_sync(F, bad);
}

// ---- generic walks: rank-3 and rank-2 tiles of any box (clipped at the
// field's edges), with escapes, fill and raw masks. The tile stays in
// global memory (L1); the codes of a window of slots - the z-slab of
// sub-blocks (rank 3) or the row of sub-blocks (rank 2) being walked,
// at most 2048 slots - are transposed into a u16 array in the stage
// buffer, and each element of the box reads its code at its slot
// (FORMAT.md section 3) from there. Then the prefix sums as in the v7
// walks, through the plane buffer. Masks (X) are expanded to slot order
// in the stage buffer too; their parity transform is undone row by row
// with ballots: x by pxor, y by a running XOR, z by a register per row
// (lane y: fill, lane 16 + y: raw) as in dec_fast3.
// Stage-buffer words of the generic walks: the code window from word 0
// (rank 3: at most 18 blocks, 2304 codes; rank 2: 10 blocks), then the
// fill and raw masks in slot order (128 words each); rank 2 keeps its
// 16x64 plane buffer in words 1024-2047.
#define GEN3_MASKS 1152
#define GEN2_MASKS 768

// Codes of blocks kb0 .. kb1 (and the block after, when their number is
// odd) into cb[slot - 128 kb0]: lanes 16h + p load plane p's block
// kb + h (four words), four transposes give lane l the codes of slots
// 128 (kb + h) + 32 i + l.
__device__ __forceinline__ void fill_codes(const unsigned *tb, unsigned bm, unsigned pat, int kb0, int kb1,
                                           unsigned short *cb, int lane) {
    const int h = lane >> 4;
#pragma unroll 1
    for (int kb = kb0; kb <= kb1; kb += 2) {
        const int k = kb + h;
        const bool pr = k < 32 && ((bm >> k) & 1u);
        const unsigned o = pr ? pat + 4 * __popc(bm & ((1u << k) - 1)) : 0u;
        unsigned t[4];
#pragma unroll
        for (int i = 0; i < 4; i++) t[i] = pr ? tb[o + i] : 0u;
        transpose32n<4>(t, lane);
        unsigned short *c = cb + 128 * (kb - kb0) + lane;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            c[32 * i] = (unsigned short)(t[i] & 0xFFFFu);
            c[128 + 32 * i] = (unsigned short)(t[i] >> 16);
        }
    }
}

// X: both masks into slot order (absent: zero).
__device__ __forceinline__ void expand_masks(const unsigned *tb, const TileMasks &mk, unsigned *fmw, int lane) {
#pragma unroll
    for (int q = 0; q < 4; q++) {
        fmw[32 * q + lane] = mask_word(tb, mk.fat, 32 * q + lane);
        fmw[128 + 32 * q + lane] = mask_word(tb, mk.rat, 32 * q + lane);
    }
}

__device__ __forceinline__ unsigned slot_bit(const unsigned *m, int s) { return (m[s >> 5] >> (s & 31)) & 1u; }

// Rank 3 (8x16x32 tiles, 4x4x8 sub-blocks), any box lz x ly x lx: per
// z-plane (A) lane x reads the codes of its column from the window,
// residuals into the plane buffer (zero outside the box, where the prefix
// sums then carry nothing into the box); (B) and (C) as in dec_fast3,
// storing only the box.
template <typename T, bool X>
__device__ __forceinline__ bool dec_gen3(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                         unsigned long long base, double step, T *__restrict__ dst, int *pb,
                                         unsigned *sw, int lane, const TileMasks &mk, T fill, int lz, int ly,
                                         int lx) {
    const unsigned F = 0xffffffffu;
    unsigned short *cb = (unsigned short *)sw;
    const int k8 = lane & ~7, dx = lane & 7, ex = min(8, lx - k8);
    const bool xin = lane < lx;
    const unsigned xm = lx >= 32 ? F : (1u << lx) - 1;
    const int P = ly * lx;
    const int ry = lane >> 1, rh = lane & 1;
    int *rowp = pb + 32 * ry;
    const int rsw = swz3(ry);
    int zc[16];
#pragma unroll
    for (int y = 0; y < 16; y++) zc[y] = 0;
    bool bad = false;
    T *col = dst + base + lane;
    const unsigned long long plane = g.ny * g.nx;
    unsigned zm = 0, nr = 0, ne = 0;  // X: this lane's mask row, carried over z; raws and escapes so far
    const unsigned *fmw = sw + GEN3_MASKS, *rmw = fmw + 128;
    if (X) {
        expand_masks(tb, mk, sw + GEN3_MASKS, lane);
        __syncwarp();
    }
    int s0 = 0, ez = 0;  // the window's first slot (relative to its first block), the slab's z extent
#pragma unroll 1
    for (int z = 0; z < lz; z++) {
        const int dz = z & 3;
        if (dz == 0) {
            const int a = 4 * (z >> 2) * P;  // first slot of the slab
            ez = min(4, lz - z);
            const int kb0 = a >> 7;
            fill_codes(tb, bm, pat, kb0, (a + ez * P - 1) >> 7, cb, lane);
            s0 = a - 128 * kb0;
            __syncwarp();
        }
        unsigned yf = 0, yr = 0;  // X: the rows' masks so far, prefix-XORed over x and y
#pragma unroll
        for (int y = 0; y < 16; y++) {
            // rows past ly stay unwritten: the prefix sums of the rows
            // inside never read them, and nothing past ly is stored
            if (y >= ly) break;
            const int j = y >> 2, dy = y & 3, ey = min(4, ly - 4 * j);
            const bool in = xin;
            const int s = s0 + ez * (4 * j * lx + ey * k8) + (dz * ey + dy) * ex + dx;
            const unsigned c = in ? cb[s] : 0u;
            int d;
            if (X) d = esc_resid(c, in, ne, mk, tb, lane, bad);
            else d = resid_of(c, bad);
            if (z == 0 && y == 0 && lane == 0) {
                bad |= c != 0;  // slot 0 holds code 0; its residual is the origin
                d = origin;
            }
            pb[32 * y + (lane ^ swz3(y))] = d;
            if (X) {
                const int as = s + 128 * ((4 * (z >> 2) * P) >> 7);  // the slot in the tile
                yf ^= pxor(__ballot_sync(F, in && slot_bit(fmw, as))) & xm;
                yr ^= pxor(__ballot_sync(F, in && slot_bit(rmw, as))) & xm;
                if (lane == y) zm ^= yf;
                if (lane == 16 + y) zm ^= yr;
            }
        }
        __syncwarp();
        int v[16];
#pragma unroll
        for (int c = 0; c < 4; c++) ld4(v + 4 * c, rowp + ((16 * rh + 4 * c) ^ rsw));
        scan16(v);
        const int lo = __shfl_sync(F, v[15], lane & ~1);
        if (rh) {
#pragma unroll
            for (int i = 0; i < 16; i++) v[i] = wadd(v[i], lo);
        }
#pragma unroll
        for (int c = 0; c < 4; c++) st4(rowp + ((16 * rh + 4 * c) ^ rsw), v + 4 * c, 0);
        __syncwarp();
        T *out = col + z * plane;
        int Y = 0;
#pragma unroll
        for (int y = 0; y < 16; y++) {
            if (y >= ly) break;
            Y = wadd(Y, pb[32 * y + (lane ^ swz3(y))]);
            zc[y] = wadd(zc[y], Y);
            T val = Bits<T>::rec(zc[y], step);
            if (X) {
                const unsigned fm = __shfl_sync(F, zm, y), rm = __shfl_sync(F, zm, 16 + y);
                val = apply_masks<T>(val, fm, rm, nr, mk, tb, fill, lane, bad);
            }
            if (xin) out[(unsigned long long)y * g.nx] = val;
        }
        __syncwarp();
    }
    if (X && (nr != mk.nraw || ne != mk.nesc)) bad = true;
    return !__any_sync(F, bad);
}

// Rank 2, element (y, x) of a 16-row band lives at word 64y + (x ^ swz3(y)):
// rows of 64 words are 0 mod 32 banks as dec_fast3's rows of 32, so the
// same XOR keeps the rows' 16-byte pieces and the 32-lane rows and
// columns on 32 banks.
// Rank 2 (64x64 tiles, 16x8 sub-blocks), any box ly x lx: per band of 16
// rows (one row of sub-blocks, slots 16 j lx ...): (A) lane l takes the
// columns l and 32 + l, residuals into a 16x64 buffer (the stage buffer's
// upper half); (B) as dec_fast3's, the left 32 columns, then the right 32
// plus the left's row totals; (C) lane l runs down its two
// columns, carrying the column sums over the bands, and stores rows of 32
// values. Escapes and mask rows in element order: a row's left 32, then
// its right 32.
template <typename T, bool X>
__device__ __forceinline__ bool dec_gen2(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                         unsigned long long base, double step, T *__restrict__ dst, unsigned *sw,
                                         int lane, const TileMasks &mk, T fill, int ly, int lx) {
    const unsigned F = 0xffffffffu;
    unsigned short *cb = (unsigned short *)sw;
    int *pb = (int *)(sw + 1024);
    const int k8 = lane & ~7, dx = lane & 7;
    const int exa = min(8, lx - k8), exb = min(8, lx - 32 - k8);
    const bool ina = lane < lx, inb = lane + 32 < lx;
    const unsigned xma = lx >= 32 ? F : (1u << lx) - 1;
    const unsigned xmb = lx >= 64 ? F : lx <= 32 ? 0u : (1u << (lx - 32)) - 1;
    const int ry = lane >> 1, rh = lane & 1;
    int *rowp = pb + 64 * ry;
    const int rsw = swz3(ry);
    bool bad = false;
    T *col = dst + base + lane;
    int Ya = 0, Yb = 0;                          // the columns' sums over the bands before
    unsigned yfa = 0, yfb = 0, yra = 0, yrb = 0;  // X: mask rows prefix-XORed over x and y (uniform)
    unsigned nr = 0, ne = 0;
    const unsigned *fmw = sw + GEN2_MASKS, *rmw = fmw + 128;
    if (X) {
        expand_masks(tb, mk, sw + GEN2_MASKS, lane);
        __syncwarp();
    }
#pragma unroll 1
    for (int j = 0; 16 * j < ly; j++) {
        const int a = 16 * j * lx, ey = min(16, ly - 16 * j);
        const int kb0 = a >> 7, s0 = a - 128 * kb0;
        fill_codes(tb, bm, pat, kb0, (a + ey * lx - 1) >> 7, cb, lane);
        __syncwarp();
        unsigned ma = 0, mb = 0;  // X: lane y (fill) and 16 + y (raw): row y's masks
#pragma unroll
        for (int y = 0; y < 16; y++) {
            if (y >= ey) break;  // as in dec_gen3
            const unsigned ca = ina ? cb[s0 + ey * k8 + y * exa + dx] : 0u;
            const unsigned cc = inb ? cb[s0 + ey * (32 + k8) + y * exb + dx] : 0u;
            int da, db;
            if (X) {
                da = esc_resid(ca, ina, ne, mk, tb, lane, bad);
                db = esc_resid(cc, inb, ne, mk, tb, lane, bad);
            } else {
                da = resid_of(ca, bad);
                db = resid_of(cc, bad);
            }
            if (j == 0 && y == 0 && lane == 0) {
                bad |= ca != 0;
                da = origin;
            }
            pb[64 * y + (lane ^ swz3(y))] = da;
            pb[64 * y + 32 + (lane ^ swz3(y))] = db;
            if (X) {
                const int sa = a + ey * k8 + y * exa + dx, sb = a + ey * (32 + k8) + y * exb + dx;
                const unsigned fa = __ballot_sync(F, ina && slot_bit(fmw, sa));
                const unsigned fb = __ballot_sync(F, inb && slot_bit(fmw, sb));
                const unsigned qa = __ballot_sync(F, ina && slot_bit(rmw, sa));
                const unsigned qb = __ballot_sync(F, inb && slot_bit(rmw, sb));
                // x: the right half continues the left half's parity
                yfa ^= pxor(fa) & xma;
                yfb ^= (pxor(fb) ^ ((__popc(fa) & 1) ? F : 0u)) & xmb;
                yra ^= pxor(qa) & xma;
                yrb ^= (pxor(qb) ^ ((__popc(qa) & 1) ? F : 0u)) & xmb;
                if (lane == y) {
                    ma = yfa;
                    mb = yfb;
                }
                if (lane == 16 + y) {
                    ma = yra;
                    mb = yrb;
                }
            }
        }
        __syncwarp();
        int rt = 0;  // the row's total over the left half
#pragma unroll
        for (int hx = 0; hx < 64; hx += 32) {
            int v[16];
#pragma unroll
            for (int c = 0; c < 4; c++) ld4(v + 4 * c, rowp + hx + ((16 * rh + 4 * c) ^ rsw));
            scan16(v);
            const int lo = __shfl_sync(F, v[15], lane & ~1), hi = __shfl_sync(F, v[15], lane | 1);
#pragma unroll
            for (int c = 0; c < 4; c++) st4(rowp + hx + ((16 * rh + 4 * c) ^ rsw), v + 4 * c, wadd(rh ? lo : 0, rt));
            rt = wadd(rt, wadd(lo, hi));
        }
        __syncwarp();
#pragma unroll
        for (int y = 0; y < 16; y++) {
            if (y >= ey) break;
            Ya = wadd(Ya, pb[64 * y + (lane ^ swz3(y))]);
            Yb = wadd(Yb, pb[64 * y + 32 + (lane ^ swz3(y))]);
            T va = Bits<T>::rec(Ya, step), vb = Bits<T>::rec(Yb, step);
            if (X) {
                const unsigned fa = __shfl_sync(F, ma, y), fb = __shfl_sync(F, mb, y);
                const unsigned qa = __shfl_sync(F, ma, 16 + y), qb = __shfl_sync(F, mb, 16 + y);
                va = apply_masks<T>(va, fa, qa, nr, mk, tb, fill, lane, bad);
                vb = apply_masks<T>(vb, fb, qb, nr, mk, tb, fill, lane, bad);
            }
            T *out = col + (unsigned long long)(16 * j + y) * g.nx;
            if (ina) out[0] = va;
            if (inb) out[32] = vb;
        }
        __syncwarp();
    }
    if (X && (nr != mk.nraw || ne != mk.nesc)) bad = true;
    return !__any_sync(F, bad);
}

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

// One warp per tile, for the standard tile shape of rank R. Full tiles
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
template <typename T, int R, bool FK>
__global__ void __launch_bounds__(DEC_W * 32, DEC_MINB_W)
    decode_warp_kernel(Geo g, const unsigned char *__restrict__ blob, unsigned long long tile0,
                       unsigned long long nt, double step, const unsigned long long *__restrict__ toff,
                       const unsigned *__restrict__ tsz, T *__restrict__ dst, unsigned *list, unsigned *count,
                       unsigned long long fill_bits, uint3 fl) {
    // per warp: the stage buffer (words 0-1535) and the v7 plane buffer
    // (1536-2047); the generic walks use the first part for codes and masks
    __shared__ __align__(16) unsigned smem[DEC_W][DEC_STAGE + 512];
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
    const int n = lz * ly * lx;
    const unsigned nw = sz / 4;
    const unsigned *gp = (const unsigned *)(blob + toff[rel]);
    unsigned *sw = smem[wi];
    // word0 first: it says whether the tile is staged
    const unsigned w0 = __ldg(gp);
    bool ok = (w0 & ~0x7FFFFu) == 0;
    const bool flags = (w0 >> 16) & 7;
    const bool staged = nw <= DEC_STAGE && (R == 1 || (n == TILE && !((w0 >> 16) & 1)));
    const unsigned *tb = gp;
    if (ok && staged) {
        for (unsigned i = lane; i < nw; i += 32) sw[i] = __ldcs(gp + i);
        __syncwarp();
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
        if (R == 3) {
            if (staged)
                ok = FK || (w0 >> 17) & 3 ? dec_fast3<T, true>(tb, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill)
                                    : dec_fast3<T, false>(tb, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill);
            else
                ok = FK || flags ? dec_gen3<T, true>(tb, bm, pat, origin, g, base, step, dst, pb, sw, lane, mk, fill, lz, ly, lx)
                       : dec_gen3<T, false>(tb, bm, pat, origin, g, base, step, dst, pb, sw, lane, mk, fill, lz, ly, lx);
        } else if (R == 2) {
            if (staged)
                ok = FK || (w0 >> 17) & 3 ? dec_fast2<T, true>(tb, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill)
                                    : dec_fast2<T, false>(tb, bm, pat, origin, g, base, step, dst, pb, lane, mk, fill);
            else
                ok = FK || flags ? dec_gen2<T, true>(tb, bm, pat, origin, g, base, step, dst, sw, lane, mk, fill, ly, lx)
                   : dec_gen2<T, false>(tb, bm, pat, origin, g, base, step, dst, sw, lane, mk, fill, ly, lx);
        } else {
            ok = FK || flags || n < TILE ? dec_fast1<T, true>(tb, bm, pat, origin, base, step, dst, pb, lane, mk, fill, n)
                   : dec_fast1<T, false>(tb, bm, pat, origin, base, step, dst, pb, lane, mk, fill, n);
        }
    }
    if (!ok && lane == 0) list[atomicAdd(count, 1u)] = (unsigned)rel;
}
