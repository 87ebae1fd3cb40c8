// What every kernel of fzgpu.cu builds on (included first): the tile
// geometry of a field (Geo: FORMAT.md section 3) and a tile's box and slots,
// the job's parameters and totals, the exact quantize (FORMAT.md section 4:
// q and the check's error without conversions), and warp and block scans.

#define NT 512              // threads per tile block
#define KPT (4096 / NT)     // elements per thread
#define NWARPS (NT / 32)
#define TILE 4096
// #pragma unroll with a macro's value (FZ_UNROLL(N_MACRO)): the argument is
// expanded before it is stringized
#define FZ_PRAGMA(x) _Pragma(#x)
#define FZ_UNROLL(n) FZ_PRAGMA(unroll n)
#define STAGE_WORDS 4096    // decode: tiles up to 16 KiB are staged in shared memory
// The range pass runs one full wave of 256-thread blocks (fzgpu_ctx's
// range_blocks: SMs x resident blocks, 1056 on an H200), at most this many.
// 1024 blocks left 8 SMs a block short: 4.22 vs 4.39 TB/s on an H200
// (cuda/tools/rangeprobe.cu).
#define RANGE_BLOCKS_MAX 4096

// Programmatic dependent launch (sm_90): a kernel launched with
// launch_dependent() may be scheduled while the kernel before it in the
// stream drains; it must call grid_wait() before it reads anything that
// kernel wrote (its blocks then wait for that grid to complete and flush).
// Elsewhere, and for a normal launch, both are no-ops.
__device__ __forceinline__ void grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static_assert(NWARPS == 16, "one warp per bit plane");

struct Geo {
    unsigned long long nz, ny, nx, gz, gy, gx, tiles;
    int tz, ty, tx, bz, by, bx;
    unsigned long long per_chunk;
    // Fast path for full 8x16x32 tiles (the rank-3 shape): thread tid owns
    // the column (y, x) = (tid / 32, tid % 32) through z = k = 0..7, so a
    // warp holds one row. Slots and field offsets split into a z part
    // (these tables) and a (y, x) part (emeta/eoff of element tid).
    int fast;
    // Shapes with a warp encoder fast path (encode_warp.cuh): FORMAT.md's
    // rank-1, -2 and -3 tile and sub-block shapes.
    int fast1, fast2, fast3;
    unsigned skoff[KPT];           // slot of element (k, 0, 0)
    unsigned long long koff[KPT];  // field offset of element (k, 0, 0): k*ny*nx
    // n / d = umul64hi(n, m) for 32-bit n and 2 <= d < 2^32, m = 2^64 / d
    // rounded down, plus 1 (n d < 2^64 keeps the error below 1 / d); m = 0
    // for d = 1 or d >= 2^32. For gx, gy and per_chunk: the warp encoder
    // divides a ticket by them on every tile (a 32-bit division is ~20
    // dependent instructions on its path: PERF.md v13).
    unsigned long long mgx, mgy, mpc;
    // Flat tiles (FORMAT.md 3.1): the job is described to the kernels as a
    // rank-1 field of nz*ny*nx values (tiles 1x1x4096, slot = element), and
    // the residuals take the field's 3-D neighbours: fnx = nx, fP = ny * nx
    // (< 2^24, make_geo), their magic multipliers (div_m), flat = 1.
    int flat;
    unsigned fnx, fP;
    unsigned long long mfnx, mfP;
    // Padded box tiles (FORMAT.md 3.2, f32 rank 3 only: make_geo): a
    // clipped tile is coded as the full tile of the field extended past its
    // far edges by repeating the nearest value inside, so the full-tile
    // walks take every tile, their loads clamped to the field (pad_off) and
    // the decoders' stores kept to the box.
    int padded;
};

// A tile's extent inside the field (tile_box's lz, ly, lx).
struct Box3 {
    int lz, ly, lx;
};

// Field offset of element (z, y, x) of the tile at (z0, y0, x0) of a
// padded field: the nearest value inside (FORMAT.md 3.2), for a tile
// coded as full whatever its box.
__device__ __forceinline__ unsigned long long pad_off(const Geo &g, unsigned long long z0, unsigned long long y0,
                                                      unsigned long long x0, int z, int y, int x) {
    const unsigned long long zz = min(z0 + z, g.nz - 1), yy = min(y0 + y, g.ny - 1), xx = min(x0 + x, g.nx - 1);
    return (zz * g.ny + yy) * g.nx + xx;
}

// n / d for n < 2^32 (every caller's contract) by the magic m of Geo.
// m = 0: d is 1 (a rank-1 or -2 field's gy, gz), or d >= 2^32 > n, so the
// quotient is n or 0 and no 64-bit division (a subroutine call, cold code
// in every tile loop: PERF.md item 3) is compiled in.
__device__ __forceinline__ unsigned long long div_m(unsigned long long n, unsigned long long d, unsigned long long m) {
    return m ? __umul64hi(n, m) : d == 1 ? n : 0ull;
}

struct DevParams {
    double eb, step, inv, lo, hi;
    unsigned int have;
};

// The job's running totals, folded by tables_kernel's blocks.
struct JobAcc {
    unsigned long long outliers;  // sum of the tiles' raw counts
    unsigned long long err_bits;  // max of the tiles' max errors: each is +0 or more (an |x - x'|), so the bits order as the values
    unsigned blocks_done;
};

// 64-bit look-back status: bits 62-63 flag (1 aggregate, 2 inclusive prefix), rest value.
#define ST_AGG (1ull << 62)
#define ST_INC (2ull << 62)
#define ST_VAL ((1ull << 62) - 1)

// T32: the caller runs only for fields below 2^32 tiles (the fill fields'
// optimistic kernel: fzgpu.cu), so the 64-bit branch is not compiled in
// (v41: levitus 1.05x, coads 1.02-1.05x; the smooth kernels without it
// measured 0.98x, so they keep it).
template <bool T32 = false>
__device__ __forceinline__ void tile_box(const Geo &g, unsigned long long t, unsigned long long &z0,
                                         unsigned long long &y0, unsigned long long &x0, int &lz, int &ly,
                                         int &lx) {
    unsigned long long ix, iy, iz;
    if (T32 || g.tiles <= 0xFFFFFFFFull) {
        // 32-bit quotients by Geo's magic multipliers (a 64-bit division is
        // a subroutine); every field below 2^32 tiles (16 PiB of f32) takes
        // this branch
        const unsigned tt = (unsigned)t, gx = (unsigned)g.gx, gy = (unsigned)g.gy;
        const unsigned r = (unsigned)div_m(tt, gx, g.mgx), r2 = (unsigned)div_m(r, gy, g.mgy);
        ix = tt - r * gx;
        iy = r - r2 * gy;
        iz = r2;
    } else {
        // two 64-bit divisions (each a subroutine call) rather than four:
        // this branch sits cold in every kernel's tile loop (TestTileBoxEmulated)
        const unsigned long long q = t / g.gx;
        iz = q / g.gy;
        ix = t - q * g.gx;
        iy = q - iz * g.gy;
    }
    z0 = iz * g.tz;
    y0 = iy * g.ty;
    x0 = ix * g.tx;
    lz = (int)min((unsigned long long)g.tz, g.nz - z0);
    ly = (int)min((unsigned long long)g.ty, g.ny - y0);
    lx = (int)min((unsigned long long)g.tx, g.nx - x0);
}

// Slot of element (z, y, x): docs/FORMAT.md section 3.
__device__ __forceinline__ int slot_of(int z, int y, int x, int lz, int ly, int lx, const Geo &g) {
    int i = z / g.bz, dz = z - i * g.bz, ez = min(g.bz, lz - i * g.bz);
    int j = y / g.by, dy = y - j * g.by, ey = min(g.by, ly - j * g.by);
    int k = x / g.bx, dx = x - k * g.bx, ex = min(g.bx, lx - k * g.bx);
    return i * g.bz * ly * lx + ez * j * g.by * lx + ez * ey * k * g.bx + (dz * ey + dy) * ex + dx;
}

#include "quantize.cuh"  // the exact quantize: Bits, quant_q (also compiled on the host by tools/encode_slow_emu.cpp)

// ---------------------------------------------------------------- block scans

// Inclusive prefix sum over lanes 0..N-1 of the warp (N = 16 or 32; lanes
// past N add what lies N below them, which callers ignore).
template <int N> __device__ __forceinline__ unsigned warp_incl_scan(unsigned x, int lane) {
#pragma unroll
    for (int o = 1; o < N; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

// Exclusive prefix sum over the block; returns the total in *total.
__device__ __forceinline__ unsigned block_excl_scan(unsigned v, unsigned *total, unsigned *sh /*NWARPS+1*/) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const unsigned x = warp_incl_scan<32>(v, lane);
    if (lane == 31) sh[w] = x;
    __syncthreads();
    if (w == 0) {
        const unsigned s = lane < NWARPS ? sh[lane] : 0, t = warp_incl_scan<32>(s, lane);
        if (lane < NWARPS) sh[lane] = t - s;
        if (lane == NWARPS - 1) sh[NWARPS] = t;
    }
    __syncthreads();
    unsigned r = sh[w] + x - v;
    *total = sh[NWARPS];
    __syncthreads();
    return r;
}

// Segmented inclusive scan of (flag, value) pairs: a set flag starts a segment.
// Returns the exclusive carry into this thread (0 if the block's first).
__device__ __forceinline__ int block_seg_carry(int flag, int v, int *shv, int *shf) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int f = flag, x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int yf = __shfl_up_sync(0xffffffffu, f, o);
        int yx = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) {
            if (!f) x = (int)((unsigned)x + (unsigned)yx);
            f |= yf;
        }
    }
    // x, f: inclusive within warp
    if (lane == 31) {
        shv[w] = x;
        shf[w] = f;
    }
    __syncthreads();
    if (w == 0) {
        int sf = lane < NWARPS ? shf[lane] : 0, sx = lane < NWARPS ? shv[lane] : 0;
        int tf = sf, tx = sx;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int yf = __shfl_up_sync(0xffffffffu, tf, o);
            int yx = __shfl_up_sync(0xffffffffu, tx, o);
            if (lane >= o) {
                if (!tf) tx = (int)((unsigned)tx + (unsigned)yx);
                tf |= yf;
            }
        }
        // exclusive carry into warp `lane` = inclusive of warp lane-1
        int ex = __shfl_up_sync(0xffffffffu, tx, 1);
        if (lane < NWARPS) shv[lane + 32] = lane == 0 ? 0 : ex;
    }
    __syncthreads();
    // exclusive carry into this thread: inclusive of previous lane, combined
    // with the warp's carry when no segment start lies between.
    int px = __shfl_up_sync(0xffffffffu, x, 1), pf = __shfl_up_sync(0xffffffffu, f, 1);
    int carry;
    if (lane == 0) {
        carry = shv[w + 32];
    } else {
        carry = pf ? px : (int)((unsigned)px + (unsigned)shv[w + 32]);
    }
    __syncthreads();
    return carry;
}
