// The warp decoder's generic walks (dec_gen3 / dec_gen2): rank-3 and
// rank-2 tiles of any box, read from global memory. Included by
// decode_warp.cuh after decode_fast.cuh.
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
// PAD: a padded field's tile (FORMAT.md 3.2): lz x ly x lx is the whole
// tile, coded as such; only box (inside the field) is stored.
template <typename T, bool X, bool PAD = false>
__device__ __forceinline__ bool dec_gen3(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                         unsigned long long base, double step, T *__restrict__ dst, int *pb,
                                         unsigned *sw, int lane, const TileMasks &mk, T fill, int lz, int ly,
                                         int lx, Box3 box = Box3{8, 16, 32}) {
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
            if (PAD ? z < box.lz && y < box.ly && lane < box.lx : xin) out[(unsigned long long)y * g.nx] = val;
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
