// chunk_scan_emu: cuda/chunk_scan.cuh's chunk_scan_kernel (the first kernel
// of a GPU decode: it validates each chunk's index entry and tile table and
// turns sizes into the offsets every later kernel reads tiles at) run on
// the host, so its rules are checked without a GPU
// (cuda/chunkscan_emu_test.go builds and drives it). The kernel is included,
// not copied, after device_common.cuh (the real Geo and block scan). NT
// threads play one block: each warp's 32 threads share a barrier for the
// shuffles, the block's NT one for __syncthreads, so a thread that skips a
// collective deadlocks the run instead of passing. Built with
// AddressSanitizer and UBSan: the blob is a heap buffer of exactly its bytes.
//
// Input (argv[1]): records {u64 blob bytes, the blob, u64 index offset, u64
// tiles per chunk, u64 tiles, u64 chunks, u64 chunks per job}.
// Output (argv[2]): per record and tile {u64 offset, u32 size} (size 0: the
// tile was rejected; offset then 0), then per job {u64 the kernel's first
// error, (tile << 8) | code, or all bits 1 for none}.
#define EMU_WITH_DEVICE_COMMON
#define NT_EMU 512  // device_common.cuh's NT (checked below), which fzgpu_decompress launches the kernel with
#define EMU_BLOCK_SYNC
#include "walk_emu.h"
#include <deque>
#include "../fzgpu.h"

static const uint3 blockDim = {NT_EMU, 1, 1};

static std::barrier<> *bar_block;
static void __syncthreads() { bar_block->arrive_and_wait(); }
static unsigned long long atomicMin(unsigned long long *p, unsigned long long v) {
    unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    return old;
}

#include "../device_common.cuh"
static_assert(NT == NT_EMU, "the block is NT threads");

__device__ __forceinline__ void report(unsigned long long *err, unsigned long long rel, unsigned code) {
    atomicMin(err, (rel << 8) | code);
}

#include "../chunk_scan.cuh"

static bool rd(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

struct Job {
    unsigned char *blob;
    unsigned long long len, index_off, first_chunk, tile0, nt, nc;
    Geo g;
    std::vector<unsigned long long> toff;
    std::vector<unsigned> tsz;
    unsigned long long err = ~0ull;
};

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: chunk_scan_emu in out\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb"), *o = fopen(argv[2], "wb");
    if (!f || !o) {
        perror("chunk_scan_emu");
        return 1;
    }
    std::vector<unsigned char *> blobs;
    std::vector<Job> jobs;
    for (int rec = 0;; rec++) {
        unsigned long long len;
        if (!rd(f, &len, 8)) break;
        unsigned char *blob = (unsigned char *)malloc(len ? len : 1);
        unsigned long long index_off, per_chunk, tiles, chunks, per_job;
        if (!rd(f, blob, len) || !rd(f, &index_off, 8) || !rd(f, &per_chunk, 8) || !rd(f, &tiles, 8) ||
            !rd(f, &chunks, 8) || !rd(f, &per_job, 8) || per_chunk == 0 || per_job == 0 ||
            chunks != (tiles + per_chunk - 1) / per_chunk || index_off > len || chunks > (len - index_off) / 24) {
            fprintf(stderr, "bad record %d\n", rec);
            return 1;
        }
        blobs.push_back(blob);
        for (unsigned long long c0 = 0; c0 < chunks; c0 += per_job) {
            Job j;
            j.blob = blob;
            j.len = len;
            j.index_off = index_off;
            j.first_chunk = c0;
            j.nc = std::min(per_job, chunks - c0);
            j.tile0 = c0 * per_chunk;
            j.nt = std::min(j.nc * per_chunk, tiles - j.tile0);
            memset(&j.g, 0, sizeof j.g);
            j.g.per_chunk = per_chunk;
            j.g.tiles = tiles;
            j.toff.assign(j.nt, ~0ull);
            j.tsz.assign(j.nt, ~0u);
            jobs.push_back(std::move(j));
        }
    }
    fclose(f);
    // NT threads for the whole run, one block at a time
    std::barrier<> block(NT);
    bar_block = &block;
    static unsigned xchs[NWARPS][32];
    std::deque<std::barrier<>> warps;
    for (int w = 0; w < NWARPS; w++) warps.emplace_back(32);
    std::vector<std::thread> th;
    for (int t = 0; t < NT; t++)
        th.emplace_back([&, t] {
            my_lane = t & 31;
            bar_warp = &warps[t >> 5];
            xch_warp = xchs[t >> 5];
            threadIdx = uint3{(unsigned)t, 0, 0};
            for (Job &j : jobs)
                for (unsigned long long b = 0; b < j.nc; b++) {
                    blockIdx = uint3{(unsigned)b, 0, 0};
                    chunk_scan_kernel(j.g, j.blob, j.len, j.index_off, j.first_chunk, j.tile0, j.toff.data(), j.tsz.data(),
                                      &j.err);
                    block.arrive_and_wait();  // the block is done before the next one starts
                }
        });
    for (auto &x : th) x.join();
    for (const Job &j : jobs) {
        for (unsigned long long i = 0; i < j.nt; i++) {
            if (j.tsz[i] == ~0u) {
                fprintf(stderr, "tile %llu of a job: no size written\n", j.tile0 + i);
                return 1;
            }
            const unsigned long long off = j.tsz[i] ? j.toff[i] : 0;
            fwrite(&off, 8, 1, o);
            fwrite(&j.tsz[i], 4, 1, o);
        }
        fwrite(&j.err, 8, 1, o);
    }
    for (unsigned char *b : blobs) free(b);
    return fclose(o) ? 1 : 0;
}
