// A snapshot's compressed chunks assembled on the device, with their
// checksums (fzgpu_gather): the host then copies the snapshot's bytes back
// with one copy of exactly their size, straight into the output blob, and
// checksums nothing (docs/PIPELINE.md, GPU-resident snapshots). Before it
// the host appended every job's bytes to the blob and checksummed each
// chunk: 9-12 ms and 3-5 ms per 1 GiB snapshot in each of 8 lanes on an
// H100 host, the bound on device snapshots' ingest.
// Included by fzgpu.cu, after crc32c.cuh.

#define GATHER_T 256  // threads per chunk; the byte table has one entry per thread

// x8 of crc32c.cuh, set by fzgpu_create (cudaMemcpyToSymbol per device)
__constant__ unsigned c_crc_x8[64];

// One block per chunk of a compress job that just ran on this context and
// stream (tprefix, tsize are its tile offsets and sizes; src its output).
// The job's bytes go to dst + state[0]; the chunk's CRC32C to crc[chunk].
// The last block to finish adds the job's bytes to state[0] (every block
// read it before), and sets state[1] where they did not fit: src_cap (the
// job's output bytes are not all there: its result reports the error) or
// dst_cap (the caller makes dst larger and runs the snapshot again, sized
// from the final state[0]). state[2] counts finished blocks.
__global__ void __launch_bounds__(GATHER_T) gather_kernel(unsigned long long per_chunk, unsigned long long tile0,
                                                          unsigned long long nt, unsigned long long first_chunk,
                                                          const unsigned long long *tprefix, const unsigned *tsize,
                                                          const unsigned *src, unsigned long long src_cap,
                                                          unsigned *dst, unsigned long long dst_cap,
                                                          unsigned long long *state, unsigned *crc) {
    __shared__ unsigned tab[4][256];
    __shared__ unsigned x8[64];
    __shared__ unsigned red[GATHER_T / 32];
    const unsigned t = threadIdx.x;
    tab[0][t] = crc32c_byte(t);
    if (t < 64) x8[t] = c_crc_x8[t];
    __syncthreads();
    for (int k = 1; k < 4; k++) {
        const unsigned v = tab[k - 1][t];
        tab[k][t] = (v >> 8) ^ tab[0][v & 0xFF];
        __syncthreads();
    }
    const unsigned long long total = tprefix[nt - 1] + tsize[nt - 1] + 4 * nt;
    const unsigned long long pos = *(volatile unsigned long long *)&state[0];
    const unsigned long long rel0 = (first_chunk + blockIdx.x) * per_chunk - tile0;
    const unsigned long long start = tprefix[rel0] + 4 * rel0;
    unsigned long long end = total;
    if (blockIdx.x + 1 < gridDim.x) {
        const unsigned long long rel1 = rel0 + per_chunk;
        end = tprefix[rel1] + 4 * rel1;
    }
    // Uniform over the job's blocks, except where a failed job left its
    // offsets inconsistent; then its result fails the snapshot anyway.
    const bool fits = total <= src_cap && pos <= dst_cap && total <= dst_cap - pos && start <= end && end <= total &&
                      !(start & 3) && !(pos & 3);
    if (fits) {
        const unsigned long long words = (end - start) / 4;
        const unsigned *s = src + start / 4;
        unsigned *d = dst + (pos + start) / 4;
        for (unsigned long long w = t; w < words; w += GATHER_T) d[w] = s[w];  // coalesced
        unsigned c = crc32c_part(s, words, GATHER_T, t, tab, x8);
        for (int o = 16; o > 0; o >>= 1) c ^= __shfl_xor_sync(0xffffffffu, c, o);
        if ((t & 31) == 0) red[t >> 5] = c;
        __syncthreads();
        if (t == 0) {
            for (int i = 1; i < GATHER_T / 32; i++) c ^= red[i];
            crc[first_chunk + blockIdx.x] = crc32c_finish(c, end - start, x8);
        }
    }
    __syncthreads();  // every thread read state[0]
    if (t == 0) {
        __threadfence();
        if (atomicAdd(&state[2], 1ull) == gridDim.x - 1) {
            __threadfence();
            state[0] = pos + total;
            if (!fits) state[1] = 1;
            state[2] = 0;
        }
    }
}
