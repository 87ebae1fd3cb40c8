// The chunk scan, the first kernel of a decode (included by decode.cuh;
// compiled on the host by tools/chunk_scan_emu.cpp): one block per chunk
// validates the chunk's index entry and tile table (docs/FORMAT.md section
// 6) and turns the tile sizes into offsets (toff) and sizes (tsz; 0 for a
// tile it rejects, reported). Everything after it reads a tile only where
// tsz is not 0, so what it accepts is what the decoders may read.

__device__ __forceinline__ unsigned ld32(const unsigned char *p) {
    return (unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24;
}

// One block per chunk: validate the tile table and turn sizes into offsets.
__global__ void chunk_scan_kernel(Geo g, const unsigned char *blob, unsigned long long blob_size,
                                  unsigned long long index_off, unsigned long long first_chunk,
                                  unsigned long long tile0, unsigned long long *toff, unsigned *tsz,
                                  unsigned long long *err) {
    __shared__ unsigned scan[2 * NWARPS + 34];
    __shared__ unsigned long long base_sh;
    __shared__ int bad;
    grid_wait();  // the error word set by the stream's work before (launch_dependent)
    unsigned long long c = first_chunk + blockIdx.x;
    unsigned long long first = c * g.per_chunk, end = min(first + g.per_chunk, g.tiles);
    unsigned long long k = end - first;
    const unsigned char *e = blob + index_off + 24 * c;
    unsigned long long coff = (unsigned long long)ld32(e) | (unsigned long long)ld32(e + 4) << 32;
    unsigned long long csz = (unsigned long long)ld32(e + 8) | (unsigned long long)ld32(e + 12) << 32;
    if (threadIdx.x == 0) {
        base_sh = 0;
        bad = 0;
    }
    __syncthreads();
    int ok = coff <= blob_size && csz <= blob_size - coff && csz >= 4 * k;
    if (!ok) {
        for (unsigned long long i = threadIdx.x; i < k; i += blockDim.x) tsz[first + i - tile0] = 0;
        if (threadIdx.x == 0) report(err, first - tile0, coff <= blob_size && csz <= blob_size - coff ? FZGPU_DE_TABLE : FZGPU_DE_INDEX);
        return;
    }
    const unsigned char *table = blob + coff;
    const unsigned long long room = csz - 4 * k;
    for (unsigned long long b = 0; b < k; b += NT) {
        unsigned long long i = b + threadIdx.x;
        unsigned sz = i < k ? ld32(table + 4 * i) : 0;
        // sizes are < 2^32 each; prefix in 64 bits via two 32-bit scans is
        // overkill for <= 65536 tiles of < 2^32: use 64-bit accumulation.
        unsigned tot;
        unsigned lo = block_excl_scan(sz & 0xFFFFu, &tot, scan);
        unsigned long long totlo = tot;
        unsigned hi = block_excl_scan(sz >> 16, &tot, scan);
        unsigned long long exc = base_sh + lo + ((unsigned long long)hi << 16);
        unsigned long long total = totlo + ((unsigned long long)tot << 16);
        if (i < k) {
            // The tile must also start 4-byte aligned: the decoders and the
            // v2 transcode read it as u32 words, and a misaligned u32 load
            // is a sticky CUDA error that ends the context. Sizes before it
            // that are not multiples of 4 (themselves invalid), or a chunk
            // that starts misaligned (an earlier chunk's size in a crafted
            // index), would put it there.
            int valid = sz >= 8 && (sz & 3) == 0 && ((coff + exc) & 3) == 0 && !bad && exc + sz <= room;
            unsigned long long rel = first + i - tile0;
            if (valid) {
                toff[rel] = coff + 4 * k + exc;
                tsz[rel] = sz;
            } else {
                tsz[rel] = 0;
                report(err, rel, FZGPU_DE_TILESIZE);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            base_sh += total;
            if (base_sh > room) bad = 1;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0 && !bad && base_sh != room) report(err, end - 1 - tile0, FZGPU_DE_TRAILCHUNK);
}
