// The warp encoder's slow path (any tile: clipped, other shapes, holes),
// and the raw and fill masks of the walked tiles (raw_mask_sparse,
// raw_mask_rows3). Included by encode_warp.cuh.

#include "flat.cuh"  // flat tiles' neighbours (FAST 4)

// ---- slow path: any tile, holes included (FORMAT.md sections 3-5 as
// written), through the warp's scratch. Latency matters more than
// instructions here: a slow tile holds up the look-back of every later
// tile, so each round works on four elements per lane with independent
// loads, and coordinates come from multiply-high division.

// e / d for e < 2^12, d <= 2^12: m = ceil(2^24 / d) is exact there.
__device__ __forceinline__ int div12(int e, unsigned m) { return (int)__umulhi((unsigned)e << 8, m); }
static __host__ __device__ __forceinline__ unsigned magic12(int d) { return (unsigned)((0xFFFFFFull + d) / d); }

// Slot of element (z, y, x) of a tile clipped to (lz, ly, lx) (FORMAT.md
// section 3), with the sub-block shape known at compile time for the
// standard shapes (FAST = rank) and read from g otherwise.
template <int FAST>
__device__ __forceinline__ int slot_std(int z, int y, int x, int lz, int ly, int lx, const Geo &g) {
    if (FAST == 0) return slot_of(z, y, x, lz, ly, lx, g);
    if (FAST == 4) return x;  // flat tiles (flat.cuh): a 1 x 1 x n box, slot = element
    constexpr int BZ = FAST == 3 ? 4 : 1, BY = FAST == 3 ? 4 : FAST == 2 ? 16 : 1, BX = FAST == 1 ? 128 : 8;
    const int i = z / BZ, dz = z % BZ, ez = min(BZ, lz - i * BZ);
    const int j = y / BY, dy = y % BY, ey = min(BY, ly - j * BY);
    const int k = x / BX, dx = x % BX, ex = min(BX, lx - k * BX);
    return i * BZ * ly * lx + ez * j * BY * lx + ez * ey * k * BX + (dz * ey + dy) * ex + dx;
}

// The word pairs (64 slots each) of codes that slow_masks_planes reads for
// a tile of n values: those holding slots < n, rounded up to its rounds of 4.
__device__ __forceinline__ int slot_pairs(int n) { return 4 * ((n + 255) >> 8); }

// Step 4 of the slow path (and of the row walk, encode_rows3.cuh), once the
// codes are in SC_CODE (slot order; slots >= n zero up to slot_pairs): the
// bit planes by warp transposes, two words at a time. The words past slot n
// are zero without a transpose (a clipped tile of 136 values needs 4 of the
// 64 word pairs): H200, same call, adk +2-7 % and stageIV +3-4 % compress
// (their clipped tiles; PERF.md v23).
__device__ __forceinline__ void slow_planes(int n, unsigned *pw, const unsigned char *sc, int lane) {
    constexpr int U = 4;
    const unsigned short *scode = (const unsigned short *)(sc + SC_CODE);
    const int mw = slot_pairs(n);
    for (int m = 0; m < 64; m += U) {
        if (m >= mw) {
#pragma unroll
            for (int u = 0; u < U; u++) put_planes(pw, 0u, 2 * (m + u), 2 * (m + u) + 1, lane);
            continue;
        }
        unsigned c[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            c[u] = (unsigned)scode[64 * (m + u) + lane] | (unsigned)scode[64 * (m + u) + 32 + lane] << 16;
#pragma unroll
        for (int u = 0; u < U; u++) put_planes(pw, transpose32(c[u], lane), 2 * (m + u), 2 * (m + u) + 1, lane);
    }
}

// Steps 3 and 4 of the slow path, once the codes are in SC_CODE and the
// element flags in SC_FL: the fill and raw masks (the parity Lorenzo
// transform of the element bitmaps, in slot order), then slow_planes.
// The masks by rows for rank 3 (lane x, a ballot per row of planes z and
// z - 1, XORed with the row before and shifted by one: no divisions, two
// byte loads per element instead of eight) were slower here: coads and
// levitus -8 % compress (128 dependent rows of ballots against 80
// independent rounds; PERF.md v23: in the warp encoder, where a slow tile's
// latency held every later tile). The row walk of clipped rank-3 tiles
// (encode_rows3.cuh) builds its masks in the walk instead.
// fr0: a flat tile's flat_r0 (FAST 4), whose masks take flat.cuh's corners.
template <int FAST>
__device__ __forceinline__ void slow_masks_planes(const Geo &g, int lz, int ly, int lx, unsigned NR, unsigned NF,
                                                  unsigned *pw, unsigned char *sc, int lane, unsigned fr0 = 0) {
    const unsigned char *sfl = sc + SC_FL;
    unsigned *smf = (unsigned *)(sc + SC_MF), *smr = (unsigned *)(sc + SC_MR);
    const int n = lz * ly * lx, P = ly * lx;
    const unsigned mP = magic12(P), mX = magic12(lx);
    __syncwarp();
    if (NR | NF) {
        for (int i = lane; i < 128; i += 32) {
            smf[i] = 0;
            smr[i] = 0;
        }
        __syncwarp();
        for (int e = lane; e < n; e += 32) {
            if (FAST == 4) {
                const unsigned m = flat_corners(g, fr0, e);
                if (NF && flat_xor_corners(g, sfl, e, m, 2)) atomicOr(&smf[e >> 5], 1u << (e & 31));
                if (NR && flat_xor_corners(g, sfl, e, m, 4)) atomicOr(&smr[e >> 5], 1u << (e & 31));
                continue;
            }
            const int z = div12(e, mP), r = e - z * P, y = div12(r, mX), x = r - y * lx;
            const unsigned m = (x > 0) << 12 | (y > 0) << 13 | (z > 0) << 14;
            const int sl = slot_std<FAST>(z, y, x, lz, ly, lx, g);
            if (NF && xor_corners(sfl, e, m, P, lx, 2)) atomicOr(&smf[sl >> 5], 1u << (sl & 31));
            if (NR && xor_corners(sfl, e, m, P, lx, 4)) atomicOr(&smr[sl >> 5], 1u << (sl & 31));
        }
    }
    __syncwarp();
    slow_planes(n, pw, sc, lane);
}

// PAD: a padded field's tile, coded whole (lz x ly x lx the full tile):
// values outside the field repeat the nearest inside (pad_off).
template <typename T, int FAST, int V, bool PAD = false>
__device__ void enc_slow(const T *__restrict__ src, const Geo &g, unsigned long long z0, unsigned long long y0,
                         unsigned long long x0, int lz, int ly, int lx, double inv, double step, double eb,
                         int has_fill, unsigned long long fill_bits, unsigned *pw, unsigned char *sc, int lane,
                         TileSum &ts) {
    constexpr int U = 4;  // elements per lane per round
    int *sq = (int *)(sc + SC_Q);
    unsigned short *scode = (unsigned short *)(sc + SC_CODE);
    unsigned char *sfl = sc + SC_FL;
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    const int n = lz * ly * lx, P = ly * lx;
    const unsigned mP = magic12(P), mX = magic12(lx);
    // a fast path may have set bits before it gave up
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
    }
    // slots >= n that slow_masks_planes reads are 0
    for (int i = lane; i < 8 * slot_pairs(n); i += 32) ((uint4 *)scode)[i] = make_uint4(0, 0, 0, 0);
    __syncwarp();
    // 1. quantize + check
    unsigned nraw = 0, nfill = 0;
    double merr = 0;
    for (int e0 = 0; e0 < n; e0 += 32 * U) {
        T v[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = e0 + 32 * u + lane;
            if (e < n) {
                const int z = div12(e, mP), r = e - z * P, y = div12(r, mX), x = r - y * lx;
                v[u] = src[PAD ? pad_off(g, z0, y0, x0, z, y, x) : ((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = e0 + 32 * u + lane;
            if (e >= n) continue;
            unsigned char f = 0;
            int q = 0;
            if (has_fill && Bits<T>::of(v[u]) == fill_bits) {
                f = 2;
                nfill++;
            } else {
                const double sv = __dmul_rn((double)v[u], inv);
                if (!(fabs(sv) < QUANT_S_LIM)) {
                    f = 4;
                    nraw++;
                } else {
                    double er;
                    q = quant_q<T>(v[u], sv, step, er);
                    f = 1;
                    if (!(er <= eb)) {
                        f = 5;
                        nraw++;
                    } else {
                        merr = fmax(merr, er);
                    }
                }
            }
            if (f & 4) atomicOr(&sraw[e >> 5], 1u << (e & 31));
            sq[e] = q;
            sfl[e] = f;
        }
    }
    const unsigned NR = __reduce_add_sync(0xffffffffu, nraw);
    const unsigned NF = __reduce_add_sync(0xffffffffu, nfill);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) merr = fmax(merr, __shfl_xor_sync(0xffffffffu, merr, o));
    __syncwarp();
    if (NR | NF) {
        // holes take their z-plane's placeholder (FORMAT.md section 4): the
        // plane's mean q, an earlier plane's where it has none, the first
        // plane with q's for the planes before it, 0 without any
        int ph = 0;
        bool seen = false;
        for (int z = 0; z < lz; z++) {
            long long ps = 0;
            unsigned pc = 0;
            for (int e = z * P + lane; e < (z + 1) * P; e += 32)
                if (sfl[e] & 1) {
                    ps += sq[e];
                    pc++;
                }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
            pc = __reduce_add_sync(0xffffffffu, pc);
            if (pc) {
                ph = (int)(ps / (long long)pc);  // truncates toward zero
                if (!seen)  // the all-hole planes before it
                    for (int e = lane; e < z * P; e += 32) sq[e] = ph;
                seen = true;
            }
            if (seen)
                for (int e = z * P + lane; e < (z + 1) * P; e += 32)
                    if (!(sfl[e] & 1)) sq[e] = ph;
        }
        if (!seen)
            for (int e = lane; e < n; e += 32) sq[e] = 0;
    }
    __syncwarp();
    ts.origin = sq[0];
    const unsigned fr0 = FAST == 4 ? flat_r0(g, x0) : 0u;  // flat tiles: x0 is the run's first flat index
    // 2. Lorenzo + codes, 128 elements a round from the top down: each
    //    residual overwrites its q once every lane has read its neighbours
    //    (all at lower indices), so lower rounds still see q.
    unsigned nesc = 0;
    for (int c0 = (n - 1) & ~(32 * U - 1); c0 >= 0; c0 -= 32 * U) {
        int d[U], zz[U], yy[U], xx[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = c0 + 32 * u + lane;
            d[u] = 0;
            zz[u] = yy[u] = xx[u] = 0;
            if (e < n) {
                const int z = div12(e, mP), r = e - z * P, y = div12(r, mX), x = r - y * lx;
                zz[u] = z;
                yy[u] = y;
                xx[u] = x;
                unsigned v = (unsigned)sq[e];
                if (FAST == 4) {  // flat tiles: the field's neighbours in the run (flat.cuh)
                    const unsigned m = flat_corners(g, fr0, e);
#pragma unroll
                    for (int k = 1; k < 8; k++)
                        if ((m >> k) & 1) {
                            const unsigned nb = (unsigned)sq[e - flat_off(g, k)];
                            v = (__popc(k) & 1) ? v - nb : v + nb;
                        }
                    d[u] = (int)v;
                    continue;
                }
                if (x) v -= (unsigned)sq[e - 1];
                if (y) v -= (unsigned)sq[e - lx];
                if (x && y) v += (unsigned)sq[e - lx - 1];
                if (z) {
                    v -= (unsigned)sq[e - P];
                    if (x) v += (unsigned)sq[e - P - 1];
                    if (y) v += (unsigned)sq[e - P - lx];
                    if (x && y) v -= (unsigned)sq[e - P - lx - 1];
                }
                d[u] = (int)v;
            }
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = c0 + 32 * u + lane;
            if (e < n) {
                sq[e] = d[u];
                bool esc;
                unsigned c = code_of<V>(d[u], esc);
                if (e == 0) {
                    c = 0;
                    esc = false;
                }
                if (esc) {
                    sfl[e] |= 8;
                    nesc++;
                    atomicOr(&sesc[e >> 5], 1u << (e & 31));
                }
                scode[slot_std<FAST>(zz[u], yy[u], xx[u], lz, ly, lx, g)] = (unsigned short)c;
            }
        }
    }
    slow_masks_planes<FAST>(g, lz, ly, lx, NR, NF, pw, sc, lane, fr0);
    ts.nesc = __reduce_add_sync(0xffffffffu, nesc);
    ts.nraw = NR;
    ts.nfill = NF;
    ts.merr = merr;
}

// The raw values of a padded rank-3 tile (8 x 16 x 32, coded whole) inside
// its box: the element-order raw bitmap (word z * 16 + y, bit x), which the
// walks and the slow path leave in sraw, counted over the box. Every lane
// gets the count.
__device__ __forceinline__ unsigned raw_inside(const unsigned *sraw, Box3 box, int lane) {
    const unsigned xm = box.lx >= 32 ? 0xffffffffu : (1u << box.lx) - 1;
    unsigned n = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int w = 32 * k + lane, z = w >> 4, y = w & 15;
        if (z < box.lz && y < box.ly) n += __popc(sraw[w] & xm);
    }
    return __reduce_add_sync(0xffffffffu, n);
}

// The raw mask of a tile whose raw values all kept their q (a fast path):
// the parity Lorenzo transform of the element-order raw bitmap, by
// toggling the 2^3 forward corners of each raw element (they are few).
__device__ __forceinline__ void raw_mask_sparse(const unsigned *sraw, unsigned *smr, int lz, int ly, int lx,
                                                const Geo &g, int lane) {
    for (int i = lane; i < 128; i += 32) smr[i] = 0;
    __syncwarp();
    const int P = ly * lx;
    for (int w = lane; w < 128; w += 32) {
        unsigned b = sraw[w];
        while (b) {
            const int e = 32 * w + __ffs(b) - 1;
            b &= b - 1;
            const int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
            // Unrolled, as in v14: only the rank-1 and -2 walks call this
            // since v15 (rank 3: raw_mask_rows3). Rolled up it cost them
            // 2-3 % (code layout); in the rank-3 kernel, its 13 KiB of
            // unrolled code had pushed the walk out of the instruction cache
            // (PERF.md v15).
            for (int c = 0; c < 8; c++) {
                const int zc = z + (c >> 2), yc = y + ((c >> 1) & 1), xc = x + (c & 1);
                if (zc < lz && yc < ly && xc < lx) {
                    const int sl = slot_of(zc, yc, xc, lz, ly, lx, g);
                    atomicXor(&smr[sl >> 5], 1u << (sl & 31));
                }
            }
        }
    }
    __syncwarp();
}

// The raw mask of a full rank-3 tile (8 x 16 x 32, sub-blocks 4 x 4 x 8)
// from its element-order raw bitmap (word z * 16 + y, bit x), by rows: the
// parity transform XORs each row with itself shifted by one in x (r ^ r <<
// 1), then with the row before it in y and the same two rows of plane
// z - 1. Slot word (z / 4) * 64 + j * 16 + k * 4 + z % 4 holds byte k
// (x = 8k .. 8k + 7) of rows y = 4j .. 4j + 3 in its bytes 0-3. Lane
// (z, j) = (l / 4, l % 4) writes its four slot words: no atomics, divisions
// or zeroing (raw_mask_sparse: about 100 instructions and 8 atomics a value).
// raw_mask_rows3_at: the same from word i = in(i) of the bitmap to the
// slot word w at out(w) (the fill kernel's, in the staging rows' padding:
// stage_pad).
template <typename In, typename Out>
__device__ __forceinline__ void raw_mask_rows3_at(In in, Out out, int lane) {
    const int z = lane >> 2, j = lane & 3;
    auto row = [&](int zz, int y) -> unsigned {
        const unsigned r = zz >= 0 && y >= 0 ? in(zz * 16 + y) : 0u;
        return r ^ (r << 1);
    };
    unsigned b[4], prev = row(z, 4 * j - 1) ^ row(z - 1, 4 * j - 1);
#pragma unroll
    for (int dy = 0; dy < 4; dy++) {
        const unsigned cur = row(z, 4 * j + dy) ^ row(z - 1, 4 * j + dy);
        b[dy] = cur ^ prev;
        prev = cur;
    }
    const int w0 = (z >> 2) * 64 + j * 16 + (z & 3);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const unsigned sel = k | (k + 4) << 4;
        *out(w0 + 4 * k) = __byte_perm(__byte_perm(b[0], b[1], sel), __byte_perm(b[2], b[3], sel), 0x5410);
    }
    __syncwarp();
}
__device__ __forceinline__ void raw_mask_rows3(const unsigned *sraw, unsigned *smr, int lane) {
    raw_mask_rows3_at([&](int i) { return sraw[i]; }, [&](int w) { return smr + w; }, lane);
}
