// The staged rank-2 walk (f32): full 64 x 64 tiles with 16 x 8 sub-blocks
// (FORMAT.md section 3), the rank-3 walk's structure (enc_fast3) applied to
// 2-D fields (included by encode_warp.cuh after enc_fast3).
//
// Why: the slot-order rank-2 walk (enc_fast2) loads 4 rows of 8 values a
// step into registers, takes two shuffles and a vote per value and codes
// every word with the 16-bit transpose; it ran at about 0.4x of the rank-3
// walk (hst 1024 x 1024: 494-525 GB/s compress on an H100 against 1247-1324
// on the smooth 3-D field; PERF.md "What is left" 3).
//
// Segments. A 64 x 64 tile is walked as 8 segments of 16 rows x 32 columns,
// s = 2j + h: rows 16j .. 16j + 15 (sub-block row j), columns 32h .. 32h + 31.
// A segment is what a z-plane is to the rank-3 walk: staged in shared
// memory by cp.async one segment ahead (the same Stager layout, rows of
// STG_ROW words), lane x owns its column, the residuals replace the values
// in the buffer, and the segment is coded with 2/4/8/16-bit codes picked by
// its largest |d|. Its slot words are the 16 words 16s .. 16s + 15: word
// 16s + j' + 4k' holds rows 16j + 4j' + dy (dy = 0..3) and columns 32h + 8k'
// + dx (dx = 0..7) at bit 8dy + dx, the bit layout of a rank-3 word, so the
// coders differ from the rank-3 ones only in which word a pair of (row
// group, column group) is and where it is stored.
//
// Lorenzo: d = Dx(Dy q). Dy against the row before in registers, and across
// segments against the carried last row of the band above (one register per
// half). Dx by one shuffle from the lane to the left; lane 0 of the right
// half takes column 31 of the left half, which lane 31 kept per row (a[]).
//
// Escapes and raw values are recorded by ballots per row into the element-
// order bitmaps (word 2y + h: element y * 64 + 32h + lane); raw values are
// not listed (segments are not in element order): the tile's write takes
// them from the field. Holes (fill, NaN, Inf, |s| >= 2^28) leave the tile to
// the slow path, as in the other walks.

// Copies the segments of one full rank-2 f32 tile into the warp's buffers:
// the rank-3 walk's Stager (same copies, same buffer layout), whose step
// from one load to the next is set per segment: segment s + 1 starts 32
// values right of segment s (s even) or 16 rows down and 32 values left
// (s odd). AL16: as Stager's.
template <bool AL16 = false>
struct Stager2 : Stager<AL16> {
    unsigned long long down;
    __device__ __forceinline__ Stager2(const float *src, const Geo &g, unsigned long long base, float *stg, int lane)
        : Stager<AL16>(src, g, base, stg, lane), down(16 * g.nx - 32) {}
    // segment s into buffer b (one commit group)
    __device__ __forceinline__ void load(int b, int s) {
        this->plane = (s & 1) ? down : 32;
        Stager<AL16>::load(b);
    }
};

// put_narrow for a rank-2 segment: word n = j' + 4k' of segment s (row
// group j' = n % 4, column group k' = n / 4) is field n % (32 / W) of
// register n / (32 / W); it is stored at word 16s + n.
template <int W>
__device__ __forceinline__ void put_narrow2(const int *sb, unsigned *pw, int s, int lane) {
    constexpr int C = 32 / W, R = W / 2;
    constexpr unsigned FM = (1u << W) - 1, LSB = 0xffffffffu / FM;
    unsigned x[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        unsigned p;
        if (W == 8) {  // words 4r + f (f = 0..3): row group f of column group r
            p = __byte_perm(__byte_perm((unsigned)sb[8 * r], (unsigned)sb[STG_ROW * 4 + 8 * r], 0x0040),
                            __byte_perm((unsigned)sb[STG_ROW * 8 + 8 * r], (unsigned)sb[STG_ROW * 12 + 8 * r], 0x0040),
                            0x5410);
        } else {
            p = 0;
#pragma unroll
            for (int f = 0; f < C; f++) {
                const int n = r * C + f;
                p |= ((unsigned)sb[STG_ROW * 4 * (n & 3) + 8 * (n >> 2)] & FM) << (W * f);
            }
        }
        if (W > 2) {
            const unsigned sg = (p >> (W - 1)) & LSB;
            p = ((p ^ (sg * FM)) + sg) | (p & (LSB << (W - 1)));
        }
        x[r] = p;
    }
    transpose32n<R>(x, lane);
    const int b = lane % W, pl = b == W - 1 ? 15 : b;
    // C * r is a multiple of 4: the plane's XOR swizzle (put_planes) only
    // touches the field's low two bits
    unsigned *const o = pw + pl * PW_STRIDE + 16 * s + ((lane / W) ^ ((pl >> 2) & 3));
#pragma unroll
    for (int r = 0; r < R; r++) o[C * r] = x[r];
}

// AL16: every row of the tile is 16-byte aligned (Stager).
template <int V, bool AL16 = false>
__device__ __forceinline__ bool enc_fast2s(const float *__restrict__ src, const Geo &g, unsigned long long base,
                                           double inv, double step, float ebf, int has_fill, unsigned fill32,
                                           unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw, int lane,
                                           TileSum &ts) {
    const unsigned F = 0xffffffffu;
    float *stg = stage_buf();
    Stager2<AL16> st(src, g, base, stg, lane);
    const int dy = lane >> 3, dx = lane & 7;
    float *const xcol = stg + lane;                                // value (y, lane): xcol[STG_ROW * y]
    const int *const slot = (const int *)stg + STG_ROW * dy + dx;  // slot (dy, dx) of a (row group, column group)
    const int pws = (lane >> 2) & 3;                               // the 16-bit coder's plane swizzle
    const int left = (lane + 31) & 31;
    int a[16];  // per row: Dy q of column 31 of the band's left half (lane 31), 0 elsewhere
#pragma unroll
    for (int y = 0; y < 16; y++) a[y] = 0;
    int c0 = 0, c1 = 0;  // q of the band above's last row, left and right half
    float emx = 0.0f;
    unsigned nraw = 0, nesc = 0;
    int origin = 0;
    st.load(0, 0);
#pragma unroll
    for (int p = 1; p < 15; p++) *(uint4 *)&pw[p * PW_STRIDE + 4 * lane] = make_uint4(0, 0, 0, 0);
#pragma unroll 1
    for (int s = 0; s < 8; s++) {
        const int h = s & 1, b = h, row0 = 16 * (s >> 1);
        if (s < 7) {
            st.load(b ^ 1, s + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncwarp();
        float *const xb = xcol + b * STG_PLANE;
        int q[16];
        unsigned rawm = 0;
        float em = 0.0f;
        if (__any_sync(F, quant_col(xb, inv, step, has_fill, fill32, q, em))) {
            cp_async_wait<0>();
            return false;
        }
        if (__any_sync(F, em > ebf)) {  // rare: raw values, as in enc_fast3
            em = 0.0f;
#pragma unroll 1
            for (int y = 0; y < 16; y++) {
                float e = 0.0f;
                bool hh;
                (void)quant_f32(xb[STG_ROW * y], inv, step, e, hh);
                const bool r = e > ebf;
                rawm |= (unsigned)r << (15 - y);
                em = r ? em : fmaxf(em, e);
            }
        }
        emx = fmaxf(emx, em);
        int *const db = (int *)xb;
        int dmax = 0, dmin = 0;
        const int cq = h ? c1 : c0;
#pragma unroll
        for (int y = 0; y < 16; y++) {
            const int A = (int)((unsigned)q[y] - (unsigned)(y ? q[y - 1] : cq));
            const int L = __shfl_sync(F, lane == 31 ? a[y] : A, left);
            a[y] = h ? 0 : A;
            int d = (int)((unsigned)A - (unsigned)L);
            if (y == 0 && s == 0) {
                origin = __shfl_sync(F, d, 0);  // element 0's q
                if (lane == 0) d = 0;
            }
            db[STG_ROW * y] = d;
            dmax = max(dmax, d);
            dmin = min(dmin, d);
        }
        if (h)
            c1 = q[15];
        else
            c0 = q[15];
        __syncwarp();
        for (unsigned rows = __reduce_or_sync(F, rawm); rows;) {  // rare
            const int bit = 31 - __clz(rows), y = 15 - bit;
            rows ^= 1u << bit;
            const unsigned br = __ballot_sync(F, (rawm >> bit) & 1u);
            if (lane == 0) sraw[2 * (row0 + y) + h] = br;
            nraw += __popc(br);
        }
        const unsigned mabs = __reduce_max_sync(F, max((unsigned)dmax, 0u - (unsigned)dmin));
        if (mabs > esc_max(V)) {  // rare: escapes, recorded, then coded as 0x8000
#pragma unroll 1
            for (int y = 0; y < 16; y++) {
                const int d = db[STG_ROW * y];
                const bool esc = (unsigned)abs(d) > esc_max(V);
                const unsigned be = __ballot_sync(F, esc);
                if (esc) {
                    sq[(row0 + y) * 64 + 32 * h + lane] = d;
                    db[STG_ROW * y] = -32768;
                }
                if (lane == 0) sesc[2 * (row0 + y) + h] = be;
                nesc += __popc(be);
            }
            __syncwarp();
        }
        const int *const sb = slot + b * STG_PLANE;
        if (mabs <= 1u) {
            put_narrow2<2>(sb, pw, s, lane);
        } else if (mabs <= 7u) {
            put_narrow2<4>(sb, pw, s, lane);
        } else if (mabs <= 127u) {
            put_narrow2<8>(sb, pw, s, lane);
        } else {
            // words (2jp, k) and (2jp + 1, k) as the low and high codes of a
            // pair; lanes 0-15 then hold plane lane of the first, 16-31
            // plane lane - 16 of the second
            unsigned *const pwp = pw + (lane & 15) * PW_STRIDE + 16 * s;
#pragma unroll 1
            for (int jp = 0; jp < 2; jp++) {
                unsigned x[4];
#pragma unroll
                for (int k = 0; k < 4; k++)
                    x[k] = code16x2(sb[STG_ROW * 8 * jp + 8 * k], sb[STG_ROW * (8 * jp + 4) + 8 * k]);
                transpose32n<4>(x, lane);
                const int lo = (2 * jp + (lane >> 4)) ^ pws;
#pragma unroll
                for (int k = 0; k < 4; k++) pwp[4 * k + lo] = x[k];
            }
        }
        __syncwarp();  // this buffer takes segment s + 2
    }
    ts.nesc = nesc;
    ts.nraw = nraw;
    ts.origin = origin;
    ts.merr = (double)__uint_as_float(__reduce_max_sync(F, __float_as_uint(emx)));
    return true;
}
