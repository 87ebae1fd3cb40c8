// Decoder v6: one warp per tile for the common case (included by fzgpu.cu).
//
// The mirror of encode_warp.cuh's fast walks. A warp takes a full tile of
// the rank-1 or rank-3 shape whose word0 has no flags (no escapes, fill or
// raw values) and whose bytes fit the warp's staging buffer: it stages the
// tile in shared memory (coalesced), finds where each bit plane starts
// (a serial walk over the plane masks, from shared memory), then walks the
// tile in slot order, 32 slots per step as the encoder did: lanes 16h + p
// load plane p of a pair of words, one 32x32 bit transpose gives each lane
// its two codes, and the Lorenzo prefix sums run as warp shuffles plus
// carried registers. No block barriers, no per-element tables.
//
// Any other tile - clipped, rank 2, other shapes, flags, too large, or one
// whose structure does not check out (sizes, a code in slot 0, an escape
// code without escapes) - goes on a list for the block decoder
// (decode_list_kernel), which decodes or rejects it exactly as before. A
// warp that gives up may have written part of its tile; the block decoder
// runs after it on the same stream and rewrites all of it. Output does not
// depend on which decoder took a tile.

#define DEC_W 4         // warps per block
#define DEC_STAGE 1536  // words staged per warp (6 KiB); larger tiles go to the block decoder
#ifndef DEC_MINB_W
#define DEC_MINB_W 6    // blocks per SM the register budget is cut for: 80 registers, 24 warps (64 spill)
#endif

// Sign-magnitude code to residual; an escape code (0x8000) sets bad.
__device__ __forceinline__ int resid_of(unsigned c, bool &bad) {
    const int mag = (int)(c & 0x7FFFu);
    bad |= c == 0x8000u;
    return (c & 0x8000u) ? -mag : mag;
}

__device__ __forceinline__ int wadd(int a, int b) { return (int)((unsigned)a + (unsigned)b); }

// Rank 3: tile 8x16x32, sub-blocks 4x4x8; the encoder's walk (z outer,
// k, then j inner; lane l = (dy, dx) = (l/8, l%8); word 64(z/4) + 16j +
// 4k + z%4). d = Dz(Dy(Dx q)) is undone in the other order: B = d + B(z-1)
// (carry cz[j][k]), A = B + A(y-1) (scan over dy, carry cy from the
// previous j), q = A + q(x-1) (scan over dx, carry cx[j] from the previous
// k).
template <typename T>
__device__ __forceinline__ bool dec_fast3(const unsigned *tb, unsigned bm, unsigned pat, int origin, const Geo &g,
                                          unsigned long long base, double step, T *__restrict__ dst, int lane) {
    const unsigned F = 0xffffffffu;
    const int dy = lane >> 3, dx = lane & 7, hsel = (lane >> 4) * 16;
    const unsigned long long nx4 = 4 * g.nx, plane = g.ny * g.nx;
    T *p0 = dst + base + (unsigned long long)dy * g.nx + dx;
    int cz[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int k = 0; k < 4; k++) cz[j][k] = 0;
    bool bad = false;
#pragma unroll 1
    for (int z = 0; z < 8; z++) {
        T *r0 = p0 + z * plane;
        int cx[4] = {0, 0, 0, 0};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int wz = (z >> 2) * 64 + 4 * k + (z & 3);
            // lanes 0-15 load word wz + 16j for j = 0, 2; lanes 16-31 for j = 1, 3
            const unsigned t0 = transpose32(zb_word(tb, bm, pat, wz + hsel), lane);
            const unsigned t1 = transpose32(zb_word(tb, bm, pat, wz + 32 + hsel), lane);
            const unsigned c[4] = {t0 & 0xFFFFu, t0 >> 16, t1 & 0xFFFFu, t1 >> 16};
            int cy = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int d = resid_of(c[j], bad);
                if (z == 0 && k == 0 && j == 0 && lane == 0) {
                    bad |= c[j] != 0;  // slot 0 holds code 0; its residual is the origin
                    d = origin;
                }
                const int B = wadd(d, cz[j][k]);
                cz[j][k] = B;
                int A = B, u;
                u = __shfl_up_sync(F, A, 8);
                if (dy >= 1) A = wadd(A, u);
                u = __shfl_up_sync(F, A, 16);
                if (dy >= 2) A = wadd(A, u);
                A = wadd(A, cy);
                cy = __shfl_sync(F, A, 24 + dx);
                int q = A;
                u = __shfl_up_sync(F, q, 1);
                if (dx >= 1) q = wadd(q, u);
                u = __shfl_up_sync(F, q, 2);
                if (dx >= 2) q = wadd(q, u);
                u = __shfl_up_sync(F, q, 4);
                if (dx >= 4) q = wadd(q, u);
                q = wadd(q, cx[j]);
                cx[j] = __shfl_sync(F, q, lane | 7);
                r0[(unsigned long long)j * nx4 + 8 * k] = Bits<T>::rec(q, step);
            }
        }
    }
    return !__any_sync(F, bad);
}

// Rank 1: tile 1x1x4096, slot = element. Words w, w+1 per transpose; q is
// an inclusive scan over the warp plus the previous word's last q.
template <typename T>
__device__ __forceinline__ bool dec_fast1(const unsigned *tb, unsigned bm, unsigned pat, int origin,
                                          unsigned long long base, double step, T *__restrict__ dst, int lane) {
    const unsigned F = 0xffffffffu;
    const int hsel = lane >> 4;
    T *p0 = dst + base + lane;
    int carry = 0;
    bool bad = false;
#pragma unroll 2
    for (int w = 0; w < 128; w += 2) {
        const unsigned t = transpose32(zb_word(tb, bm, pat, w + hsel), lane);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const unsigned c = h ? t >> 16 : t & 0xFFFFu;
            int d = resid_of(c, bad);
            if (w == 0 && h == 0 && lane == 0) {
                bad |= c != 0;
                d = origin;
            }
            int q = d, u;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                u = __shfl_up_sync(F, q, o);
                if (lane >= o) q = wadd(q, u);
            }
            q = wadd(q, carry);
            carry = __shfl_sync(F, q, 31);
            p0[32 * (w + h)] = Bits<T>::rec(q, step);
        }
    }
    return !__any_sync(F, bad);
}

template <typename T>
__global__ void __launch_bounds__(DEC_W * 32, DEC_MINB_W)
    decode_warp_kernel(Geo g, const unsigned char *__restrict__ blob, unsigned long long tile0,
                       unsigned long long nt, double step, const unsigned long long *__restrict__ toff,
                       const unsigned *__restrict__ tsz, T *__restrict__ dst, unsigned *list, unsigned *count) {
    __shared__ unsigned stage[DEC_W][DEC_STAGE];
    const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
    const unsigned long long rel = (unsigned long long)blockIdx.x * DEC_W + wi;
    if (rel >= nt) return;
    const unsigned sz = tsz[rel];
    if (sz == 0) return;  // its size was invalid, already reported by the chunk scan
    unsigned long long z0, y0, x0;
    int lz, ly, lx;
    tile_box(g, tile0 + rel, z0, y0, x0, lz, ly, lx);
    const unsigned nw = sz / 4;
    const unsigned *gp = (const unsigned *)(blob + toff[rel]);
    // word0 first: a tile with flags goes to the block decoder unstaged
    bool ok = (g.fast3 || g.fast1) && lz * ly * lx == TILE && nw <= DEC_STAGE && (gp[0] >> 16) == 0;
    if (ok) {
        unsigned *tb = stage[wi];
        for (unsigned i = lane; i < nw; i += 32) tb[i] = __ldcs(gp + i);
        __syncwarp();
        const unsigned w0 = tb[0];
        // where each plane's blocks start: serial over the masks; lanes p
        // and 16 + p keep plane p's
        unsigned at = 2, bm = 0, pat = 0;
        for (int pl = 0; pl < 16 && ok; pl++) {
            if (!((w0 >> pl) & 1)) continue;
            if (at >= nw) {
                ok = false;
                break;
            }
            const unsigned m = tb[at];
            if ((lane & 15) == pl) {
                bm = m;
                pat = at + 1;
            }
            at += 1 + 4 * __popc(m);
        }
        ok = ok && at == nw;
        if (ok) {
            const unsigned long long base = (z0 * g.ny + y0) * g.nx + x0;
            const int origin = (int)tb[1];
            ok = g.fast3 ? dec_fast3<T>(tb, bm, pat, origin, g, base, step, dst, lane)
                         : dec_fast1<T>(tb, bm, pat, origin, base, step, dst, lane);
        }
    }
    if (!ok && lane == 0) list[atomicAdd(count, 1u)] = (unsigned)rel;
}
