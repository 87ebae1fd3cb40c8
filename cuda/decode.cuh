// The decode stage (included by fzgpu.cu after the encoder; the host
// dispatch, launch_decode, stays in fzgpu.cu). Per job:
//   chunk_scan_kernel     one block per chunk: validates the chunk's tile
//                         table, tile sizes -> offsets (toff, tsize).
//   decode_warp_kernel    one warp per tile (decode_warp.cuh), for every
//                         tile of the three standard tile shapes: full,
//                         clipped, escapes, fill and raw masks. A tile
//                         whose structure does not check out goes on a list.
//   decode_list_kernel    the block decoder (decode_tile, one 512-thread
//                         block per tile) over that list: it rejects the
//                         tile with the reason the CPU decoder gives, or
//                         decodes it. Fields whose header names another
//                         tile shape (this writer never does) go here whole.
//   decode_finish_kernel  the first error, if any, into the result; the
//                         error word and counts reset for the next job.
// Each is launched as a programmatic dependent of the one before
// (fzgpu.cu's launch_dependent) and calls grid_wait() before it reads.
// Every decoder writes the same bytes as fz/ (docs/FORMAT.md section 7).

#include "flat.cuh"  // flat tiles: flat_unscan's neighbours

__device__ __forceinline__ void report(unsigned long long *err, unsigned long long rel, unsigned code) {
    atomicMin(err, (rel << 8) | code);
}

#include "zero_block.cuh"  // zb_word (also the warp decoder; compiled on the host by tools/decode_warp_emu.cpp)

// Slot of element e of a tile (n elements, P = ly * lx per z): from the
// per-job table for full tiles, by FORMAT.md's formula for clipped ones.
__device__ __forceinline__ int elem_slot(int e, int n, int P, int lz, int ly, int lx, const unsigned *emeta,
                                         const Geo &g) {
    if (n == TILE) return emeta[e] & 4095;
    const int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
    return slot_of(z, y, x, lz, ly, lx, g);
}

#include "chunk_scan.cuh"  // chunk_scan_kernel (compiled on the host by tools/chunk_scan_emu.cpp)

// The tiles of a job with a fill or raw mask (word0 bits 17, 18), counted
// into *count for decode_warp_kernel's choice of walks (mcount). Tiles
// whose size the chunk scan found invalid (0) are not read.
__global__ void mask_census_kernel(const unsigned char *__restrict__ blob, const unsigned long long *__restrict__ toff,
                                   const unsigned *__restrict__ tsz, unsigned long long nt, unsigned *count) {
    grid_wait();  // toff and tsz from the chunk scan (launch_dependent)
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    bool m = false;
    if (i < nt && tsz[i]) m = (__ldg((const unsigned *)(blob + toff[i])) >> 17) & 3;
    const unsigned b = __ballot_sync(0xffffffffu, m);
    if ((threadIdx.x & 31) == 0 && b) atomicAdd(count, (unsigned)__popc(b));
}

// In-place inclusive prefix sum (int32, wrapping) of c[0], c[st], ...,
// c[(len-1)*st]: eight loads issued before their adds and stores.
__device__ __forceinline__ void col_scan(int *c, int st, int len) {
    unsigned acc = (unsigned)c[0];
    for (int y = 1; y < len; y += 8) {
        unsigned v[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (y + j < len) v[j] = (unsigned)c[(y + j) * st];
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (y + j < len) {
                acc += v[j];
                c[(y + j) * st] = (int)acc;
            }
    }
}

struct DecShared {
    unsigned tb[STAGE_WORDS];
    int q[TILE];
    unsigned short code[TILE];
    unsigned char fl[TILE];  // 2 fill, 4 raw, 8 escape
    unsigned scan[2 * NWARPS + 34];
    int segv[64], segf[64];
    unsigned bm[16], plane_at[16];
    unsigned w0, origin, nesc, esc_at, fill_at, raw_at, nraw, rawv_at, plane_mask;
    int bad;
};

// Undoes a flat tile's Lorenzo step (FORMAT.md 3.1) on its n elements in
// shared memory, by the whole block: prefix sums along z (stride fP), y
// (stride fnx, restarting where y = 0) and x (restarting where x = 0 or at
// the tile's first element), each as chains of dependent steps, one chain
// per thread; add(e, from) folds element `from` into e. r0: flat_r0.
// Every element's neighbours lie in the run, so no step reads outside it.
template <typename F>
__device__ __forceinline__ void flat_unscan(const Geo &g, unsigned r0, int n, F add) {
    const int tid = threadIdx.x, P = (int)g.fP, nx = (int)g.fnx;
    for (int j = tid; j < P && j + P < n; j += NT)
        for (int e = j + P; e < n; e += P) add(e, e - P);
    __syncthreads();
    for (int j = tid; j < nx && j + nx < n; j += NT) {
        unsigned r = (r0 + (unsigned)j) % g.fP;  // in-plane position of element j
        for (int e = j + nx; e < n; e += nx) {
            r += (unsigned)nx;
            if (r >= g.fP) r -= g.fP;
            if (r >= (unsigned)nx) add(e, e - nx);  // y >= 1
        }
    }
    __syncthreads();
    // rows: the first starts at 0, the next at the first x = 0, then every nx
    const int x0 = (int)(r0 % g.fnx), h1 = (nx - x0) % nx, rows = h1 == 0 ? (n + nx - 1) / nx : 1 + (n - h1 + nx - 1) / nx;
    for (int k = tid; k < rows; k += NT) {
        const int a = h1 == 0 ? k * nx : k == 0 ? 0 : h1 + (k - 1) * nx;
        const int b = min(n, h1 == 0 ? a + nx : k == 0 ? h1 : a + nx);
        for (int e = a + 1; e < b; e++) add(e, e - 1);
    }
    __syncthreads();
}

// One tile (rel, relative to tile0) by the whole block: every return is
// block-uniform.
template <typename T>
__device__ __forceinline__ void decode_tile(const Geo &g, const unsigned char *__restrict__ blob,
                                            unsigned long long tile0, double step, int has_fill,
                                            unsigned long long fill_bits, const unsigned long long *toff,
                                            const unsigned *tsz, T *__restrict__ dst, unsigned long long *err,
                                            const unsigned *__restrict__ emeta,
                                            const unsigned long long *__restrict__ eoff, DecShared &s,
                                            const unsigned long long rel) {
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const unsigned sz = tsz[rel];
    if (sz == 0) return;  // its size was invalid, already reported
    const unsigned long long t = tile0 + rel;
    unsigned long long z0, y0, x0;
    int lz, ly, lx;
    tile_box(g, t, z0, y0, x0, lz, ly, lx);
    // a padded field's tile (FORMAT.md 3.2) is coded whole; only its box is stored
    const Box3 box{lz, ly, lx};
    if (g.padded) {
        lz = g.tz;
        ly = g.ty;
        lx = g.tx;
    }
    const int n = lz * ly * lx, P = ly * lx;
    const unsigned long long base = (z0 * g.ny + y0) * g.nx + x0;
    const unsigned nw = sz / 4;
    const unsigned *gp = (const unsigned *)(blob + toff[rel]);
    const unsigned *p = gp;
    if (nw <= STAGE_WORDS) {
        for (unsigned i = tid; i < nw; i += NT) s.tb[i] = gp[i];
        p = s.tb;
    }
    __syncthreads();
    if (tid == 0) {
        unsigned code = 0;
        unsigned w0 = p[0];
        unsigned long long at = 2;
        if (w0 & ~0x7FFFFu) code = FZGPU_DE_FLAGS;
        for (int pl = 0; pl < 16 && !code; pl++) {
            if (!((w0 >> pl) & 1)) continue;
            if (at >= nw) {
                code = FZGPU_DE_TRUNC;
                break;
            }
            unsigned bm = p[at];
            s.bm[pl] = bm;
            s.plane_at[pl] = (unsigned)at;
            at += 1 + 4ull * __popc(bm);
        }
        unsigned nesc = 0;
        if (!code && (w0 & (1u << 16))) {
            if (at >= nw) code = FZGPU_DE_TRUNC;
            else {
                nesc = p[at];
                if (nesc == 0 || nesc >= (unsigned)n) code = FZGPU_DE_ESCCOUNT;
                s.esc_at = (unsigned)at + 1;
                at += 1ull + nesc;
            }
        }
        if (!code && (w0 & (1u << 17))) {
            if (at >= nw) code = FZGPU_DE_TRUNC;
            else {
                s.fill_at = (unsigned)at;
                at += 1 + 4ull * __popc(p[at]);
            }
        }
        unsigned nraw = 0;
        if (!code && (w0 & (1u << 18))) {
            if (at >= nw) code = FZGPU_DE_TRUNC;
            else {
                s.raw_at = (unsigned)at;
                at += 1 + 4ull * __popc(p[at]);
                if (at >= nw) code = FZGPU_DE_TRUNC;
                else {
                    nraw = p[at];
                    if (nraw == 0) code = FZGPU_DE_RAWCOUNT;
                    s.rawv_at = (unsigned)at + 1;
                    at += 1 + (unsigned long long)nraw * (sizeof(T) / 4);
                }
            }
        }
        if (!code && at > nw) code = FZGPU_DE_TRUNC;
        if (!code && at < nw) code = FZGPU_DE_TRAILTILE;
        s.w0 = w0;
        s.origin = p[1];
        s.nesc = nesc;
        s.nraw = nraw;
        s.bad = code;
        if (code) report(err, rel, code);
    }
    __syncthreads();
    if (s.bad) return;
    const unsigned w0 = s.w0;

    // 1. codes from planes by warp transpose: lane 16h+p loads plane p of
    //    word 2m+h (0 when the plane or its zero-block is absent); after the
    //    transpose lane l holds codes 64m+l (low half) and 64m+32+l (high).
    {
        const int pl = lane & 15;
        const bool has = (w0 >> pl) & 1;
        const unsigned bm = has ? s.bm[pl] : 0u;
        const unsigned pat = has ? s.plane_at[pl] + 1 : 0u;
        for (int m = wid; m < 64; m += NWARPS) {
            const unsigned c = transpose32(zb_word(p, bm, pat, 2 * m + (lane >> 4)), lane);
            s.code[64 * m + lane] = (unsigned short)c;
            s.code[64 * m + 32 + lane] = (unsigned short)(c >> 16);
        }
    }
    // masks into element flags (rare)
    for (int e = tid; e < TILE; e += NT) s.fl[e] = 0;
    __syncthreads();
    if (tid == 0 && s.code[0] != 0) {
        s.bad = FZGPU_DE_SLOT0;
        report(err, rel, FZGPU_DE_SLOT0);
    }
    // 2. residuals in element order; escape flags
    unsigned nesc = 0;
#pragma unroll
    for (int k = 0; k < KPT; k++) {
        int e = k * NT + tid;
        if (e < n) {
            unsigned c = s.code[elem_slot(e, n, P, lz, ly, lx, emeta, g)];
            int dv = (int)(c & 0x7FFFu);
            if (c & 0x8000u) {
                if (dv == 0) {
                    s.fl[e] = 8;
                    nesc++;
                }
                dv = -dv;
            }
            s.q[e] = dv;
        }
    }
    for (int o = 16; o > 0; o >>= 1) nesc += __shfl_down_sync(0xffffffffu, nesc, o);
    if (lane == 0) s.scan[wid] = nesc;
    __syncthreads();
    if (tid == 0) {
        unsigned E = 0;
        for (int i = 0; i < NWARPS; i++) E += s.scan[i];
        if (E != s.nesc && !s.bad) {
            s.bad = FZGPU_DE_ESCCOUNT;
            report(err, rel, FZGPU_DE_ESCCOUNT);
        }
    }
    __syncthreads();
    if (s.bad) return;
    const bool masks = (w0 >> 17) & 3;
    if (s.nesc || masks) {
        // fill / raw masks: slot bits -> element flags, then undo the
        // XOR-Lorenzo transform line by line (rare path).
        if (masks) {
            for (int which = 0; which < 2; which++) {
                if (!((w0 >> (17 + which)) & 1)) continue;
                unsigned at = which ? s.raw_at : s.fill_at;
                unsigned bm = p[at];
                unsigned char bit = which ? 4 : 2;
                unsigned set = 0;
#pragma unroll
                for (int k = 0; k < KPT; k++) {
                    int e = k * NT + tid;
                    if (e < n) {
                        const int sl = elem_slot(e, n, P, lz, ly, lx, emeta, g);
                        if ((zb_word(p, bm, at + 1, sl >> 5) >> (sl & 31)) & 1) {
                            s.fl[e] |= bit;
                            set++;
                        }
                    }
                }
                // total bits in the mask
                unsigned total = 0;
                if (tid < 128) total = __popc(zb_word(p, bm, at + 1, tid));
                unsigned tt, ts;
                block_excl_scan(total, &tt, s.scan);
                block_excl_scan(set, &ts, s.scan);
                if (tid == 0 && tt != ts) {
                    s.bad = FZGPU_DE_MASKSLOTS;
                    report(err, rel, FZGPU_DE_MASKSLOTS);
                }
                __syncthreads();
                if (s.bad) return;
                // undo parity Lorenzo: prefix XOR along x, y, z
                if (g.flat) {
                    flat_unscan(g, (unsigned)(base % g.fP), n, [&](int e, int from) {
                        s.fl[e] ^= s.fl[from] & bit;
                    });
                } else {
                for (int i = tid; i < lz * ly; i += NT) {
                    unsigned char *row = s.fl + i * lx;
                    unsigned char acc = row[0] & bit;
                    for (int x = 1; x < lx; x++) {
                        acc ^= row[x] & bit;
                        row[x] = (row[x] & ~bit) | acc;
                    }
                }
                __syncthreads();
                for (int i = tid; i < lz * lx; i += NT) {
                    int z = i / lx, x = i - z * lx;
                    unsigned char *c = s.fl + z * P + x;
                    unsigned char acc = c[0] & bit;
                    for (int y = 1; y < ly; y++) {
                        acc ^= c[y * lx] & bit;
                        c[y * lx] = (c[y * lx] & ~bit) | acc;
                    }
                }
                __syncthreads();
                for (int i = tid; i < P; i += NT) {
                    unsigned char *c = s.fl + i;
                    unsigned char acc = c[0] & bit;
                    for (int z = 1; z < lz; z++) {
                        acc ^= c[z * P] & bit;
                        c[z * P] = (c[z * P] & ~bit) | acc;
                    }
                }
                __syncthreads();
                }
            }
        }
        // element-order ranks of escapes and raw values
        const int e0 = tid * KPT;
        unsigned ce = 0, cr = 0;
        for (int i = 0; i < KPT; i++) {
            int e = e0 + i;
            if (e < n) {
                ce += (s.fl[e] >> 3) & 1;
                cr += (s.fl[e] >> 2) & 1;
            }
        }
        unsigned tot, totr;
        unsigned re = block_excl_scan(ce, &tot, s.scan);
        unsigned rr = block_excl_scan(cr, &totr, s.scan);
        if (tid == 0 && ((w0 >> 18) & 1) && totr != s.nraw) {
            s.bad = FZGPU_DE_RAWCOUNT;
            report(err, rel, FZGPU_DE_RAWCOUNT);
        }
        if (s.nesc) {
            for (int i = 0; i < KPT; i++) {
                int e = e0 + i;
                if (e < n && (s.fl[e] & 8)) s.q[e] = (int)p[s.esc_at + re++];
            }
        }
        __syncthreads();
        if (s.bad) return;
        // raw values go straight to the output (the main pass skips them)
        if ((w0 >> 18) & 1) {
            for (int i = 0; i < KPT; i++) {
                int e = e0 + i;
                if (e < n && (s.fl[e] & 4)) {
                    int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
                    unsigned long long b;
                    if (sizeof(T) == 4) b = p[s.rawv_at + rr];
                    else b = (unsigned long long)p[s.rawv_at + 2 * rr] | (unsigned long long)p[s.rawv_at + 2 * rr + 1] << 32;
                    if (z < box.lz && y < box.ly && x < box.lx)
                        dst[((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x] = Bits<T>::from(b);
                    rr++;
                }
            }
        }
    }
    if (tid == 0) s.q[0] = (int)s.origin;
    __syncthreads();

    // 3. undo Lorenzo: segmented prefix along x (rows of lx), then y, then z
    if (g.flat) {
        flat_unscan(g, (unsigned)(base % g.fP), n, [&](int e, int from) {
            s.q[e] = (int)((unsigned)s.q[e] + (unsigned)s.q[from]);
        });
    } else {
    {
        const int e0 = tid * KPT;
        int v[KPT];
        int r0 = e0 % lx;
        int first_start = -1;
        int acc = 0;
#pragma unroll
        for (int i = 0; i < KPT; i++) {
            int e = e0 + i;
            int x = r0 + i;
            while (x >= lx) x -= lx;  // lx may be < KPT
            int val = e < n ? s.q[e] : 0;
            if (x == 0) {
                if (first_start < 0) first_start = i;
                acc = val;
            } else {
                acc = (int)((unsigned)acc + (unsigned)val);
            }
            v[i] = acc;
        }
        int carry = block_seg_carry(first_start >= 0, acc, s.segv, s.segf);
#pragma unroll
        for (int i = 0; i < KPT; i++) {
            int e = e0 + i;
            if (first_start < 0 || i < first_start) v[i] = (int)((unsigned)v[i] + (unsigned)carry);
            if (e < n) s.q[e] = v[i];
        }
    }
    __syncthreads();
    if (ly > 1) {
        for (int i = tid; i < lz * lx; i += NT) {
            int z = i / lx, x = i - z * lx;
            col_scan(s.q + z * P + x, lx, ly);
        }
        __syncthreads();
    }
    if (lz > 1) {
        for (int i = tid; i < P; i += NT) {
            col_scan(s.q + i, P, lz);
        }
        __syncthreads();
    }
    }

    // 4. dequantize and write; fill and raw elements are exact
    const T fill = Bits<T>::from(fill_bits);
#pragma unroll
    for (int k = 0; k < KPT; k++) {
        int e = k * NT + tid;
        if (e < n) {
            unsigned char f = s.fl[e];
            if (f & 4) continue;
            unsigned long long gi;
            if (g.padded) {  // coded whole: the box's elements only
                const int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
                if (z >= box.lz || y >= box.ly || x >= box.lx) continue;
                gi = ((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x;
            } else if (n == TILE) {
                gi = base + eoff[e];
            } else {
                int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
                gi = ((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x;
            }
            dst[gi] = (f & 2) ? fill : Bits<T>::rec(s.q[e], step);
        }
    }
    (void)has_fill;
}

// The tiles the warp decoder left (list[0 .. *count)), grid-strided: their
// number is only known on the device. Without a list (fields whose tile
// shape has no warp walk): tiles 0 .. nall-1.
#ifndef DEC_LIST_MINB
#define DEC_LIST_MINB 3  // blocks per SM the register budget is cut for (the loop around decode_tile spills a little at 40 registers)
#endif
template <typename T>
__global__ void __launch_bounds__(NT, DEC_LIST_MINB)
    decode_list_kernel(Geo g, const unsigned char *__restrict__ blob, unsigned long long tile0, double step,
                       int has_fill, unsigned long long fill_bits, const unsigned long long *toff,
                       const unsigned *tsz, T *__restrict__ dst, unsigned long long *err,
                       const unsigned *__restrict__ emeta, const unsigned long long *__restrict__ eoff,
                       const unsigned *list, const unsigned *count, unsigned nall) {
    __shared__ DecShared s;
    grid_wait();  // the list and its count from the warp decoder (launch_dependent)
    const unsigned n = list ? *count : nall;
    for (unsigned i = blockIdx.x; i < n; i += gridDim.x) {
        __syncthreads();  // the previous tile is done with s
        decode_tile<T>(g, blob, tile0, step, has_fill, fill_bits, toff, tsz, dst, err, emeta, eoff, s,
                       list ? list[i] : i);
    }
}

#include "decode_warp.cuh"
#include "transcode.cuh"

__global__ void decode_finish_kernel(unsigned long long *err, unsigned *count, fzgpu_result *res) {
    grid_wait();  // a programmatic dependent of the decoders (launch_dependent)
    fzgpu_result r;
    memset(&r, 0, sizeof r);
    unsigned long long e = *err;
    // the next job's starting state (fzgpu_ctx's dec_clean): no error, no listed or masked tiles
    *err = ~0ull;
    count[0] = count[1] = 0;
    if (e != ~0ull) {
        r.status = FZGPU_E_FORMAT;
        r.err_tile = e >> 8;
        r.err_code = (unsigned)(e & 0xFF);
    }
    *res = r;
}

