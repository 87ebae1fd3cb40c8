// loadprobe: what slows host-to-device DMA while the sidecar works
// (docs/PIPELINE.md, "bench e2e on the GPU" quotes its output).
//
// The e2e trace shows each 256 MiB upload at 45-51 GB/s under load against
// 55 GB/s alone. This probe replays the upload pattern of `bench e2e`
// (back-to-back copies on one stream from K registered read-only tmpfs
// mappings, in rotation) and adds, one at a time, the other work the
// sidecar does while a copy runs:
//
//   hbm       a kernel reading device memory flat out (range + encode read
//             each snapshot twice, at ~600 GB/s);
//   zcopy     after each upload, a kernel writes 1/ratio of its bytes into
//             mapped pinned host memory (the streamer's copy-out kernel);
//   d2h       the same bytes by cudaMemcpyAsync device-to-host instead;
//   host      4 host threads memcpy flat out (collecting, CRC, sink);
//   all       hbm + zcopy + host.
//
// Each line: median and slowest per-copy GB/s (CUDA events on the upload
// stream) and the window rate (bytes / wall time of all copies).
//
// Build and run:  nvcc -O2 -std=c++17 -o loadprobe cuda/tools/loadprobe.cu && ./loadprobe [MiB [DIR [K]]]
#include "probe.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// Sum-reads n16 16-byte words; the result only keeps the loads alive.
__global__ void hbm_read(const uint4 *p, unsigned long long n16, unsigned *sink) {
    unsigned acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

// The streamer's copy-out: 16-byte stores into mapped pinned memory.
__global__ void zero_copy(const uint4 *s, uint4 *d, unsigned long long n16) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x)
        d[i] = s[i];
}

static char *mapped(const char *dir, int i, size_t n) {
    return mapped_file(dir, "fz-loadprobe", i, n, [&](char *w) {
        for (size_t k = 0; k < n; k += 8) *(unsigned long long *)(w + k) = k * 0x9e3779b97f4a7c15ull + i;
    });
}

struct Probe {
    size_t n;
    int K, copies;
    std::vector<char *> host;
    void *dev[2];
    cudaStream_t up, side, load;
    std::vector<cudaEvent_t> e0, e1;
    uint4 *dbig, *dout, *hout, *hout_dev;
    unsigned *sink;
    size_t big, outn;
    std::vector<char> ha, hb;

    void run(const char *name, bool hbm, bool zcopy, bool d2h, int hostThreads, bool rotate) {
        std::atomic<bool> stop{false};
        std::thread hbmThread;
        if (hbm)
            hbmThread = std::thread([&] {
                CK(cudaSetDevice(0));
                while (!stop.load()) {
                    hbm_read<<<132 * 8, 256, 0, load>>>(dbig, big / 16, sink);
                    CK(cudaStreamSynchronize(load));
                }
            });
        std::vector<std::thread> hts;
        std::atomic<unsigned long long> hostBytes{0};
        for (int t = 0; t < hostThreads; t++)
            hts.emplace_back([&, t] {
                size_t part = ha.size() / hostThreads;
                while (!stop.load()) {
                    memcpy(hb.data() + t * part, ha.data() + t * part, part);
                    hostBytes += part;
                }
            });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        double t0 = now();
        for (int i = 0; i < copies; i++) {
            const char *h = host[rotate ? i % K : 0];
            CK(cudaEventRecord(e0[i], up));
            CK(cudaMemcpyAsync(dev[i & 1], h, n, cudaMemcpyHostToDevice, up));
            CK(cudaEventRecord(e1[i], up));
            if (zcopy || d2h) {
                CK(cudaStreamWaitEvent(side, e1[i], 0));
                if (zcopy)
                    zero_copy<<<128, 256, 0, side>>>(dout, hout_dev, outn / 16);
                else
                    CK(cudaMemcpyAsync(hout, dout, outn, cudaMemcpyDeviceToHost, side));
            }
            // At most two copies queued ahead, as the lanes keep it.
            if (i >= 2) CK(cudaEventSynchronize(e1[i - 2]));
        }
        CK(cudaStreamSynchronize(up));
        double t1 = now();
        CK(cudaStreamSynchronize(side));
        stop = true;
        if (hbm) hbmThread.join();
        for (auto &t : hts) t.join();
        std::vector<double> r;
        for (int i = 1; i < copies; i++) {
            float ms;
            CK(cudaEventElapsedTime(&ms, e0[i], e1[i]));
            r.push_back(n / (ms * 1e-3) / 1e9);
        }
        std::sort(r.begin(), r.end());
        printf("%-22s per copy median %6.2f GB/s  slowest %6.2f  fastest %6.2f  window %6.2f GB/s%s\n", name,
               r[r.size() / 2], r.front(), r.back(), copies * (double)n / (t1 - t0) / 1e9,
               hostThreads ? (" (host memcpy " + std::to_string(hostBytes.load() / (t1 - t0) / 1e9).substr(0, 5) + " GB/s)").c_str() : "");
        fflush(stdout);
    }
};

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 256;
    const char *dir = argc > 2 ? argv[2] : "/dev/shm";
    int K = argc > 3 ? atoi(argv[3]) : 8;
    Probe p;
    p.n = mib << 20;
    p.K = K;
    p.copies = 40;
    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("loadprobe: %s, %zu MiB copies x %d, %d registered mappings in %s, %u host threads\n", prop.name, mib,
           p.copies, K, dir, std::thread::hardware_concurrency());
    for (int i = 0; i < K; i++) {
        p.host.push_back(mapped(dir, i, p.n));
        CK(cudaHostRegister(p.host[i], p.n, cudaHostRegisterPortable | cudaHostRegisterReadOnly));
    }
    CK(cudaMalloc(&p.dev[0], p.n));
    CK(cudaMalloc(&p.dev[1], p.n));
    p.big = 1ull << 30;
    CK(cudaMalloc(&p.dbig, p.big));
    CK(cudaMemset(p.dbig, 1, p.big));
    p.outn = (p.n / 11) & ~(size_t)15;  // the e2e bench's ratio (10.9)
    CK(cudaMalloc(&p.dout, p.outn));
    CK(cudaHostAlloc(&p.hout, p.outn, cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaHostGetDevicePointer((void **)&p.hout_dev, p.hout, 0));
    CK(cudaMalloc(&p.sink, 4));
    CK(cudaStreamCreateWithFlags(&p.up, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.side, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.load, cudaStreamNonBlocking));
    p.e0.resize(p.copies);
    p.e1.resize(p.copies);
    for (int i = 0; i < p.copies; i++) {
        CK(cudaEventCreate(&p.e0[i]));
        CK(cudaEventCreate(&p.e1[i]));
    }
    p.ha.assign(256 << 20, 1);
    p.hb.assign(256 << 20, 2);

    p.run("alone, one mapping", false, false, false, 0, false);
    p.run("alone, rotating", false, false, false, 0, true);
    p.run("+ hbm", true, false, false, 0, true);
    p.run("+ zcopy", false, true, false, 0, true);
    p.run("+ d2h memcpy", false, false, true, 0, true);
    p.run("+ host 4 threads", false, false, false, 4, true);
    p.run("+ host 8 threads", false, false, false, 8, true);
    p.run("+ hbm zcopy host4", true, true, false, 4, true);
    p.run("+ hbm d2h host4", true, false, true, 4, true);
    p.run("alone, rotating (again)", false, false, false, 0, true);
    for (int i = 0; i < K; i++) {
        CK(cudaHostUnregister(p.host[i]));
        munmap(p.host[i], p.n);
    }
    return 0;
}
