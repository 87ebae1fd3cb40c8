// The parity Lorenzo transform of a fill or raw bitmap (FORMAT.md section
// 5, "masks") for one element: the XOR over its 2^3 corners. Used by the
// warp encoder's slow path (encode_slow.cuh); compiled on the host by
// tools/encode_slow_emu.cpp.

// XOR over the 2^3 corners of bit `bit` of fl (0 outside the box); m is
// the element's meta word (x>0, y>0, z>0 in bits 12..14).
__device__ __forceinline__ int xor_corners(const unsigned char *fl, int e, unsigned m, int P, int lx,
                                           unsigned char bit) {
    const bool x = (m >> 12) & 1, y = (m >> 13) & 1, z = (m >> 14) & 1;
    int b = (fl[e] & bit) != 0;
    if (x) b ^= (fl[e - 1] & bit) != 0;
    if (y) b ^= (fl[e - lx] & bit) != 0;
    if (x && y) b ^= (fl[e - lx - 1] & bit) != 0;
    if (z) {
        b ^= (fl[e - P] & bit) != 0;
        if (x) b ^= (fl[e - P - 1] & bit) != 0;
        if (y) b ^= (fl[e - P - lx] & bit) != 0;
        if (x && y) b ^= (fl[e - P - lx - 1] & bit) != 0;
    }
    return b;
}
