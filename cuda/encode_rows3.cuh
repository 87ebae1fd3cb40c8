// The row walk for clipped rank-3 tiles (enc_rows3), taken by
// encode_clipped_kernel (PCT) before the slow path. Included by
// encode_warp.cuh after encode_slow.cuh.
//
// Why (cuda/PERF.md v24): with PCT the clipped tiles no longer hold the
// scanner, so what they cost is their throughput, and the slow path pays
// about 280 thread-instructions a value on era5 (ncu: 466 us for its 37 %
// of values against 193 us for the full tiles' walk), latency-bound on its
// global scratch (L1 hit 48 %): per element two multiply-high divisions for
// its coordinates, q and a flag stored, then eight loads of q for the
// Lorenzo step. Here the warp walks the box by rows, as the staged walk
// does, with rows side by side where lx <= 16 (two 16-lane rows a step, or
// four of 8 lanes...: W lanes a row, W the power of two from lx up, so at
// least half the lanes hold a column), and quantize and Lorenzo are one
// pass: the row above by a shuffle (or a register, from the step before),
// x - 1 by one shuffle, and q of plane z - 1 from the warp's plane buffer
// (unused until the planes are built; 16 rows x 32 columns), so nothing of
// q goes through the scratch. (enc_box3, v23, walked one row a step and
// kept q in the scratch, two passes: in the warp encoder, where the tile's
// latency held the scanner, it lost on levitus' 8-wide edge tiles with 8
// of 32 lanes busy.) Measured (H200, PERF.md v25): against the slow path
// in this kernel, compress plot3d +15-30 %, era5 +11-13 %, coads +5 %;
// era5's clipped values still cost ~270 thread-instructions each. A flat
// walk (every lane on one element, any lx; branch flat3) lost on plot3d.
//
// What it writes is what enc_slow writes for such a tile, so steps 3-4
// (slow_masks_planes) and the tile writer take either: codes at their slots
// (slots past n zero up to slot_pairs(n)), the escape bitmap and each
// escape's residual in q's scratch (the escape list reads them), and for a
// value that fails the check (raw, keeps its q: FORMAT.md 4.3) its raw bit
// and flag 5 (the masks' transforms read flag bits 2 and 4: without a fill
// value the other flags stay 0). Holes (fill, NaN, Inf, |s| >= 2^28) take the placeholder, the
// mean of the tile's q, which needs a pass of its own: a field with a fill
// value gets that pass first (flags, counts, placeholder, as enc_slow's
// step 1), and the walk recomputes q. Without a fill value holes are rare:
// the walk returns false at the first group of four rows with one, and the
// caller runs enc_slow, which rewrites all of the scratch the rows wrote.
#ifndef ENC_ROWS3_MIN_LX
#define ENC_ROWS3_MIN_LX 1  // the narrowest box it takes; 33: none (A/B)
#endif

template <typename T, int V>
__device__ __forceinline__ bool enc_rows3(const T *__restrict__ src, const Geo &g, unsigned long long z0,
                                          unsigned long long y0, unsigned long long x0, int lz, int ly, int lx,
                                          double inv, double step, double eb, int has_fill,
                                          unsigned long long fill_bits, unsigned *pw, unsigned char *sc, int lane,
                                          TileSum &ts) {
    const unsigned F = 0xffffffffu;
    int *sq = (int *)(sc + SC_Q);
    unsigned short *scode = (unsigned short *)(sc + SC_CODE);
    unsigned char *sfl = sc + SC_FL;
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    const int n = lz * ly * lx;
    // Rows side by side: W lanes a row (the power of two from lx up), R =
    // 32 / W rows a step; lane (s, x) takes column x of row s of each step.
    const int W = lx > 16 ? 32 : lx > 8 ? 16 : lx > 4 ? 8 : lx > 2 ? 4 : lx > 1 ? 2 : 1, R = 32 / W;
    const int s = lane / W, x = lane & (W - 1);
    const bool xin = x < lx;
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
    }
    for (int i = lane; i < 8 * slot_pairs(n); i += 32) ((uint4 *)scode)[i] = make_uint4(0, 0, 0, 0);
    for (int i = lane; i < (n + 15) / 16; i += 32) ((uint4 *)sfl)[i] = make_uint4(0, 0, 0, 0);
    __syncwarp();
    const T *col = src + (z0 * g.ny + y0 + s) * g.nx + x0 + (xin ? x : 0);
    const unsigned long long plane = g.ny * g.nx;
    unsigned nraw = 0, nesc = 0, NR = 0, NF = 0;
    int origin = 0, ph = 0;
    double merr = 0;
    // A field with a fill value (its tiles often hold some): first a pass
    // for the flags, the counts, the error and the placeholder, as enc_slow's
    // step 1; the walk then gives holes the placeholder. Without one, holes
    // (NaN, Inf, |s| >= 2^28) are rare: the walk returns at the first.
    const bool counted = has_fill;
    if (counted) {
        unsigned nfill = 0, cnt = 0;
        long long sum = 0;
#pragma unroll 1
        for (int z = 0; z < lz; z++) {
            const T *p = col + z * plane;
#pragma unroll 1
            for (int yb = 0; yb < ly; yb += 4 * R) {
                T v[4];
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (yb + u * R + s < ly && xin) v[u] = p[(unsigned long long)(yb + u * R) * g.nx];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    if (yb + u * R + s >= ly || !xin) continue;
                    const int e = (z * ly + yb + u * R + s) * lx + x;
                    unsigned char f;
                    if (Bits<T>::of(v[u]) == fill_bits) {
                        f = 2;
                        nfill++;
                    } else {
                        int q;
                        double er;
                        bool raw;
                        if (quant1<T>(v[u], inv, step, eb, 0, 0ull, q, er, raw)) {
                            f = 4;
                            nraw++;
                        } else {
                            sum += q;
                            cnt++;
                            f = raw ? 5 : 1;
                            if (raw)
                                nraw++;
                            else
                                merr = fmax(merr, er);
                        }
                    }
                    if (f & 4) atomicOr(&sraw[e >> 5], 1u << (e & 31));
                    sfl[e] = f;
                }
            }
        }
        NR = __reduce_add_sync(F, nraw);
        NF = __reduce_add_sync(F, nfill);
        const unsigned C = __reduce_add_sync(F, cnt);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(F, sum, o);
        // holes take the placeholder: trunc(mean of the tile's q)
        ph = C ? (int)(sum / (long long)C) : 0;
    }
    unsigned *qz = pw + x;  // q of (z - 1, y, x) at qz[32 y]
#pragma unroll 1
    for (int z = 0; z < lz; z++) {
        const T *p = col + z * plane;
        unsigned tp = 0;  // t of (z, y - 1, x) for the step's first row
#pragma unroll 1
        for (int yb = 0; yb < ly; yb += 4 * R) {
            T v[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (yb + u * R + s < ly && xin) v[u] = p[(unsigned long long)(yb + u * R) * g.nx];
            int q[4];
            bool raw[4], hole = false;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                q[u] = 0;
                raw[u] = false;
                if (yb + u * R + s < ly && xin) {
                    double er;
                    const bool h = quant1<T>(v[u], inv, step, eb, has_fill, fill_bits, q[u], er, raw[u]);
                    if (counted) {
                        if (h) q[u] = ph;
                    } else {
                        hole |= h;
                        if (!raw[u]) merr = fmax(merr, er);
                    }
                }
            }
            if (!counted && __any_sync(F, hole)) return false;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                if (yb + u * R >= ly) break;  // the same for every lane
                const int y = yb + u * R + s;
                const bool in = xin && y < ly;
                const unsigned qp = z && in ? qz[32 * y] : 0u;
                if (in) qz[32 * y] = (unsigned)q[u];
                // t = q - q(z - 1); w = t - t(y - 1): the row before is
                // row s - 1 of this step, or the last row of the step before
                const unsigned t = (unsigned)q[u] - qp, tu = __shfl_up_sync(F, t, W);
                const unsigned w = t - (s ? tu : tp);
                tp = __shfl_sync(F, t, (R - 1) * W + x);
                unsigned wl = __shfl_up_sync(F, w, 1);
                if (x == 0) wl = 0;
                const int d = (int)(w - wl);
                if (in) {
                    const int e = (z * ly + y) * lx + x;
                    if (!counted && raw[u]) {
                        nraw++;
                        sfl[e] = 5;
                        atomicOr(&sraw[e >> 5], 1u << (e & 31));
                    }
                    bool esc;
                    unsigned c = code_of<V>(d, esc);
                    if (e == 0) {
                        origin = q[u];
                        c = 0;
                        esc = false;
                    }
                    if (esc) {
                        nesc++;
                        sq[e] = d;
                        atomicOr(&sesc[e >> 5], 1u << (e & 31));
                    }
                    scode[slot_std<3>(z, y, x, lz, ly, lx, g)] = (unsigned short)c;
                }
            }
        }
    }
    if (!counted) NR = __reduce_add_sync(F, nraw);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) merr = fmax(merr, __shfl_xor_sync(F, merr, o));
    // the planes overwrite qz: slow_masks_planes starts with a __syncwarp
    slow_masks_planes<3>(g, lz, ly, lx, NR, NF, pw, sc, lane);
    ts.origin = __shfl_sync(F, origin, 0);
    ts.nesc = __reduce_add_sync(F, nesc);
    ts.nraw = NR;
    ts.nfill = NF;
    ts.merr = merr;
#ifdef EMU_ROWS3_TAKEN
    EMU_ROWS3_TAKEN;  // tools/encode_clipped_emu.cpp counts the tiles taken
#endif
    return true;
}
