// decode_warp_emu: cuda/decode_warp.cuh's warp decoder (decode_warp_kernel:
// the staged walks dec_fast3/2/1, the generic walks dec_gen3/2, masks,
// escapes, the masked walks of fill fields (FK) and the full-tiles-first
// order of tile_order.cuh) run on the host, so a bug in it is caught without
// a GPU (cuda/decwarp_emu_test.go builds and drives it and compares the
// values with the CPU decoder's). The kernel itself is included, not copied,
// after device_common.cuh (the real Geo, tile_box, quantize.cuh) and
// zero_block.cuh; the CUDA intrinsics and warp operations are walk_emu.h's
// host versions plus the few below. 32 threads play one warp of a block at
// a time: warp rel of the job runs as warp rel % 4 of block rel / 4, as the
// GPU's grid numbers them. Built with AddressSanitizer and UBSan.
//
// Input (stdin, or the file argv[1]): records, each a job of one field:
//   {u32 rank (1, 2, 3; 4: flat tiles, dec_flat), u32 dtype bytes (4 or 8), u64 nz, ny, nx, u64 nt,
//    u32 has_fill, u32 order (bit 0: full tiles first, as fzgpu.cu picks
//    for rank-3 fill fields; bit 1: the masked walks for every tile, as the
//    mask census picks; bit 2: padded tiles, FORMAT.md 3.2, the PAD kernel
//    of f32 rank 3), u64 fill_bits, f64 step, u64 blob bytes}, then nt
//   u64 tile offsets into the blob, nt u32 tile sizes, and the blob (the
//   job's tiles; tile0 = 0).
// Output (stdout, or the file argv[2]): per record, u32 count of tiles the
// warps left for the block decoder, those tiles' indices (sorted), then the
// field's nz * ny * nx values (f32 or f64; all bits 1 where no warp wrote).
#include <algorithm>

#define EMU_WITH_DEVICE_COMMON  // walk_emu.h and warp_emu.h leave Geo and warp_incl_scan to it
#include "walk_emu.h"

struct int4 {  // the v7 walks' 16-byte pieces of the plane buffer
    int x, y, z, w;
};
static inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
// shfl.up within segments of `width` lanes
static unsigned __shfl_up_sync(unsigned, unsigned v, int d, int width) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    const unsigned r = (my_lane % width) >= d ? xch[my_lane - d] : v;
    bar->arrive_and_wait();
    return r;
}
// the warp decoder's L1 prefetch (inline PTX): nothing on the host
asm(".macro prefetch.global.L1 addr\n.endm");

// the staging by cp.async (stage_words.cuh): a plain copy here, since the
// kernel's shared array is not visible to the runner as cp_async_emu.h's
// arena; stage_words itself runs under late-landing copies in
// tools/transcode_emu.cpp (TestTranscodeEmulated)
#define EMU_STAGE_WORDS
static void stage_words(unsigned *s, const unsigned *gp, unsigned nw, int lane) {
    for (unsigned i = lane; i < nw; i += 32) s[i] = gp[i];
    __syncwarp();
}

#include "../device_common.cuh"
#include "../zero_block.cuh"
#include "../flat.cuh"
#include "../decode_warp.cuh"
#include "emu_geo.h"

// Decodes one job (the whole field) warp by warp and writes the record's output.
template <typename T>
static void decode_job(FILE *out, const Geo &g, unsigned rank, unsigned long long nt, unsigned has_fill, unsigned order,
                       unsigned long long fill_bits, double step, std::vector<unsigned long long> &toff,
                       std::vector<unsigned> &tsz, std::vector<unsigned char> &blob) {
    const unsigned long long n = g.nz * g.ny * g.nx;
    std::vector<T> dst(n);
    memset(dst.data(), 0xFF, sizeof(T) * n);
    std::vector<unsigned> list(nt + 1);
    unsigned count = 0;
    uint3 fl = {0, 0, 0};
    const unsigned all = (unsigned)nt;  // order bit 1: every tile counted as masked, so the masked walks take all
    if ((order & 1) && rank == 3) fl = {(unsigned)(g.nz / g.tz), (unsigned)(g.ny / g.ty), (unsigned)(g.nx / g.tx)};
    for (unsigned long long w = 0; w < nt; w++) {
        bar = new std::barrier<>(32);
        std::vector<std::thread> th;
        for (int l = 0; l < 32; l++)
            th.emplace_back([&, l] {
                my_lane = l;
                blockIdx = uint3{(unsigned)(w / DEC_W), 0, 0};
                threadIdx = uint3{(unsigned)(32 * (w % DEC_W) + l), 0, 0};
                auto run = [&](auto k) {
                    k(g, blob.data(), 0ull, nt, step, toff.data(), tsz.data(), dst.data(), list.data(), &count, fill_bits,
                      fl, (order & 2) ? &all : nullptr);
                };
                if (order & 4)
                    has_fill ? run(decode_warp_kernel<T, 3, true, true>) : run(decode_warp_kernel<T, 3, false, true>);
                else if (rank == 4)
                    has_fill ? run(decode_warp_kernel<T, 4, true>) : run(decode_warp_kernel<T, 4, false>);
                else if (rank == 3)
                    has_fill ? run(decode_warp_kernel<T, 3, true>) : run(decode_warp_kernel<T, 3, false>);
                else if (rank == 2)
                    has_fill ? run(decode_warp_kernel<T, 2, true>) : run(decode_warp_kernel<T, 2, false>);
                else
                    has_fill ? run(decode_warp_kernel<T, 1, true>) : run(decode_warp_kernel<T, 1, false>);
            });
        for (auto &t : th) t.join();
        delete bar;
    }
    std::sort(list.begin(), list.begin() + count);
    fwrite(&count, 4, 1, out);
    fwrite(list.data(), 4, count, out);
    fwrite(dst.data(), sizeof(T), n, out);
}

int main(int argc, char **argv) {
    FILE *in, *out;
    if (int rc = open_io(argc, argv, "decode_warp_emu", in, out)) return rc;
    struct {
        unsigned rank, dbytes;
        unsigned long long nz, ny, nx, nt;
        unsigned has_fill, order;
        unsigned long long fill_bits;
        double step;
        unsigned long long blob_bytes;
    } h;
    while (fread(&h.rank, 4, 2, in) == 2) {
        if (fread(&h.nz, 8, 4, in) != 4 || fread(&h.has_fill, 4, 2, in) != 2 || fread(&h.fill_bits, 8, 1, in) != 1 ||
            fread(&h.step, 8, 1, in) != 1 || fread(&h.blob_bytes, 8, 1, in) != 1 || (h.dbytes != 4 && h.dbytes != 8) || h.rank < 1 ||
            h.rank > 4) {
            fprintf(stderr, "decode_warp_emu: bad record header\n");
            return 2;
        }
        Geo g = h.rank == 4 ? emu_geo_flat(h.nz, h.ny, h.nx) : emu_geo((int)h.rank, h.nz, h.ny, h.nx);
        if (h.order & 4) {  // padded tiles: f32 rank 3 only (make_geo), tile order (fzgpu.cu)
            if (h.rank != 3 || h.dbytes != 4 || (h.order & 1)) {
                fprintf(stderr, "decode_warp_emu: padded tiles are f32 rank 3 in tile order\n");
                return 2;
            }
            g.padded = 1;
        }
        if (h.nt != g.tiles) {
            fprintf(stderr, "decode_warp_emu: %llu tiles given, the field has %llu\n", h.nt, g.tiles);
            return 2;
        }
        std::vector<unsigned long long> toff(h.nt);
        std::vector<unsigned> tsz(h.nt);
        std::vector<unsigned char> blob(h.blob_bytes + 64);  // the kernel may read a word past a short tile
        if (fread(toff.data(), 8, h.nt, in) != h.nt || fread(tsz.data(), 4, h.nt, in) != h.nt ||
            fread(blob.data(), 1, h.blob_bytes, in) != h.blob_bytes) {
            fprintf(stderr, "decode_warp_emu: truncated record\n");
            return 2;
        }
        if (h.dbytes == 4)
            decode_job<float>(out, g, h.rank, h.nt, h.has_fill, h.order, h.fill_bits, h.step, toff, tsz, blob);
        else
            decode_job<double>(out, g, h.rank, h.nt, h.has_fill, h.order, h.fill_bits, h.step, toff, tsz, blob);
    }
    return fclose(out) ? 1 : 0;
}
