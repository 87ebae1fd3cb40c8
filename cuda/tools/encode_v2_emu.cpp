// encode_v2_emu: cuda/encode_v2.cuh's tile_layout_v2 and version-2
// tile_write run on the host, so the GPU encoder's version-2 code section
// is checked on machines without a GPU (cuda/encv2_emu_test.go builds and
// drives it). 32 threads play the warp's lanes; shuffles, ballots and
// __syncwarp go through a barrier (a divergent one deadlocks instead of
// passing). Built with AddressSanitizer; each output lies in a heap buffer
// of exactly the tile's size, filled with 0xAB first, so a byte of the code
// section the writer misses shows as a difference.
//
// Input: records {u32 n (the tile's values), u32 bytes, a version-1 tile}:
// its 16 bit planes go into the shared-memory plane buffer as the walks
// leave them (escape = code 0x8000), its escape count into TileSum.
// Output: per tile {u32 bytes, the version-2 tile's first `bytes` bytes:
// word 0 (bits 0 and 16 only: fill and raw are left to the tail), the
// origin and the code section}.
// "encode_v2_emu random N SEED" instead checks N tiles of random planes
// against a model of the code section (random_planes).
#include <barrier>
#include <random>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline

#include "warp_emu.h"

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct Geo {
    int unused;
};

static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
// (hi:lo) >> (s & 31), the low word (PTX shf.r.wrap)
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    s &= 31;
    return s ? lo >> s | hi << (32 - s) : lo;
}
// PTX prmt, default mode (no sign replication: the writer's selectors have none)
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned sel) {
    const unsigned long long x = (unsigned long long)b << 32 | a;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(x >> (8 * ((sel >> (4 * i)) & 7)) & 0xFFu) << (8 * i);
    return r;
}
static unsigned atomicOr(unsigned *p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
// per 16-bit half: 0xFFFF where the halves differ
static unsigned __vcmpne2(unsigned a, unsigned b) {
    return ((a & 0xFFFFu) != (b & 0xFFFFu) ? 0xFFFFu : 0u) | ((a >> 16) != (b >> 16) ? 0xFFFF0000u : 0u);
}
static inline unsigned bitsel(unsigned a, unsigned b, unsigned m) { return (a & m) | (b & ~m); }

// as encode_warp.cuh's (the plane buffer's layout and the pieces the
// version-2 writer shares with version 1; the tail is not run here: the
// records' tiles have no fill or raw values in TileSum)
#define PW_STRIDE 132
#define SC_MF 29696
#define SC_MR 30208
struct TileSum {
    unsigned nesc, nraw, nfill;
    unsigned wide;
    int origin;
    double merr;
};
static inline uint4 pw_block(const unsigned *pw, int p, int lane) {
    uint4 b = *(const uint4 *)&pw[p * PW_STRIDE + 4 * lane];
    const int f = (p >> 2) & 3;
    if (f & 1) b = make_uint4(b.y, b.x, b.w, b.z);
    if (f & 2) b = make_uint4(b.z, b.w, b.x, b.y);
    return b;
}
static unsigned block_mask(uint4) {
    fprintf(stderr, "block_mask called: records carry no fill or raw values\n");
    abort();
}
static unsigned block_mask128(const unsigned *, int) {
    fprintf(stderr, "block_mask128 called: records carry no fill or raw values\n");
    abort();
}
struct TileLayout {
    unsigned size;
};
template <typename T> TileLayout tile_layout(const unsigned *, const unsigned char *, const TileSum &, int,
                                             const uint4 * = nullptr);
template <typename T, int LU, bool WALKED, bool PAD = false, typename ST>
void tile_write_tail(const ST &, unsigned *, unsigned, unsigned, unsigned, unsigned, unsigned, const TileSum &,
                     const unsigned char *, const T *, const Geo &, unsigned long long, unsigned long long,
                     unsigned long long, int, int, bool, int, const uint4 * = nullptr) {}
struct PlainStore {
    void operator()(unsigned *p, unsigned v) const { *p = v; }
};

#include "../tile_tail.cuh"
#include "../encode_v2.cuh"

// "random N SEED": N tiles of random planes (rates drawn per group: mixed up
// to each of 2..15, sparse, all 15 (the largest unit section, 1920 words), tiny;
// random signs where the magnitude is not 0), each checked here against a
// plain model of the code section (FORMAT.md version 2: rates, group-major
// units, padding, signs of the non-zero magnitudes), with every pad word of
// the plane buffer (the park state) left as it was. Prints a summary.
static int random_planes(int N, unsigned seed) {
    std::mt19937 rng(seed);
    static unsigned pw[16 * PW_STRIDE];
    std::barrier<> b(32);
    bar = &b;
    static TileSum ts;
    static std::vector<unsigned> out, ref;
    static int bad = 0;
    static unsigned stats[4];
    auto gen = [&](int it) {
        for (auto &x : pw) x = 0xDEADBEEF;  // pads and junk: the writer must not rely on them
        for (int p = 0; p < 16; p++)
            for (int w = 0; w < 128; w++) pw[p * PW_STRIDE + (w ^ ((p >> 2) & 3))] = 0;
        const int mode = it % 6;
        // modes 0-2: every largest rate 2..15 in turn (the unit write's step,
        // 2, 4 or 8 words a group, follows the tile's largest rate)
        const int maxr = 2 + (it / 6 + 5 * mode) % 14;
        for (int g = 0; g < 256; g++) {
            int r;
            switch (mode) {
            case 3: r = (rng() % 4 == 0) ? 1 + rng() % 15 : 0; break;      // sparse
            case 4: r = 15; break;                                        // full
            case 5: r = (rng() % 2) ? rng() % 2 : 0; break;               // tiny, odd counts
            default: r = (rng() % 3 == 0) ? 0 : rng() % (maxr + 1);
            }
            if (g == 0 && rng() % 2) r = 0;
            // slot magnitudes with bit length exactly r in at least one slot
            for (int j = 0; j < 16; j++) {
                unsigned m = r ? (rng() & ((1u << r) - 1)) : 0;
                if (j == (int)(rng() % 16) && r) m |= 1u << (r - 1);
                if (j == 15 && r) m |= 1u << (r - 1);
                const int slot = 16 * g + j, w = slot >> 5, bit = slot & 31;
                for (int p = 0; p < 15; p++)
                    if ((m >> p) & 1) pw[p * PW_STRIDE + (w ^ ((p >> 2) & 3))] |= 1u << bit;
                if (m && (rng() & 1)) pw[15 * PW_STRIDE + (w ^ 3)] |= 1u << bit;
            }
        }
        ts = TileSum{};
        ts.origin = (int)rng();
        // reference
        ref.clear();
        auto P = [&](int p, int w) { return pw[p * PW_STRIDE + (w ^ ((p >> 2) & 3))]; };
        int rate[256];
        unsigned bm = 0;
        for (int g = 0; g < 256; g++) {
            rate[g] = 0;
            for (int p = 0; p < 15; p++)
                if ((P(p, g >> 1) >> (16 * (g & 1))) & 0xFFFF) rate[g] = p + 1;
            if (rate[g]) bm |= 1u << (g >> 3);
        }
        ref.push_back(bm ? 1 : 0);
        ref.push_back((unsigned)ts.origin);
        if (bm) {
            ref.push_back(bm);
            for (int k = 0; k < 32; k++)
                if ((bm >> k) & 1) {
                    unsigned rw = 0;
                    for (int j = 0; j < 8; j++) rw |= (unsigned)rate[8 * k + j] << (4 * j);
                    ref.push_back(rw);
                }
            std::vector<unsigned short> u;
            for (int g = 0; g < 256; g++)
                for (int p = 0; p < rate[g]; p++) u.push_back((P(p, g >> 1) >> (16 * (g & 1))) & 0xFFFF);
            stats[0] += u.size() & 1;
            if (u.size() & 1) u.push_back(0);
            for (size_t i = 0; i < u.size(); i += 2) ref.push_back(u[i] | (unsigned)u[i + 1] << 16);
            std::vector<unsigned> sb;
            for (int s = 0; s < 4096; s++) {
                unsigned mag = 0;
                for (int p = 0; p < 15; p++) mag |= ((P(p, s >> 5) >> (s & 31)) & 1) << p;
                if (mag) sb.push_back((P(15, s >> 5) >> (s & 31)) & 1);
            }
            for (size_t i = 0; i < sb.size(); i += 32) {
                unsigned w = 0;
                for (size_t j = i; j < sb.size() && j < i + 32; j++) w |= sb[j] << (j - i);
                ref.push_back(w);
            }
        }
    };
    std::vector<std::thread> th;
    for (int l = 0; l < 32; l++)
        th.emplace_back([&, l] {
            my_lane = l;
            for (int it = 0; it < N; it++) {
                if (l == 0) gen(it);
                b.arrive_and_wait();
                const TileSum tsl = ts;
                const TileLayoutV2 L = tile_layout_v2<float>(pw, nullptr, tsl, l);
                const unsigned code_end = L.bm ? L.sign_at + L.nsw : 2;
                if (l == 0) out.assign(code_end + 8, 0xABABABABu);
                b.arrive_and_wait();
                tile_write<float, 1, false>(PlainStore{}, out.data(), L, tsl, pw, nullptr, nullptr, Geo{}, 0, 0, 0, 0, 0,
                                            false, l);
                b.arrive_and_wait();
                if (l == 0) {
                    bool ok = code_end == ref.size();
                    for (int p = 0; p < 16; p++)
                        for (int w = 128; w < 132; w++)
                            if (pw[p * PW_STRIDE + w] != 0xDEADBEEFu) {
                                ok = false;
                                fprintf(stderr, "pad word %d of row %d written\n", w, p);
                            }
                    for (size_t i = 0; ok && i < ref.size(); i++) ok = out[i] == ref[i];
                    for (size_t i = ref.size(); ok && i < out.size(); i++) ok = out[i] == 0xABABABABu;
                    if (!ok && bad++ < 5) {
                        size_t i = 0;
                        while (i < ref.size() && i < out.size() && out[i] == ref[i]) i++;
                        fprintf(stderr, "iter %d mode %d: size %u vs ref %zu, first diff word %zu: %#x vs %#x\n", it, it % 6,
                                code_end, ref.size(), i, i < out.size() ? out[i] : 0, i < ref.size() ? ref[i] : 0);
                    }
                }
                b.arrive_and_wait();
            }
        });
    for (auto &x : th) x.join();
    printf("%d random tiles: %d differ from the model (%u with an odd number of units)\n", N, bad, stats[0]);
    return bad != 0;
}

struct Tile {
    unsigned n;
    std::vector<unsigned> w;
};

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "random")) return random_planes(atoi(argv[2]), (unsigned)strtoul(argv[3], nullptr, 10));
    if (argc != 3) {
        fprintf(stderr, "usage: encode_v2_emu in out | encode_v2_emu random N SEED\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    std::vector<Tile> tiles;
    for (;;) {
        unsigned hdr[2];
        if (fread(hdr, 4, 2, f) != 2) break;
        Tile t;
        t.n = hdr[0];
        t.w.resize(hdr[1] / 4);
        if (hdr[1] < 8 || hdr[1] % 4 || t.n < 1 || t.n > 4096 || fread(t.w.data(), 1, hdr[1], f) != hdr[1]) {
            fprintf(stderr, "bad record %zu\n", tiles.size());
            return 1;
        }
        tiles.push_back(std::move(t));
    }
    fclose(f);
    static unsigned pw[16 * PW_STRIDE];
    std::vector<std::vector<unsigned char>> outs(tiles.size());
    std::vector<unsigned> sizes(tiles.size());
    int failed = 0;
    // The planes and TileSum of each v1 tile (lane 0, between barriers).
    auto load = [&](const Tile &t, TileSum &ts) -> bool {
        memset(pw, 0, sizeof pw);
        const unsigned w0 = t.w[0], pm = w0 & 0xFFFF;
        size_t at = 2;
        for (int p = 0; p < 16; p++) {
            if (!((pm >> p) & 1)) continue;
            if (at >= t.w.size()) return false;
            const unsigned m = t.w[at++];
            for (int k = 0; k < 32; k++) {
                if (!((m >> k) & 1)) continue;
                if (at + 4 > t.w.size()) return false;
                for (int i = 0; i < 4; i++) {
                    const int w = 4 * k + i;
                    pw[p * PW_STRIDE + (w ^ ((p >> 2) & 3))] = t.w[at++];
                }
            }
        }
        ts = TileSum{};
        ts.origin = (int)t.w[1];
        if (w0 & (1u << 16)) {
            if (at >= t.w.size()) return false;
            ts.nesc = t.w[at];
        }
        return true;
    };
    std::barrier<> b(32);
    bar = &b;
    static TileSum ts;
    static bool ok;
    std::vector<std::thread> th;
    for (int l = 0; l < 32; l++)
        th.emplace_back([&, l] {
            my_lane = l;
            for (size_t i = 0; i < tiles.size(); i++) {
                if (l == 0) ok = load(tiles[i], ts);
                b.arrive_and_wait();
                if (!ok) {
                    if (l == 0) {
                        fprintf(stderr, "tile %zu: malformed version-1 tile\n", i);
                        failed = 1;
                    }
                    b.arrive_and_wait();
                    continue;
                }
                const TileSum tsl = ts;
                const TileLayoutV2 L = tile_layout_v2<float>(pw, nullptr, tsl, l);
                const unsigned code_end = L.bm ? L.sign_at + L.nsw : 2;
                if (l == 0) {
                    outs[i].assign(L.size, 0xAB);
                    sizes[i] = 4 * code_end;
                }
                b.arrive_and_wait();
                tile_write<float, 1, false>(PlainStore{}, (unsigned *)outs[i].data(), L, tsl, pw, nullptr, nullptr,
                                            Geo{}, 0, 0, 0, 0, 0, false, l);
                b.arrive_and_wait();
            }
        });
    for (auto &x : th) x.join();
    if (failed) return 1;
    FILE *o = fopen(argv[2], "wb");
    if (!o) {
        perror(argv[2]);
        return 1;
    }
    for (size_t i = 0; i < tiles.size(); i++) {
        fwrite(&sizes[i], 4, 1, o);
        fwrite(outs[i].data(), 1, sizes[i], o);
    }
    return fclose(o) ? 1 : 0;
}
