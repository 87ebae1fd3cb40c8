// walk_emu.h: what the host emulations of the staged f32 walks
// (encode_rank3_emu.cpp: enc_fast3 of
// cuda/encode_rank3.cuh; encode_rank2_emu.cpp: enc_fast2s of
// cuda/encode_rank2.cuh) define in place of CUDA and of the device code
// their headers take from elsewhere, with the same semantics: the CUDA
// qualifiers and intrinsics, the warp-wide operations beyond warp_emu.h's,
// transpose.cuh (included: the real transposes), Geo (the fields the walks read), and
// encode_ptx.cuh's inline-PTX primitives (cp.async, sub_left, prmt). An
// emulator includes this file, then ../encode_common.cuh (the scratch
// layout, TileSum, esc_max: the real ones) and ../encode_rank3.cuh (and
// ../encode_rank2.cuh), in encode_warp.cuh's order, so the walks, Stager,
// the coders, quant_f32, code16x2 and stage_buf compiled are the headers'
// own. Built with -ffp-contract=off: every floating operation is one IEEE
// operation, rounded to nearest, as the GPU build's explicit intrinsics and
// -fmad=false.
//
// The emulated hardware (the runner sets it up per tile):
//  - 32 threads play the lanes of warp emu_warp of a block (warp_emu.h:
//    shuffles, ballots, votes, reductions and __syncwarp meet at one
//    barrier, so a warp-wide call that not every lane makes deadlocks the
//    run instead of passing); each sets my_lane and threadIdx.x;
//  - shared memory: the header's own stage_buf() (its __shared__ array of
//    ENC_W rows, one per warp, static here); the warp's row is the arena
//    that cp.async and __cvta_generic_to_shared accept;
//  - cp.async: each lane's copies are queued per commit group and land
//    either at issue ("early") or only when cp_async_wait<N> retires their
//    group ("late"); a copy must be aligned to its size and lie inside the
//    arena.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

#include "warp_emu.h"

// ------------------------------------------------------------ CUDA types and intrinsics

struct alignas(16) uint4 {  // as CUDA's: a 16-byte store must be 16-byte aligned (UBSan checks)
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct uint3 {
    unsigned x, y, z;
};
thread_local uint3 threadIdx;  // x = 32 * emu_warp + my_lane (the runner sets it)

// Shuffles of any 4- or 8-byte type (the walks shuffle ints, and
// the FILLP walk a long long: one exchange of 64 bits, never a
// conversion to warp_emu.h's unsigned). warp_emu.h's unsigned __shfl_sync
// stays the better match for unsigned.
static unsigned long long xch64_all[32];
thread_local unsigned long long *xch64_warp;  // as warp_emu.h's xch_warp
#define xch64 (xch64_warp ? xch64_warp : xch64_all)
template <typename T> static T shfl_emu(T v, int src) {
    static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8), "a 4- or 8-byte shuffle");
    unsigned long long u = 0;
    memcpy(&u, &v, sizeof v);
    xch64[my_lane] = u;
    bar->arrive_and_wait();
    u = xch64[src & 31];
    bar->arrive_and_wait();
    T r;
    memcpy(&r, &u, sizeof r);
    return r;
}
template <typename T> static T __shfl_sync(unsigned, T v, int src) { return shfl_emu(v, src); }
template <typename T> static T __shfl_xor_sync(unsigned, T v, int m) { return shfl_emu(v, my_lane ^ m); }
// __reduce_or_sync, __reduce_max_sync, __reduce_add_sync: warp_emu.h's
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// the low 32 bits of the double's bits
static inline int __double2loint(double d) {
    unsigned long long u;
    memcpy(&u, &d, 8);
    return (int)(unsigned)u;
}
// one IEEE operation each, rounded to nearest even (x86-64 SSE2, -ffp-contract=off)
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline int __double2int_rz(double d) { return (int)d; }  // C truncates toward zero
static inline double __int2double_rn(int q) { return (double)q; }
static inline float __double2float_rn(double d) { return (float)d; }
static inline float __fsub_rn(float a, float b) { return a - b; }
// (hi:lo) << (s & 31), the high word (PTX shf.l.wrap)
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
    s &= 31;
    return s ? hi << s | lo >> (32 - s) : hi;
}
// (hi:lo) << min(s, 32), the high word (PTX shf.l.clamp)
static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) {
    if (s >= 32) return lo;
    return s ? hi << s | lo >> (32 - s) : hi;
}
// (hi:lo) >> (s & 31), the low word (PTX shf.r.wrap)
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    s &= 31;
    return s ? lo >> s | hi << (32 - s) : lo;
}
// PTX prmt, default mode without sign replication (as __byte_perm: only
// the selector nibbles' low 3 bits count)
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned sel) {
    const unsigned long long x = (unsigned long long)b << 32 | a;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(x >> (8 * ((sel >> (4 * i)) & 7)) & 0xFFu) << (8 * i);
    return r;
}
// a load through L2 (ld.global.cg): a load
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }
// encode_common.cuh's note_rare (not used by the staged walks)
static inline unsigned atomicOr(unsigned *p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
// device_common.cuh's, declared for encode_common.cuh's templates (not
// instantiated by the staged walks)
template <typename T> struct Bits;
template <typename T> int quant_q(T x, double s, double step, double &er);

// fill_placeholder3 prefetches the tile's rows into L2 with inline PTX
// ("prefetch.global.L2 [%0];", the operand a 64-bit register: constraint
// "l", which x86-64 GCC takes as an index register). On the host that
// line reaches the assembler: this GNU as macro of the same name makes it
// expand to nothing (a prefetch changes no result), so the header's code is
// compiled as it is.
asm(".macro prefetch.global.L2 addr\n.endm");

// ------------------------------------------------------------ as fzgpu.cu's

#ifndef EMU_WITH_DEVICE_COMMON  // decode_warp_emu.cpp includes device_common.cuh, with the real Geo
struct Geo {  // the fields the staged walks read
    unsigned long long nz, ny, nx;
};
struct Box3 {  // device_common.cuh's: a tile's extent (the padded walks' clamp)
    int lz, ly, lx;
};
#endif
// the transposes: transpose.cuh itself (its bitsel in C off the device),
// where this file had a copy of them
#include "../transpose.cuh"

// ------------------------------------------------------------ as encode_ptx.cuh's

// the predicated store
static inline void st_if(unsigned *p, unsigned v, bool c) {
    if (c) *p = v;
}

// PTX prmt, default mode: selector nibble bit 3 replicates the sign (bit 7)
// of the selected byte
static inline unsigned prmt(unsigned a, unsigned b, unsigned sel) {
    const unsigned long long x = (unsigned long long)b << 32 | a;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        const unsigned nib = (sel >> (4 * i)) & 15;
        unsigned byte = (unsigned)(x >> (8 * (nib & 7))) & 0xFFu;
        if (nib & 8) byte = (byte & 0x80u) ? 0xFFu : 0u;
        r |= byte << (8 * i);
    }
    return r;
}
#ifdef EMU_WITH_DEVICE_COMMON
// ------------------------------------------------------------ for emulators that include device_common.cuh
// (encode_slow_emu.cpp, decode_warp_emu.cpp): what it and the kernels after it
// use beyond the walks' intrinsics above
#define __global__
#define __launch_bounds__(a, b)
thread_local uint3 blockIdx;
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline double __longlong_as_double(long long v) {
    double d;
    memcpy(&d, &v, 8);
    return d;
}
static inline long long __double_as_longlong(double d) {
    long long v;
    memcpy(&v, &d, 8);
    return v;
}
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned atomicXor(unsigned *p, unsigned v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
#ifndef EMU_BLOCK_SYNC  // chunk_scan_emu.cpp runs whole blocks and brings its own
static void __syncthreads() { bar->arrive_and_wait(); }  // device_common.cuh's block scans (not run here)
#endif
#endif

// the warp kernel's own PTX (encode_ptx.cuh): atom.global.inc with its
// limit, and the L2 policy stores as plain ones
static inline unsigned ticket_inc(unsigned *t) {
    unsigned old = __atomic_load_n(t, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(t, &old, old >= 0x7fffffffu ? 0u : old + 1, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {
    }
    return old;
}
static inline unsigned long long l2_policy(bool) { return 0; }
static inline void st_hint(unsigned *p, unsigned v, unsigned long long) { *p = v; }
// b - b(lane - 1); lane 0 keeps b (shfl.sync.up by 1, the subtraction
// predicated on the source lane being in range), wrapping
static int sub_left(int b) {
    const unsigned t = __shfl_up_sync(0xffffffffu, (unsigned)b, 1);
    return my_lane >= 1 ? (int)((unsigned)b - t) : b;
}

#include "cp_async_emu.h"  // the arena, __cvta_generic_to_shared, cp.async

// ------------------------------------------------------------ the warp

static int emu_warp;  // the warp of its block the lanes play
// Runs f(lane) on 32 threads, the warp's lanes.
template <typename F> static void run_warp(F f) {
    std::vector<std::thread> th;
    for (int l = 0; l < 32; l++)
        th.emplace_back([&f, l] {
            my_lane = l;
            threadIdx = uint3{32u * emu_warp + l, 0, 0};
            f(l);
        });
    for (auto &t : th) t.join();
}

// ------------------------------------------------------------ the runner's common part

// Opens the runner's input and output: the files argv[1] and argv[2], or
// stdin and stdout without arguments. Returns 0, or the exit status after a
// message (name: the runner's, for its usage line).
static int open_io(int argc, char **argv, const char *name, FILE *&in, FILE *&out) {
    in = stdin, out = stdout;
    if (argc == 3) {
        in = fopen(argv[1], "rb");
        if (!in) {
            perror(argv[1]);
            return 1;
        }
        out = fopen(argv[2], "wb");
        if (!out) {
            perror(argv[2]);
            return 1;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [in out] (else stdin to stdout)\n", name);
        return 2;
    }
    return 0;
}

// Reads a record's header: nh u32 words (false at the end of the input),
// then the 3 f64 d (inv, step, eb); exits on a truncated header.
static bool read_header(FILE *f, unsigned *h, size_t nh, double *d) {
    if (fread(h, 4, nh, f) != nh) return false;
    if (fread(d, 8, 3, f) != 3) {
        fprintf(stderr, "truncated record header\n");
        exit(1);
    }
    return true;
}

// Reads a record's n float32 values into a heap block of exactly n floats,
// 16-byte aligned (shape: the field's, for the message on a short read).
static float *read_values(FILE *f, size_t n, const char *shape) {
    void *p = nullptr;
    if (posix_memalign(&p, 16, n ? 4 * n : 16)) abort();
    float *v = (float *)p;
    if (fread(v, 4, n, f) != n) {
        fprintf(stderr, "truncated field (%s)\n", shape);
        exit(1);
    }
    return v;
}

// The GPU's __double2float_rd: round toward -inf (the walks' ebf, the
// largest float <= eb, is __double2float_rd(eb)).
static inline float __double2float_rd(double d) {
    float f = (float)d;
    if ((double)f > d) f = nextafterf(f, -INFINITY);
    return f;
}

// The buffers a walk writes besides its scratch: the block's whole staging
// array (stage_buf()'s rows, the lanes' warp's in the middle) and the plane
// buffer pw (16 rows of stride words, a 16-byte aligned heap block of
// exactly that size).
struct WalkBufs {
    unsigned char *stage_all;
    size_t stage_all_bytes;
    unsigned *pw;
    int stride;
};

// Makes the lanes play warp emu_warp = Warps / 2 of a block of Warps, with
// rows on both sides: the arena is its row of the staging array, which
// stage_row() (stage_buf()) returns for the warp threadIdx names, of
// row_bytes bytes; and allocates the plane buffer.
template <int Warps, typename F> static WalkBufs walk_bufs(size_t row_bytes, int stride, F stage_row) {
    static_assert(Warps >= 3, "the warp's row needs a guard row on either side");
    emu_warp = Warps / 2;
    threadIdx.x = 32u * emu_warp;
    arena = (unsigned char *)stage_row();
    arena_bytes = row_bytes;
    void *p = nullptr;
    if (posix_memalign(&p, 16, 4 * 16 * (size_t)stride)) abort();
    return WalkBufs{arena - emu_warp * arena_bytes, Warps * arena_bytes, (unsigned *)p, stride};
}

// Before a walk: the whole staging array filled with 0xFF bytes (NaN, a
// hole to the walk), the plane buffer with 0xDEADBEEF.
static void poison(const WalkBufs &B) {
    memset(B.stage_all, 0xFF, B.stage_all_bytes);
    for (int i = 0; i < 16 * B.stride; i++) B.pw[i] = 0xDEADBEEFu;
}

// After a walk (what: "tile %u" and the walk, for the messages): 1 if it
// wrote a byte of another warp's staging row (the first reported), else 0.
static int check_other_rows(const WalkBufs &B, const char *what) {
    for (size_t i = 0; i < B.stage_all_bytes; i++)
        if ((i < emu_warp * arena_bytes || i >= (emu_warp + 1) * arena_bytes) && B.stage_all[i] != 0xFF) {
            fprintf(stderr, "%s: byte %zu of another warp's staging buffer written\n", what, i);
            return 1;
        }
    return 0;
}

// 1 if the walk wrote a pad word (128 to stride - 1) of a plane row (each
// reported), else 0.
static int check_pads(const WalkBufs &B, const char *what) {
    int failed = 0;
    for (int p = 0; p < 16; p++)
        for (int w = 128; w < B.stride; w++)
            if (B.pw[p * B.stride + w] != 0xDEADBEEFu) {
                fprintf(stderr, "%s: pad word %d of plane row %d written\n", what, w, p);
                failed = 1;
            }
    return failed;
}

// 1 if a lane returned with cp.async copies pending (pending[l]: its
// pending_copies(), each reported; late: the landing mode), else 0.
static int check_pending(const int *pending, const char *what, bool late) {
    int failed = 0;
    for (int l = 0; l < 32; l++)
        if (pending[l]) {
            fprintf(stderr, "%s (%s landing): lane %d returned with %d cp.async groups or copies pending\n", what,
                    late ? "late" : "early", l, pending[l]);
            failed = 1;
        }
    return failed;
}

// merr as the f32 bits the runner writes; failed = 1 (after a message) if it
// is not a float.
static unsigned merr_bits(double merr, const char *what, int &failed) {
    const float mf = (float)merr;
    if ((double)mf != merr) {
        fprintf(stderr, "%s: merr %.17g is not a float\n", what, merr);
        failed = 1;
    }
    return __float_as_uint(mf);
}

// Writes the 16 planes x 128 words of a copy of the plane buffer (rows of
// stride words): plane p word w = pw[p * stride + (w ^ ((p >> 2) & 3))].
static void write_planes(FILE *out, const unsigned *pw, int stride) {
    for (int p = 0; p < 16; p++)
        for (int w = 0; w < 128; w++) fwrite(&pw[p * stride + (w ^ ((p >> 2) & 3))], 4, 1, out);
}
