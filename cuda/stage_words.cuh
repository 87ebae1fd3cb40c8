// A tile's words into a warp's shared stage buffer by cp.async: the warp
// decoder's stage (decode_warp.cuh) and the version-2 transcode's
// (transcode.cuh). Needs cp_async4 / cp_async_commit / cp_async_wait
// (encode_ptx.cuh on the device, tools/cp_async_emu.h on the host).
#pragma once

// The nw words at gp into s (the calling warp's part of shared memory),
// every copy in flight at once: cp.async holds no register. Loads through
// registers took several round trips a tile: eight a lane at a time, six
// for a 1,400-word tile in the transcode (hyg at 1e-4: 41 % of its stalls
// waited on global loads, PERF.md v29); unrolled with a remainder of one
// load at a time in the warp decoder (8 % of its stall samples on hst for
// 2-3 % of its instructions; with cp.async decompress +2-7 %, PERF.md v33).
// gp is 4-byte aligned (fzgpu_decompress checks the blob, chunk_scan_kernel
// each tile's offset). Returns with the words visible to the whole warp.
#ifndef EMU_STAGE_WORDS  // tools/decode_warp_emu.cpp copies directly instead
__device__ __forceinline__ void stage_words(unsigned *s, const unsigned *__restrict__ gp, unsigned nw, int lane) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    for (unsigned i = lane; i < nw; i += 32) cp_async4(sa + 4u * i, gp + i);
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
}
#endif
