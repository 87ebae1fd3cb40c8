// A compress job's state: zeroed once per context (job_init_kernel) and
// after each job by tables_kernel; the per-element tables of a full tile
// for the block decoder (meta_kernel; the v5 block encoder that shared
// them is gone since v25).

// The scalars of a compress job's state, zeroed: job_init_kernel for the
// first job, tables_kernel for the next one.
__device__ __forceinline__ void zero_job_scalars(unsigned *ticket, unsigned *err, JobAcc *acc) {
    ticket[0] = ticket[1] = ticket[2] = ticket[3] = 0;
    *err = 0;
    acc->outliers = 0;
    acc->err_bits = 0;
    acc->blocks_done = 0;
}

// A compress job's zeroed state in one launch: the look-back statuses, the
// ticket, the error flag and the result accumulator, 4 statuses per thread.
// Run for a context's first job and after a failed launch only: every
// tables_kernel leaves that state zeroed for the next job.
__global__ void job_init_kernel(unsigned long long *status, unsigned long long nt, unsigned *ticket,
                                unsigned *err, JobAcc *acc) {
    const unsigned long long i = 4 * ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 4 <= nt && (((uintptr_t)(status + i)) & 15) == 0) {
        uint4 *p = (uint4 *)(status + i);
        p[0] = p[1] = make_uint4(0, 0, 0, 0);
    } else {
        for (unsigned long long k = i; k < i + 4 && k < nt; k++) status[k] = 0;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) zero_job_scalars(ticket, err, acc);
}

// For a full tile (every tile but the clipped ones at the field's edges)
// the slot, neighbour flags and field offset of element e are the same in
// every tile: computed once per job, they replace six integer divisions per
// element and pass in the tile kernels.
__global__ void meta_kernel(Geo g, unsigned *emeta, unsigned long long *eoff) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= TILE) return;
    int P = g.ty * g.tx, z = e / P, r = e - z * P, y = r / g.tx, x = r - y * g.tx;
    emeta[e] = (unsigned)slot_of(z, y, x, g.tz, g.ty, g.tx, g) | (x > 0) << 12 | (y > 0) << 13 | (z > 0) << 14 | 1u << 15;
    eoff[e] = ((unsigned long long)z * g.ny + y) * g.nx + x;
}
