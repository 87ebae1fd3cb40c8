// rangeprobe: how fast the REL range pass (min/max over a field) can read
// 1 GiB of f32 on this GPU, by load kind, loads in flight, grid shape and
// order, against the library's range_kernel layout (1024 blocks x 256
// threads, 4 x 16-byte __ldcs per thread and round, grid-stride).
//
// Build and run:  nvcc -O3 -std=c++17 -arch=sm_90 -o rangeprobe cuda/tools/rangeprobe.cu && ./rangeprobe
#include "probe.h"

#include <cmath>

enum Load { CS, NC256, CG };

template <Load L>
__device__ __forceinline__ uint4 ld16(const uint4 *p) {
    uint4 v;
    if (L == CS) return __ldcs(p);
    if (L == NC256)
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
    else
        asm volatile("ld.global.cg.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
    return v;
}

__device__ __forceinline__ void take(float x, float &lo, float &hi) {
    const bool ok = isfinite(x);
    lo = ok && x < lo ? x : lo;
    hi = ok && x > hi ? x : hi;
}

__device__ __forceinline__ void take4(uint4 w, float &lo, float &hi) {
    take(__uint_as_float(w.x), lo, hi);
    take(__uint_as_float(w.y), lo, hi);
    take(__uint_as_float(w.z), lo, hi);
    take(__uint_as_float(w.w), lo, hi);
}

__device__ void finish(float lo, float hi, float *part) {
    __shared__ float slo[32], shi[32];
    for (int o = 16; o > 0; o >>= 1) {
        lo = fminf(lo, __shfl_down_sync(~0u, lo, o));
        hi = fmaxf(hi, __shfl_down_sync(~0u, hi, o));
    }
    if ((threadIdx.x & 31) == 0) {
        slo[threadIdx.x >> 5] = lo;
        shi[threadIdx.x >> 5] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)(blockDim.x >> 5); i++) {
            lo = fminf(lo, slo[i]);
            hi = fmaxf(hi, shi[i]);
        }
        part[2 * blockIdx.x] = lo;
        part[2 * blockIdx.x + 1] = hi;
    }
}

// Vectors i, i + step, ... below end, U of them in flight per thread.
template <Load L, int U>
__device__ __forceinline__ void take_run(const uint4 *v, unsigned long long i, unsigned long long end,
                                         unsigned long long step, float &lo, float &hi) {
    for (; i + (U - 1) * step < end; i += U * step) {
        uint4 w[U];
#pragma unroll
        for (int u = 0; u < U; u++) w[u] = ld16<L>(v + i + u * step);
#pragma unroll
        for (int u = 0; u < U; u++) take4(w[u], lo, hi);
    }
    for (; i < end; i += step) take4(ld16<L>(v + i), lo, hi);
}

// Grid-stride: round r reads U vectors per thread at i + u * nth.
template <Load L, int U>
__global__ void k_stride(const uint4 *v, unsigned long long nv, float *part) {
    float lo = INFINITY, hi = -INFINITY;
    const unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
    take_run<L, U>(v, (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x, nv, nth, lo, hi);
    finish(lo, hi, part);
}

// Block-contiguous: block b reads its own contiguous slice, U vectors per
// thread in flight, consecutive threads on consecutive vectors.
template <Load L, int U>
__global__ void k_slice(const uint4 *v, unsigned long long nv, float *part) {
    float lo = INFINITY, hi = -INFINITY;
    const unsigned long long per = (nv + gridDim.x - 1) / gridDim.x;
    const unsigned long long b0 = blockIdx.x * per, b1 = min(nv, b0 + per);
    take_run<L, U>(v, b0 + threadIdx.x, b1, blockDim.x, lo, hi);
    finish(lo, hi, part);
}

#if __CUDACC_VER_MAJOR__ >= 12  // PTX 8.0
// Bulk copies (TMA, 1-D): S stages of B bytes per block in shared memory,
// filled by cp.async.bulk and an mbarrier; chunk c of the field goes to
// block c % grid.
template <int S, int B>
__global__ void k_bulk(const char *src, unsigned long long bytes, float *part) {
    extern __shared__ __align__(128) unsigned char sm[];
    __shared__ __align__(8) unsigned long long bar[S];
    const unsigned long long nchunks = bytes / B;
    if (threadIdx.x == 0)
        for (int s = 0; s < S; s++)
            asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(&bar[s])));
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    auto issue = [&](unsigned long long c, int s) {
        const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[s]);
        const unsigned d = (unsigned)__cvta_generic_to_shared(sm + (size_t)s * B);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(B));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d),
                     "l"(src + c * B), "r"(B), "r"(b)
                     : "memory");
    };
    unsigned long long c = blockIdx.x;
    if (threadIdx.x == 0)
        for (int s = 0; s < S; s++)
            if (c + (unsigned long long)s * gridDim.x < nchunks) issue(c + (unsigned long long)s * gridDim.x, s);
    float lo = INFINITY, hi = -INFINITY;
    unsigned phase = 0;
    for (int s = 0; c < nchunks; c += gridDim.x) {
        const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[s]);
        asm volatile(
            "{\n\t.reg .pred p;\n\tWAIT_%=:\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
            "@!p bra WAIT_%=;\n\t}" ::"r"(b),
            "r"(phase));
        const uint4 *q = (const uint4 *)(sm + (size_t)s * B);
#pragma unroll 4
        for (int i = threadIdx.x; i < B / 16; i += blockDim.x) take4(q[i], lo, hi);
        __syncthreads();
        const unsigned long long cn = c + (unsigned long long)S * gridDim.x;
        if (threadIdx.x == 0 && cn < nchunks) issue(cn, s);
        if (++s == S) {
            s = 0;
            phase ^= 1;
        }
    }
    finish(lo, hi, part);
}
#endif

int main() {
    const size_t bytes = 1ull << 30;
    const unsigned long long nv = bytes / 16;
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    char *d;
    float *part;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMalloc(&part, 1 << 20));
    {
        std::vector<float> h(bytes / 4);
        for (size_t i = 0; i < h.size(); i++) h[i] = sinf(i * 1e-5f) * 100.f;
        CK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto time = [&](const char *name, auto launch) {
        std::vector<double> t;
        for (int r = 0; r < 21; r++) {
            CK(cudaEventRecord(e0));
            launch();
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r) t.push_back(ms);
        }
        CK(cudaGetLastError());
        const double m = median(t);
        printf("%-40s %.4f ms  %.2f TB/s\n", name, m, bytes / m / 1e9);
    };
    const uint4 *v = (const uint4 *)d;
    time("memcpy D2D 512 MiB (read+write 1 GiB)", [&] { CK(cudaMemcpyAsync(d + bytes / 2, d, bytes / 2, cudaMemcpyDeviceToDevice)); });
    time("stride cs U4 1024x256 (library)", [&] { k_stride<CS, 4><<<1024, 256>>>(v, nv, part); });
    time("stride nc256 U4 1024x256", [&] { k_stride<NC256, 4><<<1024, 256>>>(v, nv, part); });
    time("stride cg256 U4 1024x256", [&] { k_stride<CG, 4><<<1024, 256>>>(v, nv, part); });
    time("stride cs U4 sms*8x256", [&] { k_stride<CS, 4><<<sms * 8, 256>>>(v, nv, part); });
    time("stride nc256 U4 sms*8x256", [&] { k_stride<NC256, 4><<<sms * 8, 256>>>(v, nv, part); });
    time("stride cs U2 sms*8x256", [&] { k_stride<CS, 2><<<sms * 8, 256>>>(v, nv, part); });
    time("stride nc256 U8 sms*4x256", [&] { k_stride<NC256, 8><<<sms * 4, 256>>>(v, nv, part); });
    time("stride cs U4 sms*4x512", [&] { k_stride<CS, 4><<<sms * 4, 512>>>(v, nv, part); });
    time("slice cs U4 sms*8x256", [&] { k_slice<CS, 4><<<sms * 8, 256>>>(v, nv, part); });
    time("slice nc256 U4 sms*8x256", [&] { k_slice<NC256, 4><<<sms * 8, 256>>>(v, nv, part); });
    time("slice nc256 U8 sms*8x256", [&] { k_slice<NC256, 8><<<sms * 8, 256>>>(v, nv, part); });
    time("slice nc256 U4 sms*32x256", [&] { k_slice<NC256, 4><<<sms * 32, 256>>>(v, nv, part); });
    time("slice nc256 U4 4096x256", [&] { k_slice<NC256, 4><<<4096, 256>>>(v, nv, part); });
#if __CUDACC_VER_MAJOR__ >= 12
    {
        constexpr int S = 4, B = 16384;
        CK(cudaFuncSetAttribute(k_bulk<S, B>, cudaFuncAttributeMaxDynamicSharedMemorySize, S * B));
        time("bulk 4x16K sms*3x256", [&] { k_bulk<S, B><<<sms * 3, 256, S * B>>>(d, bytes, part); });
        time("bulk 4x16K sms*2x512", [&] { k_bulk<S, B><<<sms * 2, 512, S * B>>>(d, bytes, part); });
    }
    {
        constexpr int S = 3, B = 32768;
        CK(cudaFuncSetAttribute(k_bulk<S, B>, cudaFuncAttributeMaxDynamicSharedMemorySize, S * B));
        time("bulk 3x32K sms*2x256", [&] { k_bulk<S, B><<<sms * 2, 256, S * B>>>(d, bytes, part); });
    }
    {
        constexpr int S = 8, B = 8192;
        CK(cudaFuncSetAttribute(k_bulk<S, B>, cudaFuncAttributeMaxDynamicSharedMemorySize, S * B));
        time("bulk 8x8K sms*3x256", [&] { k_bulk<S, B><<<sms * 3, 256, S * B>>>(d, bytes, part); });
    }
#endif
    time("stride cs U4 1024x256 (library, again)", [&] { k_stride<CS, 4><<<1024, 256>>>(v, nv, part); });
    return 0;
}
