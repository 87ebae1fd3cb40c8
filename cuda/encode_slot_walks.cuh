// The slot-order walks (v6): one 32-slot word of every bit plane per step,
// values loaded into registers, neighbours by shuffles. They take full
// f64 rank-3 and rank-2 tiles, full f64 rank-1 tiles and those of f32
// fields with a fill value (enc_fast1); f32 rank 3 and rank 2 take the
// staged walks (encode_rank3.cuh, encode_rank2.cuh), the other f32 rank-1
// tiles enc_flat32 without its y and z neighbours (encode_flat.cuh).
// Included by encode_warp.cuh.

// Rank 3: tile 8x16x32, sub-blocks 4x4x8. Word w = 64i + 16j + 4k + a holds
// slots of sub-block (i, j, k) at dz = a: lane l = (dy, dx) = (l/8, l%8),
// element (4i+a, 4j+dy, 8k+dx). Walk: z outer (runtime), k, then j inner
// (unrolled), so the neighbour at x-1 for dx = 0 is the previous k's word
// (carry cx[j]), at y-1 for dy = 0 the previous j's word (carry cy) and at
// z-1 the previous z's word (carry cz[j][k]). d = Dz(Dy(Dx q)).
template <typename T, int V>
__device__ __forceinline__ bool enc_fast3_v6(const T *__restrict__ src, const Geo &g, unsigned long long base,
                                          double inv, double step, double eb, int has_fill,
                                          unsigned long long fill_bits, unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw,
                                          int lane, TileSum &ts) {
    const int dy = lane >> 3, dx = lane & 7;
    const unsigned long long nx = g.nx, nx4 = 4 * g.nx, plane = g.ny * g.nx;
    const T *p0 = src + base + (unsigned long long)dy * nx + dx;
    const int srcx = dx ? lane - 1 : lane + 7, srcy = dy ? lane - 8 : lane + 24;
    int cz[4][4], cx[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        cx[j] = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) cz[j][k] = 0;
    }
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
#pragma unroll 1
    for (int z = 0; z < 8; z++) {
        // rows 4j + dy of this z: k and the lane add immediate offsets
        const T *r0 = p0 + z * plane, *r1 = r0 + nx4, *r2 = r1 + nx4, *r3 = r2 + nx4;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const T v[4] = {__ldcs(r0 + 8 * k), __ldcs(r1 + 8 * k), __ldcs(r2 + 8 * k), __ldcs(r3 + 8 * k)};
            int cy = 0;
            unsigned c[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                bool raw;
                const int q = W.quant(v[j], raw);
                const int gx = __shfl_sync(0xffffffffu, dx == 7 ? cx[j] : q, srcx);
                const int A = (int)((unsigned)q - (unsigned)((k > 0 || dx > 0) ? gx : 0));
                cx[j] = q;
                const int gy = __shfl_sync(0xffffffffu, dy == 3 ? cy : A, srcy);
                const int B = (int)((unsigned)A - (unsigned)((j > 0 || dy > 0) ? gy : 0));
                cy = A;
                const int d = (int)((unsigned)B - (unsigned)cz[j][k]);
                cz[j][k] = B;
                c[j] = W.code(d, q, raw, k == 0 && j == 0 && z == 0, z * 512 + (4 * j + dy) * 32 + 8 * k + dx);
            }
            const int wz = (z >> 2) * 64 + 4 * k + (z & 3);
            put_planes(pw, transpose32(c[0] | c[1] << 16, lane), wz, wz + 16, lane);
            put_planes(pw, transpose32(c[2] | c[3] << 16, lane), wz + 32, wz + 48, lane);
        }
        if (!W.clean()) return false;
    }
    W.done(ts);
    return true;
}

// Rank 1: tile 1x1x4096, sub-blocks of 128: slot = element. Word w holds
// elements 32w..32w+31; d = q - q(x-1), the left neighbour of lane 0 is
// lane 31 of the previous word (carry).
template <typename T, int V>
__device__ __forceinline__ bool enc_fast1(const T *__restrict__ src, unsigned long long base, double inv,
                                          double step, double eb, int has_fill, unsigned long long fill_bits,
                                          unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw, int lane,
                                          TileSum &ts) {
    const T *p0 = src + base + lane;
    const int srcx = lane ? lane - 1 : 31;
    int carry = 0;
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
#pragma unroll 1
    for (int w0 = 0; w0 < 128; w0 += 8) {
        T v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = __ldcs(p0 + 32 * (w0 + u));
        unsigned c[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            bool raw;
            const int q = W.quant(v[u], raw);
            const int gx = __shfl_sync(0xffffffffu, lane == 31 ? carry : q, srcx);
            const int d = (int)((unsigned)q - (unsigned)((w0 + u > 0 || lane > 0) ? gx : 0));
            carry = q;
            c[u] = W.code(d, q, raw, w0 + u == 0, 32 * (w0 + u) + lane);
        }
        unsigned t[4];
#pragma unroll
        for (int u = 0; u < 4; u++) t[u] = c[2 * u] | c[2 * u + 1] << 16;
        transpose32n<4>(t, lane);
#pragma unroll
        for (int u = 0; u < 4; u++) put_planes(pw, t[u], w0 + 2 * u, w0 + 2 * u + 1, lane);
        if (!W.clean()) return false;
    }
    W.done(ts);
    return true;
}

// Rank 2: tile 64x64 (y, x), sub-blocks 16x8. Word w = 4(8j + k) + a holds
// rows 16j + 4a + dy (dy = l/8 < 4), columns 8k + dx. Walk: j outer
// (runtime), k, then a inner (unrolled). x-1 for dx = 0: the previous k's
// word (carry cx[a]); y-1 for dy = 0: the previous a's word (cy), or for
// a = 0 the previous j's last word (cj[k]). d = Dy(Dx q).
template <typename T, int V>
__device__ __forceinline__ bool enc_fast2(const T *__restrict__ src, const Geo &g, unsigned long long base,
                                          double inv, double step, double eb, int has_fill,
                                          unsigned long long fill_bits, unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw,
                                          int lane, TileSum &ts) {
    const int dy = lane >> 3, dx = lane & 7;
    const unsigned long long nx = g.nx;
    const T *p0 = src + base + (unsigned long long)dy * nx + dx;
    const int srcx = dx ? lane - 1 : lane + 7, srcy = dy ? lane - 8 : lane + 24;
    int cj[8], cx[4];
#pragma unroll
    for (int k = 0; k < 8; k++) cj[k] = 0;
#pragma unroll
    for (int a = 0; a < 4; a++) cx[a] = 0;
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
#pragma unroll 1
    for (int j = 0; j < 4; j++) {
        const T *pj = p0 + (unsigned long long)(16 * j) * nx;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            T v[4];
#pragma unroll
            for (int a = 0; a < 4; a++) v[a] = __ldcs(pj + (unsigned long long)(4 * a) * nx + 8 * k);
            unsigned c[4];
            int cy = cj[k];
#pragma unroll
            for (int a = 0; a < 4; a++) {
                bool raw;
                const int q = W.quant(v[a], raw);
                const int gx = __shfl_sync(0xffffffffu, dx == 7 ? cx[a] : q, srcx);
                const int A = (int)((unsigned)q - (unsigned)((k > 0 || dx > 0) ? gx : 0));
                cx[a] = q;
                const int gy = __shfl_sync(0xffffffffu, dy == 3 ? cy : A, srcy);
                const int d = (int)((unsigned)A - (unsigned)((j > 0 || a > 0 || dy > 0) ? gy : 0));
                cy = A;
                c[a] = W.code(d, q, raw, j == 0 && k == 0 && a == 0, (16 * j + 4 * a + dy) * 64 + 8 * k + dx);
            }
            cj[k] = cy;
            const int w = 4 * (8 * j + k);
            put_planes(pw, transpose32(c[0] | c[1] << 16, lane), w, w + 1, lane);
            put_planes(pw, transpose32(c[2] | c[3] << 16, lane), w + 2, w + 3, lane);
        }
        if (!W.clean()) return false;
    }
    W.done(ts);
    return true;
}
