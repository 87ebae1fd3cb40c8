// The rank-3 box walk (v23, enc_box3): any tile of the standard rank-3
// shape (8 x 16 x 32, sub-blocks 4 x 4 x 8) that the staged walk does not
// take: clipped at the field's edges (era5 744x33x49: 4 of every 6 tiles),
// holes (fill values in a tile a walk gave up on, NaN, Inf, |s| >= 2^28),
// f64. It writes what enc_slow writes (the same scratch, the same codes,
// flags, masks and planes; its steps 3 and 4 are enc_slow's,
// slow_masks_planes), so the tail and the writers take either. Included by
// encode_warp.cuh after encode_slow.cuh.
//
// Why not enc_slow: enc_slow walks the box in element order, four
// elements per lane per round, each with two multiply-high divisions for
// its coordinates and seven L1 loads of its neighbours' q. A clipped tile
// cost 3-6 full tiles' time (H200: coads, whose full tiles alone ran 2.9x
// faster, and levitus 1.5x: cuda/PERF.md v23). Here lane x takes column x
// of every row, as the staged walk does: coalesced loads, no divisions,
// the row above from a register and x - 1 by one shuffle.
// 1. quantize + check, four rows at a time (their loads in flight), q and the
//    flags into the scratch in element order; then holes take the
//    placeholder, as in enc_slow;
// 2. per row, t = q - q(z - 1), u = t - t(y - 1), d = u - u(x - 1)
//    (wrapping; a neighbour outside the box is 0): d over q in element
//    order, its code at its slot, escapes recorded. Planes from the top
//    down, as enc_slow's rounds, so q(z - 1) is read before it is replaced.
template <typename T, int V>
__device__ __forceinline__ void enc_box3(const T *__restrict__ src, const Geo &g, unsigned long long z0, unsigned long long y0,
                         unsigned long long x0, int lz, int ly, int lx, double inv, double step, double eb,
                         int has_fill, unsigned long long fill_bits, unsigned *pw, unsigned char *sc, int lane,
                         TileSum &ts) {
    const unsigned F = 0xffffffffu;
    int *sq = (int *)(sc + SC_Q);
    unsigned short *scode = (unsigned short *)(sc + SC_CODE);
    unsigned char *sfl = sc + SC_FL;
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    const int n = lz * ly * lx;
    const bool xin = lane < lx;
    // a fast path may have set bits before it gave up
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
    }
    // slots >= n that slow_masks_planes reads are 0
    for (int i = lane; i < 8 * slot_pairs(n); i += 32) ((uint4 *)scode)[i] = make_uint4(0, 0, 0, 0);
    __syncwarp();
    // 1. quantize + check
    unsigned nraw = 0, nfill = 0, cnt = 0;
    long long sum = 0;
    double merr = 0;
    const T *col = src + (z0 * g.ny + y0) * g.nx + x0 + lane;
    const unsigned long long plane = g.ny * g.nx;
#pragma unroll 1
    for (int z = 0; z < lz; z++) {
        const T *p = col + z * plane;
#pragma unroll 1
        for (int y0 = 0; y0 < ly; y0 += 4) {
            T v[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (y0 + u < ly && xin) v[u] = p[(unsigned long long)(y0 + u) * g.nx];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                if (y0 + u >= ly || !xin) continue;
                const int e = (z * ly + y0 + u) * lx + lane;
                unsigned char f = 0;
                int q = 0;
                if (has_fill && Bits<T>::of(v[u]) == fill_bits) {
                    f = 2;
                    nfill++;
                } else {
                    const double sv = __dmul_rn((double)v[u], inv);
                    if (!(fabs(sv) < 268435456.0)) {
                        f = 4;
                        nraw++;
                    } else {
                        double er;
                        q = quant_q<T>(v[u], sv, step, er);
                        f = 1;
                        sum += q;
                        cnt++;
                        if (!(er <= eb)) {
                            f = 5;
                            nraw++;
                        } else {
                            merr = fmax(merr, er);
                        }
                    }
                }
                if (f & 4) atomicOr(&sraw[e >> 5], 1u << (e & 31));
                sq[e] = q;
                sfl[e] = f;
            }
        }
    }
    const unsigned NR = __reduce_add_sync(F, nraw);
    const unsigned NF = __reduce_add_sync(F, nfill);
    const unsigned C = __reduce_add_sync(F, cnt);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(F, sum, o);
        merr = fmax(merr, __shfl_xor_sync(F, merr, o));
    }
    __syncwarp();
    if (NR | NF) {
        // holes take the placeholder: trunc(mean of the tile's q)
        const int ph = C ? (int)(sum / (long long)C) : 0;
        for (int e = lane; e < n; e += 32)
            if (!(sfl[e] & 1)) sq[e] = ph;
    }
    __syncwarp();
    ts.origin = sq[0];
    // 2. Lorenzo + codes: each lane reads and overwrites only its own
    //    elements, so no barrier is needed between rows
    unsigned nesc = 0;
    // Planes from the top down: plane z - 1 still holds q while plane z is
    // coded; within a plane the row above comes from a register (tp).
    const int P = ly * lx;
#pragma unroll 1
    for (int z = lz - 1; z >= 0; z--) {
        unsigned tp = 0;  // t of (z, y - 1, lane)
#pragma unroll 4
        for (int y = 0; y < ly; y++) {
            const int e = (z * ly + y) * lx + lane;
            const unsigned q = xin ? (unsigned)sq[e] : 0u, qz = xin && z ? (unsigned)sq[e - P] : 0u;
            const unsigned t = q - qz;
            const unsigned u = t - tp;
            tp = t;
            unsigned ul = __shfl_up_sync(F, u, 1);
            if (lane == 0) ul = 0;
            const int d = (int)(u - ul);
            if (xin) {
                sq[e] = d;
                bool esc;
                unsigned c = code_of<V>(d, esc);
                if (e == 0) {
                    c = 0;
                    esc = false;
                }
                if (esc) {
                    sfl[e] |= 8;
                    nesc++;
                    atomicOr(&sesc[e >> 5], 1u << (e & 31));
                }
                scode[slot_std<3>(z, y, lane, lz, ly, lx, g)] = (unsigned short)c;
            }
        }
    }
    slow_masks_planes<3>(g, lz, ly, lx, NR, NF, pw, sc, lane);
    ts.nesc = __reduce_add_sync(F, nesc);
    ts.nraw = NR;
    ts.nfill = NF;
    ts.merr = merr;
}
