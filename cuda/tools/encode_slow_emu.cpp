// encode_slow_emu: cuda/encode_slow.cuh's slow path (enc_slow: any tile of
// the rank-1, -2 and -3 shapes, clipped or full, with fill values, raw
// values and escapes) run on the host, so a bug in it is caught without a
// GPU (cuda/encslow_emu_test.go builds and drives it and checks the results
// against the CPU codec's tiles). The headers themselves are included, not
// copied: quantize.cuh (Bits, quant_q), encode_common.cuh (the scratch
// layout, TileSum, code_of, put_planes), mask_corners.cuh and
// encode_slow.cuh; the CUDA intrinsics and warp operations are
// walk_emu.h's host versions (its transpose32n is transpose.cuh's without
// the lop3 asm), and 32 threads play the warp's lanes. Built with
// AddressSanitizer and UBSan, and with -ffp-contract=off.
//
// The emulated state, as the kernel leaves it before a tile: the plane
// buffer (16 rows of PW_STRIDE words) is filled with 0xDEADBEEF, and every
// one of the 128 words of each of the 16 planes must be written (the pad
// words never); the warp's scratch (SC_BYTES, a heap block of exactly that
// size) is filled with a pattern, except sesc and sraw (zeroed, as the
// kernel leaves them), so a word read before it is written changes the
// result; every lane's TileSum must agree.
//
// Input (stdin, or the file argv[1]): records, each a field:
//   {u32 rank (1, 2 or 3), u32 nz, u32 ny, u32 nx, u32 has_fill,
//    u32 fill_bits, f64 inv, f64 step, f64 eb} then nz * ny * nx float32
//   values, C order (rank 2: nz = 1; rank 1: nz = ny = 1).
// Every tile of the rank's standard shape (FORMAT.md section 3: 8x16x32,
// 64x64, 4096), clipped at the field's edges, is run through
// enc_slow<float, rank, 1>, in tile order.
// Output (stdout, or the file argv[2]): per tile: u32 size and the tile's
// bytes as the warp kernel's tail writes them after the slow path
// (tile_layout, tile_write: encode_write.cuh), then i32 origin, u32 nesc,
// u32 nraw, u32 nfill, f64 merr, the 16 planes x 128 words (plane p word w
// = pw[p * PW_STRIDE + (w ^ ((p >> 2) & 3))]), the fill mask's and the raw
// mask's 128 words (slot order; zeros when the tile has none), the nesc
// escape residuals in element order (sq[e] for each set bit e of sesc),
// and the nraw raw values' bits in element order (the field's values at
// the set bits of sraw).
#include <algorithm>

#define EMU_WITH_DEVICE_COMMON  // walk_emu.h and warp_emu.h leave Geo and warp_incl_scan to it
#include "walk_emu.h"

#include "../device_common.cuh"  // Geo, tile_box, slot_of, quantize.cuh
#include "../encode_common.cuh"
#include "../mask_corners.cuh"
#include "../encode_slow.cuh"
#include "../encode_write.cuh"  // the tile's layout and bytes (TileStore<false>: plain stores)
#include "emu_geo.h"

template <int R>
static int run_field(FILE *in, FILE *out, const unsigned *h, const double *d) {
    const unsigned nz = h[1], ny = h[2], nx = h[3], has_fill = h[4], fill_bits = h[5];
    const double inv = d[0], step = d[1], eb = d[2];
    const size_t n = (size_t)nz * ny * nx;
    char shape[64];
    snprintf(shape, sizeof shape, "%ux%ux%u", nz, ny, nx);
    float *v = read_values(in, n, shape);
    const Geo g = emu_geo(R, nz, ny, nx);
    const int tz = g.tz, ty = g.ty, tx = g.tx;
    const unsigned gz = (unsigned)g.gz, gy = (unsigned)g.gy, gx = (unsigned)g.gx;
    static unsigned tile[16384];  // a tile's bytes (at most 42 KB: fzgpu_compress_bound)
    unsigned char *sc = (unsigned char *)malloc(SC_BYTES);
    unsigned *pw = (unsigned *)malloc(4 * PW_WORDS);
    int failed = 0;
    for (unsigned iz = 0; iz < gz && !failed; iz++)
        for (unsigned iy = 0; iy < gy && !failed; iy++)
            for (unsigned ix = 0; ix < gx && !failed; ix++) {
                const unsigned long long z0 = iz * tz, y0 = iy * ty, x0 = ix * tx;
                const int lz = std::min<int>(tz, nz - z0), ly = std::min<int>(ty, ny - y0), lx = std::min<int>(tx, nx - x0);
                for (size_t i = 0; i < SC_BYTES; i++) sc[i] = (unsigned char)(0xA5 ^ i);
                memset(sc + SC_ESC, 0, 512);
                memset(sc + SC_RAW, 0, 512);
                for (int i = 0; i < PW_WORDS; i++) pw[i] = 0xDEADBEEFu;
                TileSum ts[32];
                unsigned tsize[32];
                memset(tile, 0xEE, sizeof tile);
                bar = new std::barrier<>(32);
                run_warp([&](int lane) {
                    TileSum t{};
                    enc_slow<float, R, 1>(v, g, z0, y0, x0, lz, ly, lx, inv, step, eb, (int)has_fill, fill_bits, pw, sc,
                                          lane, t);
                    __syncwarp();
                    // then the kernel's tail for a slow tile: layout, bytes
                    const TileLayout L = tile_layout<float>(pw, sc, t, lane);
                    tsize[lane] = L.size;
                    if (L.size <= sizeof tile)
                        tile_write<float, R == 3 ? 1 : 4, false>(TileStore<false>(false), tile, L, t, pw, sc, v, g, z0, y0,
                                                                 x0, ly, lx, false, lane);
                    ts[lane] = t;
                });
                delete bar;
                const TileSum &t = ts[0];
                for (int l = 1; l < 32; l++)
                    if (memcmp(&ts[l].origin, &t.origin, sizeof t.origin) || ts[l].nesc != t.nesc ||
                        ts[l].nraw != t.nraw || ts[l].nfill != t.nfill || ts[l].merr != t.merr) {
                        fprintf(stderr, "%s tile %u,%u,%u: lane %d's TileSum differs from lane 0's\n", shape, iz, iy, ix, l);
                        failed = 1;
                    }
                for (int p = 0; p < 16; p++)
                    for (int w = 0; w < PW_STRIDE; w++)
                        if ((w < 128) == (pw[p * PW_STRIDE + w] == 0xDEADBEEFu)) {
                            fprintf(stderr, "%s tile %u,%u,%u: plane %d word %d %s\n", shape, iz, iy, ix, p, w,
                                    w < 128 ? "not written" : "(a pad word) written");
                            failed = 1;
                        }
                if (failed) break;
                for (int l = 1; l < 32; l++)
                    if (tsize[l] != tsize[0]) {
                        fprintf(stderr, "%s tile %u,%u,%u: lane %d's size differs from lane 0's\n", shape, iz, iy, ix, l);
                        failed = 1;
                    }
                if (tsize[0] > sizeof tile || tsize[0] % 4) {
                    fprintf(stderr, "%s tile %u,%u,%u: size %u\n", shape, iz, iy, ix, tsize[0]);
                    failed = 1;
                }
                if (failed) break;
                fwrite(&tsize[0], 4, 1, out);
                fwrite(tile, 1, tsize[0], out);
                const unsigned *sesc = (const unsigned *)(sc + SC_ESC), *sraw = (const unsigned *)(sc + SC_RAW);
                const int *sq = (const int *)(sc + SC_Q);
                fwrite(&t.origin, 4, 1, out);
                const unsigned cnt[3] = {t.nesc, t.nraw, t.nfill};
                fwrite(cnt, 4, 3, out);
                fwrite(&t.merr, 8, 1, out);
                for (int p = 0; p < 16; p++)
                    for (int w = 0; w < 128; w++) fwrite(&pw[p * PW_STRIDE + (w ^ ((p >> 2) & 3))], 4, 1, out);
                const unsigned zero[128] = {};
                fwrite(t.nfill ? (const unsigned *)(sc + SC_MF) : zero, 4, 128, out);
                fwrite(t.nraw ? (const unsigned *)(sc + SC_MR) : zero, 4, 128, out);
                const int ne = lz * ly * lx;
                for (int e = 0; e < ne; e++)
                    if ((sesc[e >> 5] >> (e & 31)) & 1) fwrite(&sq[e], 4, 1, out);
                const int P = ly * lx;
                for (int e = 0; e < ne; e++)
                    if ((sraw[e >> 5] >> (e & 31)) & 1) {
                        const int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
                        unsigned b;
                        memcpy(&b, &v[((z0 + z) * ny + y0 + y) * nx + x0 + x], 4);
                        fwrite(&b, 4, 1, out);
                    }
            }
    free(sc);
    free(pw);
    free(v);
    return failed;
}

int main(int argc, char **argv) {
    FILE *in, *out;
    if (int rc = open_io(argc, argv, "encode_slow_emu", in, out)) return rc;
    unsigned h[6];
    double d[3];
    while (read_header(in, h, 6, d)) {
        const int rc = h[0] == 3 ? run_field<3>(in, out, h, d) : h[0] == 2 ? run_field<2>(in, out, h, d)
                     : h[0] == 1 ? run_field<1>(in, out, h, d) : (fprintf(stderr, "rank %u\n", h[0]), 2);
        if (rc) return rc;
    }
    return fclose(out) ? 1 : 0;
}
