// The warp decoder's walk for flat tiles (FORMAT.md 3.1, flat.cuh; PERF.md
// v26): dec_flat, the mirror of encode_flat.cuh's enc_flat. Included by
// decode_warp.cuh.
//
// Element (= slot) order, 64 slots a step: lanes 16h + p read word 2m + h
// of plane p from the tile in global memory (L1; flat tiles are not
// staged, the warp's shared memory holds the rings below instead) and one
// 32x32 bit transpose gives lane l the codes of elements 64m + l and
// 64m + 32 + l. Lorenzo is undone by the three sums of FORMAT.md 3.1, each
// from where its operand already is:
//   Z = d + Z(z - 1): Z of element e - fP from a ring of FLAT_RING in
//       shared memory (fP + 31 < FLAT_RING);
//   Y = Z + Y(y - 1): Y of element e - fnx, one or two words back (fnx in
//       32 .. 64): shuffles of the last two words' Y;
//   q = Y + q(x - 1): a segmented scan across the word's lanes, restarting
//       where x = 0, plus the word before's last q.
// With X (masks, escapes or a clipped last tile) the fill and raw masks
// are undone the same way on bits (XOR; rings of FLAT_RING bits), and
// escapes, raw values and the checks are dec_fast1's: every step is in
// element order, as those lists are.

#define FLAT_RING 1920  // ints of the Z ring; + 2 x 60 words of mask bits = DEC_STAGE + 512
__host__ __device__ __forceinline__ bool flat_dec_walkable(const Geo &g) {
    return g.fnx >= 32 && g.fnx <= 64 && g.fP >= 256 && g.fP + 31 < FLAT_RING;
}

// Inclusive sum of v over the lanes, restarting at the lanes of hm (a
// ballot of heads): the plain prefix sum less the prefix before this
// lane's segment (one shuffle), so five rounds of one shuffle each rather
// than two (seg_scan). tail: no head at or below this lane.
__device__ __forceinline__ int seg_sum(int v, unsigned hm, int lane, bool &tail) {
    const unsigned F = 0xffffffffu;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(F, v, o);
        if (lane >= o) v = wadd(v, t);
    }
    const unsigned below = hm & (0xffffffffu >> (31 - lane));  // heads at or below this lane
    tail = below == 0;
    const int s = tail ? 0 : 31 - __clz(below);  // this lane's segment starts at lane s
    const int before = __shfl_sync(F, v, s > 0 ? s - 1 : 0);
    return s > 0 ? wadd(v, -before) : v;
}

// Inclusive scan of v over the lanes, restarting at lanes with head set;
// op is + (ints) or ^ (bits). Returns the scan; tail: no head at or below
// this lane (the word before's carry applies).
template <bool XOR>
__device__ __forceinline__ int seg_scan(int v, bool head, int lane, bool &tail) {
    const unsigned F = 0xffffffffu;
    bool f = head;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(F, v, o);
        const bool tf = __shfl_up_sync(F, (int)f, o) != 0;
        if (lane >= o && !f) {
            v = XOR ? v ^ t : wadd(v, t);
            f = tf;
        }
    }
    tail = !f;
    return v;
}

template <typename T, bool X>
__device__ __forceinline__ bool dec_flat(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                         unsigned long long base, double step, T *__restrict__ dst, unsigned *sw,
                                         int lane, const TileMasks &mk, T fill, int n) {
    const unsigned F = 0xffffffffu;
    const unsigned P = g.fP;
    FlatLane fl(g, base, lane);
    int *ring = (int *)sw;                      // Z of element e at (e mod FLAT_RING)
    unsigned *fring = sw + FLAT_RING, *rring = fring + FLAT_RING / 32;  // mask bits, likewise
    int Y1 = 0, Y2 = 0, cq = 0;                 // Y of the last two words, q of the word before's lane 31
    int fY1 = 0, fY2 = 0, fc = 0, rY1 = 0, rY2 = 0, rc = 0;  // the same for the fill and raw bits
    unsigned ri = lane;                         // e mod FLAT_RING
    unsigned nr = 0, ne = 0;  // raw values and escapes so far
    bool bad = false;
    T *out = dst + base + lane;
    const int nw = X ? (n + 31) >> 5 : 128;
    // lane 16h + p loads plane p of word 2m + h, a step ahead (the tile is
    // read from L1 or L2: each step waited for its loads without the lead)
    unsigned pn = zb_word(tb, bm, pat, lane >> 4);
#pragma unroll 1
    for (int m = 0; 2 * m < nw; m++) {
        // codes of words 2m, 2m + 1
        const unsigned pc = pn;
        if (2 * m + 2 < nw) pn = zb_word(tb, bm, pat, 2 * m + 2 + (lane >> 4));
        const unsigned c2 = transpose32(pc, lane);
        unsigned fw[2] = {0, 0}, rw[2] = {0, 0};
        if (X) {
            fw[0] = mask_word(tb, mk.fat, 2 * m), fw[1] = mask_word(tb, mk.fat, 2 * m + 1);
            rw[0] = mask_word(tb, mk.rat, 2 * m), rw[1] = mask_word(tb, mk.rat, 2 * m + 1);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int w = 2 * m + h, e = 32 * w + lane;
            if (X && w >= nw) break;  // the same for every lane
            const bool in = !X || e < n;
            const unsigned c = h ? c2 >> 16 : c2 & 0xFFFFu;
            int d;
            if (X) d = esc_resid(c, in, ne, mk, tb, lane, bad);
            else d = resid_of(c, bad);
            if (e == 0) {
                bad |= c != 0;
                d = origin;
            }
            const unsigned rz = ri >= P ? ri - P : ri + FLAT_RING - P;  // (e - fP) mod FLAT_RING
            const bool hz = e >= (int)P, hy = fl.hy(), head = !fl.hx();
            // Z, Y, q
            const int Z = wadd(d, hz ? ring[rz] : 0);
            ring[ri] = Z;
            const int y1 = __shfl_sync(F, Y1, fl.ys), y2 = __shfl_sync(F, Y2, fl.ys);
            const int Y = wadd(Z, hy ? (fl.yb1 ? y1 : y2) : 0);
            Y2 = Y1;
            Y1 = Y;
            bool tail;
            int q = seg_sum(Y, __ballot_sync(F, head), lane, tail);
            if (tail) q = wadd(q, cq);
            cq = __shfl_sync(F, q, 31);
            T val = Bits<T>::rec(q, step);
            if (X) {
                // the masks' bits, undone the same way (XOR)
                auto unmask = [&](unsigned word, unsigned *bring, int &B1, int &B2, int &bc) -> unsigned {
                    int b = (word >> lane) & 1;
                    if (hz) b ^= (bring[rz >> 5] >> (rz & 31)) & 1;
                    const unsigned zb = __ballot_sync(F, b);
                    if (lane == 0) bring[ri >> 5] = zb;  // ri is a multiple of 32 at lane 0
                    const int b1 = __shfl_sync(F, B1, fl.ys), b2 = __shfl_sync(F, B2, fl.ys);
                    const int yb = b ^ (hy ? (fl.yb1 ? b1 : b2) : 0);
                    B2 = B1;
                    B1 = yb;
                    bool t2;
                    int xb = seg_scan<true>(yb, head, lane, t2);
                    if (t2) xb ^= bc;
                    bc = __shfl_sync(F, xb, 31);
                    return __ballot_sync(F, xb && in);
                };
                const unsigned fm = mk.fat ? unmask(fw[h], fring, fY1, fY2, fc) : 0u;
                const unsigned rm = mk.rat ? unmask(rw[h], rring, rY1, rY2, rc) : 0u;
                val = apply_masks<T>(val, fm, rm, nr, mk, tb, fill, lane, bad);
            }
            if (in) out[32 * w] = val;
            ri += 32;
            if (ri >= FLAT_RING) ri -= FLAT_RING;
            fl.next();
        }
        // the ring's stores before a later step's loads; the step's two
        // words touch distinct ring entries and words (fP >= 256), so one
        // barrier a step lets their independent work interleave
        __syncwarp();
    }
    if (X && (nr != mk.nraw || ne != mk.nesc)) bad = true;
    return !__any_sync(F, bad);
}
