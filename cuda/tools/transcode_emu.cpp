// transcode_emu: cuda/transcode.cuh run on the host, so the version-2
// transcode is checked on machines without a GPU (cuda/transcode_emu_test.go
// builds and drives it). 32 threads play the warp's lanes; shuffles, ballots
// and votes go through a barrier, so a return that is not warp-uniform
// deadlocks instead of passing. Built with AddressSanitizer. Two runs per
// container:
//  - transcode_tile per tile: the tile in a heap buffer of exactly its
//    bytes, transcoded into a buffer of the bound the GPU's offsets rely on
//    (its bytes + V2_SLACK - 16), then into one of exactly the size the
//    first call gave (the same bytes, or the run fails);
//  - transcode_v2_kernel over the container in jobs of two chunks (the
//    offsets chunk_scan_kernel would give), into a buffer of exactly the
//    size fzgpu_decompress allocates: every tile must get the code and
//    bytes of the first run, and the accepted copies must not overlap.
// So any read or write outside the tile, the bound or the buffer aborts.
//
// Input: per container {u64 bytes, the container, u64 index offset, u64
// tiles per chunk, u64 chunks, u64 tiles, per tile {u64 offset, u32 bytes,
// u32 n (its values)}}.
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

#include "warp_emu.h"

struct Geo {
    unsigned long long per_chunk, mpc;
    int padded;  // padded tiles (FORMAT.md 3.2): a tile of TILE values whatever its box
};
#define TILE 4096
struct U3 {
    unsigned x;
};
thread_local U3 threadIdx, blockIdx;

// used by the kernels around transcode_tile, which are not run here
static unsigned long long __shfl_up_sync(unsigned, unsigned long long, int) { abort(); }
static void __syncthreads() { abort(); }
using std::min;
// the running container's tiles' values; the kernel's rejects by job tile
static std::vector<unsigned> tile_n, kcode;
inline void tile_box(const Geo &, unsigned long long t, unsigned long long &, unsigned long long &,
                     unsigned long long &, int &lz, int &ly, int &lx) {
    lz = (int)tile_n[t];
    ly = lx = 1;
}
inline void report(unsigned long long *, unsigned long long rel, unsigned code) { kcode[rel] = code; }
inline unsigned long long div_m(unsigned long long n, unsigned long long d, unsigned long long) { return n / d; }
inline unsigned block_excl_scan(unsigned, unsigned *, unsigned *) { return 0; }

// cp.async into the stage buffer (stage_words): the warp's row of emu_stage
// is the arena, and the copies land late (at the wait), so a read of the
// stage before the wait sees the tile before's bytes and fails the run
#include "cp_async_emu.h"
static unsigned emu_stage[1 << 14];  // TC_W rows of TC_STAGE words (checked below)
#define TC_STAGE_BUF (reinterpret_cast<unsigned(*)[TC_STAGE]>(emu_stage))

#include "../transcode.cuh"
static_assert(TC_W * TC_STAGE <= sizeof emu_stage / sizeof emu_stage[0], "emu_stage holds the kernel's stage rows");

struct Tile {
    unsigned long long off;
    unsigned bytes, n;
};
struct Container {
    std::vector<unsigned char> blob;
    unsigned long long index_off, per_chunk, chunks;
    std::vector<Tile> tiles;
};

static bool rd(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

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
    std::vector<Container> conts;
    for (;;) {
        unsigned long long len, nt;
        if (!rd(f, &len, 8)) break;
        Container c;
        c.blob.resize(len);
        if (!rd(f, c.blob.data(), len) || !rd(f, &c.index_off, 8) || !rd(f, &c.per_chunk, 8) || !rd(f, &c.chunks, 8) ||
            !rd(f, &nt, 8) || len % 4 || c.index_off % 4 || c.per_chunk == 0 || nt > (c.chunks * c.per_chunk) ||
            c.index_off + 24 * c.chunks > len) {
            fprintf(stderr, "bad container record %zu\n", conts.size());
            return 1;
        }
        for (unsigned long long i = 0; i < nt; i++) {
            Tile t;
            if (!rd(f, &t.off, 8) || !rd(f, &t.bytes, 4) || !rd(f, &t.n, 4) || t.bytes < 8 || t.bytes % 4 ||
                t.off % 4 || t.off > len || t.bytes > len - t.off || t.n < 1 || t.n > 4096) {
                fprintf(stderr, "bad tile record %llu of container %zu\n", i, conts.size());
                return 1;
            }
            c.tiles.push_back(t);
        }
        conts.push_back(std::move(c));
    }
    fclose(f);
    FILE *o = fopen(argv[2], "wb");
    if (!o) {
        perror(argv[2]);
        return 1;
    }
    std::barrier<> b(32);
    bar = &b;
    late_landing = true;
    int failed = 0;
    for (size_t ci = 0; ci < conts.size(); ci++) {
        const Container &C = conts[ci];
        const size_t nt = C.tiles.size();
        std::vector<unsigned> codes(nt), sizes(nt);
        std::vector<unsigned *> outs(nt);
        unsigned *bound[1] = {nullptr};
        // run 2's state, per job
        unsigned char *jout = nullptr;
        std::vector<unsigned long long> toff, v1off;
        std::vector<unsigned> tsz, v1sz;
        unsigned long long span = 0, first_chunk = 0, tile0 = 0, jnt = 0;
        tile_n.clear();
        for (auto &t : C.tiles) tile_n.push_back(t.n);
        std::vector<std::thread> th;
        for (int l = 0; l < 32; l++)
            th.emplace_back([&, l] {
                my_lane = l;
                // run 1: transcode_tile per tile
                for (size_t i = 0; i < nt; i++) {
                    const Tile &t = C.tiles[i];
                    const unsigned nw = t.bytes / 4;
                    unsigned *in = (unsigned *)malloc(t.bytes);
                    memcpy(in, C.blob.data() + t.off, t.bytes);
                    if (l == 0) bound[0] = (unsigned *)malloc(t.bytes + V2_SLACK - 16);
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
                            fprintf(stderr, "tile %zu lane %d: second call gives code %u size %u (first: size %u)%s\n",
                                    i, l, c2, sz2, sizes[i], c2 == 0 && sz2 == sizes[i] ? ", other bytes" : "");
                            failed = 1;
                        }
                    }
                    b.arrive_and_wait();
                    if (l == 0) free(bound[0]);
                    free(in);
                }
                // run 2: transcode_v2_kernel in jobs of two chunks
                for (unsigned long long ch = 0; ch < C.chunks; ch += 2) {
                    if (l == 0) {
                        first_chunk = ch;
                        tile0 = ch * C.per_chunk;
                        jnt = std::min<unsigned long long>(2 * C.per_chunk, nt - tile0);
                        // as fzgpu_decompress: span and the buffer's bytes
                        const unsigned long long room = C.blob.size() - C.index_off, most = jnt * (V2_TILE_MAX + 4ull);
                        span = room < most ? room : most;
                        jout = (unsigned char *)malloc(span + (unsigned long long)V2_SLACK * jnt);
                        toff.assign(jnt, 0);
                        tsz.assign(jnt, 0);
                        v1off.assign(jnt, ~0ull);
                        v1sz.assign(jnt, ~0u);
                        kcode.assign(jnt, 0);
                        for (unsigned long long r = 0; r < jnt; r++) {
                            toff[r] = C.tiles[tile0 + r].off;
                            tsz[r] = C.tiles[tile0 + r].bytes;
                        }
                    }
                    b.arrive_and_wait();
                    Geo g = {C.per_chunk, 0};
                    for (unsigned long long r = 0; r < jnt; r++) {
                        if (l == 0) {  // the warp's stage row, where its cp.async may write
                            arena = (unsigned char *)(emu_stage + (r % TC_W) * TC_STAGE);
                            arena_bytes = 4 * TC_STAGE;
                        }
                        b.arrive_and_wait();
                        blockIdx.x = (unsigned)(r / TC_W);
                        threadIdx.x = (unsigned)(r % TC_W) * 32 + l;
                        transcode_v2_kernel(g, C.blob.data(), C.index_off, first_chunk, tile0, jnt, span, toff.data(),
                                            tsz.data(), v1sz.data(), v1off.data(), jout, nullptr);
                        b.arrive_and_wait();
                    }
                    if (l == 0) {
                        std::vector<std::pair<unsigned long long, unsigned>> spans;
                        for (unsigned long long r = 0; r < jnt; r++) {
                            const size_t i = tile0 + r;
                            const bool same = kcode[r] == codes[i] && v1sz[r] == (codes[i] ? 0u : sizes[i]) &&
                                              (codes[i] || !memcmp(jout + v1off[r], outs[i], sizes[i]));
                            if (!same) {
                                fprintf(stderr, "container %zu tile %zu: kernel gives code %u size %u, transcode_tile %u size %u\n",
                                        ci, i, kcode[r], v1sz[r], codes[i], codes[i] ? 0u : sizes[i]);
                                failed = 1;
                            }
                            if (!kcode[r]) spans.push_back({v1off[r], v1sz[r]});
                        }
                        std::sort(spans.begin(), spans.end());
                        for (size_t k = 1; k < spans.size(); k++)
                            if (spans[k - 1].first + spans[k - 1].second > spans[k].first) {
                                fprintf(stderr, "container %zu: v1 copies overlap at offset %llu\n", ci, spans[k].first);
                                failed = 1;
                            }
                        free(jout);
                    }
                    b.arrive_and_wait();
                }
            });
        for (auto &x : th) x.join();
        if (failed) return 1;
        for (size_t i = 0; i < nt; i++) {
            const unsigned hdr[2] = {codes[i], codes[i] ? 0 : sizes[i]};
            fwrite(hdr, 4, 2, o);
            if (!codes[i]) {
                fwrite(outs[i], 1, sizes[i], o);
                free(outs[i]);
            }
        }
    }
    return fclose(o) ? 1 : 0;
}
