// h2d_probe.cu — why the sidecar's uploads move slower than bench_h2d's lone
// copy (issue #28). bench_gpu_host.sh saw the upload stream 99.9 % busy but
// at 40-46 GB/s, against 54-55 GB/s for one 256 MiB cudaMemcpy from one
// cudaHostAlloc buffer. This probe measures, in one process, the H2D rate
// of back-to-back copies on one stream (as the sidecar's upload stream
// issues them) while changing one thing at a time:
//
//   source     cudaHostAlloc, 1 buffer or K in rotation; K files of a tmpfs
//              (huge=always when DIR is one, else 4 KiB pages) mapped
//              read-only and registered read-only+portable as the sidecar
//              registers segments;
//   piece      copies of 256 MiB down to 512 KiB (same bytes);
//   in flight  copies alternating over 1, 2 or 4 streams;
//   device     the compressed output's D2H (1/11 of the bytes, 3 MiB pieces,
//              as the lanes copy jobs back) or D2H flat out; an HBM-bound
//              kernel;
//   host       T threads writing private memory with non-temporal stores
//              (the C producers' `--write fresh`), or memcpy.
//
// Each row: GB/s over the batch (events around all copies, median of 3
// batches of 24 copies), and what the load itself moved. Last a table.
//
//   h2d_probe [DIR (huge tmpfs, default /dev/shm)] [K (default 24)]
#include <cuda_runtime.h>
#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "h2d_probe:%d %s: %s\n", __LINE__, #x, cudaGetErrorString(e_));   \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static const size_t SNAP = (size_t)256 << 20;

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A file of n bytes in dir, filled through a writable mapping (new data, as a
// producer writes its segment), then mapped read-only as the sidecar maps it.
static char *mapped(const char *dir, int i, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/h2d-probe-%d", dir, i);
    unlink(path);
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)n)) perror(path), exit(1);
    char *w = (char *)mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (w == MAP_FAILED) perror("mmap"), exit(1);
    for (size_t k = 0; k < n; k += 8) *(unsigned long long *)(w + k) = k * 0x9e3779b97f4a7c15ull + i;
    munmap(w, n);
    char *m = (char *)mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) perror("mmap"), exit(1);
    close(fd);
    unlink(path);
    return m;
}

__global__ void hbm_copy(const uint4 *s, uint4 *d, unsigned long long n16) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x)
        d[i] = s[i];
}

// Host load: T threads, each over its own 256 MiB buffer, until stop.
struct HostLoad {
    std::vector<std::thread> th;
    std::atomic<bool> stop{false};
    std::atomic<unsigned long long> bytes{0};
    double t0 = 0;
    std::vector<char *> bufs;
    void start(int t, bool nt) {
        stop = false;
        bytes = 0;
        while ((int)bufs.size() < 2 * t) {
            char *b = (char *)aligned_alloc(4096, SNAP);
            memset(b, 1, SNAP);
            bufs.push_back(b);
        }
        t0 = now();
        for (int i = 0; i < t; i++)
            th.emplace_back([this, i, nt] {
                char *a = bufs[2 * i], *b = bufs[2 * i + 1];
                float base = (float)i;
                while (!stop) {
                    if (nt) {  // new values, non-temporal 16-byte stores
                        __m128 v = _mm_set1_ps(base);
                        for (size_t k = 0; k < SNAP; k += 64) {
                            _mm_stream_ps((float *)(a + k), v);
                            _mm_stream_ps((float *)(a + k + 16), v);
                            _mm_stream_ps((float *)(a + k + 32), v);
                            _mm_stream_ps((float *)(a + k + 48), v);
                        }
                        _mm_sfence();
                        base += 1;
                    } else
                        memcpy(a, b, SNAP);
                    bytes += SNAP;
                }
            });
    }
    double finish() {  // GB/s moved (written; memcpy also read as much)
        stop = true;
        for (auto &t : th) t.join();
        th.clear();
        return bytes / (now() - t0) / 1e9;
    }
};

struct Probe {
    int K;
    void *dst;           // device, SNAP bytes
    void *dsrc, *ddst;   // device, HBM load
    void *dback;         // device, D2H source
    void *hback;         // pinned, D2H target
    cudaStream_t up[4], back, hbm;
    cudaEvent_t e0, e1;
    std::vector<char *> srcs;  // current source set
};

struct Opts {
    size_t piece = SNAP;
    int streams = 1;
    int d2h = 0;  // 0 none, 1 1/11 of the bytes in 3 MiB pieces, 2 flat out
    bool hbm = false;
    int hostT = 0;
    bool hostNT = true;
};

struct Row {
    std::string name;
    double gbps, d2h_gbps, host_gbps;
};
static std::vector<Row> rows;

// One batch: 24 snapshot copies from the sources in rotation.
static double batch(Probe &p, const Opts &o, double *d2hb) {
    const int N = 24;
    size_t d2hBytes = 0;
    CK(cudaEventRecord(p.e0, p.up[0]));
    for (int s = 1; s < o.streams; s++) CK(cudaStreamWaitEvent(p.up[s], p.e0, 0));
    int k = 0;
    for (int i = 0; i < N; i++) {
        const char *src = p.srcs[i % p.srcs.size()];
        for (size_t off = 0; off < SNAP; off += o.piece, k++)
            CK(cudaMemcpyAsync((char *)p.dst + off, src + off, std::min(o.piece, SNAP - off), cudaMemcpyHostToDevice,
                               p.up[k % o.streams]));
        if (o.d2h == 1)  // the jobs' copy-back of this snapshot: 8 jobs, 1/11 each
            for (int j = 0; j < 8; j++, d2hBytes += 3 << 20)
                CK(cudaMemcpyAsync(p.hback, p.dback, 3 << 20, cudaMemcpyDeviceToHost, p.back));
        if (o.d2h == 2)
            for (int j = 0; j < 8; j++, d2hBytes += 32 << 20)
                CK(cudaMemcpyAsync(p.hback, p.dback, 32 << 20, cudaMemcpyDeviceToHost, p.back));
        if (o.hbm) hbm_copy<<<528, 512, 0, p.hbm>>>((const uint4 *)p.dsrc, (uint4 *)p.ddst, (1ull << 30) / 16);
    }
    for (int s = 1; s < o.streams; s++) {
        cudaEvent_t e;
        CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        CK(cudaEventRecord(e, p.up[s]));
        CK(cudaStreamWaitEvent(p.up[0], e, 0));
        CK(cudaEventDestroy(e));
    }
    CK(cudaEventRecord(p.e1, p.up[0]));
    double t0 = now();
    CK(cudaEventSynchronize(p.e1));
    CK(cudaStreamSynchronize(p.back));
    double tb = now() - t0;
    CK(cudaStreamSynchronize(p.hbm));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, p.e0, p.e1));
    *d2hb = d2hBytes / std::max(tb, ms / 1e3) / 1e9;
    return (double)N * SNAP / (ms / 1e3) / 1e9;
}

static void run(Probe &p, const std::string &name, const Opts &o) {
    HostLoad h;
    if (o.hostT) {
        h.start(o.hostT, o.hostNT);
        usleep(200000);
    }
    std::vector<double> v, d;
    for (int r = 0; r < 3; r++) {
        double db;
        v.push_back(batch(p, o, &db));
        d.push_back(db);
    }
    double hg = o.hostT ? h.finish() : 0;
    std::sort(v.begin(), v.end());
    std::sort(d.begin(), d.end());
    rows.push_back({name, v[1], d[1], hg});
    printf("%-52s %7.2f GB/s (min %.2f max %.2f)  d2h %.2f  host %.1f GB/s\n", name.c_str(), v[1], v[0], v[2], d[1], hg);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/dev/shm";
    int K = argc > 2 ? atoi(argv[2]) : 24;
    if (K < 1) {
        fprintf(stderr, "h2d_probe: K must be >= 1\n");
        return 2;
    }
    Probe p{};
    p.K = K;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&p.dst, SNAP));
    CK(cudaMalloc(&p.dsrc, 1ull << 30));
    CK(cudaMalloc(&p.ddst, 1ull << 30));
    CK(cudaMalloc(&p.dback, 32 << 20));
    CK(cudaMemset(p.dback, 7, 32 << 20));
    CK(cudaHostAlloc(&p.hback, 32 << 20, cudaHostAllocDefault));
    for (auto &s : p.up) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.back, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.hbm, cudaStreamNonBlocking));
    CK(cudaEventCreate(&p.e0));
    CK(cudaEventCreate(&p.e1));

    // Sources.
    std::vector<char *> alloc1, allocK, tmpfsK, shmK;
    for (int i = 0; i < K; i++) {
        char *h;
        CK(cudaHostAlloc((void **)&h, SNAP, cudaHostAllocDefault));
        memset(h, i + 1, SNAP);
        allocK.push_back(h);
    }
    alloc1.push_back(allocK[0]);
    double t0 = now();
    for (int i = 0; i < K; i++) tmpfsK.push_back(mapped(dir, i, SNAP));
    double tfill = now() - t0;
    bool sameDir = strcmp(dir, "/dev/shm") == 0;
    if (!sameDir)
        for (int i = 0; i < K; i++) shmK.push_back(mapped("/dev/shm", 100 + i, SNAP));
    printf("sources: %d x 256 MiB; %s filled at %.1f GB/s\n", K, dir, K * (double)SNAP / tfill / 1e9);
    FILE *mi = fopen("/proc/meminfo", "r");
    char line[256];
    while (mi && fgets(line, sizeof line, mi))
        if (strstr(line, "Huge") || strstr(line, "Shmem")) fputs(line, stdout);
    if (mi) fclose(mi);

    Opts o;
    p.srcs = alloc1;
    run(p, "hostalloc 1 buffer (bench_h2d)", o);
    p.srcs = allocK;
    run(p, "hostalloc K buffers", o);
    t0 = now();
    for (auto m : tmpfsK) CK(cudaHostRegister(m, SNAP, cudaHostRegisterReadOnly | cudaHostRegisterPortable));
    printf("register %s read-only: %.1f GB/s\n", dir, K * (double)SNAP / (now() - t0) / 1e9);
    p.srcs = tmpfsK;
    run(p, std::string("registered RO ") + dir + " K (the sidecar)", o);
    {
        std::vector<char *> one{tmpfsK[0]};
        p.srcs = one;
        run(p, std::string("registered RO ") + dir + " 1 buffer", o);
    }
    if (!sameDir) {
        for (auto m : shmK) CK(cudaHostRegister(m, SNAP, cudaHostRegisterReadOnly | cudaHostRegisterPortable));
        p.srcs = shmK;
        run(p, "registered RO /dev/shm K (4 KiB pages)", o);
    }

    for (size_t pc : {(size_t)32 << 20, (size_t)8 << 20, (size_t)2 << 20, (size_t)512 << 10}) {
        Opts q;
        q.piece = pc;
        p.srcs = tmpfsK;
        run(p, "sidecar source, pieces of " + std::to_string(pc >> 10) + " KiB", q);
    }
    for (int s : {2, 4}) {
        Opts q;
        q.streams = s;
        q.piece = 64 << 20;
        p.srcs = tmpfsK;
        run(p, "sidecar source, 64 MiB pieces over " + std::to_string(s) + " streams", q);
    }
    p.srcs = tmpfsK;
    {
        Opts q;
        q.d2h = 1;
        run(p, "sidecar source + copy-back D2H (1/11, 3 MiB)", q);
        q.d2h = 2;
        run(p, "sidecar source + D2H flat out", q);
        q.d2h = 0;
        q.hbm = true;
        run(p, "sidecar source + HBM copy kernel", q);
    }
    for (int t : {4, 8, 12}) {
        Opts q;
        q.hostT = t;
        run(p, "sidecar source + " + std::to_string(t) + " host threads writing (NT)", q);
    }
    {
        Opts q;
        q.hostT = 4;
        q.hostNT = false;
        run(p, "sidecar source + 4 host threads memcpy", q);
        q.hostT = 8;
        q.hostNT = true;
        p.srcs = allocK;
        run(p, "hostalloc K + 8 host threads writing (NT)", q);
        p.srcs = alloc1;
        run(p, "hostalloc 1 + 8 host threads writing (NT)", q);
        p.srcs = tmpfsK;
        q.d2h = 1;
        run(p, "sidecar source + copy-back + 8 NT writers (C fresh8)", q);
        q.hostT = 0;
        run(p, "sidecar source + copy-back (C none8)", q);
        q.hbm = true;
        q.hostT = 4;
        q.hostNT = false;
        run(p, "sidecar source + copy-back + HBM + 4 memcpy", q);
    }
    p.srcs = alloc1;
    run(p, "hostalloc 1 buffer again (drift)", Opts{});

    // The other direction (issue #31: compressed bytes of device snapshots
    // cross PCIe to the host): D2H of one job's compressed bytes (8192-tile
    // jobs: ~11 MiB at ratio 12; 2048-tile: ~3 MiB) into cudaHostAlloc
    // memory or into registered malloc memory (a Go blob registered in
    // place), one or 8 streams, 24 x 88 MiB destinations in rotation.
    {
        const size_t blob = (size_t)88 << 20;
        void *src;
        CK(cudaMalloc(&src, blob));
        CK(cudaMemset(src, 3, blob));
        std::vector<char *> ha, reg;
        for (int i = 0; i < 24; i++) {
            char *h;
            CK(cudaHostAlloc((void **)&h, blob, cudaHostAllocDefault));
            ha.push_back(h);
            char *m = (char *)aligned_alloc(4096, blob);
            memset(m, 0, blob);
            CK(cudaHostRegister(m, blob, cudaHostRegisterDefault));
            reg.push_back(m);
        }
        cudaStream_t ds[8];
        for (auto &s : ds) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        for (int kind = 0; kind < 2; kind++)
            for (size_t pc : {blob, (size_t)11 << 20, (size_t)3 << 20})
                for (int ns : {1, 8}) {
                    std::vector<double> v;
                    for (int r = 0; r < 3; r++) {
                        CK(cudaDeviceSynchronize());
                        CK(cudaEventRecord(p.e0, ds[0]));
                        for (int s = 1; s < ns; s++) CK(cudaStreamWaitEvent(ds[s], p.e0, 0));
                        int k = 0;
                        for (int i = 0; i < 24; i++)
                            for (size_t off = 0; off + pc <= blob; off += pc, k++)
                                CK(cudaMemcpyAsync((kind ? reg : ha)[i] + off, (char *)src + off, pc, cudaMemcpyDeviceToHost,
                                                   ds[k % ns]));
                        for (int s = 1; s < ns; s++) {
                            cudaEvent_t e;
                            CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
                            CK(cudaEventRecord(e, ds[s]));
                            CK(cudaStreamWaitEvent(ds[0], e, 0));
                            CK(cudaEventDestroy(e));
                        }
                        CK(cudaEventRecord(p.e1, ds[0]));
                        CK(cudaEventSynchronize(p.e1));
                        float ms;
                        CK(cudaEventElapsedTime(&ms, p.e0, p.e1));
                        v.push_back(24.0 * (blob / pc * pc) / (ms / 1e3) / 1e9);
                    }
                    std::sort(v.begin(), v.end());
                    std::string name = std::string("D2H into ") + (kind ? "registered malloc" : "hostalloc") + ", " +
                                       std::to_string(pc >> 20) + " MiB pieces, " + std::to_string(ns) + " streams";
                    rows.push_back({name, 0, v[1], 0});
                    printf("%-52s %7.2f GB/s (min %.2f max %.2f)\n", name.c_str(), v[1], v[0], v[2]);
                }
    }

    printf("\nTABLE %-52s %8s %8s %8s\n", "variant", "H2D", "D2H", "host");
    for (auto &r : rows) printf("TABLE %-52s %8.2f %8.2f %8.1f\n", r.name.c_str(), r.gbps, r.d2h_gbps, r.host_gbps);
    return 0;
}
