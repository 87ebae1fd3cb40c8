// encprobe: times fzgpu_prepare (range + params) and fzgpu_compress on the bench's smooth 1 GiB f32 field
// with CUDA events, median of 20, without verifying the output: for probe libraries built with switches
// that break the output (cuda/PERF.md v10). Build: g++ -O2 -std=c++17 -o encprobe encprobe.cpp -ldl -lpthread
// Run: ./encprobe 1e-2 path/to/libfzgpu.so [more libraries...]
// ENCPROBE_FIELD=path/name.f32 (or .f64, at most 16 MiB): that field repeated to 1 GiB as a rank-1 field
// instead (cuda/PERF.md v12: the rank-1 walks).
// ENCPROBE_VERSION=2: container version 2 (default 1).
#include <dlfcn.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <vector>
#include "../fzgpu.h"
#define CKR(x) do { int r_ = (x); if (r_) { fprintf(stderr, "%s: rc %d\n", #x, r_); exit(1); } } while (0)
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char **argv) {
    double rel = atof(argv[1]);
    const size_t nz = 256, ny = 1024, nx = 1024, n = nz * ny * nx;
    std::vector<float> host(n);
    std::vector<std::thread> th;
    for (int t = 0; t < 16; t++) th.emplace_back([&, t] {
        for (size_t z = t; z < nz; z += 16) for (size_t y = 0; y < ny; y++) for (size_t x = 0; x < nx; x++) {
            double fz = (double)z / nz, fy = (double)y / ny, fx = (double)x / nx;
            host[(z * ny + y) * nx + x] = (float)(sin(6 * fz + 1) * cos(9 * fy) + 0.5 * sin(13 * fx + 5 * fy) + fz * fx);
        }
    });
    for (auto &t : th) t.join();
    const char *fp = getenv("ENCPROBE_FIELD");
    int dt = 1;
    size_t fnx = 0;
    if (fp) {
        FILE *fh = fopen(fp, "rb");
        if (!fh) { perror(fp); return 1; }
        std::vector<char> raw(1 << 24);
        const size_t got = fread(raw.data(), 1, raw.size(), fh);
        fclose(fh);
        dt = strstr(fp, ".f64") ? 2 : 1;
        const size_t es = dt == 2 ? 8 : 4;
        if (got == 0 || got % es || (n * 4) % got % es) { fprintf(stderr, "%s: want 1..16 MiB of whole values\n", fp); return 1; }
        char *dst = (char *)host.data();
        for (size_t o = 0; o < n * 4; o += got) memcpy(dst + o, raw.data(), std::min(got, n * 4 - o));
        fnx = n * 4 / es;
    }
    for (int a = 2; a < argc; a++) {
        void *h = dlopen(argv[a], RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
#define SYM(f) auto f = (decltype(&::f))dlsym(h, #f)
        SYM(fzgpu_create); SYM(fzgpu_destroy); SYM(fzgpu_compress_bound); SYM(fzgpu_prepare); SYM(fzgpu_compress);
        SYM(fzgpu_malloc); SYM(fzgpu_free); SYM(fzgpu_host_alloc); SYM(fzgpu_stream_create); SYM(fzgpu_stream_sync);
        SYM(fzgpu_memcpy_async); SYM(fzgpu_event_create); SYM(fzgpu_event_record); SYM(fzgpu_event_elapsed);
        const uint64_t tiles = fp ? fnx / 4096 : (nz / 8) * (ny / 16) * (nx / 32);
        fzgpu_ctx *ctx; void *st, *src, *out, *e0, *e1, *e2; fzgpu_result *res;
        CKR(fzgpu_create(0, tiles, &ctx)); CKR(fzgpu_stream_create(0, &st));
        const uint64_t cap = fzgpu_compress_bound(dt, tiles);
        CKR(fzgpu_malloc(0, n * 4, &src)); CKR(fzgpu_malloc(0, cap, &out));
        CKR(fzgpu_host_alloc(sizeof(fzgpu_result), (void **)&res));
        CKR(fzgpu_memcpy_async(0, src, host.data(), n * 4, 1, st));
        CKR(fzgpu_event_create(0, &e0)); CKR(fzgpu_event_create(0, &e1)); CKR(fzgpu_event_create(0, &e2));
        fzgpu_field f = {};
        f.dtype = 1; f.mode = 2; f.bound = rel; f.tiles_per_chunk = 256; f.nz = nz; f.ny = ny; f.nx = nx;
        f.version = getenv("ENCPROBE_VERSION") ? (uint32_t)atoi(getenv("ENCPROBE_VERSION")) : 1;  // container version written
        f.tile[0] = 8; f.tile[1] = 16; f.tile[2] = 32; f.block[0] = 4; f.block[1] = 4; f.block[2] = 8;
        if (fp) {
            f.dtype = dt; f.nz = 1; f.ny = 1; f.nx = fnx;
            f.tile[0] = 1; f.tile[1] = 1; f.tile[2] = 4096; f.block[0] = 1; f.block[1] = 1; f.block[2] = 128;
        }
        std::vector<double> tp, tc, tt;
        for (int r = 0; r < 21; r++) {
            CKR(fzgpu_event_record(0, e0, st));
            CKR(fzgpu_prepare(ctx, st, &f, src));
            CKR(fzgpu_event_record(0, e1, st));
            CKR(fzgpu_compress(ctx, st, &f, src, 0, tiles / 256, out, cap, res));
            CKR(fzgpu_event_record(0, e2, st));
            CKR(fzgpu_stream_sync(0, st));
            float a, b;
            CKR(fzgpu_event_elapsed(0, e0, e1, &a)); CKR(fzgpu_event_elapsed(0, e1, e2, &b));
            if (r) { tp.push_back(a); tc.push_back(b); tt.push_back(a + b); }
        }
        const double T = med(tt);
        printf("%-28s rel %g prepare %.3f ms compress %.3f ms total %.3f ms = %.1f GB/s, bytes %llu status %u\n", argv[a], rel,
               med(tp), med(tc), T, n * 4 / (T * 1e6), (unsigned long long)res->bytes, res->status);
        fzgpu_free(0, src); fzgpu_free(0, out); fzgpu_destroy(ctx);
    }
}
