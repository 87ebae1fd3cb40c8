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
// What it writes is what enc_slow writes for such a tile, so step 4
// (slow_planes) and the tile writer take either: codes at their slots
// (slots past n zero up to slot_pairs(n)), the escape bitmap and each
// escape's residual in q's scratch (the escape list reads them), the raw
// values' bits in the element-order raw bitmap, and the fill and raw masks.
// The masks are built in the walk (v37): the parity transform of a bitmap
// is its Lorenzo step in XOR, so each step's ballot of the fill (raw) flags
// is XORed with the row above (the same word shifted by one row, or the
// step before's last row) and then with itself one column over, and that
// word with the same step's word of plane z - 1 (kept in the plane buffer);
// a lane whose bit is set sets its slot's mask bit. Until v36 the masks came
// after the walk from a byte of flags per element, eight byte loads, two
// divisions and the slot per element and mask: on coads (a fill value in
// most clipped tiles) a third of the kernel's instructions and nearly half
// its stall samples (ncu, v37 call 1). Holes (fill, NaN, Inf, |s| >= 2^28)
// take their z-plane's placeholder, which needs a pass of its own here (the
// row walk codes rows of a plane before it has read the whole plane): a
// field with a fill value gets that pass first (counts, placeholders),
// and the walk recomputes q. Without a fill value holes are rare: the walk
// returns false at the first group of four rows with one, and the caller
// runs enc_slow, which rewrites all of the scratch the rows wrote.
// f32 values take the f32 check (the f32 difference of x and x' is exact:
// encode_common.cuh's quant_e32), which saves the f64 difference, its
// compare and the f64 max per value.
#ifndef ENC_ROWS3_MIN_LX
#define ENC_ROWS3_MIN_LX 1  // the narrowest box it takes; 33: none (A/B)
#endif

// Quantize + check of one value for the row walk: q; hole for a value
// without q (|s| >= 2^28, NaN, Inf; the fill value is the caller's test);
// raw when the check fails (meaningless for a hole); e the error. f32: the
// difference in f32, exact (quant_e32), so e <= eb exactly when e <= ebf.
__device__ __forceinline__ int rows_quant(float x, double inv, double step, double eb, float ebf, bool &hole,
                                          bool &raw, float &e) {
    const int q = quant_e32(x, inv, step, e, hole);
    raw = !(e <= ebf);
    return q;
}
__device__ __forceinline__ int rows_quant(double x, double inv, double step, double eb, float ebf, bool &hole,
                                          bool &raw, double &e) {
    int q;
    hole = quant1<double>(x, inv, step, eb, 0, 0ull, q, e, raw);
    return q;
}

// One step's word of a flag bitmap (lane (s, x): row s, column x; W lanes a
// row) after the x and y steps of the parity transform: XORed with the row
// above (row s - 1 of the word, or for s = 0 the last row of prev, the step
// before's word) and then with itself one column over (not across a row's
// start: rs has the bits of x = 0).
__device__ __forceinline__ unsigned rows_parity2(unsigned b, unsigned prev, int W, unsigned rs) {
    const unsigned v = b ^ (W == 32 ? prev : b << W | prev >> (32 - W));
    return v ^ (v << 1 & ~rs);
}

// CNT: the field has a fill value (the first pass runs); known at compile
// time, so that each walk's registers are allocated for its own path.
template <typename T, int V, bool CNT>
__device__ __forceinline__ bool enc_rows3(const T *__restrict__ src, const Geo &g, unsigned long long z0,
                                          unsigned long long y0, unsigned long long x0, int lz, int ly, int lx,
                                          double inv, double step, double eb, float ebf, unsigned long long fill_bits,
                                          unsigned *pw, unsigned char *sc, int lane, TileSum &ts) {
    typedef typename std::conditional<sizeof(T) == 4, float, double>::type E;  // rows_quant's error
    const unsigned F = 0xffffffffu;
    int *sq = (int *)(sc + SC_Q);
    unsigned short *scode = (unsigned short *)(sc + SC_CODE);
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    unsigned *smf = (unsigned *)(sc + SC_MF), *smr = (unsigned *)(sc + SC_MR);
    const int n = lz * ly * lx;
    // Rows side by side: W lanes a row (the power of two from lx up), R =
    // 32 / W rows a step; lane (s, x) takes column x of row s of each step.
    const int W = lx > 16 ? 32 : lx > 8 ? 16 : lx > 4 ? 8 : lx > 2 ? 4 : lx > 1 ? 2 : 1, R = 32 / W;
    const int s = lane / W, x = lane & (W - 1);
    const bool xin = x < lx;
    const unsigned rs = W == 32 ? 1u : 0xffffffffu / ((1u << W) - 1u);  // the bits of the rows' x = 0
    // The masks' words after the x and y steps, per plane parity: fill at
    // mwd[32 (z % 2) + i], raw at mwd[32 (z % 2) + 16 + i] for step i of the
    // plane (at most 16: ly <= 16 rows, R a step). Past the rows of q.
    unsigned *const mwd = pw + 16 * 32;
    // (the masks, smf and smr, are zero: the caller clears them after each
    // tile that used them, so that tiles without fill or raw values, most of
    // a field without a fill value, pay no stores for them)
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
    }
    for (int i = lane; i < 64; i += 32) mwd[i] = 0;
    for (int i = lane; i < 8 * slot_pairs(n); i += 32) ((uint4 *)scode)[i] = make_uint4(0, 0, 0, 0);
    __syncwarp();
    const T *col = src + (z0 * g.ny + y0 + s) * g.nx + x0 + (xin ? x : 0);
    const unsigned long long plane = g.ny * g.nx;
    unsigned nesc = 0, NR = 0, NF = 0;
    int origin = 0, ph = 0;
    E merr = 0;
    // f32: the walk reads each z-plane of the box from the plane buffer, where
    // cp.async staged it one plane ahead (two buffers of 16 x 32 words past
    // qz and the mask words; row y at word 32 (y / R) + W (y % R), so a
    // step's rows are 32 consecutive words, one per lane, and lane (s, x)
    // copies the rows it reads). Read straight from global memory, the
    // step's four loads waited each time for L2: ncu on era5 (v39 call 1),
    // the loads 10 % of the kernel's instructions and the quantize that
    // waits for them ~18 % of its stall samples (long scoreboard). f64
    // values would not fit: they are read from global memory. H200 (v39
    // call 2, against the loads): compress coads 1.09x, era5 1.03-1.04x,
    // levitus and plot3d_post 1.01x.
    constexpr bool STG = sizeof(T) == 4;
    const unsigned sbuf = STG ? (unsigned)__cvta_generic_to_shared(pw + 16 * 32 + 64) + 4u * lane : 0u;
    const float *const vbuf = (const float *)(pw + 16 * 32 + 64) + lane;
    const unsigned long long rstep = (unsigned long long)R * g.nx;  // a lane's rows in global memory
    auto stage = [&](int z) {  // plane z into buffer z % 2, one commit group
        if (xin) {
            const T *p = col + z * plane;
            unsigned d = sbuf + 4u * 512u * (z & 1);
#pragma unroll 1
            for (int y = s; y < ly; y += R, p += rstep, d += 128u) cp_async4(d, p);
        }
        cp_async_commit();
    };
    // A field with a fill value (its tiles often hold some): first a pass
    // for the counts, the error and the placeholders, as enc_slow's step 1;
    // the walk then gives holes their z-plane's placeholder (lane z holds
    // plane z's, phl). Without one, holes (NaN, Inf, |s| >= 2^28) are rare:
    // the walk returns at the first.
    constexpr bool counted = CNT;
    int phl = 0;
    if (counted) {
        unsigned nfill = 0, nraw = 0;
        long long psum = 0;  // lane z: plane z's sum of q and count (lz <= 8)
        unsigned pcnt = 0;
        // (read from global memory: staged as the walk is, the pass gained
        // nothing on coads, 0.99x against the walk's staging alone; v39 call 2)
#pragma unroll 1
        for (int z = 0; z < lz; z++) {
            const T *p = col + z * plane;
            long long sum = 0;
            unsigned cnt = 0;
#pragma unroll 1
            for (int yb = 0; yb < ly; yb += 4 * R) {
                T v[4];
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (yb + u * R + s < ly && xin) v[u] = p[(unsigned long long)(yb + u * R) * g.nx];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    if (yb + u * R + s >= ly || !xin) continue;
                    if (Bits<T>::of(v[u]) == fill_bits) {
                        nfill++;
                        continue;
                    }
                    bool hole, raw;
                    E er;
                    const int q = rows_quant(v[u], inv, step, eb, ebf, hole, raw, er);
                    if (hole) {
                        nraw++;
                    } else {
                        sum += q;
                        cnt++;
                        if (raw)
                            nraw++;
                        else
                            merr = er > merr ? er : merr;
                    }
                }
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(F, sum, o);
            cnt = __reduce_add_sync(F, cnt);
            if (lane == z) {
                psum = sum;
                pcnt = cnt;
            }
        }
        NR = __reduce_add_sync(F, nraw);
        NF = __reduce_add_sync(F, nfill);
        phl = plane_placeholders(psum, pcnt, lane);  // holes take their z-plane's (lz <= 8 lanes)
    }
    unsigned nraw = 0;
    unsigned on = 0;  // bit 0: a fill value seen, bit 1: a raw value (the masks' words are 0 before)
    unsigned *qz = pw + x;  // q of (z - 1, y, x) at qz[32 y]
    if constexpr (STG) stage(0);
#pragma unroll 1
    for (int z = 0; z < lz; z++) {
        const T *p = col + z * plane;
        if (counted) ph = __shfl_sync(F, phl, z);
        if constexpr (STG) {
            if (z + 1 < lz) {
                stage(z + 1);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncwarp();
        }
        unsigned tp = 0;            // t of (z, y - 1, x) for the step's first row
        unsigned fprev = 0, rprev = 0;  // the step before's flag words
        const unsigned *const mz = mwd + 32 * ((z - 1) & 1);  // plane z - 1's mask words
        unsigned *const mo = mwd + 32 * (z & 1);
        int i = 0;  // the plane's step
#pragma unroll 1
        for (int yb = 0; yb < ly; yb += 4 * R) {
            T v[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (yb + u * R + s < ly && xin)  // (i = yb / R)
                    v[u] = STG ? (T)vbuf[512 * (z & 1) + 32 * (i + u)] : p[(unsigned long long)(yb + u * R) * g.nx];
            int q[4];
            bool raw[4], fill[4], hole = false;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                q[u] = 0;
                raw[u] = fill[u] = false;
                if (yb + u * R + s < ly && xin) {
                    E er;
                    bool h;
                    q[u] = rows_quant(v[u], inv, step, eb, ebf, h, raw[u], er);
                    if (counted) {
                        fill[u] = Bits<T>::of(v[u]) == fill_bits;
                        raw[u] = !fill[u] && (h || raw[u]);  // a hole that is not fill is raw
                        if (h || fill[u]) q[u] = ph;
                    } else {
                        hole |= h;
                        if (!raw[u]) merr = er > merr ? er : merr;
                    }
                }
            }
            if (!counted && __any_sync(F, hole)) {
                if (STG) cp_async_wait<0>();  // nothing may land in the buffer after the slow path starts
                return false;
            }
#pragma unroll
            for (int u = 0; u < 4; u++, i++) {
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
                // the masks: this step's flag words after the x and y
                // steps, XORed with plane z - 1's
                const unsigned bf = counted ? __ballot_sync(F, fill[u]) : 0u, br = __ballot_sync(F, raw[u]);
                on |= (bf ? 1u : 0u) | (br ? 2u : 0u);
                unsigned mf = 0, mr = 0;
                // a step without flags in its word, the step before's and
                // plane z - 1's word has mask words of 0 (one uniform test)
                if (on & 1u) {
                    const unsigned mzf = z ? mz[i] : 0u;
                    unsigned p2 = 0;
                    if (bf | fprev | mzf) {
                        p2 = rows_parity2(bf, fprev, W, rs);
                        mf = p2 ^ mzf;
                    }
                    if (lane == 0) mo[i] = p2;
                }
                if (on & 2u) {
                    const unsigned mzr = z ? mz[16 + i] : 0u;
                    unsigned p2 = 0;
                    if (br | rprev | mzr) {
                        p2 = rows_parity2(br, rprev, W, rs);
                        mr = p2 ^ mzr;
                    }
                    if (lane == 0) mo[16 + i] = p2;
                }
                fprev = bf;
                rprev = br;
                if (in) {
                    const int e = (z * ly + y) * lx + x;
                    if (raw[u]) {
                        nraw++;
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
                    const int sl = slot_std<3>(z, y, x, lz, ly, lx, g);
                    scode[sl] = (unsigned short)c;
                    if (mf | mr) {  // the same for every lane
                        if ((mf >> lane) & 1u) atomicOr(&smf[sl >> 5], 1u << (sl & 31));
                        if ((mr >> lane) & 1u) atomicOr(&smr[sl >> 5], 1u << (sl & 31));
                    }
                }
            }
        }
        __syncwarp();  // plane z's mask words are read by plane z + 1, and overwritten by z + 2
    }
    if (!counted) NR = __reduce_add_sync(F, nraw);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const E m2 = __shfl_xor_sync(F, merr, o);
        merr = m2 > merr ? m2 : merr;
    }
    // the planes overwrite qz and the mask words
    __syncwarp();
    slow_planes(n, pw, sc, lane);
    ts.origin = __shfl_sync(F, origin, 0);
    ts.nesc = __reduce_add_sync(F, nesc);
    ts.nraw = NR;
    ts.nfill = NF;
    ts.merr = (double)merr;
#ifdef EMU_ROWS3_TAKEN
    EMU_ROWS3_TAKEN;  // tools/encode_clipped_emu.cpp counts the tiles taken
#endif
    return true;
}
