// The 32x32 bit transpose across a warp that turns codes into bit planes
// (encoders) and planes back into codes (decoders).
#pragma once

// 32x32 bit transpose across a warp: lane r holds row r (bit c = column c);
// on return lane r holds column r (bit c = old lane c's bit r). Five
// butterfly stages, each swapping bit j of the row and column index. The
// 16- and 8-bit stages move whole bytes: a shuffle and one byte permute.
// The 4-, 2- and 1-bit stages: a shuffle, a rotate and one 3-input select
// with the lane's mask in a register (written as lop3: left to itself the
// compiler folds the mask into immediates and spends three logic ops).
// The per-lane selectors, masks and rotations depend only on the lane (the
// compiler hoists them where registers allow; at 128 it recomputes them).
__device__ __forceinline__ unsigned bitsel(unsigned a, unsigned b, unsigned m) {  // (a & m) | (b & ~m)
#ifdef __CUDA_ARCH__
    unsigned r;
    asm("lop3.b32 %0, %1, %2, %3, 0xE4;" : "=r"(r) : "r"(a), "r"(b), "r"(m));
    return r;
#else  // the host emulations (tools/walk_emu.h includes this file)
    return (a & m) | (b & ~m);
#endif
}
// N independent transposes, stage by stage: each stage is a shuffle whose
// result the next stage needs tens of cycles later, so one transpose alone
// keeps a warp waiting most of the time; N of them in step issue N
// shuffles back to back.
template <int N> __device__ __forceinline__ void transpose32n(unsigned (&x)[N], int lane) {
    const unsigned F = 0xffffffffu;
    unsigned y[N];
#pragma unroll
    for (int i = 0; i < N; i++) y[i] = __shfl_xor_sync(F, x[i], 16);
#pragma unroll
    for (int i = 0; i < N; i++) x[i] = __byte_perm(x[i], y[i], (lane & 16) ? 0x3276u : 0x5410u);
#pragma unroll
    for (int i = 0; i < N; i++) y[i] = __shfl_xor_sync(F, x[i], 8);
#pragma unroll
    for (int i = 0; i < N; i++) x[i] = __byte_perm(x[i], y[i], (lane & 8) ? 0x3715u : 0x6240u);
#pragma unroll
    for (int j = 4; j >= 1; j >>= 1) {
        const unsigned m = j == 4 ? 0x0F0F0F0Fu : j == 2 ? 0x33333333u : 0x55555555u;
        const bool top = (lane & j) == 0;
#pragma unroll
        for (int i = 0; i < N; i++) y[i] = __shfl_xor_sync(F, x[i], j);
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = bitsel(x[i], __funnelshift_l(y[i], y[i], top ? j : 32 - j), top ? m : ~m);
    }
}
__device__ __forceinline__ unsigned transpose32(unsigned x, int lane) {
    unsigned a[1] = {x};
    transpose32n<1>(a, lane);
    return a[0];
}
