// A version-1 tile's layout and write (FORMAT.md section 5.1): block masks,
// the stores (plain, or with an L2 policy for parked tiles), the escape and
// raw lists, and where a tile goes in the output. Included by
// encode_warp.cuh; encode_v2.cuh writes version 2's code section and reuses
// the tail.

// Zero-block mask of a slot-order bitmap of 128 words, lane k holding
// block k's 16 bytes b.
__device__ __forceinline__ unsigned block_mask(uint4 b) {
    return __ballot_sync(0xffffffffu, (b.x | b.y | b.z | b.w) != 0);
}
// The same of the bitmap at m.
__device__ __forceinline__ unsigned block_mask128(const unsigned *m, int lane) {
    return block_mask(((const uint4 *)m)[lane]);
}

// Stores of a tile's bytes. A parked tile (the scanner) is read back a tile
// later, after the walks have streamed tens of MB through L2, so its lines
// are stored with the lowest eviction priority (evict_last); bytes written
// to their place in the output are not read again (evict_normal). One
// tile_write for both, the policy a register (a copy per policy was 3 %
// slower on the smooth field). Without the scanner (HINT false): plain
// stores (the policy stores cost the f64 rank-1 walk 2 %).
template <bool HINT>
struct TileStore {
    unsigned long long pol;
    __device__ __forceinline__ explicit TileStore(bool keep) {
        if (HINT) pol = l2_policy(keep);
    }
    __device__ __forceinline__ void operator()(unsigned *p, unsigned v) const {
        if (HINT)
            st_hint(p, v, pol);
        else
            *p = v;
    }
};

// Writes a zero-block coded bitmap (mask word, then the non-zero blocks).
template <typename ST>
__device__ __forceinline__ void put_blocks(const ST &st, unsigned *o, unsigned at, unsigned bm, uint4 b,
                                           int lane) {
    if (lane == 0) st(o + at, bm);
    if ((bm >> lane) & 1) {
        unsigned *dst = o + at + 1 + 4 * __popc(bm & ((1u << lane) - 1));
        st(dst, b.x);
        st(dst + 1, b.y);
        st(dst + 2, b.z);
        st(dst + 3, b.w);
    }
}

// Writes the set bits' values of an element-order bitmap (128 words) in
// element order: val(e) for each e with its bit set, `wpv` words each.
// U: the unroll count of the loop over the four groups of 32 words (rare:
// escapes, raw values); the rank-3 kernel keeps it rolled up for the
// instruction cache, the others unrolled as in v14 (PERF.md v15).
template <int U, typename F>
__device__ __forceinline__ void put_listed(unsigned *o, const unsigned *bits, int wpv, int lane, F val) {
    unsigned pos = 0;
#pragma unroll U
    for (int w0 = 0; w0 < 128; w0 += 32) {
        unsigned b = bits[w0 + lane];
        const unsigned cntb = __popc(b);
        const unsigned inc = warp_incl_scan<32>(cntb, lane);
        unsigned k = pos + inc - cntb;
        while (b) {
            const int bit = __ffs(b) - 1;
            b &= b - 1;
            val((w0 + lane) * 32 + bit, o + (unsigned long long)k * wpv);
            k++;
        }
        pos += __shfl_sync(0xffffffffu, inc, 31);
    }
}

// Where a tile's bytes go and how many there are. Lane p keeps plane p's
// block mask and word offset.
struct TileLayout {
    unsigned my_bm, my_at;
    unsigned pm, esc_at, fill_at, raw_at, fbm, rbm, size;
};

#include "tile_tail.cuh"

template <typename T>
__device__ __forceinline__ TileLayout tile_layout(const unsigned *pw, const unsigned char *sc, const TileSum &ts,
                                                  int lane, const uint4 *mf4 = nullptr) {
    TileLayout L;
    // Only the ballots in the loop: lane p keeps plane p's mask, and the
    // planes' offsets come from one 16-lane scan after it (a running offset
    // in the loop took 17 instructions a plane on the tile's serial tail).
    unsigned bm = 0;
#pragma unroll
    for (int p = 0; p < 16; p++) {
        const uint4 b = *(const uint4 *)&pw[p * PW_STRIDE + 4 * lane];
        const unsigned m = __ballot_sync(0xffffffffu, (b.x | b.y | b.z | b.w) != 0);
        bm = lane == p ? m : bm;
    }
    const unsigned words = bm ? 1 + 4 * __popc(bm) : 0;  // 0 for lanes >= 16
    const unsigned inc = warp_incl_scan<16>(words, lane);
    L.my_bm = bm;
    L.my_at = 2 + inc - words;
    L.pm = __ballot_sync(0xffffffffu, bm != 0);
    unsigned at = 2 + __shfl_sync(0xffffffffu, inc, 15);
    tail_layout<T>(L, at, sc, ts, lane, mf4);
    return L;
}

// Bytes before the tiles of tile t's chunk that are not tiles: the size
// tables of its chunk and the chunks before it (chunk c's tiles follow its
// size table). T32: as tile_box's.
template <bool T32 = false>
__device__ __forceinline__ unsigned long long tables_before(const Geo &g, unsigned long long t,
                                                            unsigned long long tile0) {
    const unsigned long long chunk = T32 || t <= 0xFFFFFFFFull ? div_m(t, g.per_chunk, g.mpc) : t / g.per_chunk;
    return 4 * (min((chunk + 1) * g.per_chunk, g.tiles) - tile0);
}

// The tile's place in the output, or null (and the error flag) if it does
// not fit; tb from tables_before.
__device__ __forceinline__ unsigned *tile_out(unsigned *out, unsigned long long cap, unsigned *err,
                                              unsigned long long tb, unsigned long long excl, unsigned size,
                                              int lane) {
    const unsigned long long off = excl + tb;  // bytes
    if (off + size > cap) {
        if (lane == 0) atomicOr(err, 1u);
        return nullptr;
    }
    return out + off / 4;
}

// Writes the tile's bytes after its code section (FORMAT.md section 5:
// escapes, fill mask, raw mask and values), the same in both container
// versions. WALKED: a tile of a hot walk (enc_fast3's HOT: no escapes, its
// raw values listed), for which the escape list and the raw fallback are
// not compiled.
// PAD: a padded field's tile, coded whole (raw values outside the field
// repeat the nearest inside: pad_off). mf4: as fill_mask4's.
template <typename T, int LU, bool WALKED, bool PAD = false, typename ST>
__device__ __forceinline__ void tile_write_tail(const ST &st, unsigned *o, unsigned esc_at, unsigned fill_at,
                                                unsigned raw_at, unsigned fbm, unsigned rbm, const TileSum &ts,
                                                const unsigned char *sc, const T *src, const Geo &g,
                                                unsigned long long z0, unsigned long long y0, unsigned long long x0,
                                                int ly, int lx, bool listed, int lane, const uint4 *mf4 = nullptr) {
    const unsigned NR = ts.nraw, NF = ts.nfill, E = ts.nesc;
    if (!WALKED && E) {
        const int *sq = (const int *)(sc + SC_Q);
        if (lane == 0) st(o + esc_at, E);
        put_listed<LU>(o + esc_at + 1, (const unsigned *)(sc + SC_ESC), 1, lane,
                   [&](int e, unsigned *dst) { st(dst, (unsigned)sq[e]); });
    }
    if (NF) put_blocks(st, o, fill_at, fbm, fill_mask4(sc, mf4, lane), lane);
    if (NR) {
        put_blocks(st, o, raw_at, rbm, ((const uint4 *)(sc + SC_MR))[lane], lane);
        const unsigned rv = raw_at + 1 + 4 * __popc(rbm);
        if (lane == 0) st(o + rv, NR);
        if (sizeof(T) == 4 && listed && NR <= SC_RV_MAX) {  // the v9 walk listed them
            const unsigned *srv = (const unsigned *)(sc + SC_RV);
#pragma unroll 1
            for (unsigned i = lane; i < NR; i += 32) st(o + rv + 1 + i, srv[i]);
            return;
        }
        if (WALKED) return;
        const int P = ly * lx;
        put_listed<LU>(o + rv + 1, (const unsigned *)(sc + SC_RAW), sizeof(T) / 4, lane, [&](int e, unsigned *dst) {
            // listed: a full 8 x 16 x 32 tile (shifts, not divisions)
            const int z = listed ? e >> 9 : e / P, r = e - z * P, y = listed ? r >> 5 : r / lx, x = r - y * lx;
            const unsigned long long b =
                Bits<T>::of(src[PAD ? pad_off(g, z0, y0, x0, z, y, x) : ((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x]);
            st(dst, (unsigned)b);
            if (sizeof(T) == 8) st(dst + 1, (unsigned)(b >> 32));
        });
    }
}

// Writes the tile's bytes (FORMAT.md section 5), container version 1.
template <typename T, int LU, bool WALKED, bool PAD = false, typename ST>
__device__ __forceinline__ void tile_write(const ST &st, unsigned *o, const TileLayout &L, const TileSum &ts, const unsigned *pw,
                                           const unsigned char *sc, const T *src, const Geo &g,
                                           unsigned long long z0, unsigned long long y0, unsigned long long x0,
                                           int ly, int lx, bool listed, int lane, const uint4 *mf4 = nullptr) {
    const unsigned NR = ts.nraw, NF = ts.nfill, E = ts.nesc;
    if (lane == 0) {
        st(o, L.pm | (E ? 1u << 16 : 0) | (NF ? 1u << 17 : 0) | (NR ? 1u << 18 : 0));
        st(o + 1, (unsigned)ts.origin);
    }
    for (unsigned rest = L.pm; rest; rest &= rest - 1) {
        const int p = __ffs(rest) - 1;
        const unsigned bm = __shfl_sync(0xffffffffu, L.my_bm, p), pat = __shfl_sync(0xffffffffu, L.my_at, p);
        put_blocks(st, o, pat, bm, pw_block(pw, p, lane), lane);
    }
    tile_write_tail<T, LU, WALKED, PAD>(st, o, L.esc_at, L.fill_at, L.raw_at, L.fbm, L.rbm, ts, sc, src, g, z0, y0, x0, ly,
                                   lx, listed, lane, mf4);
}
