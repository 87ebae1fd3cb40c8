// Tile offsets for the encoders: each tile publishes its size; a tile's output
// offset is the sum of the sizes before it, by a decoupled look-back or the scanner warp.
// Included by fzgpu.cu.

// Publishes a tile's size for the look-backs of later tiles, as early as
// possible: they wait for it (cuda/PERF.md v11: with the first look-back
// loads issued just before this store, compress took 7-9 % longer).
__device__ __forceinline__ void publish_size(unsigned long long *status, unsigned long long rel, unsigned size,
                                             int lane) {
    if (lane == 0)
        *(volatile unsigned long long *)&status[rel] = (rel == 0 ? ST_INC : ST_AGG) | size;
}

// Decoupled look-back over tile sizes, after publish_size: returns the sum
// of the sizes of tiles 0..rel-1 (whole warp).
__device__ __forceinline__ unsigned long long lookback(unsigned long long *status, unsigned long long rel,
                                                       unsigned size, int lane) {
    if (rel == 0) return 0;
    unsigned long long excl = 0;
    long long look = (long long)rel - 1;
    while (true) {
        const long long idx = look - lane;
        unsigned long long v = idx >= 0 ? *(volatile unsigned long long *)&status[idx] : ST_INC;
        unsigned inc;
        int stop;
        while (true) {
            // Only the tiles up to the nearest inclusive prefix count: waiting
            // for all 32 made each tile wait for the slowest of its 32
            // predecessors (≈ 100 polls per tile, 13 % of the encoder's
            // instructions on a 1 GiB field).
            inc = __ballot_sync(0xffffffffu, (v >> 62) == 2);
            stop = inc ? __ffs(inc) - 1 : 31;
            const unsigned need = __ballot_sync(0xffffffffu, (v >> 62) == 0) & (0xffffffffu >> (31 - stop));
            if (!need) break;
            if ((v >> 62) == 0) v = *(volatile unsigned long long *)&status[idx];
        }
        unsigned long long val = lane <= stop ? (v & ST_VAL) : 0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) val += __shfl_xor_sync(0xffffffffu, val, o);
        excl += val;
        if (inc) break;
        look -= 32;
    }
    if (lane == 0) *(volatile unsigned long long *)&status[rel] = ST_INC | (excl + size);
    return excl;
}

// The scanner (f32 rank-3 kernels, v12): one warp of the warp encoder (the
// one taking ticket 0) turns the sizes the tiles publish into inclusive
// prefixes, in tile order; a tile warp parks its bytes and reads its offset
// a tile later (encode_warp.cuh). The other kernels' tile warps run the
// decoupled look-back themselves.
#ifndef ENC_SCAN_K
#define ENC_SCAN_K 8            // statuses per lane and round of the scanner (16: no faster)
#endif

__device__ __forceinline__ unsigned long long ld_vol(const unsigned long long *p) {
    return *(const volatile unsigned long long *)p;
}

// The scanner: the sizes of tiles 0..ntiles-1 (ST_AGG, or ST_INC
// for tile 0, as publish_size leaves them) become ST_INC | (inclusive
// prefix), in tile order. Why one warp and not each tile's own look-back: a
// look-back waits for the slowest of the tiles before it, and that wait sat
// on every tile's path (23 % of the encoder's warp samples, PERF.md v11); the
// scanner waits instead, and a tile reads its prefix a tile later, when it
// is (nearly always) there.
// Each round takes the ENC_SCAN_K * 32 statuses from the first tile without
// a prefix (lane l: ENC_SCAN_K consecutive ones) and gives prefixes to the
// published tiles up to the first unpublished one, so a straggler holds up
// only the tiles after it. The next round's loads go out before this round's
// scan and stores, so a round costs about one L2 round trip: after a slow
// tile publishes, the thousands of tiles waiting behind it get their
// prefixes within a few rounds.
// abortf (the optimistic kernels): one of quit_bits is set when a warp
// gives the job up; the scanner then stops waiting for a size it will
// never get.
__device__ void scan_sizes(unsigned long long *status, unsigned long long ntiles, int lane,
                           const unsigned *abortf = nullptr, unsigned quit_bits = 0) {
    constexpr int K = ENC_SCAN_K;
    unsigned long long r = 0, base = 0, v[K];
    auto load = [&](unsigned long long at) {
        const unsigned long long i0 = at + (unsigned long long)K * lane;
#pragma unroll
        for (int k = 0; k < K; k++) v[k] = i0 + k < ntiles ? ld_vol(&status[i0 + k]) : ST_INC;
    };
    load(0);
    while (r < ntiles) {
        const unsigned long long i0 = r + (unsigned long long)K * lane;
        int fb = K;  // the lane's first unpublished tile
#pragma unroll
        for (int k = K - 1; k >= 0; k--)
            if ((v[k] >> 62) == 0) fb = k;
        const unsigned bad = __ballot_sync(0xffffffffu, fb < K);
        const int l0 = bad ? __ffs(bad) - 1 : 32;
        const int m = bad ? K * l0 + __shfl_sync(0xffffffffu, fb, l0) : 32 * K;  // tiles ready in order
        if (m == 0) {
#pragma unroll
            for (int k = 0; k < K; k++)
                if ((v[k] >> 62) == 0 && i0 + k < ntiles) v[k] = ld_vol(&status[i0 + k]);
            // one read for the warp, so that its lanes agree (a read per lane
            // could straddle the give-up's write: the host emulation's threads
            // did, and a lane left the warp)
            if (abortf && __shfl_sync(0xffffffffu, lane ? 0u : *(const volatile unsigned *)abortf & quit_bits, 0))
                return;
            continue;
        }
        unsigned s[K], tot = 0;  // a round's sizes sum to < 2^32
#pragma unroll
        for (int k = 0; k < K; k++) {
            tot += K * lane + k < m ? (unsigned)(v[k] & ST_VAL) : 0u;
            s[k] = tot;
        }
        load(r + (unsigned)m);  // the next round's statuses, in flight during the stores
        const unsigned inc = warp_incl_scan<32>(tot, lane);
        const unsigned long long lb = base + (inc - tot);
#pragma unroll
        for (int k = 0; k < K; k++)
            if (K * lane + k < m && i0 + k < ntiles)
                *(volatile unsigned long long *)&status[i0 + k] = ST_INC | (lb + s[k]);
        base += __shfl_sync(0xffffffffu, inc, 31);
        r += (unsigned)m;
    }
}

// A tile's exclusive prefix once the scanner has reached it (whole warp).
// (The unpark polls with its own copy of this loop, its first load issued
// before the park loads: one loop for both, taking the caller's first poll,
// made every tile 1 % slower on an H200, PERF.md v14.)
__device__ __forceinline__ unsigned long long await_prefix(const unsigned long long *status,
                                                           unsigned long long rel, unsigned size, int lane) {
    unsigned long long v = 0;
    if (lane == 0)
        do v = ld_vol(&status[rel]);
        while ((v >> 62) != 2);
    return __shfl_sync(0xffffffffu, (v & ST_VAL) - size, 0);
}
