// A word of a zero-block coded bitmap (FORMAT.md section 5), for the block
// decoder (decode.cuh) and the warp decoder (decode_warp.cuh).
#pragma once

// Word W (0-127) of a zero-block coded 512-byte bitmap (FORMAT.md section
// 5) whose block mask is bm and whose blocks start at word at of p: 0 for
// an absent block (bm = 0 stands for an absent plane).
__device__ __forceinline__ unsigned zb_word(const unsigned *p, unsigned bm, unsigned at, int W) {
    const int kb = W >> 2;
    return ((bm >> kb) & 1) ? p[at + 4 * __popc(bm & ((1u << kb) - 1)) + (W & 3)] : 0u;
}
