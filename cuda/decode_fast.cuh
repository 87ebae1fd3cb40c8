// The warp decoder's fast walks (dec_fast3 / dec_fast2 / dec_fast1): full
// tiles staged in shared memory, the prefix sums through the plane buffer
// ("v7 walks"). Included by decode_warp.cuh after its shared helpers.
// ---- v7 walks: the prefix sums run through a per-warp 2 KiB plane buffer
// instead of warp shuffles. A shuffle and a shared-memory word cost the
// same (an SM moves 32 of either per clock), but a scan over lanes needs
// 3-5 dependent shuffles per value while one store and one load put the
// run a scan needs into one lane, where it is a chain of adds.

// Element (lane) of a 32-element row whose raw mask word is rm: the next
// raw value (nr raws came before this row; bad if the mask marks more than
// the count), or val.
template <typename T>
__device__ __forceinline__ T apply_raw(T val, unsigned rm, unsigned &nr, const TileMasks &mk, const unsigned *tb,
                                       int lane, bool &bad) {
    if ((rm >> lane) & 1) {
        const unsigned r = nr + __popc(rm & ((1u << lane) - 1));
        if (r < mk.nraw) val = raw_value<T>(tb, mk.rvat, r);
        else bad = true;
    }
    nr += __popc(rm);
    return val;
}
// The same with the row's fill mask word fm: the fill value first.
template <typename T>
__device__ __forceinline__ T apply_masks(T val, unsigned fm, unsigned rm, unsigned &nr, const TileMasks &mk,
                                         const unsigned *tb, T fill, int lane, bool &bad) {
    if ((fm >> lane) & 1) val = fill;
    return apply_raw<T>(val, rm, nr, mk, tb, lane, bad);
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

// Word w of each present block of run (bit k: block k of four, 16 bytes
// each from o) into t[k] (0 for an absent block); o moves past the
// present ones. The staged rank-2 walk's loads and few_codes'.
__device__ __forceinline__ void run_words(const unsigned *tb, unsigned &o, unsigned w, unsigned run, unsigned *t) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const unsigned pr = (run >> k) & 1u;
        t[k] = pr ? tb[o + w] : 0u;
        o += 4 * pr;
    }
}

// The staged walks' 8-bit layout (tiles without planes 7-14, so
// a code's magnitude fits bits 0-6 and its sign goes to bit 7): lane l reads
// word w (at o) of plane l % 8 (7: the sign plane) of each block of run
// present, one transpose, and byte b of word k is then the code of row
// 4b + l / 8, column 8k + l % 8. Residuals into the plane buffer, as the
// 16-bit layout writes them; first: the tile's first z-plane or band, whose
// slot 0 holds the origin.
__device__ __forceinline__ void few_codes(const unsigned *tb, unsigned &o, unsigned w, unsigned run, bool first,
                                          int origin, int *pb, int lane, bool &bad) {
    const int dy = lane >> 3, dx = lane & 7;
    unsigned t[4];
    run_words(tb, o, w, run, t);
    transpose32n<4>(t, lane);
    unsigned esc = 0;  // an escape (v1 code 0x8000, here 0x80): none in a staged tile
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const unsigned r = resid8x4(t[k], esc);
#pragma unroll
        for (int b = 0; b < 4; b++) {
            int d = sext8(r, b);
            if (first && k == 0 && b == 0 && lane == 0) {
                bad |= (t[k] & 0xFFu) != 0;  // slot 0 holds code 0; its residual is the origin
                d = origin;
            }
            const int y = 4 * b + dy;
            pb[32 * y + ((8 * k + dx) ^ swz3(y))] = d;
        }
    }
    bad |= esc != 0;
}

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
// COLS (fill fields, v36): one transpose of the 32 row words gives lane x
// its column of both masks (bit y: fill (y, x), bit 16 + y: raw (y, x)),
// so a value tests a bit where it took two broadcasts, and raw rows come
// by broadcast only in z-planes that hold a raw value. (In the kernels of
// fields without a fill value, whose masks are raw masks, the branch
// raised nvcc 11.8's spills from 0 to 96 bytes: COLS is off there.)
// PAD: a padded field's tile (FORMAT.md 3.2), decoded whole; only its box
// (inside the field) is stored.
template <typename T, bool M, bool COLS = false, bool PAD = false>
__device__ __forceinline__ bool dec_fast3(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                          unsigned long long base, double step, T *__restrict__ dst, int *pb,
                                          int lane, const TileMasks &mk, T fill, bool few,
                                          Box3 box = Box3{8, 16, 32}) {
    const unsigned F = 0xffffffffu;
    const int dy = lane >> 3, dx = lane & 7, hsel = (lane >> 4) * 16;
    const int ry = lane >> 1, rh = lane & 1;
    int *rowp = pb + 32 * ry;
    const int rsw = swz3(ry);
    int zc[16];
#pragma unroll
    for (int y = 0; y < 16; y++) zc[y] = 0;
    bool bad = false;
    unsigned esc = 0;  // escapes (resid16x2): none in a staged tile
    T *col = dst + base + lane;
    const unsigned long long plane = g.ny * g.nx;
    // PAD: the rows this lane stores (the box's along y, none outside it
    // along x; ylim: none in a plane outside it along z), so that each
    // store's predicate is one compare (st_if)
    const int ylane = PAD ? (lane < box.lx ? box.ly : 0) : 16;
    unsigned zm = 0, nr = 0;  // M: this lane's mask row, carried over z; raws so far
    // M: lane 16m + y reads row y of mask m (fill, raw). A z-quarter (planes
    // 4q .. 4q + 3) of row y lies in the blocks 16q + 4 (y / 4) + k, k =
    // 0..3, byte y % 4 of word z % 4 of each: the four blocks present (mrun)
    // and where the first starts (mat) are found once a quarter, as the
    // codes' runs are below, instead of a popc and a select a word (PERF.md
    // v44: mask_word was 7.4 % of the fill fields' decoder's instructions).
    unsigned mrun = 0, mat = 0;
    const unsigned msel = (lane & 3) | (4 + (lane & 3)) << 4;  // byte y % 4 of two words
    unsigned run0 = 0, run1 = 0, at0 = 0, at1 = 0;
    // few (planes 7-14 absent, warp-uniform; few_codes): lanes take plane
    // l % 8's mask and offset, and lane l reads block 16 (z / 4) + 4 (l / 8)
    // + k: one transpose a z-plane where the 16-bit layout takes two.
    if (few) {
        const int src = (lane & 7) == 7 ? 15 : (lane & 7);  // lanes p and 16 + p hold plane p's
        bm = __shfl_sync(F, bm, src);
        pat = __shfl_sync(F, pat, src);
    }
#pragma unroll 1
    for (int z = 0; z < 8; z++) {
        if (M) {
            const int my = lane & 15;
            if ((z & 3) == 0) {
                const unsigned at = lane < 16 ? mk.fat : mk.rat;
                const unsigned mb = at ? tb[at] : 0u;  // the block mask (0: no such mask)
                const int kb0 = 16 * (z >> 2) + 4 * (my >> 2);
                mrun = (mb >> kb0) & 15u;
                mat = at + 1 + 4 * __popc(mb & ((1u << kb0) - 1));
            }
            unsigned w[4], mo = mat + (z & 3);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const unsigned pr = (mrun >> k) & 1u;
                w[k] = pr ? tb[mo] : 0u;
                mo += 4 * pr;
            }
            // byte y % 4 of word k into byte k
            unsigned r = __byte_perm(__byte_perm(w[0], w[1], msel), __byte_perm(w[2], w[3], msel), 0x5410u);
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
        if (few) {
            if ((z & 3) == 0) {
                const int k0 = 16 * (z >> 2) + 4 * (lane >> 3);
                run0 = (bm >> k0) & 15u;
                at0 = pat + 4 * __popc(bm & ((1u << k0) - 1));
            }
            unsigned o0 = at0 + (z & 3);
            few_codes(tb, o0, 0, run0, z == 0, origin, pb, lane, bad);
        } else {
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
                    const unsigned r[2] = {resid16x2(t[2 * u], esc), resid16x2(t[2 * u + 1], esc)};
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        int d = sext16(r[j >> 1], j & 1);
                        if (z == 0 && k == 0 && j == 0 && lane == 0) {
                            bad |= (t[0] & 0xFFFFu) != 0;  // slot 0 holds code 0; its residual is the origin
                            d = origin;
                        }
                        const int y = 4 * j + dy;
                        pb[32 * y + ((8 * k + dx) ^ swz3(y))] = d;
                    }
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
        unsigned cm = 0;
        bool rawp = false;
        if (M && COLS) {
            cm = transpose32(zm, lane);
            rawp = (__ballot_sync(F, zm != 0u) >> 16) != 0u;
        }
        T *out = col + z * plane;
        const int ylim = PAD ? (z < box.lz ? ylane : 0) : 16;
        // (C) down the column. RAW (COLS: a z-plane with a raw value, rare;
        // warp-uniform) is its own copy of the loop, so that the common
        // planes pay no test a value for it (nvcc 11.8: a branch a value).
        auto col_walk = [&](auto raw_tag) {
            constexpr bool RAW = decltype(raw_tag)::value;
            int Y = 0;
#pragma unroll
            for (int y = 0; y < 16; y++) {
                Y = wadd(Y, pb[32 * y + (lane ^ swz3(y))]);
                zc[y] = wadd(zc[y], Y);
                T val = Bits<T>::rec(zc[y], step);
                if (M && COLS) {
                    if ((cm >> y) & 1u) val = fill;
                    if (RAW) val = apply_raw<T>(val, __shfl_sync(F, zm, 16 + y), nr, mk, tb, lane, bad);
                } else if (M) {
                    const unsigned fm = __shfl_sync(F, zm, y), rm = __shfl_sync(F, zm, 16 + y);
                    val = apply_masks<T>(val, fm, rm, nr, mk, tb, fill, lane, bad);
                }
                if constexpr (PAD && sizeof(T) == 4)  // the padded kernels are f32
                    st_if((unsigned *)(out + (unsigned long long)y * g.nx), Bits<T>::of(val), y < ylim);
                else if (!PAD || y < ylim)
                    out[(unsigned long long)y * g.nx] = val;
            }
        };
        if (M && COLS && rawp) col_walk(std::true_type{});
        else col_walk(std::false_type{});
        __syncwarp();
    }
    if (M && nr != mk.nraw) bad = true;
    bad |= esc != 0;
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
                                          int lane, const TileMasks &mk, T fill, bool few) {
    const unsigned F = 0xffffffffu;
    const int dy = lane >> 3, dx = lane & 7, h = lane >> 4;
    const int ry = lane >> 1, rh = lane & 1;
    int *rowp = pb + 32 * ry;
    const int rsw = swz3(ry);
    int Y0 = 0, Y1 = 0;  // the column sums over the bands before, per half
    unsigned yc0 = 0, yc1 = 0, nrb = 0;  // M: mask rows carried over bands, per half; raws of the bands before
    unsigned esc = 0;  // escapes (resid16x2): none in a staged tile
    bool bad = false;
    T *col = dst + base + lane;
    // Blocks come in the order kb = 8j + 4hx + k, so one running offset
    // over the present blocks replaces a popc per word.
    unsigned at = pat;
    // few (planes 7-14 absent, warp-uniform; few_codes): lanes take plane
    // l % 8's mask and offset, and lane l reads word l / 8 of each block:
    // one transpose a band half where the 16-bit layout takes two.
    if (few) {
        const int src = (lane & 7) == 7 ? 15 : (lane & 7);  // lanes p and 16 + p hold plane p's
        bm = __shfl_sync(F, bm, src);
        at = __shfl_sync(F, pat, src);
    }
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
            const unsigned run = (bm >> (8 * j + 4 * hx)) & 15u;  // the half's four blocks present
            unsigned o = at;
            if (few) {
                few_codes(tb, o, lane >> 3, run, j == 0 && hx == 0, origin, pb, lane, bad);
            } else {
#pragma unroll
                for (int mp = 0; mp < 2; mp++) {
                    unsigned t[4];
                    o = at;  // both word pairs of the same blocks
                    run_words(tb, o, 2 * mp + h, run, t);
                    transpose32n<4>(t, lane);
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const unsigned r = resid16x2(t[k], esc);
#pragma unroll
                        for (int hh = 0; hh < 2; hh++) {
                            int d = sext16(r, hh);
                            if (j == 0 && hx == 0 && mp == 0 && k == 0 && hh == 0 && lane == 0) {
                                bad |= (t[k] & 0xFFFFu) != 0;  // slot 0 holds code 0; its residual is the origin
                                d = origin;
                            }
                            const int y = 4 * (2 * mp + hh) + dy;
                            pb[32 * y + ((8 * k + dx) ^ swz3(y))] = d;
                        }
                    }
                }
            }
            at = o;
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
    bad |= esc != 0;
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
