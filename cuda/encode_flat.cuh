// The flat walk (enc_flat) and the raw mask of a walked flat tile (flat
// tiles: FORMAT.md 3.1, flat.cuh). Included by encode_warp.cuh.

#include "flat.cuh"

// The walk of a full flat tile without holes (PERF.md v26), in element
// (= slot) order as the rank-1 walk (enc_fast1): word w holds elements
// 32w .. 32w + 31, lane l element 32w + l, eight words a step, codes into
// the plane buffer by transposes. d = Dz Dy Dx q with the differences from:
//   A = q - q(x - 1): a shuffle, lane 0 from the word before (carry);
//   B = A - A(y - 1): A of element e - fnx, one or two words back
//       (fnx in 32 .. 64): one shuffle of the last two words' A, the
//       sender picking the word (FlatLane::send1);
//   d = B - B(z - 1): B of element e - fP from a ring of 2048 in the
//       warp's scratch (the slow path's code space, SC_CODE, which the walk
//       does not use; q's holds the escapes' residuals), written fP
//       elements before (256 <= fP < 2048: a step ago or more, and not yet
//       overwritten), loaded with the step's values.
// Elements before the run count as q = 0 (FORMAT.md 3.1); x > 0 and y > 0
// (r >= fnx, r the in-plane position) are followed lane by lane. A first
// walk by in-plane chunks with the plane inner (registers only, runs ORed
// in at unaligned slots) cost ~200 thread-instructions a value and
// compressed era5 at 316 GB/s against its box tiles' 421 (call 3).
// Returns false at the first hole (the slow path takes the tile).
__device__ __forceinline__ bool flat_walkable(const Geo &g) {
    return g.fnx >= 32 && g.fnx <= 64 && g.fP >= 256 && g.fP < 2048;
}

template <typename T, int V>
__device__ __forceinline__ bool enc_flat(const T *__restrict__ src, const Geo &g, unsigned long long i0,
                                         double inv, double step, double eb, int has_fill,
                                         unsigned long long fill_bits, unsigned *pw, int *sq, unsigned *sesc,
                                         unsigned *sraw, int lane, TileSum &ts) {
    const unsigned F = 0xffffffffu;
    const unsigned P = g.fP;
    FlatLane fl(g, i0, lane);
    const T *p0 = src + i0 + lane;
    int *ring = (int *)((unsigned char *)sq - SC_Q + SC_CODE);  // B of element e at e % 2048 (L2)
    int carry = 0, A1 = 0, A2 = 0;
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
#pragma unroll 1
    for (int w0 = 0; w0 < 128; w0 += 8) {
        T v[8];
        int bz[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int e = 32 * (w0 + u) + lane;
            v[u] = __ldcs(p0 + 32 * (w0 + u));
            bz[u] = e >= (int)P ? __ldcg(ring + ((e - (int)P) & 2047)) : 0;
        }
        unsigned c[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int e = 32 * (w0 + u) + lane;
            bool raw;
            const int q = W.quant(v[u], raw);
            int qx = __shfl_up_sync(F, q, 1);
            if (lane == 0) qx = carry;
            carry = __shfl_sync(F, q, 31);
            const int A = (int)((unsigned)q - (unsigned)(fl.hx() ? qx : 0));
            const int ay = __shfl_sync(F, fl.send1 ? A1 : A2, fl.ys);
            A2 = A1;
            A1 = A;
            const int B = (int)((unsigned)A - (unsigned)(fl.hy() ? ay : 0));
            __stcg(ring + (e & 2047), B);
            const int d = (int)((unsigned)B - (unsigned)bz[u]);
            c[u] = W.code(d, q, raw, w0 + u == 0, e);
            fl.next();
        }
        unsigned t[4];
#pragma unroll
        for (int u = 0; u < 4; u++) t[u] = c[2 * u] | c[2 * u + 1] << 16;
        transpose32n<4>(t, lane);
#pragma unroll
        for (int u = 0; u < 4; u++) put_planes(pw, t[u], w0 + 2 * u, w0 + 2 * u + 1, lane);
        if (!W.clean()) return false;
        __syncwarp();  // the step's B stores before a later step's loads
    }
    W.done(ts);
#ifdef EMU_FLAT_TAKEN
    EMU_FLAT_TAKEN;  // tools/encode_warp_emu.cpp counts the tiles taken
#endif
    return true;
}

// enc_flat for f32 tiles with the staged walks' quantize (quant_f32,
// encode_rank3.cuh): the check's difference in f32, exact there, folded
// into a float max per step, so that the raw test (e > ebf) and the tile's
// largest error are taken once per eight words and per value only in the
// rare steps with a raw value; escapes by one vote a step (v49, v50).
// Fill values (has_fill) are holes: the slow path takes the tile.
// FLAT false: a full rank-1 tile (FORMAT.md: d = q - q(x - 1), no y or z
// neighbours), the same walk without the y shuffle and the z ring; the
// rank-1 kernel takes it for f32 fields without a fill value (v30; enc_fast1
// before, with FastWalk's f64 check a value).
// Measured and not kept (H200, era5 flat, PERF.md v27): the values loaded a
// step ahead, compress -2 %; the escapes taken once a step with their
// residuals in registers of their own, -5 % (nvcc 11.8: 128 registers and a
// 16-byte spill, from 125 and none). v49 keeps them in the code registers
// instead (flat tiles: +4-6 %), v50 in rank 1 too.
template <int V, bool FLAT = true>
__device__ __forceinline__ bool enc_flat32(const float *__restrict__ src, const Geo &g, unsigned long long i0,
                                           double inv, double step, float ebf, int has_fill, unsigned fill32,
                                           unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw, int lane,
                                           TileSum &ts) {
    const unsigned F = 0xffffffffu;
    const unsigned P = FLAT ? g.fP : 0u;
    std::conditional_t<FLAT, FlatLane, Rank1Lane> fl(g, i0, lane);
    const float *p0 = src + i0 + lane;
    int *ring = (int *)((unsigned char *)sq - SC_Q + SC_CODE);
    int carry = 0, A1 = 0, A2 = 0, oq = 0;  // oq: lane 0's q of element 0
    unsigned nesc = 0, nraw = 0;
    float merr = 0.0f;  // the largest |x - x'| of the values that keep their q and pass
#pragma unroll 1
    for (int w0 = 0; w0 < 128; w0 += 8) {
        float v[8], ev[8];
        int bz[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int e = 32 * (w0 + u) + lane;
            v[u] = __ldcs(p0 + 32 * (w0 + u));
            bz[u] = FLAT && e >= (int)P ? __ldcg(ring + ((e - (int)P) & 2047)) : 0;
        }
        // FLAT: this step's eight words of the ring, 32 (w0 % 64) + lane +
        // 32 u: no wrap inside a step (w0 % 8 == 0), so each store takes an
        // immediate offset from one address a step (v50: era5 compress
        // 1.03-1.05x; nvcc 11.8's step loop 751 -> 729 instructions)
        int *const rstep = ring + ((32 * w0 + lane) & 2047);
        unsigned c[8];      // the codes (an escape's residual until the step's end)
        unsigned escm = 0;  // bit u: word u's value is an escape
        bool hole = false;
        float em = 0.0f;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            bool h;
            float eu = 0.0f;
            const int q = quant_f32(v[u], inv, step, eu, h);
            ev[u] = eu;
            em = fmaxf(em, eu);
            hole |= h || (has_fill && __float_as_uint(v[u]) == fill32);
            int qx = __shfl_up_sync(F, q, 1);
            if (lane == 0) qx = carry;
            carry = __shfl_sync(F, q, 31);
            const int A = (int)((unsigned)q - (unsigned)(fl.hx() ? qx : 0));
            int d = A;
            if constexpr (FLAT) {
                const int ay = __shfl_sync(F, fl.send1 ? A1 : A2, fl.ys);
                A2 = A1;
                A1 = A;
                const int B = (int)((unsigned)A - (unsigned)(fl.hy() ? ay : 0));
                __stcg(rstep + 32 * u, B);
                d = (int)((unsigned)B - (unsigned)bz[u]);
            }
            // Element 0's code 0 and origin by selects (lane 0's oq,
            // broadcast after the walk), and an escape's residual kept in
            // c[u] until the step's end, so that no branch splits the
            // step's eight words: nvcc interleaves their chains only within
            // one block (PERF.md v49: era5 compress 1.04-1.06x; v50: rank 1
            // too, hyg 1.02-1.12x, with its kernel at 2 blocks a SM, where
            // at 3 (80 registers) this spilled and lost).
            bool esc;
            const unsigned cu = code_of<V>(d, esc);
            const bool e0 = u == 0 && w0 == 0 && lane == 0;
            if (u == 0) oq = e0 ? q : oq;
            esc = esc && !e0;
            c[u] = esc ? (unsigned)d : e0 ? 0u : cu;
            escm |= (unsigned)esc << u;
            fl.next();
        }
        if (__any_sync(F, hole)) return false;
        if (__any_sync(F, escm != 0)) {  // escapes in this step (rare)
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const bool esc = (escm >> u) & 1u;
                nesc += __popc(__ballot_sync(F, esc));
                note_rare(esc, false, (int)c[u], 32 * (w0 + u) + lane, sq, sesc, sraw);
                if (esc) c[u] = 0x8000u;
            }
        }
        if (__any_sync(F, em > ebf)) {  // a raw value (keeps its q) in this step
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const bool raw = ev[u] > ebf;
                if (raw) note_rare(false, true, 0, 32 * (w0 + u) + lane, sq, sesc, sraw);
                else merr = fmaxf(merr, ev[u]);
                nraw += __popc(__ballot_sync(F, raw));
            }
        } else
            merr = fmaxf(merr, em);
        unsigned t[4];
#pragma unroll
        for (int u = 0; u < 4; u++) t[u] = c[2 * u] | c[2 * u + 1] << 16;
        transpose32n<4>(t, lane);
#pragma unroll
        for (int u = 0; u < 4; u++) put_planes(pw, t[u], w0 + 2 * u, w0 + 2 * u + 1, lane);
        if (FLAT) __syncwarp();  // the step's B stores before a later step's loads
    }
    ts.nesc = nesc;
    ts.nraw = nraw;
    ts.origin = __shfl_sync(F, oq, 0);
    ts.merr = (double)merr;
#ifdef EMU_FLAT_TAKEN
    EMU_FLAT_TAKEN;
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
