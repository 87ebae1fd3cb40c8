// The v5 block encoder: one 512-thread block per tile, for fields where most
// tiles are clipped (use_v5 in fzgpu.cu); xor_corners is shared with the warp encoder's slow path.
// Included by fzgpu.cu.

struct EncShared {
    int q[TILE];                    // q, then residuals
    unsigned short code[TILE];      // slot order
    __align__(16) unsigned pw[16 * PWS]; // bit planes: [plane][word], rows padded (banks)
    unsigned char fl[TILE];         // 1 has q, 2 fill, 4 raw, 8 escape
    unsigned mfill[128], mraw[128]; // slot-order masks
    unsigned bm[16], fbm, rbm;
    unsigned red_u[NWARPS * 4];
    long long red_s[NWARPS];
    double red_d[NWARPS];
    unsigned scan[2 * NWARPS + 34];
    unsigned ticket;
    unsigned long long excl;
    unsigned plane_mask, nesc, nraw, nfill, size, esc_at, fill_at, raw_at;
    unsigned plane_at[16];
    int origin;
};

#include "mask_corners.cuh"  // xor_corners (also the warp encoder's slow path)

template <typename T>
__global__ void __launch_bounds__(NT, ENC_MINB)
    encode_kernel(const T *__restrict__ src, Geo g, const DevParams *__restrict__ prm, int has_fill,
                  unsigned long long fill_bits, unsigned long long tile0, unsigned long long ntiles,
                  unsigned *__restrict__ out, unsigned long long cap, unsigned long long *status, unsigned *tsize,
                  unsigned long long *tprefix, unsigned *touts, double *terr, unsigned *ticket, unsigned *err,
                  const unsigned *__restrict__ emeta, const unsigned long long *__restrict__ eoff) {
    __shared__ EncShared s;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    if (tid == 0) s.ticket = atomicAdd(ticket, 1u);
    __syncthreads();
    const unsigned long long rel = s.ticket;
    if (rel >= ntiles) return;
    const unsigned long long t = tile0 + rel;
    unsigned long long z0, y0, x0;
    int lz, ly, lx;
    tile_box(g, t, z0, y0, x0, lz, ly, lx);
    const int n = lz * ly * lx, P = ly * lx;
    const double eb = prm->eb, step = prm->step, inv = prm->inv;
    const unsigned long long base = (z0 * g.ny + y0) * g.nx + x0;

    // 1. quantize + check. Element e = k*NT + tid: warps read rows.
    const bool fast = g.fast && n == TILE;
    unsigned nraw = 0, nfill = 0;
    double maxerr = 0;
    unsigned meta[KPT];  // slot | x>0 <<12 | y>0 <<13 | z>0 <<14 | valid <<15 (not fast)
    // fast: meta of element k*NT+tid is that of element tid plus the z part
    const unsigned m0 = fast ? emeta[tid] : 0u;
    // meta is read only when !fast, after the loop below has set every
    // entry; nvcc cannot see that through the lambda (warning 549, a false
    // positive; initialising meta instead changed this kernel's code)
#pragma nv_diag_suppress 549
    auto metaof = [&](int k) -> unsigned {
        return fast ? m0 + g.skoff[k] + (k > 0 ? 1u << 14 : 0u) : meta[k];
    };
#pragma nv_diag_default 549
    // Branch-free: every step is computed and the outcome selected (the
    // values of steps a fill or raw element skips are never used).
    auto quant = [&](int e, unsigned long long gi) {
        T v = src[gi];
        unsigned char f = 0;
        int q = 0;
        if (has_fill && Bits<T>::of(v) == fill_bits) {
            f = 2;
            nfill++;
        } else {
            double sv = __dmul_rn((double)v, inv);
            if (!(fabs(sv) < 268435456.0)) {  // also NaN and +-Inf
                f = 4;
                nraw++;
            } else {
                double er;
                q = quant_q<T>(v, sv, step, er);
                f = 1;
                if (!(er <= eb)) {
                    f = 5;
                    nraw++;
                } else if (er > maxerr) {
                    maxerr = er;
                }
            }
        }
        s.q[e] = q;
        s.fl[e] = f;
    };
    if (fast) {
        const unsigned long long off0 = base + eoff[tid];
#pragma unroll
        for (int k = 0; k < KPT; k++) quant(k * NT + tid, off0 + g.koff[k]);
    } else {
#pragma unroll
        for (int k = 0; k < KPT; k++) {
            int e = k * NT + tid;
            meta[k] = 0;
            if (e < n) {
                unsigned long long gi;
                if (n == TILE) {
                    meta[k] = emeta[e];
                    gi = base + eoff[e];
                } else {
                    int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
                    meta[k] = (unsigned)slot_of(z, y, x, lz, ly, lx, g) | (x > 0) << 12 | (y > 0) << 13 |
                              (z > 0) << 14 | 1u << 15;
                    gi = ((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x;
                }
                quant(e, gi);
            } else {
                s.code[e] = 0;  // slots n..4095 hold code 0
            }
        }
    }
    if (tid < 128) {
        s.mfill[tid] = 0;
        s.mraw[tid] = 0;
    }
    // block reductions
    for (int o = 16; o > 0; o >>= 1) {
        nraw += __shfl_down_sync(0xffffffffu, nraw, o);
        nfill += __shfl_down_sync(0xffffffffu, nfill, o);
        maxerr = fmax(maxerr, __shfl_down_sync(0xffffffffu, maxerr, o));
    }
    if (lane == 0) {
        s.red_u[NWARPS + wid] = nraw;
        s.red_u[2 * NWARPS + wid] = nfill;
        s.red_d[wid] = maxerr;
    }
    __syncthreads();
    // every warp reduces the 16 partials itself: no serial thread-0 section
    // and no second barrier.
    const unsigned NR = __reduce_add_sync(0xffffffffu, lane < NWARPS ? s.red_u[NWARPS + lane] : 0u);
    const unsigned NF = __reduce_add_sync(0xffffffffu, lane < NWARPS ? s.red_u[2 * NWARPS + lane] : 0u);
    if (NR | NF) {
        // holes: the placeholder is the mean of the tile's q (rare path)
        long long sum = 0;
        unsigned cnt = 0;
#pragma unroll
        for (int k = 0; k < KPT; k++) {
            int e = k * NT + tid;
            if (e < n && (s.fl[e] & 1)) {
                sum += s.q[e];
                cnt++;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            sum += __shfl_down_sync(0xffffffffu, sum, o);
            cnt += __shfl_down_sync(0xffffffffu, cnt, o);
        }
        if (lane == 0) {
            s.red_s[wid] = sum;
            s.red_u[wid] = cnt;
        }
        __syncthreads();
        long long S = 0;
        unsigned C = 0;
        for (int i = 0; i < NWARPS; i++) {
            S += s.red_s[i];
            C += s.red_u[i];
        }
        const int ph = C ? (int)(S / (long long)C) : 0;  // placeholder (truncating)
#pragma unroll
        for (int k = 0; k < KPT; k++) {
            int e = k * NT + tid;
            if (e < n && !(s.fl[e] & 1)) s.q[e] = ph;
        }
        __syncthreads();
    }

    // 2. Lorenzo residuals and codes.
    int d[KPT];
    unsigned nesc = 0;
    auto emit = [&](int k, int e, int dv) {
        d[k] = dv;
        unsigned c;
        if (e == 0) {
            c = 0;
        } else {
            int sg = dv >> 31;
            unsigned mag = (unsigned)((dv ^ sg) - sg);
            if (mag > 32767u) {
                c = 0x8000;
                nesc++;
                s.fl[e] |= 8;  // own element: no other thread reads fl here
            } else {
                c = mag | ((unsigned)sg & 0x8000u);
            }
        }
        s.code[metaof(k) & 4095] = (unsigned short)c;
    };
    if (fast) {
        // d = Dz Dx Dy q: Dy from the row above (shared memory), Dx by a
        // shuffle (a warp is one row), Dz from the register of the previous
        // k (this thread's column).
        unsigned rprev = 0;
#pragma unroll
        for (int k = 0; k < KPT; k++) {
            const int e = k * NT + tid;
            const unsigned a = (unsigned)s.q[e] - (wid ? (unsigned)s.q[e - 32] : 0u);
            const unsigned al = __shfl_up_sync(0xffffffffu, a, 1);
            const unsigned r = a - (lane ? al : 0u);
            emit(k, e, (int)(r - rprev));
            rprev = r;
        }
    } else {
#pragma unroll
        for (int k = 0; k < KPT; k++) {
            int e = k * NT + tid;
            d[k] = 0;
            if (meta[k] >> 15) {
                unsigned m = meta[k];
                int hx = (m >> 12) & 1, hy = (m >> 13) & 1, hz = (m >> 14) & 1;
                unsigned v = (unsigned)s.q[e];
                if (hx) v -= (unsigned)s.q[e - 1];
                if (hy) v -= (unsigned)s.q[e - lx];
                if (hx && hy) v += (unsigned)s.q[e - lx - 1];
                if (hz) {
                    v -= (unsigned)s.q[e - P];
                    if (hx) v += (unsigned)s.q[e - P - 1];
                    if (hy) v += (unsigned)s.q[e - P - lx];
                    if (hx && hy) v -= (unsigned)s.q[e - P - lx - 1];
                }
                emit(k, e, (int)v);
            }
        }
    }
    __syncthreads();  // all q read; codes complete
    if (tid == 0) s.origin = s.q[0];
#pragma unroll
    for (int k = 0; k < KPT; k++) {
        int e = k * NT + tid;
        if (e < n) s.q[e] = d[k];
    }
    // fill / raw masks: XOR-Lorenzo of the element bitmap, in slot order
    if (NR | NF) {
#pragma unroll
        for (int k = 0; k < KPT; k++) {
            int e = k * NT + tid;
            const unsigned m = metaof(k);
            if (m >> 15) {
                int sl = m & 4095;
                if (NF && xor_corners(s.fl, e, m, P, lx, 2)) atomicOr(&s.mfill[sl >> 5], 1u << (sl & 31));
                if (NR && xor_corners(s.fl, e, m, P, lx, 4)) atomicOr(&s.mraw[sl >> 5], 1u << (sl & 31));
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) nesc += __shfl_down_sync(0xffffffffu, nesc, o);
    if (lane == 0) s.red_u[3 * NWARPS + wid] = nesc;
    __syncthreads();

    // 3. Bitshuffle by warp transpose: warp w takes the 64 codes of words
    //    2m, 2m+1 (lane l: codes 64m+l and 64m+32+l, packed), transposes, and
    //    lane p (p < 16) holds plane p of word 2m, lane 16+p of word 2m+1.
    for (int m = wid; m < 64; m += NWARPS) {
        const unsigned c = (unsigned)s.code[64 * m + lane] | (unsigned)s.code[64 * m + 32 + lane] << 16;
        const unsigned w = transpose32(c, lane);
        s.pw[(lane & 15) * PWS + 2 * m + (lane >> 4)] = w;
    }
    __syncthreads();
    // 4. zero-block masks: warp p owns plane p, lane k block k.
    {
        uint4 b = *(const uint4 *)&s.pw[wid * PWS + 4 * lane];
        unsigned m = __ballot_sync(0xffffffffu, (b.x | b.y | b.z | b.w) != 0);
        if (lane == 0) s.bm[wid] = m;
        if (wid == 0 && (NF | NR)) {
            uint4 f = ((uint4 *)s.mfill)[lane], r = ((uint4 *)s.mraw)[lane];
            unsigned fm = __ballot_sync(0xffffffffu, (f.x | f.y | f.z | f.w) != 0);
            unsigned rm = __ballot_sync(0xffffffffu, (r.x | r.y | r.z | r.w) != 0);
            if (lane == 0) {
                s.fbm = fm;
                s.rbm = rm;
            }
        }
    }
    __syncthreads();
    // 5. Layout (warp 0: plane offsets by a 16-lane scan), then the
    //    decoupled look-back: the sum of the sizes of tiles 0..rel-1.
    if (wid == 0) {
        const unsigned E = __reduce_add_sync(0xffffffffu, lane < NWARPS ? s.red_u[3 * NWARPS + lane] : 0u);
        const unsigned bmp = lane < 16 ? s.bm[lane] : 0u;
        const unsigned szp = bmp ? 1 + 4 * __popc(bmp) : 0u;
        const unsigned inc = warp_incl_scan<16>(szp, lane);
        const unsigned pm = __ballot_sync(0xffffffffu, bmp != 0);
        if (lane < 16) s.plane_at[lane] = 2 + inc - szp;
        double M = lane < NWARPS ? s.red_d[lane] : 0.0;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) M = fmax(M, __shfl_xor_sync(0xffffffffu, M, o));
        unsigned at = 2 + __shfl_sync(0xffffffffu, inc, 15);  // words
        if (lane == 0) {
            s.esc_at = at;
            if (E) at += 1 + E;
            s.fill_at = at;
            if (NF) at += 1 + 4 * __popc(s.fbm);
            s.raw_at = at;
            if (NR) at += 1 + 4 * __popc(s.rbm) + 1 + NR * (sizeof(T) / 4);
            s.plane_mask = pm;
            s.nesc = E;
            s.size = at * 4;
            unsigned long long sz = at * 4ull;
            tsize[rel] = (unsigned)sz;
            touts[rel] = NR;
            terr[rel] = M;
        }
        // the size as lane 0 computed it
        const unsigned size = __shfl_sync(0xffffffffu, at * 4, 0);
        publish_size(status, rel, size, lane);
        const unsigned long long excl = lookback(status, rel, size, lane);
        if (lane == 0) s.excl = excl;
    }
    __syncthreads();
    const unsigned long long chunk = t / g.per_chunk;
    const unsigned long long cend = min((chunk + 1) * g.per_chunk, g.tiles) - tile0;
    const unsigned long long off = s.excl + 4 * cend;  // bytes
    if (tid == 0) tprefix[rel] = s.excl;
    if (off + s.size > cap) {
        if (tid == 0) atomicOr(err, 1u);
        return;
    }
    unsigned *o = out + off / 4;
    const unsigned pm = s.plane_mask;
    if (tid == 0) {
        unsigned w0 = pm | (s.nesc ? 1u << 16 : 0) | (NF ? 1u << 17 : 0) | (NR ? 1u << 18 : 0);
        o[0] = w0;
        o[1] = (unsigned)s.origin;
    }
    {
        int p = wid, k = lane;
        unsigned bm = s.bm[p];
        if (bm) {
            unsigned at = s.plane_at[p];
            if (k == 0) o[at] = bm;
            if ((bm >> k) & 1) {
                unsigned *dst = o + at + 1 + 4 * __popc(bm & ((1u << k) - 1));
                uint4 b = *(const uint4 *)&s.pw[p * PWS + 4 * k];
                dst[0] = b.x;
                dst[1] = b.y;
                dst[2] = b.z;
                dst[3] = b.w;
            }
        }
    }
    if (wid == 0 && NF) {
        unsigned bm = s.fbm, at = s.fill_at;
        if (lane == 0) o[at] = bm;
        if ((bm >> lane) & 1) {
            unsigned *dst = o + at + 1 + 4 * __popc(bm & ((1u << lane) - 1));
            for (int i = 0; i < 4; i++) dst[i] = s.mfill[4 * lane + i];
        }
    }
    if (wid == 1 && NR) {
        unsigned bm = s.rbm, at = s.raw_at;
        if (lane == 0) {
            o[at] = bm;
            o[at + 1 + 4 * __popc(bm)] = NR;
        }
        if ((bm >> lane) & 1) {
            unsigned *dst = o + at + 1 + 4 * __popc(bm & ((1u << lane) - 1));
            for (int i = 0; i < 4; i++) dst[i] = s.mraw[4 * lane + i];
        }
    }
    // escapes and raw values in element order: thread owns elements 8t..8t+7
    if (s.nesc | NR) {
        const int e0 = tid * KPT;
        unsigned ce = 0, cr = 0;
#pragma unroll
        for (int i = 0; i < KPT; i++) {
            int e = e0 + i;
            if (e < n) {
                ce += (s.fl[e] >> 3) & 1;
                cr += (s.fl[e] >> 2) & 1;
            }
        }
        unsigned tot;
        unsigned re = block_excl_scan(ce, &tot, s.scan);
        unsigned rr = block_excl_scan(cr, &tot, s.scan);
        if (s.nesc) {
            if (tid == 0) o[s.esc_at] = s.nesc;
            for (int i = 0; i < KPT; i++) {
                int e = e0 + i;
                if (e < n && (s.fl[e] & 8)) o[s.esc_at + 1 + re++] = (unsigned)s.q[e];
            }
        }
        if (NR) {
            unsigned at = s.raw_at + 1 + 4 * __popc(s.rbm) + 1;
            for (int i = 0; i < KPT; i++) {
                int e = e0 + i;
                if (e < n && (s.fl[e] & 4)) {
                    int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
                    unsigned long long b = Bits<T>::of(src[((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x]);
                    if (sizeof(T) == 4) {
                        o[at + rr] = (unsigned)b;
                    } else {
                        o[at + 2 * rr] = (unsigned)b;
                        o[at + 2 * rr + 1] = (unsigned)(b >> 32);
                    }
                    rr++;
                }
            }
        }
    }
}
