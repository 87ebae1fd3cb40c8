// Container version 2's code section ("group rates", docs/FORMAT.md; the
// normative layout of the session plan, units group-major), written by the
// warp encoder from the tile's 16 bit planes in shared memory (included by
// encode_warp.cuh; only the kernels instantiated with V = 2 use it).
//
// The walks are version 1's: they leave v1 codes in the planes (escape =
// 0x8000: sign set, magnitude 0), with version 2's escape threshold
// (esc_max(2): |d| >= 32767 is an escape). Here, per lane k (block k,
// groups 8k .. 8k+7, the uint4 at word 4k of each plane):
//   layout: the rates of the lane's 8 groups (the highest magnitude plane
//     with a bit in the group's 16-bit half word), escapes turned into
//     magnitude 32767 sign 0 (in the planes: rows 0..14 |= escape bits), the
//     block mask by a ballot, the packed signs (a 32-bit compress of each
//     sign word by its non-zero-magnitude mask), and one warp scan of the
//     lane's unit count and sign-bit count together: group-major units make
//     each lane's units one contiguous u16 run, and its sign bits one
//     contiguous bit run.
//   write: the rate words; the sign words, ORed into plane row 15 of the
//     shared buffer (read by the layout already; words shared by
//     neighbouring lanes merge there), then stored as whole words; the
//     units, built in shared memory and copied out whole: each lane packs
//     its units two to a word (PRMT, a funnel shift for odd starts) into
//     its own column of the plane buffer, in place (v2_compact), and the
//     warp copies the unit section out 32 consecutive words a round (the
//     u16 units stored straight to global memory before: each store
//     instruction touched 32 sectors, 88 of them a lane on hyg at 1e-4).
//     The tail (escapes, masks, raw values) is version 1's.

// Where a version-2 tile's bytes go. Per lane: rw, eu, nu, sbit, cnt, pk.
struct TileLayoutV2 {
    unsigned rw;          // rates of the lane's groups 8k+j in bits 4j .. 4j+3
    unsigned eu, nu;      // the lane's first magnitude unit (from the unit section's start) and its units
    unsigned sbit;        // the lane's first sign bit, from the sign section's start
    unsigned cnt;         // sign bits of the lane's words 0..3, a byte each
    unsigned pk[4];       // those sign bits, packed from bit 0
    unsigned bm, W;       // block mask; number of magnitude units
    unsigned sign_at, nsw;  // the sign section's word offset and length
    unsigned esc_at, fill_at, raw_at, fbm, rbm, size;
};

// Bits of x selected by m, packed to the low end in order (pext; Hacker's
// Delight 7-4, branch-free: the GPU has no PEXT).
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

// Stores block `lane` of plane p given in word order (the inverse of
// pw_block: the swizzle XORs the word index, so it is its own inverse).
__device__ __forceinline__ void pw_put_block(unsigned *pw, int p, int lane, uint4 b) {
    const int f = (p >> 2) & 3;
    if (f & 1) b = make_uint4(b.y, b.x, b.w, b.z);
    if (f & 2) b = make_uint4(b.z, b.w, b.x, b.y);
    *(uint4 *)&pw[p * PW_STRIDE + 4 * lane] = b;
}

template <typename T>
__device__ __forceinline__ TileLayoutV2 tile_layout_v2(unsigned *pw, const unsigned char *sc, const TileSum &ts,
                                                       int lane, const uint4 *mf4 = nullptr) {
    const unsigned F = 0xffffffffu;
    TileLayoutV2 L;
    // r[j]: the rates of word j's two groups, one per 16-bit half (the
    // highest plane p + 1 whose half is non-zero); nz[j]: the non-zero
    // magnitudes of word j
    unsigned r[4] = {0, 0, 0, 0}, nz[4] = {0, 0, 0, 0};
#pragma unroll
    for (int p = 0; p < 15; p++) {
        const uint4 b = pw_block(pw, p, lane);
        const unsigned w[4] = {b.x, b.y, b.z, b.w}, pp = (unsigned)(p + 1) * 0x10001u;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const unsigned m = __vcmpne2(w[j], 0u);
            r[j] = bitsel(pp, r[j], m);
            nz[j] |= w[j];
        }
    }
    const uint4 sb = pw_block(pw, 15, lane);
    unsigned s[4] = {sb.x, sb.y, sb.z, sb.w};
    if (ts.nesc) {
        // Escapes (rare): v1's code 0x8000 (sign set, magnitude 0: no other
        // code has a sign without a magnitude) becomes magnitude 32767
        // (rate 15, every magnitude plane) with sign 0.
        unsigned e[4], any = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            e[j] = s[j] & ~nz[j];
            any |= e[j];
        }
        if (any) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                r[j] = bitsel(0x000F000Fu, r[j], __vcmpne2(e[j], 0u));
                nz[j] |= e[j];
                s[j] &= ~e[j];
            }
#pragma unroll 1
            for (int p = 0; p < 15; p++) {
                uint4 b = pw_block(pw, p, lane);
                b.x |= e[0];
                b.y |= e[1];
                b.z |= e[2];
                b.w |= e[3];
                pw_put_block(pw, p, lane, b);
            }
        }
        __syncwarp();
    }
    unsigned rw = 0, sum = 0, cnt = 0, tot = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        rw |= (r[j] & 0xFu) << (8 * j) | (r[j] >> 16) << (8 * j + 4);
        sum += (r[j] & 0xFu) + (r[j] >> 16);
        const unsigned c = __popc(nz[j]);
        cnt |= c << (8 * j);
        tot += c;
        L.pk[j] = compress32(s[j], nz[j]);
    }
    const unsigned bm = __ballot_sync(F, rw != 0);
    // one scan for both: units (<= 3840 in all) low, sign bits (<= 4096) high
    const unsigned both = sum | tot << 16, inc = warp_incl_scan<32>(both, lane), ex = inc - both;
    const unsigned all = __shfl_sync(F, inc, 31), W = all & 0xFFFFu, N = all >> 16;
    const unsigned nb = __popc(bm);
    L.rw = rw;
    L.cnt = cnt;
    L.bm = bm;
    L.W = W;
    L.eu = ex & 0xFFFFu;
    L.nu = sum;
    L.sbit = ex >> 16;
    L.sign_at = 3 + nb + (W + 1) / 2;
    L.nsw = (N + 31) / 32;
    unsigned at = bm ? L.sign_at + L.nsw : 2;  // bm = 0: no magnitude, so no sign either
    tail_layout<T>(L, at, sc, ts, lane, mf4);
    return L;
}

// The layout of container version V.
template <typename T, int V>
__device__ __forceinline__ auto tile_layout_v(unsigned *pw, const unsigned char *sc, const TileSum &ts, int lane,
                                              const uint4 *mf4 = nullptr) {
    if constexpr (V == 2)
        return tile_layout_v2<T>(pw, sc, ts, lane, mf4);
    else
        return tile_layout<T>(pw, sc, ts, lane, mf4);
}

// Builds the magnitude units of one lane's blocks in its own column of the
// plane buffer (column k: words 4k .. 4k+3 of rows 0..14), in place. Its
// stream starts at its first unit of an even index in the tile's unit
// section (an odd first unit goes to the lane before: its word's low half)
// and ends with the next non-empty lane's first unit (nf) or the padding
// where it ends at an odd index, so each lane holds exactly the section's
// words ceil(E/2) .. ceil((E+n)/2) - 1 (E: its first unit, n: its units):
// local word m in row m % 15 of column slot m / 15, swizzled as the planes
// (byte offsets: the table T, in plane row 15). In place: step jw reads
// slot jw of rows 0 .. 2 NW - 1 (NW words of 2 units per group: rates up to
// 2 NW), then writes the units of groups 2jw, 2jw+1: up to 30 (jw + 1)
// units in all, local words below 15 (jw + 1), all in slots <= jw, whose
// planes are read already. Each group's units are packed two to a word by
// PRMT (low or high halves of two planes), shifted by a unit where the run
// starts at an odd place (a funnel shift), and stored as whole words, NW of
// them predicated (no per-unit stores, no data-dependent loop).
template <int NW>
__device__ __forceinline__ void v2_put_run(unsigned char *colb, const unsigned short *T, const unsigned (&X)[NW + 1],
                                           unsigned r, int q) {
    const unsigned s = q & 1;
    if (s && q >= 0 && r) *(unsigned short *)(colb + T[q >> 1] + 2) = (unsigned short)X[0];
    const int nw = ((int)r - (int)s + 1) >> 1;
    const unsigned short *const Tm = T + ((q + 1) >> 1);
#pragma unroll
    for (int i = 0; i < NW; i++)
        if (i < nw) *(unsigned *)(colb + Tm[i]) = __funnelshift_r(X[i], X[i + 1], 16 * s);
}

template <int NW>
__device__ __forceinline__ void v2_compact(const unsigned *pw, unsigned char *colb, const unsigned short *T,
                                           unsigned rw, int q, unsigned nf, int lane) {
    const unsigned *const col = pw + 4 * lane;
#pragma unroll 1
    for (int jw = 0; jw < 4; jw++) {
        const unsigned rlo = (rw >> (8 * jw)) & 15u, rhi = (rw >> (8 * jw + 4)) & 15u;
        unsigned X[NW + 1], Y[NW + 1];
#pragma unroll
        for (int i = 0; i < NW; i++) {
            const int p0 = 2 * i, p1 = 2 * i + 1;
            const unsigned a = p0 < 15 ? col[p0 * PW_STRIDE + (jw ^ ((p0 >> 2) & 3))] : 0u;
            const unsigned b = p1 < 15 ? col[p1 * PW_STRIDE + (jw ^ ((p1 >> 2) & 3))] : 0u;
            X[i] = __byte_perm(a, b, 0x5410);  // the low halves: group 2jw, units p0, p1
            Y[i] = __byte_perm(a, b, 0x7632);  // the high halves: group 2jw + 1
        }
        X[NW] = Y[NW] = 0;  // planes >= 2 NW: above every rate
        v2_put_run<NW>(colb, T, X, rlo, q);
        q += rlo;
        v2_put_run<NW>(colb, T, Y, rhi, q);
        q += rhi;
    }
    if (rw && (q & 1)) *(unsigned short *)(colb + T[q >> 1] + 2) = (unsigned short)nf;
}

// Writes a version-2 tile's bytes. Plane rows 0..15 of pw are overwritten
// (signs merged in row 15, then tables there; units compacted in rows
// 0..14): every walk rewrites the planes it leaves for each tile.
template <typename T, int LU, bool WALKED, bool PAD = false, typename ST>
__device__ __forceinline__ void tile_write(const ST &st, unsigned *o, const TileLayoutV2 &L, const TileSum &ts,
                                           unsigned *pw, const unsigned char *sc, const T *src, const Geo &g,
                                           unsigned long long z0, unsigned long long y0, unsigned long long x0,
                                           int ly, int lx, bool listed, int lane, const uint4 *mf4 = nullptr) {
    const unsigned F = 0xffffffffu;
    const unsigned NR = ts.nraw, NF = ts.nfill, E = ts.nesc;
    if (lane == 0) {
        st(o, (L.bm ? 1u : 0u) | (E ? 1u << 16 : 0) | (NF ? 1u << 17 : 0) | (NR ? 1u << 18 : 0));
        st(o + 1, (unsigned)ts.origin);
    }
    if (L.bm) {
        const unsigned nb = __popc(L.bm), U = 3 + nb;  // the unit section's first word
        if (lane == 0) st(o + 2, L.bm);
        if (L.rw) st(o + 3 + __popc(L.bm & ((1u << lane) - 1)), L.rw);
        // Signs: the lane's bits run from bit L.sbit of the section; merged
        // in plane row 15 (up to 128 words), then stored whole.
        unsigned *const sw = pw + 15 * PW_STRIDE;
        __syncwarp();
        *(uint4 *)&sw[4 * lane] = make_uint4(0, 0, 0, 0);
        __syncwarp();
        unsigned bit = L.sbit;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const unsigned c = (L.cnt >> (8 * j)) & 0xFFu;
            if (c) {
                const unsigned wi = bit >> 5, sh = bit & 31;
                atomicOr(&sw[wi], L.pk[j] << sh);
                if (sh + c > 32) atomicOr(&sw[wi + 1], L.pk[j] >> (32 - sh));
            }
            bit += c;
        }
        __syncwarp();
        for (unsigned i = lane; i < L.nsw; i += 32) st(o + L.sign_at + i, sw[i]);
        // Units. The lane's first unit (plane 0 of its first group with a
        // rate), for the lane before it; its words [gs, ge) of the section.
        const unsigned j0 = L.rw ? (__ffs(L.rw) - 1) >> 2 : 0, f0 = pw[4 * lane + (j0 >> 1)] >> (16 * (j0 & 1));
        const unsigned nxt = __ffs(L.bm & ~((2u << lane) - 1));  // the next lane with units, + 1 (0: none)
        const unsigned fn = __shfl_sync(F, f0, (nxt - 1) & 31), nf = nxt ? fn & 0xFFFFu : 0u;
        const unsigned gs = (L.eu + 1) >> 1, ge = (L.eu + L.nu + 1) >> 1;
        const bool own = ge > gs;
        const unsigned O = __ballot_sync(F, own);
        __syncwarp();  // row 15's sign words are read: its first 64 words take the tables
        // T[m]: the byte offset of local word m in a column (m < 64, u16 each);
        // then the owners by rank, lane | gs << 5
        unsigned short *const Tb = (unsigned short *)sw;
        unsigned *const rk = sw + 32;
        {
            const unsigned m0 = 2 * lane, m1 = m0 + 1;
            const unsigned r0 = m0 % 15, r1 = m1 % 15;
            const unsigned t0 = 4 * (r0 * PW_STRIDE + ((m0 / 15) ^ ((r0 >> 2) & 3)));
            const unsigned t1 = 4 * (r1 * PW_STRIDE + ((m1 / 15) ^ ((r1 >> 2) & 3)));
            sw[lane] = t0 | t1 << 16;
        }
        if (own) rk[__popc(O & ((1u << lane) - 1))] = lane | gs << 5;
        __syncwarp();
        unsigned char *const colb = (unsigned char *)(pw + 4 * lane);
        const int q = -(int)(L.eu & 1);
        // the largest rate of the tile picks how many planes a step reads
        if (__any_sync(F, (L.rw & 0x88888888u) != 0))
            v2_compact<8>(pw, colb, Tb, L.rw, q, nf, lane);
        else if (__any_sync(F, (L.rw & 0xCCCCCCCCu) != 0))
            v2_compact<4>(pw, colb, Tb, L.rw, q, nf, lane);
        else
            v2_compact<2>(pw, colb, Tb, L.rw, q, nf, lane);
        __syncwarp();
        // Copy-out, 64 words a round, coalesced: word i's owner is the last
        // one starting at or before i (the owners' starts increase with
        // rank): the owners starting at or before c, then the starts in
        // (c, c + 31] and [c + 32, c + 63] as bit masks. The two halves'
        // loads are unconditional (a lane past the end reads local word 0 of
        // a valid owner: ranks count owners only) and only the stores
        // predicated, so both halves' loads are in flight together (with the
        // loads inside the ifs, ptxas made two branch regions, one after the
        // other).
        const unsigned Wt = (L.W + 1) >> 1, le = (2u << lane) - 1;
#pragma unroll 1
        for (unsigned c = 0; c < Wt; c += 64) {
            const unsigned before = __popc(__ballot_sync(F, own && gs <= c)) - 1;
            const unsigned M0 = __reduce_or_sync(F, own && gs - c - 1 < 31u ? 1u << (gs - c) : 0u);
            const unsigned M1 = __reduce_or_sync(F, own && gs - c - 32 < 32u ? 1u << (gs - c - 32) : 0u);
            const unsigned i0 = c + lane, i1 = i0 + 32;
            const unsigned e0 = rk[before + __popc(M0 & le)], e1 = rk[before + __popc(M0) + __popc(M1 & le)];
            const unsigned m0 = i0 < Wt ? i0 - (e0 >> 5) : 0u, m1 = i1 < Wt ? i1 - (e1 >> 5) : 0u;
            const unsigned v0 = *(const unsigned *)((const unsigned char *)(pw + 4 * (e0 & 31)) + Tb[m0]);
            const unsigned v1 = *(const unsigned *)((const unsigned char *)(pw + 4 * (e1 & 31)) + Tb[m1]);
            if (i0 < Wt) st(o + U + i0, v0);
            if (i1 < Wt) st(o + U + i1, v1);
        }
    }
    tile_write_tail<T, LU, WALKED, PAD>(st, o, L.esc_at, L.fill_at, L.raw_at, L.fbm, L.rbm, ts, sc, src, g, z0, y0, x0, ly,
                                   lx, listed, lane, mf4);
}
