// Sketch for docs/FORMAT-v2-proposal.md §6: the code-section tail of the GPU
// encoder and the code-section head of the decoder, version 1 (today's
// zero-block coding, as cuda/encode_warp.cuh's tile_layout + put_blocks do it)
// and version 2 (group rates). Not part of the product and never run: it
// exists to count SASS instructions per tile (compile only):
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -cubin -o /tmp/s.cubin cuda/tools/formatv2_sketch.cu
//   cuobjdump -sass /tmp/s.cubin | awk '/Function :/{f=$3} /^ +\/\*[0-9a-f]+\*\//{n[f]++} END{for(k in n) print k, n[k]}'
//
// One warp per tile; the tile's 16 bit planes (128 u32 words each, plane 15 =
// signs) are in shared memory, as both warp kernels hold them. Lane k owns
// slots 128k … 128k+127: the uint4 at word 4k of each plane, i.e. v1's
// zero-block k and v2's groups 8k … 8k+7. Output words from `out` (the tile's
// place; word0 and origin left to the caller).
#include <cstdint>

#define F 0xffffffffu
#ifndef V2_PLANES
#define V2_PLANES 15  // magnitude planes the v2 loops walk (15: worst case; -DV2_PLANES=k counts a tile of rate ≤ k)
#endif

template <int N> __device__ __forceinline__ unsigned scan_incl(unsigned x, int lane) {
#pragma unroll
    for (int o = 1; o < N; o <<= 1) {
        const unsigned y = __shfl_up_sync(F, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

__device__ __forceinline__ unsigned lanes_below(int lane) { return (1u << lane) - 1; }

// ---------------------------------------------------------------- version 1

// Tail of today's encoder: per plane a ballot of non-zero blocks, one scan of
// the plane sizes, uint4 stores of the non-zero blocks.
__device__ unsigned v1_encode_tail(const unsigned *pw, unsigned *out, int lane) {
    unsigned bm = 0;
#pragma unroll
    for (int p = 0; p < 16; p++) {
        const uint4 b = ((const uint4 *)(pw + 128 * p))[lane];
        const unsigned m = __ballot_sync(F, (b.x | b.y | b.z | b.w) != 0);
        bm = lane == p ? m : bm;
    }
    const unsigned words = bm ? 1 + 4 * __popc(bm) : 0;
    const unsigned inc = scan_incl<16>(words, lane);
    const unsigned my_at = 2 + inc - words;
    const unsigned total = 2 + __shfl_sync(F, inc, 15);
#pragma unroll
    for (int p = 0; p < 16; p++) {
        const unsigned m = __shfl_sync(F, bm, p), at = __shfl_sync(F, my_at, p);
        if (m == 0) continue;
        if (lane == 0) out[at] = m;
        if ((m >> lane) & 1) {
            const uint4 b = ((const uint4 *)(pw + 128 * p))[lane];
            ((uint4 *)(out + at + 1))[0] = b;  // the real kernel stores 4 words (alignment)
        }
    }
    return total;
}

// Head of today's decoder: read each plane's mask, scatter its blocks.
__device__ unsigned v1_decode_head(const unsigned *in, unsigned pmask, unsigned *pw, int lane) {
    unsigned at = 2;
#pragma unroll
    for (int p = 0; p < 16; p++) {
        uint4 b = make_uint4(0, 0, 0, 0);
        if ((pmask >> p) & 1) {
            const unsigned m = in[at];
            if ((m >> lane) & 1) b = ((const uint4 *)(in + at + 1 + 4 * __popc(m & lanes_below(lane))))[0];
            at += 1 + 4 * __popc(m);
        }
        ((uint4 *)(pw + 128 * p))[lane] = b;
    }
    return at;
}

// ---------------------------------------------------------------- version 2

// pext / pdep on 32 bits, branch-free (Hacker's Delight 7-4 / 7-5): the GPU
// has no PEXT/PDEP.
__device__ __forceinline__ unsigned compress32(unsigned x, unsigned m) {
    x &= m;
    unsigned mk = ~m << 1;
#pragma unroll
    for (int i = 0; i < 5; i++) {
        unsigned mp = mk ^ (mk << 1);
        mp ^= mp << 2;
        mp ^= mp << 4;
        mp ^= mp << 8;
        mp ^= mp << 16;
        const unsigned mv = mp & m;
        m = (m ^ mv) | (mv >> (1 << i));
        const unsigned t = x & mv;
        x = (x ^ t) | (t >> (1 << i));
        mk &= ~mp;
    }
    return x;
}

__device__ __forceinline__ unsigned expand32(unsigned x, unsigned m) {
    const unsigned m0 = m;
    unsigned mk = ~m << 1, a[5];
#pragma unroll
    for (int i = 0; i < 5; i++) {
        unsigned mp = mk ^ (mk << 1);
        mp ^= mp << 2;
        mp ^= mp << 4;
        mp ^= mp << 8;
        mp ^= mp << 16;
        const unsigned mv = mp & m;
        a[i] = mv;
        m = (m ^ mv) | (mv >> (1 << i));
        mk &= ~mp;
    }
#pragma unroll
    for (int i = 4; i >= 0; i--) {
        const unsigned t = x << (1 << i);
        x = (x & ~a[i]) | (t & a[i]);
    }
    return x & m0;
}

// Tail of a version-2 encoder. Rates of the lane's 8 groups in r[0..3]
// (two groups per u32, one per 16-bit half), non-zero masks in nz.
__device__ unsigned v2_encode_tail(const unsigned *pw, unsigned *out, int lane) {
    uint4 nz = make_uint4(0, 0, 0, 0);
    unsigned r[4] = {0, 0, 0, 0};
#pragma unroll
    for (int p = 0; p < 15; p++) {
        const uint4 b = ((const uint4 *)(pw + 128 * p))[lane];
        const unsigned pp = (p + 1) * 0x10001u;
        const unsigned w[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const unsigned m = __vcmpne2(w[j], 0);
            r[j] = (m & pp) | (~m & r[j]);
        }
        nz.x |= b.x, nz.y |= b.y, nz.z |= b.z, nz.w |= b.w;
    }
    unsigned rw = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) rw |= (r[j] & 0xF) << (8 * j) | ((r[j] >> 16) & 0xF) << (8 * j + 4);
    const unsigned bm = __ballot_sync(F, rw != 0);
    if (bm == 0) return 2;
    unsigned at = 2;
    if (lane == 0) out[at] = bm;
    at++;
    if (rw) out[at + __popc(bm & lanes_below(lane))] = rw;
    at += __popc(bm);
    // Magnitude units, plane-major, u16 each; all 15 planes (the worst
    // case: a real kernel stops at the largest rate, a warp-uniform bound).
    unsigned short *o16 = (unsigned short *)out;
    unsigned pos = 2 * at;
#pragma unroll
    for (int p = 0; p < V2_PLANES; p++) {
        const unsigned pp = p * 0x10001u;
        unsigned g[4], c = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            g[j] = __vcmpgtu2(r[j], pp);
            c += __popc(g[j]);
        }
        c >>= 4;
        const unsigned inc = scan_incl<32>(c, lane);
        unsigned o = pos + inc - c;
        const uint4 b = ((const uint4 *)(pw + 128 * p))[lane];
        const unsigned w[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (g[j] & 1) o16[o++] = (unsigned short)w[j];
            if (g[j] >> 31) o16[o++] = (unsigned short)(w[j] >> 16);
        }
        pos += __shfl_sync(F, inc, 31);
    }
    if (pos & 1) o16[pos++] = 0;  // (lane 31's write in the real kernel)
    at = pos / 2;
    // Signs of the non-zero magnitudes: compress each word of the sign plane
    // by its non-zero mask; the lane's bits are contiguous in the stream.
    const uint4 s = ((const uint4 *)(pw + 128 * 15))[lane];
    const unsigned nzw[4] = {nz.x, nz.y, nz.z, nz.w}, sw[4] = {s.x, s.y, s.z, s.w};
    unsigned pk[4], cnt[4], tot = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        pk[j] = compress32(sw[j], nzw[j]);
        cnt[j] = __popc(nzw[j]);
        tot += cnt[j];
    }
    const unsigned inc = scan_incl<32>(tot, lane);
    unsigned bit = inc - tot;  // the lane's first bit in the stream
    // Merge into the stream: words shared with a neighbour lane are ORed
    // (shared-memory atomics; the staging buffer starts zeroed).
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (cnt[j]) {
            const unsigned wi = at + (bit >> 5), sh = bit & 31;
            atomicOr(out + wi, pk[j] << sh);
            if (sh && (sh + cnt[j] > 32)) atomicOr(out + wi + 1, pk[j] >> (32 - sh));
        }
        bit += cnt[j];
    }
    return at + (__shfl_sync(F, inc, 31) + 31) / 32;
}

// Head of a version-2 decoder: rates, magnitude units into the planes, signs
// expanded into plane 15.
__device__ unsigned v2_decode_head(const unsigned *in, unsigned *pw, int lane) {
    const unsigned bm = in[2];
    unsigned at = 3;
    const unsigned rw = (bm >> lane) & 1 ? in[at + __popc(bm & lanes_below(lane))] : 0;
    at += __popc(bm);
    unsigned r[4];
#pragma unroll
    for (int j = 0; j < 4; j++) r[j] = (rw >> (8 * j) & 0xF) | (rw >> (8 * j + 4) & 0xF) << 16;
    const unsigned short *i16 = (const unsigned short *)in;
    unsigned pos = 2 * at;
    uint4 nz = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int p = 0; p < 15; p++) {
        uint4 b = make_uint4(0, 0, 0, 0);
        if (p < V2_PLANES) {
            const unsigned pp = p * 0x10001u;
            unsigned g[4], c = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                g[j] = __vcmpgtu2(r[j], pp);
                c += __popc(g[j]);
            }
            c >>= 4;
            const unsigned inc = scan_incl<32>(c, lane);
            unsigned o = pos + inc - c;
            unsigned w[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const unsigned lo = (g[j] & 1) ? i16[o++] : 0;
                const unsigned hi = (g[j] >> 31) ? i16[o++] : 0;
                w[j] = lo | hi << 16;
            }
            b = make_uint4(w[0], w[1], w[2], w[3]);
            nz.x |= b.x, nz.y |= b.y, nz.z |= b.z, nz.w |= b.w;
            pos += __shfl_sync(F, inc, 31);
        }
        ((uint4 *)(pw + 128 * p))[lane] = b;
    }
    at = (pos + 1) / 2;
    const unsigned nzw[4] = {nz.x, nz.y, nz.z, nz.w};
    unsigned tot = 0, cnt[4];
#pragma unroll
    for (int j = 0; j < 4; j++) tot += cnt[j] = __popc(nzw[j]);
    const unsigned inc = scan_incl<32>(tot, lane);
    unsigned bit = inc - tot, sg[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const unsigned wi = at + (bit >> 5), sh = bit & 31;
        const unsigned long long win = (unsigned long long)in[wi] | (unsigned long long)in[wi + 1] << 32;
        sg[j] = expand32((unsigned)(win >> sh), nzw[j]);
        bit += cnt[j];
    }
    ((uint4 *)(pw + 128 * 15))[lane] = make_uint4(sg[0], sg[1], sg[2], sg[3]);
    return at + (__shfl_sync(F, inc, 31) + 31) / 32;
}

// Variant for comparison: groups of 32 slots (one u32 per group and plane),
// rates as a u16 of 4 nibbles per non-zero block (the 32-slot layout measured
// in the proposal's §3; 2-14 % larger output than 16-slot groups).
__device__ unsigned v2w32_encode_tail(const unsigned *pw, unsigned *out, int lane) {
    unsigned pm[4] = {0, 0, 0, 0}, nzw[4] = {0, 0, 0, 0};
#pragma unroll
    for (int p = 0; p < 15; p++) {
        const uint4 b = ((const uint4 *)(pw + 128 * p))[lane];
        const unsigned w[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            pm[j] |= (w[j] != 0) << p;
            nzw[j] |= w[j];
        }
    }
    unsigned r[4], rw = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        r[j] = 32 - __clz(pm[j]);
        rw |= r[j] << (4 * j);
    }
    const unsigned bm = __ballot_sync(F, rw != 0);
    if (bm == 0) return 2;
    unsigned short *o16 = (unsigned short *)out;
    if (lane == 0) out[2] = bm;
    if (rw) o16[6 + __popc(bm & lanes_below(lane))] = (unsigned short)rw;
    unsigned at = 3 + (__popc(bm) + 1) / 2;
#pragma unroll
    for (int p = 0; p < V2_PLANES; p++) {
        unsigned c = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) c += r[j] > (unsigned)p;
        const unsigned inc = scan_incl<32>(c, lane);
        unsigned o = at + inc - c;
        const uint4 b = ((const uint4 *)(pw + 128 * p))[lane];
        const unsigned w[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (r[j] > (unsigned)p) out[o++] = w[j];
        at += __shfl_sync(F, inc, 31);
    }
    const uint4 s = ((const uint4 *)(pw + 128 * 15))[lane];
    const unsigned sw[4] = {s.x, s.y, s.z, s.w};
    unsigned pk[4], cnt[4], tot = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        pk[j] = compress32(sw[j], nzw[j]);
        cnt[j] = __popc(nzw[j]);
        tot += cnt[j];
    }
    const unsigned inc = scan_incl<32>(tot, lane);
    unsigned bit = inc - tot;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (cnt[j]) {
            const unsigned wi = at + (bit >> 5), sh = bit & 31;
            atomicOr(out + wi, pk[j] << sh);
            if (sh && (sh + cnt[j] > 32)) atomicOr(out + wi + 1, pk[j] >> (32 - sh));
        }
        bit += cnt[j];
    }
    return at + (__shfl_sync(F, inc, 31) + 31) / 32;
}

// Variant for comparison: the same 16-slot groups with the magnitude units
// in group-major order (all units of group 0, then group 1, …): one scan of
// the lane's Σ rates instead of one per plane, but a warp's stores are no
// longer contiguous across lanes (fine into shared memory, scattered into
// global memory).
__device__ unsigned v2gm_encode_tail(const unsigned *pw, unsigned *out, int lane) {
    uint4 nz = make_uint4(0, 0, 0, 0);
    unsigned r[4] = {0, 0, 0, 0};
#pragma unroll
    for (int p = 0; p < 15; p++) {
        const uint4 b = ((const uint4 *)(pw + 128 * p))[lane];
        const unsigned pp = (p + 1) * 0x10001u;
        const unsigned w[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const unsigned m = __vcmpne2(w[j], 0);
            r[j] = (m & pp) | (~m & r[j]);
        }
        nz.x |= b.x, nz.y |= b.y, nz.z |= b.z, nz.w |= b.w;
    }
    unsigned rw = 0, sum = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        rw |= (r[j] & 0xF) << (8 * j) | ((r[j] >> 16) & 0xF) << (8 * j + 4);
        sum += (r[j] & 0xF) + (r[j] >> 16);
    }
    const unsigned bm = __ballot_sync(F, rw != 0);
    if (bm == 0) return 2;
    unsigned at = 2;
    if (lane == 0) out[at] = bm;
    at++;
    if (rw) out[at + __popc(bm & lanes_below(lane))] = rw;
    at += __popc(bm);
    unsigned short *o16 = (unsigned short *)out;
    const unsigned inc = scan_incl<32>(sum, lane);
    unsigned o = 2 * at + inc - sum;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const unsigned rj = j & 1 ? r[j / 2] >> 16 : r[j / 2] & 0xF;
#pragma unroll
        for (int p = 0; p < V2_PLANES; p++) {
            if ((unsigned)p < rj) {
                const unsigned w = pw[128 * p + 4 * lane + j / 2];
                o16[o++] = (unsigned short)(j & 1 ? w >> 16 : w);
            }
        }
    }
    unsigned pos = 2 * at + __shfl_sync(F, inc, 31);
    if (pos & 1) o16[pos++] = 0;
    at = pos / 2;
    const uint4 s = ((const uint4 *)(pw + 128 * 15))[lane];
    const unsigned nzw[4] = {nz.x, nz.y, nz.z, nz.w}, sw[4] = {s.x, s.y, s.z, s.w};
    unsigned pk[4], cnt[4], tot = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        pk[j] = compress32(sw[j], nzw[j]);
        cnt[j] = __popc(nzw[j]);
        tot += cnt[j];
    }
    const unsigned inc2 = scan_incl<32>(tot, lane);
    unsigned bit = inc2 - tot;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (cnt[j]) {
            const unsigned wi = at + (bit >> 5), sh = bit & 31;
            atomicOr(out + wi, pk[j] << sh);
            if (sh && (sh + cnt[j] > 32)) atomicOr(out + wi + 1, pk[j] >> (32 - sh));
        }
        bit += cnt[j];
    }
    return at + (__shfl_sync(F, inc2, 31) + 31) / 32;
}

// ---------------------------------------------------------------- kernels
// One warp per tile; the planes come from `planes` (2048 words a tile), the
// tile's bytes go to / come from a fixed 2112-word slot per tile.

// The encoders write the tile into shared memory (the real kernel parks or
// copies it out afterwards, the same for both versions).
__global__ void enc_v1(const unsigned *planes, unsigned *out, unsigned *size) {
    __shared__ unsigned pw[2048], ob[2112];
    const int lane = threadIdx.x;
    for (int i = lane; i < 2048; i += 32) pw[i] = planes[2048ull * blockIdx.x + i];
    __syncwarp();
    const unsigned n = v1_encode_tail(pw, ob, lane);
    __syncwarp();
    for (int i = lane; i < 2112; i += 32) out[2112ull * blockIdx.x + i] = ob[i];
    if (lane == 0) size[blockIdx.x] = n;
}

__global__ void enc_v2(const unsigned *planes, unsigned *out, unsigned *size) {
    __shared__ unsigned pw[2048], ob[2112];
    const int lane = threadIdx.x;
    for (int i = lane; i < 2048; i += 32) pw[i] = planes[2048ull * blockIdx.x + i];
    __syncwarp();
    const unsigned n = v2_encode_tail(pw, ob, lane);
    __syncwarp();
    for (int i = lane; i < 2112; i += 32) out[2112ull * blockIdx.x + i] = ob[i];
    if (lane == 0) size[blockIdx.x] = n;
}

// The decoders read the tile from shared memory (staged by a coalesced copy,
// the same for both versions).
__global__ void dec_v1(const unsigned *in, unsigned *planes, unsigned *size) {
    __shared__ unsigned pw[2048], t[2112];
    const int lane = threadIdx.x;
    for (int i = lane; i < 2112; i += 32) t[i] = in[2112ull * blockIdx.x + i];
    __syncwarp();
    const unsigned n = v1_decode_head(t, t[0] & 0xFFFF, pw, lane);
    __syncwarp();
    for (int i = lane; i < 2048; i += 32) planes[2048ull * blockIdx.x + i] = pw[i];
    if (lane == 0) size[blockIdx.x] = n;
}

__global__ void dec_v2(const unsigned *in, unsigned *planes, unsigned *size) {
    __shared__ unsigned pw[2048], t[2112];
    const int lane = threadIdx.x;
    for (int i = lane; i < 2112; i += 32) t[i] = in[2112ull * blockIdx.x + i];
    __syncwarp();
    const unsigned n = v2_decode_head(t, pw, lane);
    __syncwarp();
    for (int i = lane; i < 2048; i += 32) planes[2048ull * blockIdx.x + i] = pw[i];
    if (lane == 0) size[blockIdx.x] = n;
}

__global__ void enc_v2w32(const unsigned *planes, unsigned *out, unsigned *size) {
    __shared__ unsigned pw[2048], ob[2112];
    const int lane = threadIdx.x;
    for (int i = lane; i < 2048; i += 32) pw[i] = planes[2048ull * blockIdx.x + i];
    __syncwarp();
    const unsigned n = v2w32_encode_tail(pw, ob, lane);
    __syncwarp();
    for (int i = lane; i < 2112; i += 32) out[2112ull * blockIdx.x + i] = ob[i];
    if (lane == 0) size[blockIdx.x] = n;
}

__global__ void enc_v2gm(const unsigned *planes, unsigned *out, unsigned *size) {
    __shared__ unsigned pw[2048], ob[2112];
    const int lane = threadIdx.x;
    for (int i = lane; i < 2048; i += 32) pw[i] = planes[2048ull * blockIdx.x + i];
    __syncwarp();
    const unsigned n = v2gm_encode_tail(pw, ob, lane);
    __syncwarp();
    for (int i = lane; i < 2112; i += 32) out[2112ull * blockIdx.x + i] = ob[i];
    if (lane == 0) size[blockIdx.x] = n;
}
