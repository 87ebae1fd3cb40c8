// warp_emu.h: the warp intrinsics the host emulations of the v2 kernels
// (encode_v2_emu.cpp, transcode_emu.cpp) need. 32 threads play a warp's
// lanes (each sets my_lane); shuffles, ballots, votes and __syncwarp meet at
// one barrier, so a lane that skips a warp-wide call deadlocks the run
// instead of passing. The runner creates `bar` for 32 threads.
#pragma once
#include <barrier>

// One warp's: a runner of one warp sets bar (from its main thread) and
// every thread shares xch_all. A runner of several warps (encode_warp_emu.cpp)
// sets bar_warp and xch_warp in each thread to its warp's own.
static std::barrier<> *bar_all;
thread_local std::barrier<> *bar_warp;
static unsigned xch_all[32];
thread_local unsigned *xch_warp;
#define bar (bar_warp ? bar_warp : bar_all)
#define xch (xch_warp ? xch_warp : xch_all)
thread_local int my_lane;
static inline unsigned __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
static void __syncwarp() { bar->arrive_and_wait(); }
static unsigned __shfl_sync(unsigned, unsigned v, int src) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    const unsigned r = xch[src];
    bar->arrive_and_wait();
    return r;
}
static unsigned __shfl_up_sync(unsigned, unsigned v, int d) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    const unsigned r = my_lane >= d ? xch[my_lane - d] : v;
    bar->arrive_and_wait();
    return r;
}
static unsigned __ballot_sync(unsigned, bool p) {
    xch[my_lane] = p;
    bar->arrive_and_wait();
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= (xch[i] ? 1u : 0u) << i;
    bar->arrive_and_wait();
    return r;
}
static bool __any_sync(unsigned m, bool p) { return __ballot_sync(m, p) != 0; }
// __reduce_*_sync: every lane's value folded by f, in lane order
template <typename F> static unsigned reduce_emu(unsigned v, F f) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    unsigned r = xch[0];
    for (int i = 1; i < 32; i++) r = f(r, xch[i]);
    bar->arrive_and_wait();
    return r;
}
static unsigned __reduce_or_sync(unsigned, unsigned v) {
    return reduce_emu(v, [](unsigned a, unsigned b) { return a | b; });
}
static unsigned __reduce_max_sync(unsigned, unsigned v) {
    return reduce_emu(v, [](unsigned a, unsigned b) { return a > b ? a : b; });
}
static unsigned __reduce_add_sync(unsigned, unsigned v) {
    return reduce_emu(v, [](unsigned a, unsigned b) { return a + b; });
}
#ifndef EMU_WITH_DEVICE_COMMON  // else device_common.cuh's own
// as fzgpu.cu's
template <int N> unsigned warp_incl_scan(unsigned x, int lane) {
    for (int o = 1; o < N; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}
#endif
