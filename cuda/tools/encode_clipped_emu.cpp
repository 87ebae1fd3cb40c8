// encode_clipped_emu: cuda/encode_clipped.cuh's encode_clipped_kernel (PCT:
// a job's clipped rank-3 tiles coded first, appended to a side buffer) run
// on the host by one warp of 32 threads (ASan/UBSan), so its ticket loop,
// its clipped-tile order (tile_order.cuh), the bump pointer, the tables it
// leaves and the overflow fallback are checked without a GPU
// (cuda/encclipped_emu_test.go compares each pre-coded tile with the CPU
// codec's). The slow path and the tile writer are the headers' own, as in
// encode_slow_emu.cpp.
//
// Input: records {u32 nz, ny, nx, has_fill, fill_bits, rank (3, or 2 with
// nz 1), f64 inv, step, eb,
// u64 side_cap} then the field's f32 values; the job is the whole field.
// Output per record: u64 nfull, u64 nclip, u64 bytes used (the bump
// pointer, at most side_cap), u64 the tiles the row walk took (enc_rows3), per tile u32 tsize (0xFFFFFFFF: not touched), u64 the side offset (soffs), u32
// touts, f64 terr, then the side buffer's first `used` bytes (only the
// written tiles' bytes are compared; the rest is a pattern).
#include <algorithm>

#define EMU_WITH_DEVICE_COMMON
#include "walk_emu.h"

#include "../device_common.cuh"
#include "emu_geo.h"
#include "../encode_common.cuh"
#include "../mask_corners.cuh"
#include "../encode_slow.cuh"
// the tiles the row walk took (lane 0 of the warp counts them)
static unsigned long long rows3_taken;
#define EMU_ROWS3_TAKEN \
    if (lane == 0) rows3_taken++
#include "../encode_rows3.cuh"
#include "../encode_write.cuh"
#include "../tile_order.cuh"
// the kernel's dynamic shared memory (extern __shared__ on the GPU)
static unsigned enc_smem_host[ENC_W * PW_WORDS];
#define ENC_CLIPPED_SMEM enc_smem_host
#include "../encode_clipped.cuh"

int main(int argc, char **argv) {
    FILE *in, *out;
    if (int rc = open_io(argc, argv, "encode_clipped_emu", in, out)) return rc;
    unsigned h[6];
    double d[3];
    unsigned long long cap;
    unsigned record = 0;
    while (fread(h, 4, 6, in) == 6) {
        if (fread(d, 8, 3, in) != 3 || fread(&cap, 8, 1, in) != 1) return 2;
        const int rank = (int)h[5];  // 3, or 2 (nz 1)
        const unsigned long long n = (unsigned long long)h[0] * h[1] * h[2];
        float *v = read_values(in, n, "field");
        const Geo g = emu_geo(rank, h[0], h[1], h[2]);
        const uint3 fl = {(unsigned)(g.nz / g.tz), (unsigned)(g.ny / g.ty), (unsigned)(g.nx / g.tx)};
        const unsigned long long nt = g.tiles, nfull = full_before(g, nt, fl.x, fl.y, fl.z), nclip = nt - nfull;
        DevParams prm{};
        prm.inv = d[0], prm.step = d[1], prm.eb = d[2];
        std::vector<unsigned> side((cap + 15) / 4 + 4, 0xABABABABu), tsize(nt, 0xFFFFFFFFu), touts(nt, 0xFFFFFFFFu);
        std::vector<unsigned long long> soffs(nt, ~0ull);
        std::vector<double> terr(nt, -1.0);
        unsigned long long ctr[2] = {0, 0};
        unsigned char *scratch = (unsigned char *)malloc((size_t)ENC_W * SC_BYTES);
        rows3_taken = 0;
        // the row walk stages f32 planes by cp.async in the warp's plane
        // buffer; copies land at issue in even records and only at their
        // wait in odd ones (a read before the wait then sees stale bytes)
        arena = (unsigned char *)enc_smem_host;
        arena_bytes = sizeof enc_smem_host;
        late_landing = record++ & 1;
        bar = new std::barrier<>(32);
        run_warp([&](int lane) {
            blockIdx = uint3{0, 0, 0};
            threadIdx = uint3{(unsigned)lane, 0, 0};
            (rank == 3 ? encode_clipped_kernel<float, 3> : encode_clipped_kernel<float, 2>)(
                v, g, &prm, (int)h[3], h[4], 0ull, nt, fl, nfull, nclip, side.data(), cap, ctr,
                                         tsize.data(), soffs.data(), touts.data(), terr.data(), scratch);
            if (const int n = pending_copies()) {
                fprintf(stderr, "lane %d: %d cp.async groups left pending at the kernel's end\n", lane, n);
                abort();
            }
        });
        delete bar;
        const unsigned long long used = std::min(ctr[0], cap);  // the bump pointer runs on past cap
        fwrite(&nfull, 8, 1, out);
        fwrite(&nclip, 8, 1, out);
        fwrite(&used, 8, 1, out);
        fwrite(&rows3_taken, 8, 1, out);
        for (unsigned long long t = 0; t < nt; t++) {
            fwrite(&tsize[t], 4, 1, out);
            fwrite(&soffs[t], 8, 1, out);
            fwrite(&touts[t], 4, 1, out);
            fwrite(&terr[t], 8, 1, out);
        }
        fwrite(side.data(), 1, used, out);
        free(scratch);
        free(v);
    }
    return fclose(out) ? 1 : 0;
}
