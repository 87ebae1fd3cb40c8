// Container version 2 on the decode side (included by decode.cuh): each
// version-2 tile is rewritten as the version-1 tile that holds the same
// codes, and the version-1 decoders (decode_warp_kernel, decode_list_kernel)
// then run unchanged on that copy. Per job one kernel, transcode_v2_kernel:
// one warp per tile reads the tile's code section, checks every version-2
// rule of it (docs/FORMAT.md; rejects named by FZGPU_DE_V2*) and writes the
// version-1 tile, its size (0: rejected, reported like the v1 rejects) and
// its offset in the context's v2 buffer.
// Offsets without a scan: the version-1 tile of job tile i goes to
//   (its version-2 offset - the job's first chunk's offset) + V2_SLACK * i,
// since a version-1 tile is at most V2_SLACK bytes longer than its
// version-2 tile (transcode_tile), and the version-2 tiles of a job lie in
// order, each after the one before (chunk_scan_kernel within a chunk; the
// kernel checks that each chunk starts after the one before ends). So the
// copies never overlap, and the buffer's size follows from the blob's size
// and the job's tiles on the host, with no wait on the device
// (fzgpu_decompress).
// Why a pre-pass instead of a version-2 head in the warp decoder: the v1
// decoders stay byte for byte what has been verified against the CPU, and
// the tail (escapes, fill and raw masks, raw values) is copied verbatim, so
// every tail rule (and every decode rule after the codes) is checked by the
// same code for both versions. Its cost is one read of the v2 tile and one
// write of the v1 tile.
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

#include "stage_words.cuh"  // the tile into the stage buffer by cp.async

#define TC_W 4               // warps per block
// A warp's stage buffer (words): tiles up to 6 KiB are read once, into it;
// longer ones are parsed from global memory. With 6 KiB, 8 blocks fit an
// SM (24 KiB of shared memory and 64 registers each, no spill): H200, v29
// call 3, against 8 KiB and 6 blocks (80 registers), decompress of version
// 2 hst 1.02 / 1.05 / 1.09x and hyg 1.08 / 1.11 / 1.09x at 1e-2 / 1e-3 /
// 1e-4. Both overridable for A/B builds.
#ifndef TC_STAGE
#define TC_STAGE 1536u
#endif
#ifndef TC_MINB
#define TC_MINB 8
#endif
#define V2_TAIL_MAX 50188u   // largest valid tail: escapes 4 + 4*4095, two masks 2*(4+512), raw count 4 + 8*4096 bytes
// A version-1 tile is shorter than its version-2 tile + V2_SLACK: word0,
// origin and tail are the same bytes in both; a v1 code section is at most
// 16 planes x (block mask 4 + 32 blocks x 16) = 8256 bytes, a v2 code
// section at least 16 (block mask, a rate word, a non-zero top unit and
// its padding u16, and so a sign word); without codes both are the same.
#define V2_SLACK 8256u
// Largest valid version-2 tile: word0 and origin 8, block mask 4, 32 rate
// words, 256 x 15 units, 128 sign words, the tail (a tile without codes is
// at most 8 + tail); every longer tile is rejected (FZGPU_DE_TRAILTILE).
#define V2_TILE_MAX (8u + 4u + 4u * 32u + 2u * 3840u + 4u * 128u + V2_TAIL_MAX)

// The low popc(m) bits of x laid on the set bits of m, lowest first (a
// parallel bit deposit, Hacker's Delight 7-5 "expand"): ~75 instructions
// for 32 bits, where a loop over the set bits takes one round per bit.
__device__ __forceinline__ unsigned deposit_bits(unsigned x, unsigned m) {
    const unsigned m0 = m;
    unsigned mk = ~m << 1, mv[5];
#pragma unroll
    for (int i = 0; i < 5; i++) {
        unsigned mp = mk ^ (mk << 1);
        mp ^= mp << 2;
        mp ^= mp << 4;
        mp ^= mp << 8;
        mp ^= mp << 16;
        mv[i] = mp & m;
        m = (m ^ mv[i]) | (mv[i] >> (1 << i));
        mk &= ~mp;
    }
#pragma unroll
    for (int i = 4; i >= 0; i--) x = (x & ~mv[i]) | ((x << (1 << i)) & mv[i]);
    return x & m0;
}

// Appends v1 plane p (this lane's four words of it, q) to the tile at o +
// at when any lane's words are non-zero: the plane's block mask (lane 0),
// then the words of the lanes with a bit in it, in lane order; sets bit p
// of the plane mask pm. Warp-wide.
__device__ __forceinline__ void v1_put_plane(unsigned *__restrict__ o, unsigned &at, unsigned &pm, unsigned p,
                                             const unsigned (&q)[4], int lane) {
    const unsigned b = __ballot_sync(0xffffffffu, (q[0] | q[1] | q[2] | q[3]) != 0u);
    if (!b) return;
    pm |= 1u << p;
    if (lane == 0) o[at] = b;
    if ((b >> lane) & 1u) {
        unsigned *d = o + at + 1 + 4 * __popc(b & ((1u << lane) - 1));
#pragma unroll
        for (int w = 0; w < 4; w++) d[w] = q[w];
    }
    at += 1 + 4 * __popc(b);
}

// Checks a version-2 tile's code section (gp: its nw words; n: its
// values); returns 0 after writing the version-1 tile at o and its bytes
// to *v1sz (at most 4 nw + V2_SLACK - 16), or an FZGPU_DE_* code (the
// planes written before the rule that failed was checked lie at o, inside
// the same bound; the caller then reports size 0). Every return is
// warp-uniform.
__device__ __forceinline__ unsigned transcode_tile(const unsigned *__restrict__ gp, unsigned nw, int n, int lane,
                                                   unsigned *v1sz, unsigned *__restrict__ o) {
    const unsigned F = 0xffffffffu;
    const unsigned w0 = gp[0];
    if (w0 & ~0x70001u) return FZGPU_DE_FLAGS;
    if (!(w0 & 1u)) {
        // no codes: the v1 tile is the same bytes (plane mask 0)
        if (nw - 2 > V2_TAIL_MAX / 4) return FZGPU_DE_TRAILTILE;
        *v1sz = 4 * nw;
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

    // Per group: its first unit (us[j]; us[8] is the lane's end), the top
    // unit, which must be non-zero, and escapes (rare: a group of rate 15
    // whose 15 units share a set bit; esw[w]: the escape slots of groups 2w,
    // 2w + 1 as one word), found before the plane walk below so that it can
    // leave them out of v1 planes 0-14.
    unsigned us[9], esw[4] = {0u, 0u, 0u, 0u}, mr = 0;
    bool badtop = false;
    {
        unsigned u = incl - sumr;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const unsigned r = (rw >> (4 * j)) & 15u;
            us[j] = u;
            if (r) badtop |= up[u + r - 1] == 0u;
            mr = r > mr ? r : mr;
            u += r;
        }
        us[8] = u;
    }
    if (__any_sync(F, badtop)) return FZGPU_DE_V2RATES;
    if (__any_sync(F, mr == 15u)) {
        // unrolled, so that us[] and esw[] are indexed by constants and stay
        // in registers (a rolled loop put them in local memory: nvcc 13, a
        // 64-byte stack frame read by the plane walk below, v52)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (us[j + 1] - us[j] == 15u) {
                unsigned all = 0xFFFFu;
#pragma unroll 1
                for (int p = 0; p < 15; p++) all &= up[us[j] + p];
                esw[j >> 1] |= all << (16 * (j & 1));
            }
        }
    }
    const unsigned maxr = __reduce_max_sync(F, mr);

    // v1 planes 0-14, one at a time up to the warp's highest rate: each
    // lane's four words of the plane (its groups' unit p, 0 past a group's
    // rate, the escape slots cleared), the plane's block mask by a ballot,
    // the words of the lanes with a bit in it. The lanes' words ORed over
    // the planes, escapes included, are the non-zero magnitudes (nzw). One
    // read of each unit: the census loop over each group's units and the 16
    // ballots for the planes' masks before v52 were ~30 % of the kernel's
    // instructions (v51 call 3, ncu SourceCounters, hst at 1e-2). A tile
    // broken in a way found below (a bit on a slot >= n, slot 0, signs,
    // tail) has had planes written by then, inside its own part of the
    // output (at most 2 + 15 x 129 words < V2_SLACK), and is reported with
    // size 0.
    unsigned nzw[4] = {0u, 0u, 0u, 0u}, pm = 0, at = 2;
#pragma unroll 1
    for (unsigned p = 0; p < maxr; p++) {
        unsigned q[4];
#pragma unroll
        for (int w = 0; w < 4; w++) {
            const unsigned a0 = us[2 * w] + p, a1 = us[2 * w + 1] + p;
            const unsigned h0 = a0 < us[2 * w + 1] ? up[a0] : 0u, h1 = a1 < us[2 * w + 2] ? up[a1] : 0u;
            const unsigned v = h0 | h1 << 16;
            nzw[w] |= v;
            q[w] = v & ~esw[w];
        }
        v1_put_plane(o, at, pm, p, q, lane);
    }
    bool badslot = false;
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const int valid = n - (128 * lane + 32 * w);  // slots of the word below n
        const unsigned vm = valid >= 32 ? 0xFFFFFFFFu : valid <= 0 ? 0u : (1u << valid) - 1;
        badslot |= (nzw[w] & ~vm) != 0u;
    }
    if (__any_sync(F, badslot)) return FZGPU_DE_V2MAGS;
    if (__shfl_sync(F, nzw[0], 0) & 1u) return FZGPU_DE_SLOT0;  // slot 0's residual is the origin

    // Signs: one bit per non-zero magnitude, in slot order.
    unsigned cnt = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) cnt += __popc(nzw[w]);
    const unsigned sincl = warp_incl_scan<32>(cnt, lane);
    const unsigned N = __shfl_sync(F, sincl, 31);
    const unsigned ss = ms + mw, sw = (N + 31) >> 5;  // first sign word, sign words
    if (ss + sw > nw) return FZGPU_DE_TRUNC;
    if ((N & 31u) && (gp[ss + sw - 1] >> (N & 31u))) return FZGPU_DE_V2SIGNS;  // unused bits of the last word
    const unsigned te = ss + sw;                                                // first tail word
    if (nw - te > V2_TAIL_MAX / 4) return FZGPU_DE_TRAILTILE;
    // A word's sign bits (c <= 32, consecutive in the stream) deposited on
    // its non-zero slots; v1 plane 15 is the signs and the escape slots.
    unsigned s15[4];
    bool badsign = false;
    {
        unsigned bpos = sincl - cnt;
#pragma unroll
        for (int w = 0; w < 4; w++) {
            const unsigned m = nzw[w];
            const unsigned c = __popc(m);
            unsigned bits = 0;
            if (c) {
                const unsigned i0 = bpos >> 5, off = bpos & 31u;
                unsigned long long win = gp[ss + i0];
                if (off + c > 32) win |= (unsigned long long)gp[ss + i0 + 1] << 32;  // i0 + 1 < sw: bpos + c <= N
                bits = (unsigned)(win >> off);
                if (c < 32) bits &= (1u << c) - 1;
            }
            const unsigned sg = deposit_bits(bits, m);
            badsign |= (sg & esw[w]) != 0u;  // an escape is magnitude 32767 with sign 0
            s15[w] = sg | esw[w];
            bpos += c;
        }
    }
    if (__any_sync(F, badsign)) return FZGPU_DE_V2SIGNS;
    v1_put_plane(o, at, pm, 15, s15, lane);
    *v1sz = 4 * (at + (nw - te));
    if (lane == 0) {
        o[0] = (w0 & 0x70000u) | pm;
        o[1] = gp[1];
    }
    for (unsigned i = lane; i < nw - te; i += 32) o[at + i] = gp[te + i];
    return 0;
}

// Tile rel of the job: its version-1 tile at out + v1off[rel] and its size
// in v1sz[rel] (0: its size was invalid, or it breaks a rule: reported).
// The offset is (toff[rel] - the job's first chunk's offset) + V2_SLACK *
// rel, and span bounds the first term: out holds span + V2_SLACK * nt
// bytes (the header comment says why the tiles cannot overlap there).
__global__ void __launch_bounds__(TC_W * 32, TC_MINB)
    transcode_v2_kernel(Geo g, const unsigned char *__restrict__ blob, unsigned long long index_off,
                        unsigned long long first_chunk, unsigned long long tile0, unsigned long long nt,
                        unsigned long long span, const unsigned long long *__restrict__ toff,
                        const unsigned *__restrict__ tsz, unsigned *__restrict__ v1sz,
                        unsigned long long *__restrict__ v1off, unsigned char *__restrict__ out,
                        unsigned long long *err) {
#ifndef TC_STAGE_BUF  // the host emulation (tools/transcode_emu.cpp) names its own array, the arena of its cp.async
    __shared__ unsigned stage[TC_W][TC_STAGE];
#define TC_STAGE_BUF stage
#endif
    const int lane = threadIdx.x & 31;
    const unsigned long long rel = (unsigned long long)blockIdx.x * TC_W + (threadIdx.x >> 5);
    if (rel >= nt) return;
    // All of the tile's first loads in one round trip: its size and offset
    // (the offset is stale when the size is 0, and not used then), and the
    // index entries (24 bytes, u32-aligned: fzgpu_decompress) of the job's
    // first chunk, of the tile's chunk c and of chunk c - 1: c must start
    // where c - 1 ends or later (else two chunks' copies could overlap).
    const unsigned sz = tsz[rel];
    const unsigned long long at = toff[rel];
    const unsigned *ix = (const unsigned *)(blob + index_off);
    const unsigned long long t = tile0 + rel, c = t <= 0xFFFFFFFFull ? div_m(t, g.per_chunk, g.mpc) : t / g.per_chunk;
    const unsigned long long base = ix[6 * first_chunk] | (unsigned long long)ix[6 * first_chunk + 1] << 32;
    bool order = true;
    if (c > first_chunk) {
        const unsigned *e = ix + 6 * c;
        const unsigned long long coff = e[0] | (unsigned long long)e[1] << 32;
        const unsigned long long poff = e[-6] | (unsigned long long)e[-5] << 32;
        const unsigned long long pend = poff + (e[-4] | (unsigned long long)e[-3] << 32);
        order = pend >= poff && coff >= pend;
    }
    if (sz == 0) {
        if (lane == 0) v1sz[rel] = 0;
        return;
    }
    unsigned code = !order || at < base ? FZGPU_DE_INDEX : at - base > span || sz > span - (at - base) ? FZGPU_DE_TRAILTILE : 0u;
    unsigned size = 0;
    const unsigned long long o = at - base + (unsigned long long)V2_SLACK * rel;
    if (!code) {
        unsigned long long z0, y0, x0;
        int lz, ly, lx;
        tile_box(g, tile0 + rel, z0, y0, x0, lz, ly, lx);
        const int n = g.padded ? TILE : lz * ly * lx;  // a padded field's tile is coded whole (FORMAT.md 3.2)
        // A tile that fits the stage buffer is read in one coalesced round
        // trip (stage_words) and parsed from shared memory:
        // read from global memory, the walk is a chain of ~7 dependent
        // round trips (word0 and block mask, rate words, units, padding,
        // sign words, tail).
        const unsigned nw = sz / 4;
        const unsigned *gp = (const unsigned *)(blob + at);
        unsigned *const v1 = (unsigned *)(out + o);
        if (nw <= TC_STAGE) {
            // two inlined calls, not one through a pointer that may be
            // either: here the compiler sees that s is shared memory and
            // emits shared loads (LDS, 32-bit addresses); through one
            // generic pointer every read of the tile was a generic load
            // with a 64-bit address, and the kernel is instruction-bound
            // (ncu, H200, hst at 1e-4: issue slots 70 % busy, the lines
            // that read units ~35 % of its instructions). With the plane
            // write below: version-2 decompress hst +7-11 %, hyg +7-20 %
            // (PERF.md v32)
            unsigned *s = TC_STAGE_BUF[threadIdx.x >> 5];
            stage_words(s, gp, nw, lane);
            code = transcode_tile(s, nw, n, lane, &size, v1);
        } else {
            code = transcode_tile(gp, nw, n, lane, &size, v1);
        }
    }
    if (lane == 0) {
        v1sz[rel] = code ? 0u : size;
        v1off[rel] = o;
        if (code) report(err, rel, code);
    }
}
