// The warp decoder's walk for flat tiles (FORMAT.md 3.1, flat.cuh; PERF.md
// v27): dec_flat, the mirror of encode_flat.cuh's enc_flat. Included by
// decode_warp.cuh.
//
// q = Sz Sy Sx d, the three prefix sums of FORMAT.md 3.1 (x within a row, y
// within a plane, z, each only over elements of the run). The sums commute
// (an element's terms are the d of e - i - j nx - k P, i <= x, j <= y, all
// in the run, in any order), so the walk takes x first, where it is
// cheapest, in chunks of FLAT_CH = 256 elements:
//   A  codes -> residuals d into the chunk buffer, element order: lanes
//      16h + p read plane p of word 2m + h (from global memory through L1,
//      a chunk ahead; flat tiles are not staged: the warp's shared memory
//      holds the q ring), four 32x32 bit transposes give lane l the codes
//      of elements 64m + l and 64m + 32 + l; escapes (rare) by a second pass
//      over the chunk's words where a vote finds one.
//   B  lane l takes elements 8l .. 8l + 7: X' = Sx d by a prefix in
//      registers restarting at the run's head (x = 0; at most one, nx >= 32),
//      one warp scan of the lanes' sums, and where a lane has no head the
//      base of the segment it continues (the nearest head lane below, one
//      shuffle) or the chunk before's last X'.
//   C  word by word, lane l element 32w + l: W = X' + W(e - nx) where y > 0
//      (one or two words back, nx in 32 .. 64: one shuffle, the sending lane
//      picks the word its reader needs), q = W + q(e - P) from a ring of
//      FLAT_RING in shared memory, then the value.
// The fill and raw masks (X) are undone before the walk, for the whole tile
// at once and bit-parallel (flat_masks): the same three prefix sums in XOR
// as Hillis-Steele doubling rounds over the tile's 128 words, lane l
// holding words l, l + 32, l + 64, l + 96 of each mask at the end, and
// after the walk lane l writes the fill and raw values of those words'
// elements over what C wrote there, so C is the same walk with masks or
// without. (Undone word by word in C, as the first version of this walk
// did: ~70 more thread-instructions a word at era5's 1e-4, where nearly
// every tile has a raw mask; ncu, PERF.md v27. Applied in C, a word's
// flags by two shuffles: v27's walk.)
// v26's walk (all three sums lane by lane, x by a five-round segmented
// scan a word): ~132 thread-instructions a value (ncu, era5 1e-2).

#define FLAT_RING 2048  // ints of the q ring: a power of two, indices by a mask
#define FLAT_CH 256     // elements a chunk: lane runs of 8
// Words of step C a loop iteration: the whole chunk (H200, PERF.md v27:
// era5 1e-2 +4 % against two; the masked walk then applied the masks in C
// and took two, 1e-3 -7 % with eight)
#ifndef FLAT_C_UNROLL_PLAIN
#define FLAT_C_UNROLL_PLAIN 8
#endif
#ifndef FLAT_C_UNROLL_MASKED
#define FLAT_C_UNROLL_MASKED 8
#endif
#define FLAT_C_UNROLL (X ? FLAT_C_UNROLL_MASKED : FLAT_C_UNROLL_PLAIN)
#define FLAT_SMEM (FLAT_RING + FLAT_CH)  // words a warp: the q ring, the chunk
__host__ __device__ __forceinline__ bool flat_dec_walkable(const Geo &g) {
    // fP >= FLAT_CH: q(e - P) lies in chunks before
    return g.fnx >= 32 && g.fnx <= 64 && g.fP >= FLAT_CH && g.fP + 32 <= FLAT_RING;
}

// Element e (0 .. 255) of a chunk lives at word sw8(e): the 16-byte pieces
// of odd 32-word rows XOR-swapped by one, so a word of 32 consecutive
// elements (A, C) and the lanes' 8-element runs (B: two 16-byte loads,
// a quarter-warp of 8 lanes per wavefront) both hit 32 banks.
__device__ __forceinline__ int sw8(int e) { return e ^ (((e >> 5) & 1) << 2); }

// Bits j >= lo of a word (lo clamped to 0 .. 32).
__device__ __forceinline__ unsigned bits_from(int lo) { return lo <= 0 ? 0xffffffffu : lo >= 32 ? 0u : 0xffffffffu << lo; }

// The bits of elements 32w + j - s (j = 0 .. 31) of the tile mask m
// (128 words), 0 for elements before the run.
__device__ __forceinline__ unsigned flat_back(const unsigned *m, int w, int s) {
    const int b = 32 * w - s;  // the element of bit 0
    if (b <= -32) return 0u;
    const int wi = b >> 5, sh = b & 31;  // floor
    const unsigned lo = wi >= 0 ? m[wi] : 0u, hi = sh ? m[wi + 1] : 0u;
    return __funnelshift_r(lo, hi, sh);
}

// Bits j of a word whose element's position p (r in the plane or x in the
// row) is >= s, where bit 0's position is p0 and positions run to per - 1
// and wrap to 0 at most once a word (per >= 32).
__device__ __forceinline__ unsigned flat_pos_ge(unsigned p0, unsigned per, int s) {
    const int jw = (int)(per - p0);  // the bit where the position wraps to 0 (>= 32: none)
    return (bits_from(s - (int)p0) & ~bits_from(jw)) | bits_from(jw + s);
}

// X walks: the tile's fill and raw masks (FORMAT.md 3.1, "masks") with the
// parity transform undone, into fw, rw: word 32k + lane in [k]. The flags
// are Sz Sy Sx of the coded bits in XOR, and each sum is Hillis-Steele
// doubling over the tile's 128 words in buf (the chunk buffer, free before
// the walk): round s, bit e ^= bit e - s where e - s lies in the run and,
// for y (s = 2^i nx), the element is >= s into its plane, for x (s = 2^i)
// >= s into its row. era5: 2 + 6 + 6 rounds of 4 words a lane and mask.
// Bits past n (the field's last tile) are left for the walk to cut.
__device__ __forceinline__ void flat_masks(const unsigned *tb, const TileMasks &mk, const Geo &g,
                                           unsigned long long i0, int n, unsigned *buf, int lane,
                                           unsigned (&fw)[4], unsigned (&rw)[4]) {
    const unsigned P = g.fP, NX = g.fnx, r0 = flat_r0(g, i0);
    const bool hf = mk.fat != 0, hr = mk.rat != 0;
    unsigned pr[4], px[4];  // r and x of bit 0 of the lane's words
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int w = 32 * k + lane;
        flat_rx(g, r0, 32 * w, pr[k], px[k]);
        buf[w] = mask_word(tb, mk.fat, w);
        buf[128 + w] = mask_word(tb, mk.rat, w);
    }
    __syncwarp();
    // kind 0: z (all bits), 1: y, 2: x
    auto round = [&](int s, int kind) {
        unsigned f[4], r[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int w = 32 * k + lane;
            const unsigned m = kind == 0 ? 0xffffffffu : kind == 1 ? flat_pos_ge(pr[k], P, s) : flat_pos_ge(px[k], NX, s);
            f[k] = hf ? buf[w] ^ (flat_back(buf, w, s) & m) : 0u;
            r[k] = hr ? buf[128 + w] ^ (flat_back(buf + 128, w, s) & m) : 0u;
        }
        __syncwarp();
#pragma unroll
        for (int k = 0; k < 4; k++) {
            buf[32 * k + lane] = f[k];
            buf[128 + 32 * k + lane] = r[k];
        }
        __syncwarp();
    };
    for (int s = (int)P; s < n; s *= 2) round(s, 0);
    for (int s = (int)NX; s < (int)P; s *= 2) round(s, 1);
    for (int s = 1; s < (int)NX; s *= 2) round(s, 2);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        fw[k] = buf[32 * k + lane];
        rw[k] = buf[128 + 32 * k + lane];
    }
    __syncwarp();  // the walk's chunks overwrite buf
}

template <typename T, bool X>
__device__ __forceinline__ bool dec_flat(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                         unsigned long long base, double step, T *__restrict__ dst, unsigned *sw,
                                         int lane, const TileMasks &mk, T fill, int n) {
    const unsigned F = 0xffffffffu;
    const unsigned P = g.fP, NX = g.fnx;
    FlatLane fl(g, base, lane);
    int *ring = (int *)sw;             // q of element e at e mod FLAT_RING
    int *cb = ring + FLAT_RING;        // the chunk (sw8)
    // B: x of this lane's run's first element, 8 lane, in chunk 0
    unsigned xl = (unsigned)((base % P + 8u * lane) % NX);
    const unsigned xstep = FLAT_CH % NX;
    int W1 = 0, W2 = 0, cX = 0;  // W of the last two words; X' of the chunk before's last element
    unsigned fw[4] = {0, 0, 0, 0}, rw[4] = {0, 0, 0, 0};  // X: the flags, word 32k + lane in [k]
    const bool hm = X && (mk.fat | mk.rat);
    if (hm) flat_masks(tb, mk, g, base, n, (unsigned *)cb, lane, fw, rw);
    // q of the elements before the run is 0: the ring slots that elements
    // 0 .. P - 1 read ((e - P) mod FLAT_RING), which no element writes
    // before it reads them (the first write is element FLAT_RING - P + e's);
    // the walk then reads z's neighbour without a test (step A's barrier
    // orders these stores before it)
    for (unsigned i = lane; i < P; i += 32) ring[FLAT_RING - P + i] = 0;
    unsigned nr = 0, ne = 0;     // the tile's raw values (after the walk), escapes so far
    bool bad = false, esc = false;  // esc: an escape code in this chunk (X)
    T *out = dst + base + lane;
    const int nch = X ? (n + FLAT_CH - 1) / FLAT_CH : TILE / FLAT_CH;
    unsigned pn[4];  // the chunk's plane words: lane 16h + p, plane p of word 2u + h
#pragma unroll
    for (int u = 0; u < 4; u++) pn[u] = zb_word(tb, bm, pat, 2 * u + (lane >> 4));
#pragma unroll 1
    for (int ch = 0; ch < nch; ch++) {
        // A: residuals into the chunk buffer
        unsigned t[4];
#pragma unroll
        for (int u = 0; u < 4; u++) t[u] = pn[u];
        if (ch + 1 < nch) {
#pragma unroll
            for (int u = 0; u < 4; u++) pn[u] = zb_word(tb, bm, pat, 8 * (ch + 1) + 2 * u + (lane >> 4));
        }
        transpose32n<4>(t, lane);
#pragma unroll
        for (int u = 0; u < 4; u++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int wl = 2 * u + h, e = FLAT_CH * ch + 32 * wl + lane;
                const unsigned c = h ? t[u] >> 16 : t[u] & 0xFFFFu;
                int d;
                if (X) {
                    const bool in = e < n;
                    d = in ? resid(c) : 0;  // an escape code's (0) is replaced below
                    esc |= in && c == 0x8000u;
                } else {
                    d = resid_of(c, bad);
                }
                if (ch == 0 && wl == 0 && lane == 0) {  // element 0 (wl == 0: known at compile time)
                    bad |= c != 0;
                    d = origin;
                }
                cb[sw8(32 * wl + lane)] = d;
            }
        }
        // X, rare: the chunk's escapes take the listed residuals, numbered
        // in element order (one warp vote a chunk when there are none)
        if (X && __any_sync(F, esc)) {
#pragma unroll 1
            for (int wl = 0; wl < 8; wl++) {
                const int u = wl >> 1, e = FLAT_CH * ch + 32 * wl + lane;
                const unsigned tw = u == 0 ? t[0] : u == 1 ? t[1] : u == 2 ? t[2] : t[3];
                const unsigned c = wl & 1 ? tw >> 16 : tw & 0xFFFFu;
                const bool es = e < n && c == 0x8000u;
                const unsigned b = __ballot_sync(F, es);
                if (es) {
                    const unsigned r = ne + __popc(b & ((1u << lane) - 1));
                    if (r < mk.nesc) cb[sw8(32 * wl + lane)] = (int)tb[mk.escat + r];
                    else bad = true;
                }
                ne += __popc(b);
            }
            esc = false;
        }
        __syncwarp();
        // B: X' over the lanes' runs
        int v[8];
        ld4(v, cb + sw8(8 * lane));
        ld4(v + 4, cb + sw8(8 * lane + 4));
        const int hd = xl == 0 ? 0 : (int)(NX - xl);  // the run's head; none when >= 8
        int b = 0;                                     // the run's prefix before the head
#pragma unroll
        for (int i = 1; i < 8; i++) {
            if (i == hd) b = v[i - 1];
            v[i] = wadd(v[i], v[i - 1]);
        }
        int s = v[7];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(F, s, o);
            if (lane >= o) s = wadd(s, y);
        }
        const int pre = wadd(wadd(s, -v[7]), cX);  // the chunk's prefix before this run, from the tile's
        const unsigned hb = __ballot_sync(F, hd < 8);
        const unsigned below = hb & ((1u << lane) - 1);
        const int bo = __shfl_sync(F, wadd(pre, b), below ? 31 - __clz(below) : 0);  // the segment's base
        const int oin = below ? wadd(pre, -bo) : pre, ohd = -b;
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = wadd(v[i], i >= hd ? ohd : oin);
        cX = __shfl_sync(F, v[7], 31);
        *(int4 *)(cb + sw8(8 * lane)) = make_int4(v[0], v[1], v[2], v[3]);
        *(int4 *)(cb + sw8(8 * lane + 4)) = make_int4(v[4], v[5], v[6], v[7]);
        xl += xstep;
        if (xl >= NX) xl -= NX;
        __syncwarp();
        // C: y and z, the values
        FZ_UNROLL(FLAT_C_UNROLL)
        for (int wl = 0; wl < 8; wl++) {
            const int w = 8 * ch + wl, e = 32 * w + lane;
            const int xv = cb[sw8(32 * wl + lane)];
            const int y = __shfl_sync(F, fl.send1 ? W1 : W2, fl.ys);
            const int W = wadd(xv, fl.hy() ? y : 0);
            W2 = W1;
            W1 = W;
            const int q = wadd(W, ring[(e - (int)P) & (FLAT_RING - 1)]);  // 0 before the run's P-th element
            ring[e & (FLAT_RING - 1)] = q;
            if (!X || e < n) out[32 * w] = Bits<T>::rec(q, step);
            fl.next();
        }
        // the chunk buffer's reads before the next chunk's stores; the
        // ring's stores before a later chunk's loads
        __syncwarp();
    }
    // X: the fill value and the raw values over what the walk wrote, lane l
    // for the elements of words l, l + 32, l + 64, l + 96 (the walk's
    // __syncwarp orders its stores of those elements, by other lanes, before
    // these). Raw values are numbered in element order: word 32k + l's first
    // is the count over words 32k' + l' (k' < k) and 32k + l' (l' < l), by
    // two scans of the counts packed two to a word (a sum is <= 1024).
    if (hm) {
        unsigned c[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const unsigned cut = ~bits_from(n - 32 * (32 * k + lane));  // elements < n
            fw[k] &= cut;
            rw[k] &= cut;
            c[k] = __popc(rw[k]);
        }
        const unsigned a = c[0] | c[1] << 16, b = c[2] | c[3] << 16;
        unsigned ai = a, bi = b;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned ya = __shfl_up_sync(F, ai, o), yb = __shfl_up_sync(F, bi, o);
            if (lane >= o) {
                ai += ya;
                bi += yb;
            }
        }
        const unsigned sa = __shfl_sync(F, ai, 31), sb = __shfl_sync(F, bi, 31);  // the sums over the lanes
        const unsigned ae = ai - a, be = bi - b, t0 = sa & 0xFFFFu, t1 = sa >> 16, t2 = sb & 0xFFFFu;
        const unsigned first[4] = {ae & 0xFFFFu, t0 + (ae >> 16), t0 + t1 + (be & 0xFFFFu), t0 + t1 + t2 + (be >> 16)};
        nr = t0 + t1 + t2 + (sb >> 16);
        if (nr == mk.nraw) {  // else the tile is bad: no raw value is read past the list
#pragma unroll
            for (int k = 0; k < 4; k++) {
                T *const o = dst + base + 32ull * (32 * k + lane);
                for (unsigned f = fw[k]; f; f &= f - 1) o[__ffs(f) - 1] = fill;
                unsigned ri = first[k];
                for (unsigned r = rw[k]; r; r &= r - 1) o[__ffs(r) - 1] = raw_value<T>(tb, mk.rvat, ri++);
            }
        }
    }
    if (X && (nr != mk.nraw || ne != mk.nesc)) bad = true;
    return !__any_sync(F, bad);
}
