// The flat walk (enc_flat) and the raw mask of a walked flat tile (flat
// tiles: FORMAT.md 3.1, flat.cuh). Included by encode_warp.cuh.

#include "flat.cuh"

// The walk of a full flat tile without holes (PERF.md v26). The run spans
// K <= 4 planes of the field (fP >= 1366); the warp walks it by in-plane
// chunks of 32 positions r = rc + lane, and within a chunk by plane k (at
// flat index i0 - r0 + k fP + r, element e = k fP + r - r0), so that each
// of the three differences of d = Dz Dy Dx q comes from a register:
//   A = q - q(x - 1): a shuffle, lane 0 from the plane's carry;
//   B = A - A(y - 1): A of r - fnx, one or two chunks back in the same
//       plane (fnx in 32 .. 64): two shuffles of the plane's last two A;
//   d = B - B(z - 1): the plane before's B in this chunk (same lane).
// Elements outside the run count as q = 0 (FORMAT.md 3.1), so every
// neighbour needs no test but x > 0 and y > 0. Codes land at slot e: each
// run of 32 is transposed (two planes' runs a transpose) and ORed into
// the plane buffer at its slot, which need not be a multiple of 32.
// Returns false at the first hole (the slow path takes the tile).
#define FLAT_KMAX 4
__device__ __forceinline__ bool flat_walkable(const Geo &g) { return g.fnx >= 32 && g.fnx <= 64 && g.fP >= 1366; }

template <typename T, int V>
__device__ __forceinline__ bool enc_flat(const T *__restrict__ src, const Geo &g, unsigned long long i0,
                                         double inv, double step, double eb, int has_fill,
                                         unsigned long long fill_bits, unsigned *pw, int *sq, unsigned *sesc,
                                         unsigned *sraw, int lane, TileSum &ts) {
    const unsigned F = 0xffffffffu;
    const int P = (int)g.fP, nx = (int)g.fnx;
    const int r0 = (int)flat_r0(g, i0), K = (r0 + TILE - 1) / P + 1;
    const T *p0 = src + i0 - (unsigned long long)r0;  // flat index of (plane 0, r = 0)
    // the plane buffer starts zeroed: runs are ORed in
    for (int i = lane; i < 16 * 32; i += 32) ((uint4 *)(pw + (i >> 5) * PW_STRIDE))[i & 31] = make_uint4(0, 0, 0, 0);
    __syncwarp();
    int A1[FLAT_KMAX], A2[FLAT_KMAX], cq[FLAT_KMAX];
#pragma unroll
    for (int k = 0; k < FLAT_KMAX; k++) A1[k] = A2[k] = cq[k] = 0;
    const int ys = (lane - nx) & 31;      // lane of A(r - fnx)
    const bool yb1 = lane - nx >= -32;    // ... one chunk back (else two)
    int x = lane;                         // r mod fnx (fnx >= 32)
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
    // The loads run a chunk ahead: each chunk's K loads are used at once,
    // and without the lead every chunk waited for L2 (call 2 of v26: era5
    // 349 GB/s, below its box tiles' 424).
    auto inrun = [&](int k, int rr) { return k < K && rr < P && k * P + rr - r0 >= 0 && k * P + rr - r0 < TILE; };
    T vn[FLAT_KMAX];
#pragma unroll
    for (int k = 0; k < FLAT_KMAX; k++)
        if (inrun(k, lane)) vn[k] = __ldcs(p0 + (unsigned long long)(k * P + lane));
#pragma unroll 1
    for (int rc = 0; rc < P; rc += 32) {
        const int r = rc + lane;
        const bool hx = x > 0, hy = r >= nx;
        T v[FLAT_KMAX];
        bool in[FLAT_KMAX];
#pragma unroll
        for (int k = 0; k < FLAT_KMAX; k++) {
            v[k] = vn[k];
            in[k] = inrun(k, r);
            if (inrun(k, r + 32)) vn[k] = __ldcs(p0 + (unsigned long long)(k * P + r + 32));
        }
        unsigned c[FLAT_KMAX];
        int sb[FLAT_KMAX];
        int Bp = 0;
#pragma unroll
        for (int k = 0; k < FLAT_KMAX; k++) {
            c[k] = 0;
            sb[k] = k * P + rc - r0;
            // a plane without an element of the run in this chunk: its
            // registers stay as they are (zero before the run, unused after)
            if (k >= K || !__any_sync(F, in[k])) {
                Bp = 0;
                continue;
            }
            bool raw = false;
            const int q = in[k] ? W.quant(v[k], raw) : 0;
            int qx = __shfl_up_sync(F, q, 1);
            if (lane == 0) qx = cq[k];
            cq[k] = __shfl_sync(F, q, 31);
            const int A = (int)((unsigned)q - (unsigned)(hx ? qx : 0));
            const int a1 = __shfl_sync(F, A1[k], ys), a2 = __shfl_sync(F, A2[k], ys);
            A2[k] = A1[k];
            A1[k] = A;
            const int B = (int)((unsigned)A - (unsigned)(hy ? (yb1 ? a1 : a2) : 0));
            const int e = k * P + r - r0;
            int d = (int)((unsigned)B - (unsigned)Bp);
            Bp = B;
            if (e == 0 || !in[k]) d = 0;  // the origin (code 0, q in the tile header); no element
            if (k == 0 && rc == (r0 & ~31)) W.origin = __shfl_sync(F, q, r0 & 31);
            c[k] = W.code(d, q, raw && in[k], false, e);
        }
        if (!W.clean()) return false;
        // two runs a transpose: lane p holds plane p of run a, lane 16 + p of run b
#pragma unroll
        for (int k = 0; k < FLAT_KMAX; k += 2) {
            const unsigned cb = k + 1 < FLAT_KMAX ? c[k + 1] : 0u;
            if (!__any_sync(F, (c[k] | cb) != 0)) continue;
            const unsigned t = transpose32(c[k] | cb << 16, lane);
            const int s = lane < 16 ? sb[k] : (k + 1 < FLAT_KMAX ? sb[k + 1] : 0);
            const int w = s >> 5, o = s & 31, p = lane & 15;
            unsigned *row = pw + p * PW_STRIDE;
            const int sw = (p >> 2) & 3;  // put_planes' swizzle
            if (t) {
                if (w >= 0 && w < 128) row[w ^ sw] |= t << o;
                if (o && w + 1 >= 0 && w + 1 < 128) row[(w + 1) ^ sw] |= t >> (32 - o);
            }
        }
        x += 32;
        if (x >= nx) x -= nx;
    }
    __syncwarp();
    W.done(ts);
#ifdef EMU_FLAT_TAKEN
    EMU_FLAT_TAKEN;  // tools/encode_warp_emu.cpp counts the tiles taken
#endif
    return true;
}

// The raw mask of a walked flat tile: the parity transform of its
// element-order raw bitmap, by toggling each raw element's forward corners
// (the elements it is a corner of: flat_corners).
__device__ __forceinline__ void raw_mask_flat(const unsigned *sraw, unsigned *smr, const Geo &g, unsigned r0,
                                              int n, int lane) {
    for (int i = lane; i < 128; i += 32) smr[i] = 0;
    __syncwarp();
    for (int w = lane; w < 128; w += 32) {
        unsigned b = sraw[w];
        while (b) {
            const int e = 32 * w + __ffs(b) - 1;
            b &= b - 1;
            atomicXor(&smr[e >> 5], 1u << (e & 31));
            for (int k = 1; k < 8; k++) {
                const int j = e + flat_off(g, k);
                if (j < n && ((flat_corners(g, r0, j) >> k) & 1)) atomicXor(&smr[j >> 5], 1u << (j & 31));
            }
        }
    }
    __syncwarp();
}
