// The box walk (v20): the warp encoder's walk for every rank-3 tile the hot
// walks do not take, i.e. tiles clipped at the field's edges (any lz, ly,
// lx) and tiles with holes (fill, NaN, Inf, |s| >= 2^28), f32 and f64.
// Included by encode_warp.cuh.
//
// Before v20 those tiles took enc_slow (per-element divisions, q, flags and
// codes through global scratch, a pass per stage, atomics per mask bit),
// and fields whose tiles were mostly clipped (era5 744x33x49: 4 of 6 tiles
// per z-slab) were handed to the v5 block encoder instead.
//
// Lane x owns column x of the box (lanes >= lx idle, q = 0 there, which is
// the Lorenzo predictor's zero outside the box). Per z-plane the 16 rows
// are quantized as a column, Dy is taken in registers, Dz against one
// carried register per row, Dx by one shuffle, as in enc_fast3, but without
// staging (the tile was prefetched into L2), with groups of 4 rows skipped
// where the box ends (ly = 1 tiles cost one group, not four).
// Codes go, 16 bits each, into the warp's plane buffer at their slot
// (FORMAT.md section 3: a clipped tile's slots are the full tile's slot
// order with the slots outside the box removed); after the walk each lane
// takes its 64 code pairs into registers and 32 transposes turn them into
// the bit planes in the same buffer.
// Holes need the tile's placeholder p (the mean of the tile's q), known
// only after the walk: the first pass uses p = 0 and also collects the sum;
// a tile with holes and p != 0 is walked again for its codes and escapes
// (the masks and raw values of the first pass stand: they do not depend on
// p). Fill and raw masks (parity Lorenzo of the element bitmaps) come from
// one 16-bit column mask per lane and plane: Dy by a shift, Dz against the
// previous plane's, Dx by one shuffle; only their set bits are placed, with
// atomics (land-mask corners are few).

// u16 index of slot s in the warp's code buffer (the plane buffer pw).
// The codes of slots 64m + l and 64m + 32 + l share a word, so that one
// 32-bit load gives lane l its transpose input for word pair m; pair m
// sits in plane row m % 16, words 32 (m / 16) + l: exactly where the planes
// of word pairs 16 (m / 16) .. 16 (m / 16) + 15 go (put_planes keeps a word
// inside its aligned group of 32), so the planes can replace the codes a
// quarter at a time with 16 registers a lane. Words 128-131 of each row
// (the parked tile's state in row 0) are not touched.
__device__ __forceinline__ int box_code_at(int s) {
    const int m = s >> 6;
    return 2 * ((m & 15) * PW_STRIDE + 32 * (m >> 4) + (s & 31)) + ((s >> 5) & 1);
}

// Quantize + check of one value (FORMAT.md section 4): q; noq for
// |s| >= 2^28, NaN, Inf; bad for a failed check. For f32 the check's
// difference is taken in f32, where it is exact (quant_f32 says why), and
// compared with ebf, the largest float <= eb: one conversion less.
__device__ __forceinline__ int box_quant(float x, double inv, double step, double eb, float ebf, bool &noq,
                                         bool &bad, float &er) {
    const double s = __dmul_rn((double)x, inv);
    noq = !(fabs(s) < 268435456.0);
    const double sr = __dadd_rn(s, 6755399441055744.0);
    const double qd = __dsub_rn(sr, 6755399441055744.0);
    er = fabsf(__fsub_rn(x, __double2float_rn(__dmul_rn(qd, step))));
    bad = !(er <= ebf);
    return __double2loint(sr);
}
__device__ __forceinline__ int box_quant(double x, double inv, double step, double eb, float ebf, bool &noq,
                                         bool &bad, double &er) {
    const double s = __dmul_rn(x, inv);
    noq = !(fabs(s) < 268435456.0);
    const int q = quant_q<double>(x, s, step, er);
    bad = !(er <= eb);
    return q;
}

// Zeroes the code buffer: slots without an element hold code 0.
__device__ __forceinline__ void box_clear(unsigned *pw, int lane) {
#pragma unroll 1
    for (int i = lane; i < 512; i += 32) ((uint4 *)pw)[(i >> 5) * (PW_STRIDE / 4) + (i & 31)] = make_uint4(0, 0, 0, 0);
}

// The code buffer to bit planes, a quarter (16 word pairs) at a time: the
// pairs' codes into registers, then 4 x 4 transposes over them.
__device__ __forceinline__ void box_to_planes(unsigned *pw, int lane) {
    __syncwarp();
#pragma unroll 1
    for (int h = 0; h < 4; h++) {
        const unsigned *const cw = pw + 32 * h + lane;
        unsigned c[16];
#pragma unroll
        for (int m = 0; m < 16; m++) c[m] = cw[m * PW_STRIDE];
        __syncwarp();
#pragma unroll
        for (int m = 0; m < 16; m += 4) {
            unsigned t[4] = {c[m], c[m + 1], c[m + 2], c[m + 3]};
            transpose32n<4>(t, lane);
            const int w = 2 * (16 * h + m);
#pragma unroll
            for (int u = 0; u < 4; u++) put_planes(pw, t[u], w + 2 * u, w + 2 * u + 1, lane);
        }
        __syncwarp();
    }
}

// Redoes the code of one element whose residual is d0 + p * dh instead of
// the d0 its code (or, for an escape, the escape list) holds (BOX_FIXUP).
__device__ __forceinline__ void box_fix(unsigned short *scode, int at, int *sq, unsigned *sesc, int e, int ph,
                                        int dh, unsigned &nesc) {
    const unsigned c0 = scode[at], bit = 1u << (e & 31);
    const bool was = c0 == 0x8000u;
    const int d0 = was ? sq[e] : (c0 & 0x8000u) ? -(int)(c0 & 0x7fffu) : (int)c0;
    const int d = (int)((unsigned)d0 + (unsigned)ph * (unsigned)dh);
    bool esc;
    const unsigned c = code_of(d, esc);
    if (esc) {
        sq[e] = d;
        if (!was) {
            atomicOr(&sesc[e >> 5], bit);
            nesc++;
        }
    } else if (was) {
        atomicAnd(&sesc[e >> 5], ~bit);
        nesc--;
    }
    scode[at] = (unsigned short)c;
}

#ifndef BOX_STAGE
#define BOX_STAGE 1  // f32: z-planes staged in shared memory by cp.async, two ahead (0: loaded at each plane)
#endif
#ifndef BOX_FIXUP
#define BOX_FIXUP 1  // tiles with holes: codes near holes fixed after the walk (0: the tile walked again)
#endif

template <typename T>
__device__ __forceinline__ void enc_box3(const T *__restrict__ src, const Geo &g, unsigned long long base, int lz, int ly, int lx,
                         double inv, double step, double eb, int has_fill, unsigned long long fill_bits,
                         unsigned *pw, unsigned char *sc, int lane, TileSum &ts) {
    constexpr unsigned F = 0xffffffffu;
    // the f32 kernels have the v9 walk's plane buffers (stage_buf)
    constexpr bool stg = BOX_STAGE && sizeof(T) == 4 && ENC_V9;
    int *sq = (int *)(sc + SC_Q);
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    unsigned *smf = (unsigned *)(sc + SC_MF), *smr = (unsigned *)(sc + SC_MR);
    unsigned *shm = (unsigned *)(sc + SC_FL);  // hole column masks, word 32 z + lane (BOX_FIXUP)
    unsigned short *scode = (unsigned short *)pw;
    // a fast walk may have set bits before it gave the tile up
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
        smf[i] = 0;
        smr[i] = 0;
    }
    const bool act = lane < lx;
    const unsigned long long nx = g.nx, plane = g.ny * g.nx;
    const T *const col = src + base + (act ? lane : 0);
    // slot of (z, y, lane) = i*4*ly*lx + ez*j*4*lx + ez*ey*8k + (dz*ey + dy)*ex + dx (FORMAT.md section 3)
    const int k = lane >> 3, dx = lane & 7, ex = min(8, lx - 8 * k), P = ly * lx;
    const unsigned lymask = ly >= 16 ? 0xffffu : (1u << ly) - 1;
    long long sum = 0;
    unsigned cnt = 0, nraw = 0, nfill = 0, nesc = 0;
    bool anyhole = false;
    // the check's error in f32 for f32 values (box_quant)
    using E = typename std::conditional<sizeof(T) == 4, float, double>::type;
    E merr = 0;
    const float ebf = __double2float_rd(eb);
    int ph = 0, origin = 0, hole0 = 0;
    unsigned sbase = 0;
    if constexpr (stg) sbase = (unsigned)__cvta_generic_to_shared(stage_buf()) + 4u * lane;
    // plane z into staging buffer b (one commit group); rows past ly and
    // lanes past lx are not copied (their values are never used)
    auto issue = [&](int z, int b) {
        if constexpr (stg) {
            if (act) {
                const T *p = col + z * plane;
#pragma unroll
                for (int y = 0; y < 16; y++)
                    if (y < ly) cp_async4(sbase + 4u * (b * STG_PLANE + STG_ROW * y), p + (unsigned long long)y * nx);
            }
            cp_async_commit();
        }
    };
#pragma unroll 1
    for (int pass = 0; pass < 2; pass++) {
        // slots without an element hold code 0
        box_clear(pw, lane);
        if (pass) {
            for (int i = lane; i < 128; i += 32) sesc[i] = 0;
        }
        __syncwarp();
        issue(0, 0);
        if (lz > 1) issue(1, 1);
        nesc = 0;
        int a[16];
#pragma unroll
        for (int y = 0; y < 16; y++) a[y] = 0;
        unsigned cpf = 0, cpr = 0;  // the previous plane's Dy of the fill and raw column masks
#pragma unroll 1
        for (int z = 0; z < lz; z++) {
            const int i = z >> 2, dz = z & 3, ez = min(4, lz - 4 * i);
            T v[16];
            if constexpr (stg) {
                if (z + 1 < lz)
                    cp_async_wait<1>();
                else
                    cp_async_wait<0>();
                __syncwarp();
                const float *const xb = stage_buf() + (z & 1) * STG_PLANE + lane;
#pragma unroll
                for (int y = 0; y < 16; y++) v[y] = xb[STG_ROW * y];
                __syncwarp();
                if (z + 2 < lz) issue(z + 2, z & 1);
            } else {
                const T *const pz = col + z * plane;
#pragma unroll
                for (int y = 0; y < 16; y++) v[y] = act && y < ly ? pz[(unsigned long long)y * nx] : (T)0;
            }
            unsigned fm = 0, rm = 0, hm = 0;  // bit y: fill, raw, hole
            int qprev = 0;
            const int zb = i * 4 * P + dx;  // slot part of (i, dx)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (4 * j >= ly) continue;
                const int ey = min(4, ly - 4 * j);
                const int jb = zb + ez * j * 4 * lx + ez * ey * 8 * k + dz * ey * ex;  // + dy*ex: slot of (z, 4j+dy, lane)
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int y = 4 * j + u;
                    const bool in = act && y < ly;
                    bool noq, bad;
                    E er;
                    int qq = box_quant(v[y], inv, step, eb, ebf, noq, bad, er);
                    const bool fill = has_fill && Bits<T>::of(v[y]) == fill_bits;
                    const bool hole = in && (fill || noq);
                    const bool raw = in && !fill && (noq || bad);
                    qq = hole ? ph : in ? qq : 0;
                    if (pass == 0 && in && !hole) {
                        sum += qq;
                        cnt++;
                        if (!raw) merr = max(merr, er);
                    }
                    fm |= (unsigned)(in && fill) << y;
                    rm |= (unsigned)raw << y;
                    hm |= (unsigned)hole << y;
                    // Lorenzo: Dy, Dz, Dx
                    const int A = (int)((unsigned)qq - (unsigned)qprev);
                    qprev = qq;
                    const int B = (int)((unsigned)A - (unsigned)a[y]);
                    a[y] = A;
                    const int d = sub_left(B);
                    bool esc;
                    unsigned c = code_of(d, esc);
                    if (z == 0 && y == 0) {
                        origin = __shfl_sync(F, qq, 0);
                        hole0 = __shfl_sync(F, (int)hole, 0);
                        if (lane == 0) {
                            c = 0;
                            esc = false;
                        }
                    }
                    if (in) {
                        if (esc) {
                            const int e = (z * ly + y) * lx + lane;
                            sq[e] = d;
                            atomicOr(&sesc[e >> 5], 1u << (e & 31));
                            nesc++;
                        }
                        scode[box_code_at(jb + u * ex)] = (unsigned short)c;
                    }
                }
            }
            if (pass == 0) {
                if (BOX_FIXUP) shm[32 * z + lane] = hm;
                anyhole |= hm != 0;
                nfill += __popc(fm);
                nraw += __popc(rm);
                // parity Lorenzo of the column masks (rows past ly are 0,
                // lanes past lx too, and (m << 1) & lymask drops row ly)
                const unsigned cf = (fm ^ (fm << 1)) & lymask, cr = (rm ^ (rm << 1)) & lymask;
                unsigned bf = cf ^ cpf, br = cr ^ cpr;
                cpf = cf;
                cpr = cr;
                const unsigned lf = __shfl_up_sync(F, bf, 1), lr = __shfl_up_sync(F, br, 1);
                if (lane) {
                    bf ^= lf;
                    br ^= lr;
                }
                if (!act) bf = br = 0;
                auto slot = [&](int y) {
                    const int j = y >> 2, ey = min(4, ly - 4 * j);
                    return zb + ez * j * 4 * lx + ez * ey * 8 * k + (dz * ey + (y & 3)) * ex;
                };
                for (unsigned b = bf; b; b &= b - 1) {
                    const int sl = slot(__ffs(b) - 1);
                    atomicOr(&smf[sl >> 5], 1u << (sl & 31));
                }
                for (unsigned b = br; b; b &= b - 1) {
                    const int sl = slot(__ffs(b) - 1);
                    atomicOr(&smr[sl >> 5], 1u << (sl & 31));
                }
                for (unsigned b = rm; b; b &= b - 1) {  // element order, for the raw values' list
                    const int e = (z * ly + __ffs(b) - 1) * lx + lane;
                    atomicOr(&sraw[e >> 5], 1u << (e & 31));
                }
            }
        }
        if (pass == 0) {
            if (!__any_sync(F, anyhole)) break;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(F, sum, o);
            const unsigned C = __reduce_add_sync(F, cnt);
            // holes take the placeholder: trunc(mean of the tile's q)
            ph = C ? (int)(sum / (long long)C) : 0;
            if (ph == 0 || BOX_FIXUP) break;  // p = 0: what the walk used
        }
        __syncwarp();
    }
    if (BOX_FIXUP && ph != 0) {
        // The walk took q = 0 for holes. Lorenzo is linear: with q = p at
        // the holes each residual is d0 + p * dh, dh the Lorenzo residual of
        // the hole indicator (0 wherever the 8 corners are all holes or all
        // not, i.e. away from a hole region's edges). Those elements' d0
        // come back from their codes (or the escape list), and their codes
        // and escapes are redone; element 0's code stays 0, its q is p.
        __syncwarp();
        if (hole0) origin = ph;
        int a[16];
#pragma unroll
        for (int y = 0; y < 16; y++) a[y] = 0;
#pragma unroll 1
        for (int z = 0; z < lz; z++) {
            const int i = z >> 2, dz = z & 3, ez = min(4, lz - 4 * i);
            const unsigned hz = shm[32 * z + lane];
            const int zb = i * 4 * P + dx;
            int hprev = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (4 * j >= ly) continue;
                const int ey = min(4, ly - 4 * j);
                const int jb = zb + ez * j * 4 * lx + ez * ey * 8 * k + dz * ey * ex;
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int y = 4 * j + u;
                    const int h = (hz >> y) & 1;
                    const int A = h - hprev;
                    hprev = h;
                    const int B = A - a[y];
                    a[y] = A;
                    const int dh = sub_left(B);
                    if (act && y < ly && dh != 0 && (z | y | lane) != 0)
                        box_fix(scode, box_code_at(jb + u * ex), sq, sesc, (z * ly + y) * lx + lane, ph, dh, nesc);
                }
            }
        }
    }
    box_to_planes(pw, lane);
    ts.nesc = __reduce_add_sync(F, nesc);
    ts.nraw = __reduce_add_sync(F, nraw);
    ts.nfill = __reduce_add_sync(F, nfill);
    ts.origin = origin;
    ts.merr = (double)merr;
}

// Rank 2 (BOX_RANK2): tiles of 64 x 64 (y, x), sub-blocks 16 x 8, clipped
// or not, holes or not. Lane l owns columns l and 32 + l (the halves h = 0,
// 1; the second only where lx > 32). The tile is walked by row blocks j of
// 16 rows (one sub-block row), each half's 16 rows loaded at once: Dy in
// registers with the previous block's last q carried, Dx by one shuffle
// (column 32 takes column 31's Dy from lane 31's half 0). Slot of (y, x)
// (FORMAT.md section 3, bz = 1): 16 j lx + ey 8k + dy ex + dx. Codes,
// masks, holes and the fix-up as in enc_box3.
#ifndef BOX_RANK2
#define BOX_RANK2 0
#endif

template <typename T>
__device__ __forceinline__ void enc_box2(const T *__restrict__ src, const Geo &g, unsigned long long base, int ly, int lx,
                                         double inv, double step, double eb, int has_fill,
                                         unsigned long long fill_bits, unsigned *pw, unsigned char *sc, int lane,
                                         TileSum &ts) {
    constexpr unsigned F = 0xffffffffu;
    int *sq = (int *)(sc + SC_Q);
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    unsigned *smf = (unsigned *)(sc + SC_MF), *smr = (unsigned *)(sc + SC_MR);
    unsigned *shm = (unsigned *)(sc + SC_FL);  // hole column masks, word 32 (2j + h) + lane
    unsigned short *scode = (unsigned short *)pw;
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
        smf[i] = 0;
        smr[i] = 0;
    }
    box_clear(pw, lane);
    __syncwarp();
    const unsigned long long nx = g.nx;
    using E = typename std::conditional<sizeof(T) == 4, float, double>::type;
    E merr = 0;
    const float ebf = __double2float_rd(eb);
    long long sum = 0;
    unsigned cnt = 0, nraw = 0, nfill = 0, nesc = 0;
    bool anyhole = false;
    int origin = 0, hole0 = 0;
    const int nh = lx > 32 ? 2 : 1;
    int qc[2] = {0, 0};           // per half: q of the previous row
    unsigned fc[2] = {0, 0}, rc[2] = {0, 0};  // per half: fill / raw bit of the previous row
#pragma unroll 1
    for (int j = 0; 16 * j < ly; j++) {
        const int ey = min(16, ly - 16 * j);
        const unsigned lymask = ey >= 16 ? 0xffffu : (1u << ey) - 1;
        int A0[16];                  // half 0's Dy (lane 31's is column 32's left neighbour)
        unsigned cf0 = 0, cr0 = 0;   // half 0's Dy of the column masks
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if (h >= nh) break;
            const int x = 32 * h + lane;
            const bool act = x < lx;
            const int k = x >> 3, dx = x & 7, ex = min(8, lx - 8 * k);
            const int jb = j * 16 * lx + ey * 8 * k + dx;  // + dy*ex
            const T *const p = src + base + (unsigned long long)(16 * j) * nx + (act ? x : 0);
            T v[16];
#pragma unroll
            for (int y = 0; y < 16; y++) v[y] = act && y < ey ? p[(unsigned long long)y * nx] : (T)0;
            unsigned fm = 0, rm = 0, hm = 0;
            int qprev = qc[h];
#pragma unroll
            for (int gq = 0; gq < 4; gq++) {
                if (4 * gq >= ey) continue;
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int y = 4 * gq + u;
                    const bool in = act && y < ey;
                    bool noq, bad;
                    E er;
                    int qq = box_quant(v[y], inv, step, eb, ebf, noq, bad, er);
                    const bool fill = has_fill && Bits<T>::of(v[y]) == fill_bits;
                    const bool hole = in && (fill || noq);
                    const bool raw = in && !fill && (noq || bad);
                    qq = hole || !in ? 0 : qq;
                    if (in && !hole) {
                        sum += qq;
                        cnt++;
                        if (!raw) merr = max(merr, er);
                    }
                    fm |= (unsigned)(in && fill) << y;
                    rm |= (unsigned)raw << y;
                    hm |= (unsigned)hole << y;
                    const int A = (int)((unsigned)qq - (unsigned)qprev);
                    qprev = qq;
                    int d;
                    if (h == 0) {
                        d = sub_left(A);
                        A0[y] = A;
                    } else {
                        d = (int)((unsigned)A - (unsigned)__shfl_sync(F, lane == 31 ? A0[y] : A, (lane + 31) & 31));
                    }
                    bool esc;
                    unsigned c = code_of(d, esc);
                    if (h == 0 && y == 0) {
                        if (j == 0) {
                            origin = __shfl_sync(F, qq, 0);
                            hole0 = __shfl_sync(F, (int)hole, 0);
                            if (lane == 0) {
                                c = 0;
                                esc = false;
                            }
                        }
                    }
                    if (in) {
                        if (esc) {
                            const int e = (16 * j + y) * lx + x;
                            sq[e] = d;
                            atomicOr(&sesc[e >> 5], 1u << (e & 31));
                            nesc++;
                        }
                        scode[box_code_at(jb + y * ex)] = (unsigned short)c;
                    }
                }
            }
            qc[h] = qprev;
            shm[32 * (2 * j + h) + lane] = hm;
            anyhole |= hm != 0;
            nfill += __popc(fm);
            nraw += __popc(rm);
            // parity Lorenzo of the column masks: Dy with the previous
            // block's last row, Dx as for the values
            const unsigned cf = (fm ^ (fm << 1) ^ fc[h]) & lymask, cr = (rm ^ (rm << 1) ^ rc[h]) & lymask;
            fc[h] = (fm >> 15) & 1;
            rc[h] = (rm >> 15) & 1;
            unsigned bf, br;
            if (h == 0) {
                const unsigned lf = __shfl_up_sync(F, cf, 1), lr = __shfl_up_sync(F, cr, 1);
                bf = lane ? cf ^ lf : cf;
                br = lane ? cr ^ lr : cr;
                cf0 = cf;
                cr0 = cr;
            } else {
                bf = cf ^ __shfl_sync(F, lane == 31 ? cf0 : cf, (lane + 31) & 31);
                br = cr ^ __shfl_sync(F, lane == 31 ? cr0 : cr, (lane + 31) & 31);
            }
            if (!act) bf = br = 0;
            for (unsigned b = bf; b; b &= b - 1) {
                const int sl = jb + (__ffs(b) - 1) * ex;
                atomicOr(&smf[sl >> 5], 1u << (sl & 31));
            }
            for (unsigned b = br; b; b &= b - 1) {
                const int sl = jb + (__ffs(b) - 1) * ex;
                atomicOr(&smr[sl >> 5], 1u << (sl & 31));
            }
            for (unsigned b = rm; b; b &= b - 1) {  // element order, for the raw values' list
                const int e = (16 * j + __ffs(b) - 1) * lx + x;
                atomicOr(&sraw[e >> 5], 1u << (e & 31));
            }
        }
    }
    if (__any_sync(F, anyhole)) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(F, sum, o);
        const unsigned C = __reduce_add_sync(F, cnt);
        const int ph = C ? (int)(sum / (long long)C) : 0;
        if (ph != 0) {  // the fix-up of enc_box3, in two dimensions
            __syncwarp();
            if (hole0) origin = ph;
            int hc[2] = {0, 0};
#pragma unroll 1
            for (int j = 0; 16 * j < ly; j++) {
                const int ey = min(16, ly - 16 * j);
                int hA0[16];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    if (h >= nh) break;
                    const int x = 32 * h + lane;
                    const bool act = x < lx;
                    const int k = x >> 3, dx = x & 7, ex = min(8, lx - 8 * k);
                    const int jb = j * 16 * lx + ey * 8 * k + dx;
                    const unsigned hz = shm[32 * (2 * j + h) + lane];
                    int hprev = hc[h];
#pragma unroll
                    for (int y = 0; y < 16; y++) {
                        const int hb = (hz >> y) & 1;
                        const int A = hb - hprev;
                        hprev = hb;
                        int dh;
                        if (h == 0) {
                            dh = sub_left(A);
                            hA0[y] = A;
                        } else {
                            dh = A - __shfl_sync(F, lane == 31 ? hA0[y] : A, (lane + 31) & 31);
                        }
                        if (act && y < ey && dh != 0 && (j | h | y | lane) != 0)
                            box_fix(scode, box_code_at(jb + y * ex), sq, sesc, (16 * j + y) * lx + x, ph, dh, nesc);
                    }
                    hc[h] = hprev;
                }
            }
        }
    }
    box_to_planes(pw, lane);
    ts.nesc = __reduce_add_sync(F, nesc);
    ts.nraw = __reduce_add_sync(F, nraw);
    ts.nfill = __reduce_add_sync(F, nfill);
    ts.origin = origin;
    ts.merr = (double)merr;
}
