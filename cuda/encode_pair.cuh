// Encoder v10: two warps per f32 rank-3 tile (included by fzgpu.cu after
// encode_warp.cuh, whose helpers it uses).
//
// Why: the v9 walk (one warp per tile, enc_fast3) is latency-bound at 16
// warps per SM. Its 16-value columns need 128 registers (the q of a column,
// and the Dz carry of 16 rows in two arrays) and 13.25 KiB of shared memory
// per warp (the tile's bit planes and two staged planes); both limits allow
// 16 warps. Here warp h of a pair walks rows 8h .. 8h+7 of every z-plane:
// the same steps on half the column, so its arrays halve, and the pair
// shares one copy of the bit planes. The second warp quantizes row 7 again
// (its Dy neighbour) instead of waiting for the first: 1/16 more quantize
// work, no exchange inside the walk. The two halves of the coding map to
// the two word groups of v9 (j = 2h, 2h + 1), so the bit planes, the masks
// and the bytes are the v9 ones.
//
// Per tile (warps h = 0, 1; barrier B = the pair's named barrier):
//   walk both halves; B; if either half met a hole, warp 0 runs the slow
//   path (enc_slow) alone; B; both compute the layout; warp 0 runs the
//   look-back; B; both write their share (tile_write PART 1, 2); warp 0
//   takes the next ticket; B.
// A hole seen by one half stops the other at its next plane (`bail`).

#ifndef ENC_PAIR
#define ENC_PAIR 1              // 1: f32 rank 3 by warp pairs (v10); 0: one warp per tile (v9)
#endif
#ifndef ENC_PAIR_MINB
#define ENC_PAIR_MINB 3         // blocks per SM the registers are cut for: 3 = 80 registers, 24 warps
#endif
#define HST_ROWS 9              // staged rows of a half: the row above it, then its 8
#define HST_PLANE (HST_ROWS * STG_ROW)
#define ENC_PAIR_SMEM (ENC_W / 2 * PW_WORDS * 4)  // dynamic: one set of bit planes per pair

// What the two warps of a pair tell each other about their tile.
struct PairShared {
    TileSum ts;                 // the slow path's totals
    unsigned long long excl;    // the tile's offset from the look-back
    unsigned ticket;
    volatile int bail;          // a half met a hole: the tile goes to the slow path
    int ok[2];                  // the half's walk finished
    unsigned mk[2], nraw[2], nesc[2];
    int origin;
};

__device__ __forceinline__ void pair_sync(int id) { asm volatile("bar.sync %0, 64;" ::"r"(id) : "memory"); }

// The warp's two half-plane buffers (2.8 KiB).
__device__ __forceinline__ float *half_stage_buf() {
    __shared__ __align__(16) float stage_h[ENC_W][2 * HST_PLANE];
    return stage_h[threadIdx.x >> 5];
}

// Copies rows 8h .. 8h+7 of each plane of a full tile into buffer rows
// 1 .. 8, and for h = 1 row 7 into buffer row 0. 16-byte copies when every
// row starts on a 16-byte boundary (lane l: piece l % 8 of rows l / 8 and
// l / 8 + 4; lanes 0-7 the row above), else 4-byte ones (lane l: column l).
struct HalfStager {
    const float *gz;
    unsigned long long rstep, plane, nx;
    unsigned scp;
    bool al16, up;
    __device__ __forceinline__ HalfStager(const float *src, const Geo &g, unsigned long long base, float *stg,
                                          int lane, int h) {
        nx = g.nx;
        plane = g.ny * g.nx;
        const unsigned long long b = base + (unsigned long long)(8 * h) * nx;
        al16 = (nx & 3) == 0 && (((unsigned long long)(src + base)) & 15) == 0;
        gz = src + b + (al16 ? (unsigned long long)(lane >> 3) * nx + 4 * (lane & 7) : lane);
        rstep = al16 ? 4 * nx : nx;
        scp = (unsigned)__cvta_generic_to_shared(stg) +
              4u * (al16 ? STG_ROW * (1 + (lane >> 3)) + 4 * (lane & 7) : STG_ROW + lane);
        up = h && (!al16 || lane < 8);
    }
    // the next plane into buffer b (one commit group)
    __device__ __forceinline__ void load(int b) {
        const float *p = gz;
        gz += plane;
        const unsigned d = scp + 4u * HST_PLANE * b;
        if (al16) {
            if (up) cp_async16(d - 4u * STG_ROW, p - nx);
            cp_async16(d, p);
            cp_async16(d + 16u * STG_ROW, p + rstep);
        } else {
            if (up) cp_async4(d - 4u * STG_ROW, p - nx);
#pragma unroll
            for (int y = 0; y < 8; y++) {
                cp_async4(d + 4u * STG_ROW * y, p);
                p += rstep;
            }
        }
        cp_async_commit();
    }
};

// The walk of half h of a full f32 rank-3 tile: v9's enc_fast3 on rows
// 8h .. 8h+7 (see there for the quantize, the keys and the coding). Leaves
// the half's totals in ps; false if a hole showed up (here or in the
// other half).
template <bool HF>
__device__ __forceinline__ bool enc_half(const float *__restrict__ src, const Geo &g, unsigned long long base,
                                         double inv, double step, float ebf, unsigned fill32, unsigned *pw,
                                         int *sq, unsigned *sesc, unsigned *sraw, int lane, int h,
                                         PairShared &ps) {
    const unsigned F = 0xffffffffu;
    float *stg = half_stage_buf();
    HalfStager st(src, g, base, stg, lane, h);
    const int dy = lane >> 3, dx = lane & 7;
    float *const xcol = stg + lane;                                    // buffer row r: xcol[STG_ROW * r]
    const int *const slot = (const int *)stg + STG_ROW * (1 + dy) + dx;  // slot (dy, dx) of words j = 2h, 2h + 1
    unsigned *const pwl = pw + (lane & 15) * PW_STRIDE + (lane >> 4) * 16 + 32 * h;
    const int pws = (lane >> 2) & 3;
    int a0[8], a1[8];
#pragma unroll
    for (int y = 0; y < 8; y++) a1[y] = 0;
    const unsigned ebf_bits = __float_as_uint(ebf);
    unsigned mk = 0xffffffffu;
    unsigned nraw = 0, nesc = 0;
    int origin = 0;
    st.load(0);
    auto walk_plane = [&](auto par, int z, int(&az)[8], const int(&azp)[8]) -> bool {
        constexpr int PAR = decltype(par)::value;
        if (z < 7) {
            st.load(PAR ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncwarp();
        if (ps.bail) {
            cp_async_wait<0>();
            return false;
        }
        float *const xb = xcol + PAR * HST_PLANE;
        int q[8], qup = 0;
        unsigned rawm = 0;  // bit 7 - y: value y is raw
        bool hole = false;
        if (h) {  // row 7: only its q, for Dy (its outcome is the other half's)
            int k;
            bool hh;
            qup = quant_f32(xb[0], inv, step, ebf_bits, k, hh);
        }
#pragma unroll
        for (int y = 0; y < 8; y++) {
            const float x = xb[STG_ROW * (1 + y)];
            int k;
            bool hh;
            q[y] = quant_f32(x, inv, step, ebf_bits, k, hh);
            hole |= hh;
            if (HF) hole |= __float_as_uint(x) == fill32;
            rawm = __funnelshift_l((unsigned)k, rawm, 1);
            mk = min(mk, (unsigned)k);
        }
        if (__any_sync(F, hole)) {
            if (lane == 0) ps.bail = 1;
            cp_async_wait<0>();
            return false;
        }
        int *const db = (int *)xb + STG_ROW;
        int dmax = 0, dmin = 0;
#pragma unroll
        for (int y = 0; y < 8; y++) {
            const int A = (int)((unsigned)q[y] - (unsigned)(y ? q[y - 1] : qup));
            const int B = (int)((unsigned)A - (unsigned)azp[y]);
            az[y] = A;
            int d = sub_left(B);
            if (PAR == 0 && y == 0 && z == 0 && h == 0) {
                origin = __shfl_sync(F, d, 0);  // element 0's q: the tile's origin, its code 0
                if (lane == 0) d = 0;
            }
            db[STG_ROW * y] = d;
            dmax = max(dmax, d);
            dmin = min(dmin, d);
        }
        __syncwarp();
        for (unsigned rows = __reduce_or_sync(F, rawm); rows; rows &= rows - 1) {
            const int b = __ffs(rows) - 1, y = 7 - b;
            const unsigned br = __ballot_sync(F, (rawm >> b) & 1u);
            if (lane == 0) sraw[z * 16 + 8 * h + y] = br;
            nraw += __popc(br);
        }
        if (__any_sync(F, dmax > 32767 || dmin < -32767)) {
#pragma unroll 1
            for (int y = 0; y < 8; y++) {
                const int d = db[STG_ROW * y];
                const bool esc = (unsigned)abs(d) > 32767u;
                const unsigned be = __ballot_sync(F, esc);
                if (esc) {
                    sq[z * 512 + (8 * h + y) * 32 + lane] = d;
                    db[STG_ROW * y] = -32768;
                }
                if (lane == 0) sesc[z * 16 + 8 * h + y] = be;
                nesc += __popc(be);
            }
            __syncwarp();
        }
        const int *const sb = slot + PAR * HST_PLANE;
        const int wz = (z >> 2) * 64 + (z & 3);
        unsigned *const pwp = pwl + (wz ^ pws);
        unsigned x[4];
#pragma unroll
        for (int k = 0; k < 4; k++)  // rows 8h + dy (word j = 2h) and 8h + 4 + dy (j = 2h + 1)
            x[k] = code16x2(sb[8 * k], sb[STG_ROW * 4 + 8 * k]);
        transpose32n<4>(x, lane);
#pragma unroll
        for (int k = 0; k < 4; k++) pwp[4 * k] = x[k];
        __syncwarp();  // this buffer takes plane z + 2
        return true;
    };
#pragma unroll 1
    for (int z = 0; z < 8; z += 2) {
        if (!walk_plane(std::integral_constant<int, 0>{}, z, a0, a1)) return false;
        if (!walk_plane(std::integral_constant<int, 1>{}, z + 1, a1, a0)) return false;
    }
    mk = __reduce_min_sync(F, mk);
    if (lane == 0) {
        ps.mk[h] = mk;
        ps.nraw[h] = nraw;
        ps.nesc[h] = nesc;
        if (h == 0) ps.origin = origin;
    }
    return true;
}

// f32 rank-3 fields: warps 2m and 2m + 1 of a block share tile after tile
// (named barrier 1 + m); everything else as encode_warp_kernel.
__global__ void __launch_bounds__(ENC_W * 32, ENC_PAIR_MINB)
    encode_pair_kernel(const float *__restrict__ src, Geo g, const DevParams *__restrict__ prm, int has_fill,
                       unsigned long long fill_bits, unsigned long long tile0, unsigned long long ntiles,
                       unsigned *__restrict__ out, unsigned long long cap, unsigned long long *status,
                       unsigned *tsize, unsigned long long *tprefix, unsigned *touts, double *terr,
                       unsigned *ticket, unsigned *err, unsigned char *scratch) {
    extern __shared__ __align__(16) unsigned enc_smem[];
    __shared__ PairShared pairs[ENC_W / 2];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, h = wib & 1, bar = 1 + (wib >> 1);
    PairShared &ps = pairs[wib >> 1];
    unsigned *pw = enc_smem + (wib >> 1) * PW_WORDS;
    // the pair works in warp 0's scratch
    unsigned char *sc = scratch + ((unsigned long long)blockIdx.x * ENC_W + (wib & ~1)) * SC_BYTES;
    int *sq = (int *)(sc + SC_Q);
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    const double eb = prm->eb, step = prm->step, inv = prm->inv;
    const float ebf = __double2float_rd(eb);
    if (h == 0) {
        for (int i = lane; i < 128; i += 32) {  // the walks only set rows
            sesc[i] = 0;
            sraw[i] = 0;
        }
        if (lane == 0) {
            ps.bail = 0;
            ps.ticket = atomicAdd(ticket, 1u);
        }
    }
    pair_sync(bar);
    unsigned long long rel = ps.ticket;
    while (rel < ntiles) {
        const unsigned long long t = tile0 + rel;
        unsigned long long z0, y0, x0;
        int lz, ly, lx;
        tile_box(g, t, z0, y0, x0, lz, ly, lx);
        const bool full = lz == g.tz && ly == g.ty && lx == g.tx;
        const unsigned long long base = (z0 * g.ny + y0) * g.nx + x0;
        bool ok = false;
        if (full)
            ok = has_fill ? enc_half<true>(src, g, base, inv, step, ebf, (unsigned)fill_bits, pw, sq, sesc, sraw,
                                           lane, h, ps)
                          : enc_half<false>(src, g, base, inv, step, ebf, 0, pw, sq, sesc, sraw, lane, h, ps);
        if (lane == 0) ps.ok[h] = ok;
        pair_sync(bar);
        TileSum ts;
        if (ps.ok[0] && ps.ok[1]) {
            ts.nraw = ps.nraw[0] + ps.nraw[1];
            ts.nesc = ps.nesc[0] + ps.nesc[1];
            ts.nfill = 0;
            ts.origin = ps.origin;
            const unsigned mk = min(ps.mk[0], ps.mk[1]), eb_bits = __float_as_uint(ebf);
            ts.merr = mk <= eb_bits ? (double)__uint_as_float(eb_bits - mk) : 0.0;
            if (ts.nraw) {
                if (h == 0) raw_mask_sparse(sraw, (unsigned *)(sc + SC_MR), lz, ly, lx, g, lane);
                pair_sync(bar);
            }
        } else {
            if (h == 0) {
                if (lane == 0) ps.bail = 0;
                if (ENC_PREFETCH && !full) prefetch_tile(src, g, base, lz, ly, lx, lane);
                ts.nraw = ts.nfill = 0;
                enc_slow<float, 3>(src, g, z0, y0, x0, lz, ly, lx, inv, step, eb, has_fill, fill_bits, pw, sc,
                                   lane, ts);
                if (lane == 0) ps.ts = ts;
            }
            pair_sync(bar);
            ts = ps.ts;
        }
        const TileLayout L = tile_layout<float>(pw, sc, ts, lane);
        if (h == 0) {
            if (lane == 0) {
                tsize[rel] = L.size;
                touts[rel] = ts.nraw;
                terr[rel] = ts.merr;
            }
            const unsigned long long excl = lookback(status, rel, L.size, lane);
            if (lane == 0) {
                tprefix[rel] = excl;
                ps.excl = excl;
            }
        }
        pair_sync(bar);
        unsigned *o = tile_out(out, cap, err, g, t, tile0, ps.excl, L.size, lane);
        if (o) {
            if (h == 0)
                tile_write<float, 1>(o, L, ts, pw, sc, src, g, z0, y0, x0, ly, lx, lane);
            else
                tile_write<float, 2>(o, L, ts, pw, sc, src, g, z0, y0, x0, ly, lx, lane);
        }
        // each warp clears the element bitmap only it read
        if (h == 0 ? ts.nesc : ts.nraw) {
            __syncwarp();
            unsigned *m = h == 0 ? sesc : sraw;
            for (int i = lane; i < 128; i += 32) m[i] = 0;
        }
        if (h == 0 && lane == 0) ps.ticket = atomicAdd(ticket, 1u);
        pair_sync(bar);  // the bit planes and scratch are free for the next tile
        rel = ps.ticket;
    }
}
