// The compress job's tail: the tile-size table at the head of each chunk and
// the job's result.
// Included by fzgpu.cu.

// Tile-size tables at the head of each chunk and, in the block that ends
// last, the job's result. One thread per tile: a single block folding the
// per-tile records (v9 and before, finish_kernel) took 30 us of a 1 GiB
// field's 0.94 ms compress on an H200. The fold is an integer sum and a max,
// so the result does not depend on the order the blocks end in.
__global__ void tables_kernel(Geo g, unsigned long long tile0, unsigned long long ntiles, const unsigned *tsize,
                              const unsigned long long *tprefix, const unsigned *touts, const double *terr,
                              unsigned *out, unsigned long long cap, unsigned *err, const DevParams *prm,
                              JobAcc *acc, fzgpu_result *res, unsigned long long *status, unsigned *ticket,
                              unsigned long long *status_opt, unsigned long long *status_opt8) {
    grid_wait();
    const unsigned long long rel = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    // The next job starts from zero statuses, ticket, error flag and sums
    // (what job_init_kernel writes): this kernel leaves them so, which saves
    // that launch per job.
    if (rel < ntiles) status[rel] = 0;
    if (status_opt && rel < ntiles) {
        status_opt[rel] = 0;
        status_opt8[rel] = 0;
    }
    unsigned long long o = 0;
    double e = 0;
    if (rel < ntiles) {
        o = touts[rel];
        e = terr[rel];
        if (!*err) {
            const unsigned long long t = tile0 + rel, c = t / g.per_chunk, first = c * g.per_chunk;
            const unsigned long long start = tprefix[first - tile0] + 4 * (first - tile0);
            const unsigned long long at = start + 4 * (t - first);
            if (at + 4 <= cap) out[at / 4] = tsize[rel];
        }
    }
    for (int k = 16; k > 0; k >>= 1) {
        o += __shfl_xor_sync(0xffffffffu, o, k);
        e = fmax(e, __shfl_xor_sync(0xffffffffu, e, k));
    }
    __shared__ unsigned long long so[32];
    __shared__ double se[32];
    if ((threadIdx.x & 31) == 0) {
        so[threadIdx.x >> 5] = o;
        se[threadIdx.x >> 5] = e;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (int i = 1; i < (int)(blockDim.x >> 5); i++) {
        o += so[i];
        e = fmax(e, se[i]);
    }
    atomicAdd(&acc->outliers, o);
    atomicMax(&acc->err_bits, (unsigned long long)__double_as_longlong(e));
    __threadfence();
    if (atomicAdd(&acc->blocks_done, 1u) != gridDim.x - 1) return;
    __threadfence();
    fzgpu_result r;
    memset(&r, 0, sizeof r);
    r.bytes = tprefix[ntiles - 1] + tsize[ntiles - 1] + 4 * ntiles;
    r.outliers = *(volatile unsigned long long *)&acc->outliers;
    r.max_abs_err = __longlong_as_double((long long)*(volatile unsigned long long *)&acc->err_bits);
    r.abs_eb = prm->eb;
    r.step = prm->step;
    r.range_min = prm->lo;
    r.range_max = prm->hi;
    r.have_range = prm->have;
    r.status = *err ? FZGPU_E_CAPACITY : 0;
    *res = r;
    zero_job_scalars(ticket, err, acc);
}
