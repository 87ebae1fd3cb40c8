// transcode_emu: cuda/transcode.cuh's transcode_tile run on the host, so
// the version-2 transcode is checked on machines without a GPU
// (cuda/transcode_emu_test.go builds and drives it). 32 threads play the
// warp's lanes; shuffles, ballots and votes go through a barrier, so a
// return that is not warp-uniform deadlocks instead of passing. Built with
// AddressSanitizer: each tile lies in a heap buffer of exactly its bytes,
// and each tile is transcoded twice: into a buffer of the bound the GPU's
// offsets rely on (its bytes + V2_SLACK - 16), then into one of exactly
// the size the first call gave (the same bytes, or the run fails), so any
// read or write outside them aborts.
//
// Input: records {u32 n (the tile's values), u32 bytes, the tile}.
// Output: per tile {u32 code (0 or FZGPU_DE_*), u32 bytes, the v1 tile}.
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "../fzgpu.h"

#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
#define __restrict__
#define __shared__ static
#define NT 512
#define NWARPS 16
struct Geo {
    unsigned long long per_chunk, mpc;
};
struct U3 {
    unsigned x;
};
thread_local U3 threadIdx, blockIdx;

static std::barrier<> *bar;
static unsigned xch[32];
thread_local int my_lane;
static inline unsigned __popc(unsigned x) { return __builtin_popcount(x); }
static unsigned __shfl_sync(unsigned, unsigned v, int src) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    const unsigned r = xch[src];
    bar->arrive_and_wait();
    return r;
}
static unsigned __shfl_up_sync(unsigned, unsigned v, int d) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    const unsigned r = my_lane >= d ? xch[my_lane - d] : v;
    bar->arrive_and_wait();
    return r;
}
static unsigned __ballot_sync(unsigned, bool p) {
    xch[my_lane] = p;
    bar->arrive_and_wait();
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= (xch[i] ? 1u : 0u) << i;
    bar->arrive_and_wait();
    return r;
}
static bool __any_sync(unsigned m, bool p) { return __ballot_sync(m, p) != 0; }
// as fzgpu.cu's
template <int N> unsigned warp_incl_scan(unsigned x, int lane) {
    for (int o = 1; o < N; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}
// used by the kernels around transcode_tile, which are not run here
static unsigned long long __shfl_up_sync(unsigned, unsigned long long, int) { abort(); }
static void __syncthreads() { abort(); }
static void __syncwarp() { abort(); }
using std::min;
inline void tile_box(const Geo &, unsigned long long, unsigned long long &, unsigned long long &,
                     unsigned long long &, int &, int &, int &) {}
inline void report(unsigned long long *, unsigned long long, unsigned) {}
inline unsigned long long div_m(unsigned long long n, unsigned long long d, unsigned long long) { return n / d; }
inline unsigned block_excl_scan(unsigned, unsigned *, unsigned *) { return 0; }

#include "../transcode.cuh"

struct Tile {
    unsigned n;
    std::vector<unsigned char> b;
};

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: transcode_emu in out\n");
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
        t.b.resize(hdr[1]);
        if (hdr[1] < 8 || hdr[1] % 4 || t.n < 1 || t.n > 4096 || fread(t.b.data(), 1, hdr[1], f) != hdr[1]) {
            fprintf(stderr, "bad record %zu\n", tiles.size());
            return 1;
        }
        tiles.push_back(std::move(t));
    }
    fclose(f);
    std::barrier<> b(32);
    bar = &b;
    std::vector<unsigned> codes(tiles.size()), sizes(tiles.size());
    std::vector<unsigned *> outs(tiles.size());
    unsigned *bound[1] = {nullptr};
    int failed = 0;
    std::vector<std::thread> th;
    for (int l = 0; l < 32; l++)
        th.emplace_back([&, l] {
            my_lane = l;
            for (size_t i = 0; i < tiles.size(); i++) {
                const Tile &t = tiles[i];
                const unsigned nw = t.b.size() / 4;
                unsigned *in = (unsigned *)malloc(t.b.size());
                memcpy(in, t.b.data(), t.b.size());
                if (l == 0) bound[0] = (unsigned *)malloc(t.b.size() + V2_SLACK - 16);
                b.arrive_and_wait();
                unsigned sz = 0;
                const unsigned c = transcode_tile(in, nw, (int)t.n, l, &sz, bound[0]);
                if (l == 0) {
                    codes[i] = c;
                    sizes[i] = sz;
                }
                b.arrive_and_wait();
                if (codes[i] == 0) {
                    if (l == 0) outs[i] = (unsigned *)malloc(sizes[i]);
                    b.arrive_and_wait();
                    unsigned sz2 = 0;
                    const unsigned c2 = transcode_tile(in, nw, (int)t.n, l, &sz2, outs[i]);
                    b.arrive_and_wait();
                    if (c2 != 0 || sz2 != sizes[i] || memcmp(outs[i], bound[0], sizes[i])) {
                        fprintf(stderr, "tile %zu lane %d: second call gives code %u size %u (first: size %u)%s\n", i, l,
                                c2, sz2, sizes[i], c2 == 0 && sz2 == sizes[i] ? ", other bytes" : "");
                        failed = 1;
                    }
                }
                b.arrive_and_wait();
                if (l == 0) free(bound[0]);
                free(in);
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
        const unsigned hdr[2] = {codes[i], codes[i] ? 0 : sizes[i]};
        fwrite(hdr, 4, 2, o);
        if (!codes[i]) {
            fwrite(outs[i], 1, sizes[i], o);
            free(outs[i]);
        }
    }
    return fclose(o) ? 1 : 0;
}
