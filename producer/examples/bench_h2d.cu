// bench_h2d.cu — pinned host-to-device bandwidth of one GPU, measured the
// way `fzsidecar bench e2e` measures it (cuda.Streamer.PinnedH2D): a
// cudaHostAlloc buffer of N bytes copied with cudaMemcpyAsync into device
// memory on one stream, timed by events, median of 10 after a warm-up.
// bench_gpu_host.sh runs it before and after each C producer run, so each
// run's ingest is compared with the link measured in that run.
//
//   bench_h2d [BYTES (default 268435456)] [DEVICE (default 0)]
// Prints "pinned_h2d_bytes_per_second <value>".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_h2d: %s: %s\n", #x, cudaGetErrorString(e_));                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], nullptr, 10) : (size_t)256 << 20;
    int dev = argc > 2 ? atoi(argv[2]) : 0;
    if (n == 0) {
        fprintf(stderr, "bench_h2d: BYTES must be > 0\n");
        return 2;
    }
    CK(cudaSetDevice(dev));
    void *h = nullptr, *d = nullptr;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CK(cudaHostAlloc(&h, n, cudaHostAllocDefault));
    memset(h, 1, n);
    CK(cudaMalloc(&d, n));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = -1; i < 10; i++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (i >= 0)
            ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    printf("pinned_h2d_bytes_per_second %.0f\n", (double)n / (ms[ms.size() / 2] / 1e3));
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
    return 0;
}
