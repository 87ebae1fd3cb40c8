// Range and bound parameters (compress, before the encoder): min and max over the
// finite non-fill values (REL), then abs_eb, step and 1/step exactly as fz.DeriveBound.
// Included by fzgpu.cu.

// Min and max over finite non-fill values. The bulk is read as 16-byte
// vectors, four per thread per round (64 bytes in flight per thread): the
// scalar grid-stride loop of v1-v5 kept a quarter of that in flight and
// reached about a third of the bandwidth.
template <typename T>
__device__ __forceinline__ void range_take(T x, int has_fill, unsigned long long fill_bits, T &lo, T &hi) {
    const bool ok = isfinite(x) && !(has_fill && Bits<T>::of(x) == fill_bits);
    lo = ok && x < lo ? x : lo;
    hi = ok && x > hi ? x : hi;
}

template <typename T>
__global__ void range_kernel(const T *src, unsigned long long n, int has_fill, unsigned long long fill_bits,
                             double *partials) {
    constexpr int V = 16 / sizeof(T);  // values per vector
    T lo = (T)INFINITY, hi = (T)-INFINITY;
    const unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    // head up to the first 16-byte boundary, vectors, then the tail
    unsigned long long head = ((16 - ((uintptr_t)src & 15)) & 15) / sizeof(T);
    if (head > n) head = n;
    const unsigned long long nv = (n - head) / V, tail0 = head + nv * V;
    if (tid < head) range_take(src[tid], has_fill, fill_bits, lo, hi);
    if (tid < n - tail0) range_take(src[tail0 + tid], has_fill, fill_bits, lo, hi);
    const uint4 *vp = (const uint4 *)(src + head);
    unsigned long long i = tid;
    // 4 loads in flight per thread (8 measured slower: 0.287 vs 0.258 ms per GiB)
    for (; i + 3 * nth < nv; i += 4 * nth) {
        uint4 w[4];
#pragma unroll
        for (int u = 0; u < 4; u++) w[u] = __ldcs(vp + i + u * nth);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const T *x = (const T *)&w[u];
#pragma unroll
            for (int k = 0; k < V; k++) range_take(x[k], has_fill, fill_bits, lo, hi);
        }
    }
    for (; i < nv; i += nth) {
        const uint4 w = __ldcs(vp + i);
        const T *x = (const T *)&w;
#pragma unroll
        for (int k = 0; k < V; k++) range_take(x[k], has_fill, fill_bits, lo, hi);
    }
    __shared__ T slo[32], shi[32];
    for (int o = 16; o > 0; o >>= 1) {
        T a = __shfl_down_sync(0xffffffffu, lo, o), b = __shfl_down_sync(0xffffffffu, hi, o);
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) {
        slo[w] = lo;
        shi[w] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)(blockDim.x >> 5); i++) {
            lo = slo[i] < lo ? slo[i] : lo;
            hi = shi[i] > hi ? shi[i] : hi;
        }
        partials[2 * blockIdx.x] = (double)lo;
        partials[2 * blockIdx.x + 1] = (double)hi;
    }
}

// The (min, max) of the range kernel's per-block partials, by one block of
// FOLD_T threads (every thread gets it): one round of loads for up to
// FOLD_T parts. (One warp took 32 rounds for 1024 parts: the params kernel
// ran 5.3 us.) Parts that saw no value hold min > max.
#define FOLD_T 1024
__device__ __forceinline__ void fold_partials(const double *partials, int nparts, double &lo, double &hi) {
    __shared__ double flo[FOLD_T / 32], fhi[FOLD_T / 32];
    auto warp_fold = [&]() {
        for (int o = 16; o > 0; o >>= 1) {
            const double a = __shfl_xor_sync(0xffffffffu, lo, o), b = __shfl_xor_sync(0xffffffffu, hi, o);
            lo = a < lo ? a : lo;
            hi = b > hi ? b : hi;
        }
    };
    lo = INFINITY;
    hi = -INFINITY;
    for (int i = threadIdx.x; i < nparts; i += FOLD_T) {
        const double a = partials[2 * i], b = partials[2 * i + 1];
        if (a <= b) {
            lo = a < lo ? a : lo;
            hi = b > hi ? b : hi;
        }
    }
    warp_fold();
    if ((threadIdx.x & 31) == 0) {
        flo[threadIdx.x >> 5] = lo;
        fhi[threadIdx.x >> 5] = hi;
    }
    __syncthreads();
    lo = flo[threadIdx.x & 31];
    hi = fhi[threadIdx.x & 31];
    warp_fold();
}

// One block of FOLD_T threads: the header's abs_eb and step exactly as fz/compress.go derives
// them, from the range (rel) or the bound (abs). (One thread folding the
// 1024 partials took 57 us of a 1 GiB field's 0.31 ms prepare on an H200.)
__global__ void params_kernel(const double *partials, int nparts, int rel, double bound, DevParams *p) {
    grid_wait();
    double l = 0, h = 0;
    if (rel) fold_partials(partials, nparts, l, h);
    if (threadIdx.x != 0) return;
    double lo = 0, hi = 0;
    int have = 0;
    if (rel) {
        have = l <= h;
        if (have) {
            lo = l == 0 ? 0.0 : l;  // -0 and +0 normalised
            hi = h == 0 ? 0.0 : h;
        }
    }
    double eb = rel ? __dmul_rn(bound, __dsub_rn(hi, lo)) : bound;
    double step = __dmul_rn(2.0, eb);
    if (eb == 0) {
        step = 1;
        if (have && lo != 0 && !isinf(lo)) step = fabs(lo);
    }
    if (isinf(step)) step = DBL_MAX;
    p->eb = eb;
    p->step = step;
    p->inv = __ddiv_rn(1.0, step);
    p->lo = have ? lo : __longlong_as_double(0x7FF8000000000000ll);
    p->hi = have ? hi : __longlong_as_double(0x7FF8000000000000ll);
    p->have = have;
}

// One block of FOLD_T threads: folds the range_kernel partials into a running range acc[2]
// (lo, hi), restarting it unless accumulate: a field streamed through the
// device in pieces gets the same range as one pass over all of it.
__global__ void range_fold_kernel(const double *partials, int nparts, double *acc, int accumulate) {
    double lo, hi;
    fold_partials(partials, nparts, lo, hi);
    if (threadIdx.x == 0) {
        if (accumulate) {
            lo = acc[0] < lo ? acc[0] : lo;
            hi = acc[1] > hi ? acc[1] : hi;
        }
        acc[0] = lo;
        acc[1] = hi;
    }
}
