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
// Lorenzo step. Here lane x takes column x of every row, as the staged walk
// does, and quantize and Lorenzo are one pass: the row above from a
// register, x - 1 by one shuffle, and q of plane z - 1 from the warp's
// plane buffer (unused until the planes are built; 16 rows x 32 lanes),
// so nothing of q goes through the scratch. Lanes x >= lx idle, so the
// caller takes it for lx >= ENC_ROWS3_MIN_LX only. (enc_box3, v23, walked
// rows too but kept q in the scratch, two passes: in the warp encoder,
// where the tile's latency held the scanner, it lost on levitus' 8-wide
// edge tiles.)
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
#define ENC_ROWS3_MIN_LX 16  // 33: never
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
    const bool xin = lane < lx;
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
    }
    for (int i = lane; i < 8 * slot_pairs(n); i += 32) ((uint4 *)scode)[i] = make_uint4(0, 0, 0, 0);
    for (int i = lane; i < (n + 15) / 16; i += 32) ((uint4 *)sfl)[i] = make_uint4(0, 0, 0, 0);
    __syncwarp();
    const T *col = src + (z0 * g.ny + y0) * g.nx + x0 + (xin ? lane : 0);
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
            for (int yb = 0; yb < ly; yb += 4) {
                T v[4];
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (yb + u < ly && xin) v[u] = p[(unsigned long long)(yb + u) * g.nx];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    if (yb + u >= ly || !xin) continue;
                    const int e = (z * ly + yb + u) * lx + lane;
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
    unsigned *qz = pw + lane;  // q of (z - 1, y, lane) at qz[32 y]
#pragma unroll 1
    for (int z = 0; z < lz; z++) {
        const T *p = col + z * plane;
        unsigned tp = 0;  // t of (z, y - 1, lane)
#pragma unroll 1
        for (int yb = 0; yb < ly; yb += 4) {
            T v[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (yb + u < ly && xin) v[u] = p[(unsigned long long)(yb + u) * g.nx];
            int q[4];
            bool raw[4], hole = false;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                q[u] = 0;
                raw[u] = false;
                if (yb + u < ly && xin) {
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
                const int y = yb + u;
                if (y >= ly) break;  // the same for every lane
                const unsigned qp = z ? qz[32 * y] : 0u;
                qz[32 * y] = (unsigned)q[u];
                const unsigned t = (unsigned)q[u] - qp, w = t - tp;
                tp = t;
                unsigned wl = __shfl_up_sync(F, w, 1);
                if (lane == 0) wl = 0;
                const int d = (int)(w - wl);
                if (xin) {
                    const int e = (z * ly + y) * lx + lane;
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
                    scode[slot_std<3>(z, y, lane, lz, ly, lx, g)] = (unsigned short)c;
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
