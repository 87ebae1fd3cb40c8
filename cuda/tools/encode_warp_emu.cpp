// encode_warp_emu: the warp encoder kernel itself (encode_warp.cuh's
// encode_warp_kernel, f32 ranks 1-3 and flat tiles: the walks, the FILLP
// walk, the slow path, the tail, the look-back, the scanner warp and the L2
// park) run on the host by one
// block of ENC_W warps, 32 threads each (ASan/UBSan), so the kernel's flow
// between warps (tickets, published sizes, prefixes, parked tiles) is checked
// without a GPU (cuda/encwarp_emu_test.go compares every tile it writes with
// the CPU codec's). With PCT set, encode_clipped_kernel (encode_clipped.cuh)
// runs first and the warp encoder takes the clipped tiles from its side
// buffer. The headers are included, not copied; the CUDA intrinsics, warp
// operations and PTX primitives are walk_emu.h's host versions, with one
// barrier and exchange buffer per warp.
//
// Input: records {u32 nz, ny, nx, has_fill, fill_bits, mode (1: PCT, 2:
// padded tiles, FORMAT.md 3.2: the PAD kernels), late (cp.async
// copies land when waited for), tile0, nt (the job: tiles [tile0, tile0 +
// nt), whole chunks of 256 tiles as fzgpu.cu's jobs; nt = 0: the whole
// field), rank (1, 2, 3, or 4: flat tiles), f64 inv, step, eb} then the f32
// values. Output per record: u32 err
// (the kernel's error flags), u32 the tiles enc_flat32 took whole (the flat walk, and the f32 rank-1 walk), u32 1
// if the fill fields' optimistic kernel (HF 5) did the job, per tile of the job u32 tsize, u64 tprefix,
// u32 touts, f64 terr, then u64
// bytes and the output buffer's first `bytes` bytes (the tiles at tprefix
// plus the size tables' room before them; the tables themselves are
// tables_kernel's, not run here).
#include <algorithm>
#include <atomic>
#include <memory>

#define EMU_WITH_DEVICE_COMMON
#define EMU_HOST_PTX  // encode_ptx.cuh: walk_emu.h's versions
#include "walk_emu.h"

static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

#include "../device_common.cuh"
#include "emu_geo.h"
#include "../offsets.cuh"
#include "../mask_corners.cuh"
static unsigned __vcmpne2(unsigned a, unsigned b) {  // as encode_v2_emu.cpp's
    return ((a & 0xFFFFu) != (b & 0xFFFFu) ? 0xFFFFu : 0u) | ((a >> 16) != (b >> 16) ? 0xFFFF0000u : 0u);
}
// the kernels' dynamic shared memory (extern __shared__ on the GPU): one
// block's, ENC_W * PW_WORDS words (allocated in main)
static unsigned *enc_smem_host;
#define ENC_WARP_SMEM enc_smem_host
#define ENC_CLIPPED_SMEM enc_smem_host
static std::atomic<unsigned> flat_taken{0};  // tiles enc_flat32 took whole, per record
#define EMU_FLAT_TAKEN (lane == 0 ? (void)flat_taken++ : (void)0)
#include "../encode_warp.cuh"

template <typename F> static void run_block(F f) {
    std::vector<std::unique_ptr<std::barrier<>>> bars;
    for (int w = 0; w < ENC_W; w++) bars.emplace_back(new std::barrier<>(32));
    static unsigned xchs[ENC_W][32];
    static unsigned long long xch64s[ENC_W][32];
    std::vector<std::thread> th;
    for (int t = 0; t < ENC_W * 32; t++)
        th.emplace_back([&, t] {
            my_lane = t & 31;
            threadIdx = uint3{(unsigned)t, 0, 0};
            blockIdx = uint3{0, 0, 0};
            bar_warp = bars[t >> 5].get();
            xch_warp = xchs[t >> 5];
            xch64_warp = xch64s[t >> 5];
            f();
        });
    for (auto &x : th) x.join();
}

int main(int argc, char **argv) {
    FILE *in, *out;
    if (int rc = open_io(argc, argv, "encode_warp_emu", in, out)) return rc;
    unsigned h[10];
    double d[3];
    enc_smem_host = (unsigned *)aligned_alloc(16, 4 * ENC_W * PW_WORDS);
    threadIdx.x = 0;
    arena = (unsigned char *)stage_buf();  // warp 0's row: the array's start
    arena_bytes = sizeof(float) * ENC_W * 2 * STG_PLANE;
    while (fread(h, 4, 10, in) == 10) {
        if (fread(d, 8, 3, in) != 3) return 2;
        const unsigned long long n = (unsigned long long)h[0] * h[1] * h[2];
        float *v = read_values(in, n, "field");
        const int rank = (int)h[9];  // 3, 2 (nz 1), 1 (nz = ny = 1), or 4: flat tiles (FORMAT.md 3.1, the kernel's FAST 4)
        Geo g = rank == 4 ? emu_geo_flat(h[0], h[1], h[2]) : emu_geo(rank, h[0], h[1], h[2]);
        const bool pad = h[5] == 2;  // make_geo takes padded tiles for rank 3 only
        if (pad && rank != 3) return 2;
        g.padded = pad;
        const unsigned long long tile0 = h[7], nt = h[8] ? h[8] : g.tiles - tile0;
        if (tile0 + nt > g.tiles) return 2;
        DevParams prm{};
        prm.inv = d[0], prm.step = d[1], prm.eb = d[2];
        const int has_fill = (int)h[3];
        const unsigned long long fill_bits = h[4];
        late_landing = h[6] != 0;
        const unsigned long long cap = 4 * nt + nt * 42072ull;  // the tables' room + fzgpu_compress_bound
        std::vector<unsigned> obuf(cap / 4, 0xCDCDCDCDu), tsize(nt, 0), touts(nt, 0);
        std::vector<unsigned long long> status(nt, 0), tprefix(nt, 0), soffs(nt, 0);
        std::vector<double> terr(nt, 0);
        unsigned ticket = 0, err = 0;
        unsigned char *scratch = (unsigned char *)malloc((size_t)ENC_W * SC_BYTES);
        std::vector<unsigned> side;
        const unsigned *pre = nullptr;
        if (h[5] == 1 && rank != 4 && rank != 1) {  // PCT (not for flat or rank-1 tiles: none is clipped but the last)
            const uint3 fl = {(unsigned)(g.nz / g.tz), (unsigned)(g.ny / g.ty), (unsigned)(g.nx / g.tx)};
            const unsigned long long nfull = full_before(g, tile0 + nt, fl.x, fl.y, fl.z) - full_before(g, tile0, fl.x, fl.y, fl.z),
                                     nclip = nt - nfull;
            side.assign(nt * 42072ull / 4 + 16, 0);
            unsigned long long ctr[2] = {0, 0};
            // the clipped kernel's row walk stages its planes in the warps'
            // plane buffers: the arena is the kernel's shared array meanwhile
            unsigned char *const warp_arena = arena;
            const size_t warp_arena_bytes = arena_bytes;
            arena = (unsigned char *)enc_smem_host;
            arena_bytes = 4 * ENC_W * PW_WORDS;
            run_block([&] {
                (rank == 3 ? encode_clipped_kernel<float, 3> : encode_clipped_kernel<float, 2>)(
                    v, g, &prm, has_fill, fill_bits, tile0, nt, fl, nfull, nclip, side.data(), 4 * side.size(), ctr,
                    tsize.data(), soffs.data(), touts.data(), terr.data(), scratch);
                if (const int n = pending_copies()) {
                    fprintf(stderr, "thread %u: %d cp.async groups left pending by the clipped kernel\n", threadIdx.x, n);
                    abort();
                }
            });
            arena = warp_arena;
            arena_bytes = warp_arena_bytes;
            pre = side.data();
        }
        // fzgpu.cu's dispatch: a rank-3 field with a fill value whose job has
        // no clipped tiles or has them pre-coded runs the optimistic kernel
        // (HF 5) first; the full kernel (HF 2) redoes the job if it gave up
        // (bit 1 of abortf), else returns at once. Where every full tile's
        // rows are 16-byte aligned the optimistic kernel and rank 2's are
        // the AL16 ones (no 4-byte copies).
        // (padded: every tile walked whole, as if all were full)
        const bool optf = rank == 3 && has_fill &&
                          (pad || (g.nz % g.tz == 0 && g.ny % g.ty == 0 && g.nx % g.tx == 0) || pre) &&
                          g.tiles <= 0xFFFFFFFFull;
        const bool rows16 = ((uintptr_t)v & 15) == 0 && g.nx % 4 == 0;
        unsigned abortf = 0, opt_done = 0;
        if (optf) {
            std::vector<unsigned long long> ostatus(nt, 0);
            unsigned oticket = 0;
            run_block([&] {
                (pad ? (rows16 ? encode_warp_kernel<float, 3, 5, 1, 1, true, true> : encode_warp_kernel<float, 3, 5, 1, 1, false, true>)
                     : rows16 ? encode_warp_kernel<float, 3, 5, 1, 1, true> : encode_warp_kernel<float, 3, 5, 1>)(
                    v, g, &prm, has_fill, fill_bits, tile0, nt, obuf.data(), cap, ostatus.data(), tsize.data(),
                    tprefix.data(), touts.data(), terr.data(), &oticket, &err, scratch, &abortf, pre, soffs.data());
            });
            opt_done = !(abortf & 2u);
        }
        run_block([&] {
            if (rank == 1)  // fzgpu.cu's enc_kernel: HF 1 for fields without a fill value
                (has_fill ? encode_warp_kernel<float, 1, 0, 1> : encode_warp_kernel<float, 1, 1, 1>)(
                    v, g, &prm, has_fill, fill_bits, tile0, nt, obuf.data(), cap, status.data(), tsize.data(),
                    tprefix.data(), touts.data(), terr.data(), &ticket, &err, scratch, nullptr, nullptr, nullptr);
            else if (rank == 4)  // the same for flat tiles
                (has_fill ? encode_warp_kernel<float, 4, 0, 1> : encode_warp_kernel<float, 4, 1, 1>)(
                    v, g, &prm, has_fill, fill_bits, tile0, nt, obuf.data(), cap, status.data(), tsize.data(),
                    tprefix.data(), touts.data(), terr.data(), &ticket, &err, scratch, nullptr, nullptr, nullptr);
            else if (rank == 2)  // fzgpu.cu's enc_kernel: HF 1 for fields without a fill value; PC for PCT jobs
                (has_fill ? (pre ? (rows16 ? encode_warp_kernel<float, 2, 0, 1, 1, true> : encode_warp_kernel<float, 2, 0, 1, 1>)
                                 : (rows16 ? encode_warp_kernel<float, 2, 0, 1, 0, true> : encode_warp_kernel<float, 2, 0, 1, 0>))
                          : (pre ? (rows16 ? encode_warp_kernel<float, 2, 1, 1, 1, true> : encode_warp_kernel<float, 2, 1, 1, 1>)
                                 : (rows16 ? encode_warp_kernel<float, 2, 1, 1, 0, true> : encode_warp_kernel<float, 2, 1, 1, 0>)))(
                    v, g, &prm, has_fill, fill_bits, tile0, nt, obuf.data(), cap, status.data(), tsize.data(),
                    tprefix.data(), touts.data(), terr.data(), &ticket, &err, scratch, nullptr, pre, soffs.data());
            else if (has_fill)
                (pad ? encode_warp_kernel<float, 3, 2, 1, 1, false, true> : encode_warp_kernel<float, 3, 2, 1>)(v, g, &prm, has_fill, fill_bits, tile0, nt, obuf.data(), cap,
                                                   status.data(), tsize.data(), tprefix.data(), touts.data(), terr.data(),
                                                   &ticket, &err, scratch, optf ? &abortf : nullptr, pre, soffs.data());
            else
                (pad ? encode_warp_kernel<float, 3, 1, 1, 1, false, true> : encode_warp_kernel<float, 3, 1, 1>)(v, g, &prm, has_fill, fill_bits, tile0, nt, obuf.data(), cap,
                                                   status.data(), tsize.data(), tprefix.data(), touts.data(), terr.data(),
                                                   &ticket, &err, scratch, nullptr, pre, soffs.data());
        });
        fwrite(&err, 4, 1, out);
        const unsigned taken = flat_taken.exchange(0);
        fwrite(&taken, 4, 1, out);
        fwrite(&opt_done, 4, 1, out);
        unsigned long long end = 0;
        for (unsigned long long t = 0; t < nt; t++) {
            fwrite(&tsize[t], 4, 1, out);
            fwrite(&tprefix[t], 8, 1, out);
            fwrite(&touts[t], 4, 1, out);
            fwrite(&terr[t], 8, 1, out);
            end = std::max(end, 4 * (std::min(g.tiles, ((tile0 + t) / 256 + 1) * 256) - tile0) + tprefix[t] + tsize[t]);
        }
        end = std::min(end, cap);
        fwrite(&end, 8, 1, out);
        fwrite(obuf.data(), 1, end, out);
        free(scratch);
        free(v);
    }
    return fclose(out) ? 1 : 0;
}
