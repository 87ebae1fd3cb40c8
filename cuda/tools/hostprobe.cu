// hostprobe: measures the host-side costs the GPU pipeline is built on, on
// the machine it runs on (docs/PIPELINE.md "GPU path" quotes its output):
//
//   * a producer filling a /dev/shm segment: fresh file (page faults),
//     fallocate'd file, and a reused file (pages already there);
//   * cudaHostRegister / cudaHostUnregister of a read-only tmpfs mapping;
//   * H2D from that registered mapping, from cudaHostAlloc memory, and from
//     pageable memory;
//   * memcpy from the mapping into pinned memory with 1..16 threads (the
//     staging-ring fallback).
//
//   * H2D on every GPU at once, from registered tmpfs mappings (one per GPU)
//     and from cudaHostAlloc memory: whether DMA from a producer's 4 KiB
//     pages scales like DMA from the driver's own pinned memory. With a
//     second argument, the same for a mapping in that directory (e.g. a
//     tmpfs mounted with huge=always, 2 MiB pages).
//
// Build and run:  nvcc -O2 -std=c++17 -o hostprobe cuda/tools/hostprobe.cu && ./hostprobe [MiB [DIR]]
#include "probe.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

static void pcopy(char *dst, const char *src, size_t n, int threads) {
    std::vector<std::thread> ts;
    size_t per = (n / threads + 4095) & ~(size_t)4095;
    for (int t = 0; t < threads; t++) {
        size_t a = std::min(n, per * t), b = std::min(n, per * (t + 1));
        ts.emplace_back([=] { memcpy(dst + a, src + a, b - a); });
    }
    for (auto &t : ts) t.join();
}

static double h2d(void *d, const void *h, size_t n, cudaStream_t s) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<double> r;
    for (int i = 0; i < 7; i++) {
        CK(cudaEventRecord(a, s));
        CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (i > 1) r.push_back(n / (ms * 1e-3) / 1e9);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return median(r);
}

// allGPUs copies n bytes from hosts[g] to devs[g] on every GPU g at once,
// 5 times after a warm-up, and returns the median aggregate GB/s.
static double allGPUs(const std::vector<void *> &hosts, const std::vector<void *> &devs, size_t n) {
    int g = (int)hosts.size();
    std::vector<cudaStream_t> st(g);
    for (int i = 0; i < g; i++) {
        CK(cudaSetDevice(i));
        CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    }
    std::vector<double> r;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now();
        for (int i = 0; i < g; i++) {
            CK(cudaSetDevice(i));
            CK(cudaMemcpyAsync(devs[i], hosts[i], n, cudaMemcpyHostToDevice, st[i]));
        }
        for (int i = 0; i < g; i++) {
            CK(cudaSetDevice(i));
            CK(cudaStreamSynchronize(st[i]));
        }
        if (rep > 0) r.push_back(g * n / (now() - t0) / 1e9);
    }
    for (int i = 0; i < g; i++) {
        CK(cudaSetDevice(i));
        cudaStreamDestroy(st[i]);
    }
    CK(cudaSetDevice(0));
    return median(r);
}

// mapped creates a file of n bytes of src in dir and maps it read-only.
static char *mapped(const char *dir, int i, size_t n, const std::vector<char> &src) {
    return mapped_file(dir, "fz-hostprobe", i, n, [&](char *w) { memcpy(w, src.data(), n); });
}

static void concurrency(const char *dir, size_t n, const std::vector<char> &src) {
    int g = 0;
    CK(cudaGetDeviceCount(&g));
    std::vector<void *> devs(g), pins(g), regs(g);
    for (int i = 0; i < g; i++) {
        CK(cudaSetDevice(i));
        CK(cudaMalloc(&devs[i], n));
        CK(cudaHostAlloc(&pins[i], n, cudaHostAllocPortable));
        memcpy(pins[i], src.data(), n);
        regs[i] = mapped(dir, i, n, src);
        CK(cudaHostRegister(regs[i], n, cudaHostRegisterPortable | cudaHostRegisterReadOnly));
    }
    CK(cudaSetDevice(0));
    for (int k = 1; k <= g; k++) {
        std::vector<void *> p(pins.begin(), pins.begin() + k), r(regs.begin(), regs.begin() + k),
            d(devs.begin(), devs.begin() + k);
        printf("H2D on %d GPU(s) at once: from cudaHostAlloc %6.2f GB/s, from registered mappings in %s %6.2f GB/s\n", k,
               allGPUs(p, d, n), dir, allGPUs(r, d, n));
    }
    for (int i = 0; i < g; i++) {
        CK(cudaSetDevice(i));
        CK(cudaHostUnregister(regs[i]));
        munmap(regs[i], n);
        cudaFreeHost(pins[i]);
        cudaFree(devs[i]);
    }
    CK(cudaSetDevice(0));
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? atoll(argv[1]) : 1024;
    size_t n = mib << 20;
    const char *path = "/dev/shm/fz-hostprobe";
    std::vector<char> src(n);
    for (size_t i = 0; i < n; i += 8) *(uint64_t *)&src[i] = i * 0x9E3779B97F4A7C15ull;
    printf("hostprobe: %zu MiB, %u hardware threads\n", mib, std::thread::hardware_concurrency());

    // Producer side: fill a segment, three ways.
    auto fill = [&](int mode) {  // 0 fresh, 1 fallocate, 2 MAP_POPULATE
        unlink(path);
        double t0 = now();
        int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, n)) perror("segment"), exit(1);
        if (mode == 1 && posix_fallocate(fd, 0, n)) perror("fallocate"), exit(1);
        char *m = (char *)mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | (mode == 2 ? MAP_POPULATE : 0), fd, 0);
        memcpy(m, src.data(), n);
        double t1 = now();
        memcpy(m, src.data(), n);  // second write: pages present (a reused segment)
        double t2 = now();
        munmap(m, n);
        close(fd);
        return std::make_pair(n / (t1 - t0) / 1e9, n / (t2 - t1) / 1e9);
    };
    const char *names[] = {"fresh file", "fallocate", "MAP_POPULATE"};
    for (int mode = 0; mode < 3; mode++) {
        std::vector<double> a, b;
        for (int i = 0; i < 3; i++) {
            auto r = fill(mode);
            a.push_back(r.first);
            b.push_back(r.second);
        }
        printf("producer fill, %-13s %6.2f GB/s   rewrite (reused segment) %6.2f GB/s\n", names[mode], median(a),
               median(b));
    }
    {  // pwrite into a fresh file
        std::vector<double> a;
        for (int i = 0; i < 3; i++) {
            unlink(path);
            double t0 = now();
            int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
            size_t off = 0;
            while (off < n) {
                ssize_t w = pwrite(fd, src.data() + off, std::min(n - off, (size_t)64 << 20), off);
                if (w <= 0) perror("pwrite"), exit(1);
                off += w;
            }
            close(fd);
            a.push_back(n / (now() - t0) / 1e9);
        }
        printf("producer fill, pwrite        %6.2f GB/s\n", median(a));
    }
    // Leave a filled segment for the sidecar-side probes.
    {
        unlink(path);
        int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
        ftruncate(fd, n);
        char *m = (char *)mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        memcpy(m, src.data(), n);
        munmap(m, n);
        close(fd);
    }

    CK(cudaSetDevice(0));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    int ro = 0;
    cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, 0);
    printf("device: %s, host-register read-only supported: %d\n", p.name, ro);
    void *d;
    CK(cudaMalloc(&d, n));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    int fd = open(path, O_RDONLY);
    // Register / unregister a read-only mapping, fresh mapping each time (as
    // the sidecar maps each snapshot).
    {
        std::vector<double> reg, unreg, bw;
        for (int i = 0; i < 5; i++) {
            char *m = (char *)mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
            double t0 = now();
            cudaError_t e = cudaHostRegister(m, n, cudaHostRegisterPortable | cudaHostRegisterReadOnly);
            double t1 = now();
            if (e != cudaSuccess) {
                printf("cudaHostRegister(read-only mapping): %s\n", cudaGetErrorString(e));
                cudaGetLastError();
                munmap(m, n);
                break;
            }
            if (i == 0) bw.push_back(h2d(d, m, n, s));
            double t2 = now();
            CK(cudaHostUnregister(m));
            double t3 = now();
            munmap(m, n);
            reg.push_back(n / (t1 - t0) / 1e9);
            unreg.push_back(n / (t3 - t2) / 1e9);
        }
        if (!reg.empty())
            printf("register read-only tmpfs mapping: %7.1f GB/s (%.2f ms per GiB), unregister %7.1f GB/s, H2D from it %6.2f GB/s\n",
                   median(reg), 1e3 / median(reg) * 1.073741824, median(unreg), bw[0]);
        // With MAP_POPULATE (page tables filled by mmap).
        reg.clear();
        for (int i = 0; i < 3; i++) {
            double t0 = now();
            char *m = (char *)mmap(nullptr, n, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
            double t1 = now();
            cudaError_t e = cudaHostRegister(m, n, cudaHostRegisterPortable | cudaHostRegisterReadOnly);
            double t2 = now();
            if (e != cudaSuccess) {
                cudaGetLastError();
                munmap(m, n);
                break;
            }
            CK(cudaHostUnregister(m));
            munmap(m, n);
            reg.push_back(n / (t2 - t1) / 1e9);
            printf("  MAP_POPULATE mmap %.1f GB/s, then register %.1f GB/s\n", n / (t1 - t0) / 1e9, reg.back());
        }
    }
    // Pinned allocation and pageable H2D for reference.
    void *pin;
    CK(cudaHostAlloc(&pin, n, cudaHostAllocPortable));
    memcpy(pin, src.data(), n);
    printf("H2D from cudaHostAlloc memory: %6.2f GB/s\n", h2d(d, pin, n, s));
    printf("H2D from pageable memory:      %6.2f GB/s\n", h2d(d, src.data(), n, s));
    {
        std::vector<double> r;
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        for (int i = 0; i < 7; i++) {
            CK(cudaEventRecord(a, s));
            CK(cudaMemcpyAsync(pin, d, n, cudaMemcpyDeviceToHost, s));
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            if (i > 1) r.push_back(n / (ms * 1e-3) / 1e9);
        }
        printf("D2H to cudaHostAlloc memory:   %6.2f GB/s\n", median(r));
    }
    // Staging: memcpy from the read-only mapping into pinned memory.
    {
        char *m = (char *)mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
        for (int t : {1, 2, 4, 8, 12, 16}) {
            std::vector<double> r;
            for (int i = 0; i < 5; i++) {
                double t0 = now();
                pcopy((char *)pin, m, n, t);
                r.push_back(n / (now() - t0) / 1e9);
            }
            printf("staging memcpy mapping -> pinned, %2d threads: %6.2f GB/s\n", t, median(r));
        }
        munmap(m, n);
    }
    close(fd);
    unlink(path);
    concurrency("/dev/shm", n, src);
    if (argc > 2) concurrency(argv[2], n, src);
    return 0;
}
