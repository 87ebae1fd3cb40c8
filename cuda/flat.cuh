#pragma once
// Flat tiles (FORMAT.md 3.1): a tile is a run of 4096 consecutive values of
// the folded field, element e at flat index i = 4096 t + e, slot e; the
// Lorenzo residual and the masks' parity transform keep the field's 3-D
// neighbours that lie in the same run. The kernels see such a job as a
// rank-1 field (Geo: nz = ny = 1, nx = the value count, tiles 1x1x4096), so
// tiling, chunks, offsets and the tile writer are rank 1's; what differs is
// only which earlier elements are an element's neighbours, which this file
// answers. Included by encode_warp.cuh and decode.cuh.
//
// Why (PERF.md v26): era5's 744x33x49 grid leaves 37 % of its values in
// clipped box tiles, each ~5x the cost per value of a full tile on the GPU
// (v24-v25: three walks for them, none below ~270 thread-instructions a
// value); flat tiles have no clipped tiles but the field's last.

// Where a flat tile starts in the field's planes and rows: the in-plane
// position r0 = i0 mod (ny nx) of its first element (i0 = 4096 t); the
// rest follows per element by flat_rc.
// i0: the tile's first flat index (4096 t: the x0 of its rank-1 box).
__device__ __forceinline__ unsigned flat_r0(const Geo &g, unsigned long long i0) {
    return (unsigned)(i0 % g.fP);
}

// Element e's in-plane position r (0 .. fP - 1) and column x (0 .. fnx - 1)
// from the tile's r0: 32-bit quotients by Geo's magic multipliers (r0 + e <
// fP + 4096 < 2^25).
__device__ __forceinline__ void flat_rx(const Geo &g, unsigned r0, int e, unsigned &r, unsigned &x) {
    const unsigned u = r0 + (unsigned)e;
    r = u - (unsigned)div_m(u, g.fP, g.mfP) * g.fP;
    x = r - (unsigned)div_m(r, g.fnx, g.mfnx) * g.fnx;
}

// The offsets of element e's 2^3 - 1 backward neighbours and whether each
// exists (FORMAT.md 3.1: z >= a, y >= b, x >= c and in the same run), in
// corner order c + 2b + 4a = 1 .. 7: bit k of the result is corner k.
__device__ __forceinline__ unsigned flat_corners(const Geo &g, unsigned r0, int e) {
    unsigned r, x;
    flat_rx(g, r0, e, r, x);
    const bool hx = x > 0, hy = r >= g.fnx;
    unsigned m = 0;
#pragma unroll
    for (int k = 1; k < 8; k++) {
        const int a = k >> 2, b = (k >> 1) & 1, c = k & 1;
        const long long off = (long long)a * g.fP + (long long)b * g.fnx + c;
        const bool ok = (!c || hx) && (!b || hy) && (long long)e - off >= 0;
        m |= (unsigned)ok << k;
    }
    return m;
}

// The offset of corner k (1 .. 7) of a flat tile's element.
__device__ __forceinline__ int flat_off(const Geo &g, int k) {
    return (k >> 2) * (int)g.fP + ((k >> 1) & 1) * (int)g.fnx + (k & 1);
}

// The parity transform of bit `bit` of the element flags fl at element e
// of a flat tile (FORMAT.md 3.1, "masks"): the XOR over the corners m
// (flat_corners) says exist.
__device__ __forceinline__ int flat_xor_corners(const Geo &g, const unsigned char *fl, int e, unsigned m,
                                                unsigned char bit) {
    int b = (fl[e] & bit) != 0;
#pragma unroll
    for (int k = 1; k < 8; k++)
        if ((m >> k) & 1) b ^= (fl[e - flat_off(g, k)] & bit) != 0;
    return b;
}

// A lane's element of a flat tile in the word-order walks (enc_flat,
// dec_flat: word w holds elements 32w .. 32w + 31, lane l element 32w + l):
// its in-plane position r and column x, for y > 0 (r >= fnx) and x > 0;
// next() moves them a word on. With 32 <= fnx <= 64 the element fnx back
// is lane ys of the word before (for lanes >= fnx - 32) or of the one
// before that; ys is a rotation of the lanes, so the sender knows which
// word its one reader needs: send1, this lane's reader wants the word
// before (one shuffle a value instead of two and a select).
struct FlatLane {
    unsigned r, x;
    const unsigned P, nx;
    const int ys;
    const bool send1;
    __device__ __forceinline__ FlatLane(const Geo &g, unsigned long long i0, int lane)
        : P(g.fP), nx(g.fnx), ys((lane - (int)g.fnx) & 31), send1((int)((lane + g.fnx) & 31) >= (int)g.fnx - 32) {
        const unsigned r0 = flat_r0(g, i0);
        r = r0 + lane;
        x = r0 % nx + lane;
        if (r >= P) r -= P;
        if (x >= nx) x -= nx;
    }
    __device__ __forceinline__ bool hx() const { return x > 0; }
    __device__ __forceinline__ bool hy() const { return r >= nx; }
    __device__ __forceinline__ void next() {
        x += 32;
        if (x >= nx) x -= nx;
        r += 32;
        if (r >= P) r -= P;
    }
};

// enc_flat32's lane state for a rank-1 tile (FLAT false): every element but
// element 0 (whose code the walk sets to 0) has its x - 1 neighbour in the
// tile, and there are no y or z neighbours to follow.
struct Rank1Lane {
    __device__ __forceinline__ Rank1Lane(const Geo &, unsigned long long, int) {}
    __device__ __forceinline__ bool hx() const { return true; }
    __device__ __forceinline__ void next() {}
};
