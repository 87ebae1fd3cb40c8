// Container version 2 on the decode side (included by decode.cuh): each
// version-2 tile is rewritten as the version-1 tile that holds the same
// codes, and the version-1 decoders (decode_warp_kernel, decode_list_kernel)
// then run unchanged on that copy. Per job:
//   transcode_v2_kernel<false>  one warp per tile: reads the tile's code
//                      section, checks every version-2 rule of the code
//                      section (docs/FORMAT.md; rejects named by
//                      FZGPU_DE_V2*), and writes the size of the version-1
//                      tile (0: rejected, reported like the v1 rejects).
//   v2_scan_kernel     one block: sizes -> offsets in the context's v2
//                      buffer, and their total (the host grows the buffer
//                      to it: fzgpu_decompress).
//   transcode_v2_kernel<true>   the same walk again, writing the v1 tile.
// Why a pre-pass instead of a version-2 head in the warp decoder: the v1
// decoders stay byte for byte what has been verified against the CPU, and
// the tail (escapes, fill and raw masks, raw values) is copied verbatim, so
// every tail rule (and every decode rule after the codes) is checked by the
// same code for both versions. Its cost is one read of the v2 code section
// twice and one write of the v1 tile (PERF.md has no number for it yet).
//
// A v2 code section (bit 0 of word0) against v1's:
//   block mask, rate words (a nibble per 16-slot group), the magnitudes'
//   bit planes as group-major u16 units (unit p of group g: bit p of the
//   magnitudes of slots 16g .. 16g+15), a padding u16 when their number is
//   odd, then one sign bit per non-zero magnitude in slot order.
//   v2 magnitude 32767 with sign 0 is an escape: v1 code 0x8000. Any other
//   magnitude m with sign s is v1 code s << 15 | m. So v1 plane p (p < 15)
//   of a group is its unit p with the escape slots cleared, and v1 plane 15
//   is the sign bits plus the escape slots.
// The warp's lane k owns block k: slots 128k .. 128k+127, groups 8k .. 8k+7.

#define TC_W 4               // warps per block
#define V2_TAIL_MAX 50188u   // largest valid tail: escapes 4 + 4*4095, two masks 2*(4+512), raw count 4 + 8*4096 bytes

// Checks tile rel's version-2 code section; returns 0 (and *v1sz, the
// version-1 tile's bytes) or an FZGPU_DE_* code. With WRITE, also writes
// the version-1 tile at o. Every return is warp-uniform.
template <bool WRITE>
__device__ __forceinline__ unsigned transcode_tile(const unsigned *__restrict__ gp, unsigned nw, int n, int lane,
                                                   unsigned *v1sz, unsigned *__restrict__ o) {
    const unsigned F = 0xffffffffu;
    const unsigned w0 = gp[0];
    if (w0 & ~0x70001u) return FZGPU_DE_FLAGS;
    if (!(w0 & 1u)) {
        // no codes: the v1 tile is the same bytes (plane mask 0)
        if (nw - 2 > V2_TAIL_MAX / 4) return FZGPU_DE_TRAILTILE;
        *v1sz = 4 * nw;
        if (WRITE)
            for (unsigned i = lane; i < nw; i += 32) o[i] = gp[i];
        return 0;
    }
    if (nw < 3) return FZGPU_DE_TRUNC;
    const unsigned bm = gp[2];
    const int nblk = (n + 127) >> 7;  // 1 .. 32
    if (bm == 0 || (nblk < 32 && (bm >> nblk))) return FZGPU_DE_V2BLOCKS;
    const unsigned nr = __popc(bm);
    if (3 + nr > nw) return FZGPU_DE_TRUNC;
    const bool mine = (bm >> lane) & 1u;
    const unsigned rw = mine ? gp[3 + __popc(bm & ((1u << lane) - 1))] : 0u;
    bool bad = mine && rw == 0;
    unsigned sumr = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const unsigned r = (rw >> (4 * j)) & 15u;
        bad |= r != 0 && 16 * (8 * lane + j) >= n;  // a rate on a group past the tile's values
        sumr += r;
    }
    if (__any_sync(F, bad)) return FZGPU_DE_V2RATES;
    const unsigned incl = warp_incl_scan<32>(sumr, lane);
    const unsigned W = __shfl_sync(F, incl, 31);  // units in all
    const unsigned ms = 3 + nr;                   // first magnitude word
    const unsigned mw = (W + 1) >> 1;             // magnitude words, padding included
    if (ms + mw > nw) return FZGPU_DE_TRUNC;
    if ((W & 1u) && (gp[ms + mw - 1] >> 16)) return FZGPU_DE_V2MAGS;  // non-zero padding u16
    const unsigned short *up = (const unsigned short *)(gp + ms);

    // Per group: first unit, union of the magnitudes' bits (non-zero
    // slots), escapes (all 15 units set), the v1 planes 0-14 present in this
    // lane's block (pres); the top unit must be non-zero and no bit may lie
    // on a slot >= n. A group's units are loaded at once (15 predicated
    // loads in flight, not a chain of 15).
    unsigned us[8], nz[8], es[8];
    unsigned pres = 0;
    bool badtop = false, badslot = false;
    {
        unsigned u = incl - sumr;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const unsigned r = (rw >> (4 * j)) & 15u;
            unsigned v[15];
#pragma unroll
            for (int p = 0; p < 15; p++) v[p] = (unsigned)p < r ? up[u + p] : 0u;
            unsigned any = 0, all = 0xFFFFu, top = 0;
#pragma unroll
            for (int p = 0; p < 15; p++) {
                any |= v[p];
                all &= v[p];
                if ((unsigned)p + 1 == r) top = v[p];
            }
            const unsigned e = r == 15 ? all : 0u;
#pragma unroll
            for (int p = 0; p < 15; p++)
                if (v[p] & ~e) pres |= 1u << p;
            badtop |= r != 0 && top == 0;
            const int valid = n - 16 * (8 * lane + j);  // slots of the group below n
            const unsigned vm = valid >= 16 ? 0xFFFFu : valid <= 0 ? 0u : (1u << valid) - 1;
            badslot |= (any & ~vm) != 0;
            us[j] = u;
            nz[j] = any;
            es[j] = e;
            u += r;
        }
    }
    if (__any_sync(F, badtop)) return FZGPU_DE_V2RATES;
    if (__any_sync(F, badslot)) return FZGPU_DE_V2MAGS;
    if (__shfl_sync(F, nz[0], 0) & 1u) return FZGPU_DE_SLOT0;  // slot 0's residual is the origin

    // Signs: one bit per non-zero magnitude, in slot order.
    unsigned cnt = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) cnt += __popc(nz[j]);
    const unsigned sincl = warp_incl_scan<32>(cnt, lane);
    const unsigned N = __shfl_sync(F, sincl, 31);
    const unsigned ss = ms + mw, sw = (N + 31) >> 5;  // first sign word, sign words
    if (ss + sw > nw) return FZGPU_DE_TRUNC;
    if ((N & 31u) && (gp[ss + sw - 1] >> (N & 31u))) return FZGPU_DE_V2SIGNS;  // unused bits of the last word
    const unsigned te = ss + sw;                                                // first tail word
    if (nw - te > V2_TAIL_MAX / 4) return FZGPU_DE_TRAILTILE;
    unsigned sg[8];
    bool badsign = false;
    {
        unsigned b = sincl - cnt;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const unsigned c = __popc(nz[j]);
            unsigned s = 0;
            if (c) {
                const unsigned i0 = b >> 5, off = b & 31u;
                unsigned long long win = gp[ss + i0];
                if (off + c > 32) win |= (unsigned long long)gp[ss + i0 + 1] << 32;  // i0 + 1 < sw: b + c <= N
                unsigned bits = (unsigned)(win >> off) & ((1u << c) - 1);
                for (unsigned m = nz[j]; m; m &= m - 1) {
                    if (bits & 1u) s |= m & (0u - m);
                    bits >>= 1;
                }
            }
            badsign |= (s & es[j]) != 0;  // an escape is magnitude 32767 with sign 0
            sg[j] = s;
            b += c;
        }
    }
    if (__any_sync(F, badsign)) return FZGPU_DE_V2SIGNS;

    // v1 plane 15 (signs and escapes), then each plane's block mask.
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (sg[j] | es[j]) pres |= 1u << 15;
    unsigned pm = 0, words = 0;
#pragma unroll
    for (int p = 0; p < 16; p++) {
        const unsigned b = __ballot_sync(F, (pres >> p) & 1u);
        if (b) {
            pm |= 1u << p;
            words += 1 + 4 * __popc(b);
        }
    }
    *v1sz = 4 * (2 + words + (nw - te));
    if (!WRITE) return 0;
    if (lane == 0) {
        o[0] = (w0 & 0x70000u) | pm;
        o[1] = gp[1];
    }
    unsigned at = 2;
#pragma unroll 1
    for (int p = 0; p < 16; p++) {
        const unsigned b = __ballot_sync(F, (pres >> p) & 1u);
        if (!b) continue;
        if (lane == 0) o[at] = b;
        if ((b >> lane) & 1u) {
            unsigned *q = o + at + 1 + 4 * __popc(b & ((1u << lane) - 1));
#pragma unroll
            for (int w = 0; w < 4; w++) {
                unsigned h[2];
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int j = 2 * w + i;
                    const unsigned r = (rw >> (4 * j)) & 15u;
                    h[i] = p == 15 ? sg[j] | es[j] : (unsigned)p < r ? up[us[j] + p] & ~es[j] : 0u;
                }
                q[w] = h[0] | h[1] << 16;
            }
        }
        at += 1 + 4 * __popc(b);
    }
    for (unsigned i = lane; i < nw - te; i += 32) o[at + i] = gp[te + i];
    return 0;
}

// WRITE false: v1sz[rel] = the version-1 size of tile rel, or 0 (its size
// was invalid, or the tile breaks a rule: reported). WRITE true: the tiles
// with v1sz[rel] != 0 go to out + v1off[rel].
template <bool WRITE>
__global__ void __launch_bounds__(TC_W * 32)
    transcode_v2_kernel(Geo g, const unsigned char *__restrict__ blob, unsigned long long tile0,
                        unsigned long long nt, const unsigned long long *__restrict__ toff,
                        const unsigned *__restrict__ tsz, unsigned *v1sz, const unsigned long long *v1off,
                        unsigned char *out, unsigned long long *err) {
    const int lane = threadIdx.x & 31;
    const unsigned long long rel = (unsigned long long)blockIdx.x * TC_W + (threadIdx.x >> 5);
    if (rel >= nt) return;
    const unsigned sz = tsz[rel];
    if (WRITE ? v1sz[rel] == 0 : sz == 0) {
        if (!WRITE && lane == 0) v1sz[rel] = 0;
        return;
    }
    unsigned long long z0, y0, x0;
    int lz, ly, lx;
    tile_box(g, tile0 + rel, z0, y0, x0, lz, ly, lx);
    const unsigned *gp = (const unsigned *)(blob + toff[rel]);
    unsigned size = 0;
    const unsigned code =
        transcode_tile<WRITE>(gp, sz / 4, lz * ly * lx, lane, &size, WRITE ? (unsigned *)(out + v1off[rel]) : nullptr);
    if (!WRITE && lane == 0) {
        v1sz[rel] = code ? 0u : size;
        if (code) report(err, rel, code);
    }
}

// Exclusive scan of the job's v1 tile sizes into offsets, and their total.
// One block; thread i takes the i-th run of ceil(nt / NT) tiles: its run's
// sum, a 64-bit block scan of the sums, then the run's offsets (two passes
// over the sizes, instead of a block-wide scan per NT tiles).
__global__ void __launch_bounds__(NT) v2_scan_kernel(const unsigned *v1sz, unsigned long long nt,
                                                     unsigned long long *v1off, unsigned long long *total) {
    __shared__ unsigned long long wsum[NWARPS];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const unsigned long long per = (nt + NT - 1) / NT, b = threadIdx.x * per, e = min(b + per, nt);
    unsigned long long s = 0;
    for (unsigned long long i = b; i < e; i++) s += v1sz[i];
    unsigned long long x = s;  // inclusive prefix over the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) wsum[w] = x;
    __syncthreads();
    unsigned long long run = x - s;
    for (int i = 0; i < w; i++) run += wsum[i];
    for (unsigned long long i = b; i < e; i++) {
        v1off[i] = run;
        run += v1sz[i];
    }
    if (threadIdx.x == NT - 1) *total = run;  // the last run ends at the total (an empty run starts there)
}
