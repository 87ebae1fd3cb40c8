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
//      of elements 64m + l and 64m + 32 + l; escapes in element order.
//   B  lane l takes elements 8l .. 8l + 7: X' = Sx d by a prefix in
//      registers restarting at the run's head (x = 0; at most one, nx >= 32),
//      one warp scan of the lanes' sums, and where a lane has no head the
//      base of the segment it continues (the nearest head lane below, one
//      shuffle) or the chunk before's last X'.
//   C  word by word, lane l element 32w + l: W = X' + W(e - nx) where y > 0
//      (one or two words back, nx in 32 .. 64: one shuffle, the sending lane
//      picks the word its reader needs), q = W + q(e - P) from a ring of
//      FLAT_RING in shared memory, then the value.
// The fill and raw masks (X) are undone word by word in C on whole words:
// x by a prefix XOR restarting at the word's head bit, y by a funnel shift
// of the last two words' bits, z by a ring of FLAT_RING bits; a handful of
// warp-uniform operations a word rather than a scan a bit (v26's walk
// undid them lane by lane, ~45 instructions a word and mask).
// v26's walk (all three sums lane by lane, x by a five-round segmented
// scan a word): ~132 thread-instructions a value (ncu, era5 1e-2).

#define FLAT_RING 1920  // ints of the q ring (a multiple of 32: its bit rings have FLAT_RING / 32 words)
#define FLAT_CH 256     // elements a chunk: lane runs of 8
#define FLAT_SMEM (FLAT_RING + FLAT_CH + 2 * (FLAT_RING / 32))  // words a warp: q ring, chunk, fill and raw bit rings
__host__ __device__ __forceinline__ bool flat_dec_walkable(const Geo &g) {
    // fP >= FLAT_CH: q(e - P) and the bits of e - P lie in chunks before
    return g.fnx >= 32 && g.fnx <= 64 && g.fP >= FLAT_CH && g.fP + 31 < FLAT_RING;
}

// Element e (0 .. 255) of a chunk lives at word sw8(e): the 16-byte pieces
// of odd 32-word rows XOR-swapped by one, so a word of 32 consecutive
// elements (A, C) and the lanes' 8-element runs (B: two 16-byte loads,
// a quarter-warp of 8 lanes per wavefront) both hit 32 banks.
__device__ __forceinline__ int sw8(int e) { return e ^ (((e >> 5) & 1) << 2); }

// Undoes the parity transform of one mask word (word w = 32 elements) of a
// flat tile (FORMAT.md 3.1, "masks"): mw the coded word; hm the word's head
// bit (x = 0; at most one), hym its bits with y > 0, zm its bits with e >= P;
// c the x carry (the word before's last bit after x), B1, B2 the last two
// words' bits after y; bring the bits of final flags by e mod FLAT_RING, o
// the ring bit of e - P for the word's bit 0, wslot the ring word of the
// word's own bits.
__device__ __forceinline__ unsigned flat_unmask(unsigned mw, unsigned hm, unsigned hym, unsigned zm, unsigned nx,
                                                unsigned o, unsigned wslot, unsigned *bring, unsigned &c,
                                                unsigned &B1, unsigned &B2) {
    // x: prefix XOR, restarting at the head
    const unsigned xm = pxor(mw);
    const unsigned lo = hm ? hm - 1 : 0xffffffffu;  // bits before the head
    unsigned b = xm ^ (c ? lo : 0u) ^ ((xm & (hm >> 1)) ? ~lo : 0u);
    c = b >> 31;
    // y: the bits nx back (words w - 1, w - 2)
    b ^= __funnelshift_lc(B2, B1, nx - 32) & hym;
    B2 = B1;
    B1 = b;
    // z: the final bits P back
    if (zm) {
        const unsigned wi = o >> 5, sh = o & 31;
        const unsigned hi = sh ? (wi + 1 == FLAT_RING / 32 ? 0 : wi + 1) : wi;
        b ^= __funnelshift_r(bring[wi], bring[hi], sh) & zm;
    }
    bring[wslot] = b;  // every lane stores the same word
    return b;
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
    unsigned *fring = sw + FLAT_RING + FLAT_CH, *rring = fring + FLAT_RING / 32;  // final mask bits, likewise
    // B: x of this lane's run's first element, 8 lane, in chunk 0
    unsigned xl = (unsigned)((base % P + 8u * lane) % NX);
    const unsigned xstep = FLAT_CH % NX;
    int W1 = 0, W2 = 0, cX = 0;  // W of the last two words; X' of the chunk before's last element
    unsigned fc = 0, fB1 = 0, fB2 = 0, rc = 0, rB1 = 0, rB2 = 0;  // X: the masks' carries
    unsigned ri = lane;          // e mod FLAT_RING
    unsigned nr = 0, ne = 0;     // raw values and escapes so far
    bool bad = false;
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
                if (X) d = esc_resid(c, e < n, ne, mk, tb, lane, bad);
                else d = resid_of(c, bad);
                if (e == 0) {
                    bad |= c != 0;
                    d = origin;
                }
                cb[sw8(32 * wl + lane)] = d;
            }
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
#pragma unroll 2
        for (int wl = 0; wl < 8; wl++) {
            const int w = 8 * ch + wl, e = 32 * w + lane;
            const int xv = cb[sw8(32 * wl + lane)];
            const int y = __shfl_sync(F, fl.send1 ? W1 : W2, fl.ys);
            const int W = wadd(xv, fl.hy() ? y : 0);
            W2 = W1;
            W1 = W;
            const unsigned rz = ri >= P ? ri - P : ri + FLAT_RING - P;  // (e - P) mod FLAT_RING
            const int q = wadd(W, e >= (int)P ? ring[rz] : 0);
            ring[ri] = q;
            T val = Bits<T>::rec(q, step);
            const bool in = !X || e < n;
            if (X && (mk.fat | mk.rat)) {
                const unsigned hm = __ballot_sync(F, !fl.hx()), hym = __ballot_sync(F, fl.hy());
                const int e0 = 32 * w;
                const unsigned zm = e0 >= (int)P ? F : e0 + 32 > (int)P ? F << (P - e0) : 0u;
                const unsigned r0 = ri - lane;  // 32 w mod FLAT_RING
                const unsigned o = r0 >= P ? r0 - P : r0 + FLAT_RING - P, ws = r0 >> 5;
                const unsigned vm = __ballot_sync(F, in);
                const unsigned fm = mk.fat ? flat_unmask(mask_word(tb, mk.fat, w), hm, hym, zm, NX, o, ws, fring, fc, fB1, fB2) & vm : 0u;
                const unsigned rm = mk.rat ? flat_unmask(mask_word(tb, mk.rat, w), hm, hym, zm, NX, o, ws, rring, rc, rB1, rB2) & vm : 0u;
                val = apply_masks<T>(val, fm, rm, nr, mk, tb, fill, lane, bad);
            }
            if (in) out[32 * w] = val;
            ri += 32;
            if (ri >= FLAT_RING) ri -= FLAT_RING;
            fl.next();
        }
        // the chunk buffer's reads before the next chunk's stores; the
        // rings' stores before a later chunk's loads
        __syncwarp();
    }
    if (X && (nr != mk.nraw || ne != mk.nesc)) bad = true;
    return !__any_sync(F, bad);
}
