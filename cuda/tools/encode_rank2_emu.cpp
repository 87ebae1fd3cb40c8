// encode_rank2_emu: cuda/encode_rank2.cuh's staged rank-2 walk
// (enc_fast2s) run on the host, so a bug in it is caught without a GPU
// (cuda/encrank2_emu_test.go builds and drives it and checks the results
// against the CPU codec). The header itself is included, not copied; what
// it takes from encode_warp.cuh and fzgpu.cu is defined here with the same
// semantics ("as encode_warp.cuh's"). 32 threads play the warp's lanes;
// shuffles, ballots, votes, reductions and __syncwarp go through a barrier
// (warp_emu.h), so a warp-wide call that not every lane makes deadlocks the
// run instead of passing. Built with AddressSanitizer and UBSan, and with
// -ffp-contract=off: every floating operation is one IEEE operation,
// rounded to nearest, as the GPU build's explicit intrinsics and -fmad=false.
//
// The emulated hardware:
//  - shared memory: the warp's staging buffer (2 * STG_PLANE floats) is a
//    heap block of exactly that size, 16-byte aligned, filled with 0xFF
//    bytes (NaN, a hole to the walk) before each tile, so a value read
//    before its copy landed leaves the tile to the slow path (done = 0);
//  - cp.async: each lane's copies are queued per commit group and land
//    either at issue ("early") or only when cp_async_wait<N> retires their
//    group ("late"): every tile is walked once in each mode and both
//    results must be identical, so a missing wait or a buffer reloaded while
//    still read shows as a difference; a copy must be aligned to its size
//    and lie inside the buffer, and no copy may be pending when the walk
//    returns (it would land in a buffer the next tile uses);
//  - the plane buffer (16 rows of PW_STRIDE words, 16-byte aligned) is
//    filled with 0xDEADBEEF before each tile: the walk must write all 128
//    words of every plane (it zeroes planes 1-14 itself; the coders write
//    planes 0 and 15 of each segment) and leave the pad words 128-131 of
//    every row alone (row 0's hold the parked tile's state on the GPU);
//  - sesc and sraw (128 words each) are zeroed before each tile (the GPU
//    clears them once per warp and the tail after each tile); sq (4096
//    ints) is filled with 0x7F7F7F7F;
//  - every lane's TileSum and return value must agree (they are warp-
//    uniform on the GPU).
//
// Input (stdin, or the file argv[1]): records, each a field:
//   {u32 ny, u32 nx, u32 V (1 or 2), u32 has_fill, u32 fill_bits, f64 inv,
//    f64 step, f64 eb} then ny * nx float32 values, row-major.
// Each full 64 x 64 tile (ty, tx) (base ty * 64 * nx + tx * 64; clipped
// tiles are skipped) is walked by enc_fast2s<V> with ebf = the largest
// float <= eb, as the GPU's __double2float_rd(eb).
// Output (stdout, or the file argv[2]): per full tile, in tile order:
//   u32 tile (ty * gx + tx, gx = ceil(nx / 64)), u32 done (1 or 0), and
//   if done: i32 origin, u32 nesc, u32 nraw, u32 merr (f32 bits), the 16
//   planes x 128 words (plane p word w = pw[p * PW_STRIDE + (w ^ ((p >> 2)
//   & 3))]), the 128 sraw words, the 128 sesc words, then the nesc escape
//   residuals in element order (sq[e] for each set bit e of sesc).
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__

#include "warp_emu.h"

// ------------------------------------------------------------ CUDA types and intrinsics

struct alignas(16) uint4 {  // as CUDA's: a 16-byte store must be 16-byte aligned (UBSan checks)
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// warp_emu.h's __shfl_sync takes unsigned; the walk also shuffles ints
static int __shfl_sync(unsigned m, int v, int src) { return (int)__shfl_sync(m, (unsigned)v, src); }
static unsigned __shfl_xor_sync(unsigned, unsigned v, int m) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    const unsigned r = xch[(my_lane ^ m) & 31];
    bar->arrive_and_wait();
    return r;
}
static unsigned __reduce_or_sync(unsigned, unsigned v) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= xch[i];
    bar->arrive_and_wait();
    return r;
}
static unsigned __reduce_max_sync(unsigned, unsigned v) {
    xch[my_lane] = v;
    bar->arrive_and_wait();
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r = xch[i] > r ? xch[i] : r;
    bar->arrive_and_wait();
    return r;
}
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
static inline float __double2float_rn(double d) { return (float)d; }
static inline float __fsub_rn(float a, float b) { return a - b; }
// (hi:lo) << (s & 31), the high word (PTX shf.l.wrap)
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
    s &= 31;
    return s ? hi << s | lo >> (32 - s) : hi;
}
// PTX prmt, default mode without sign replication (as __byte_perm: only
// the selector nibbles' low 3 bits count)
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned sel) {
    const unsigned long long x = (unsigned long long)b << 32 | a;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(x >> (8 * ((sel >> (4 * i)) & 7)) & 0xFFu) << (8 * i);
    return r;
}

// ------------------------------------------------------------ as fzgpu.cu's

struct Geo {  // only nx is read
    unsigned long long nx;
};
static inline unsigned bitsel(unsigned a, unsigned b, unsigned m) { return (a & m) | (b & ~m); }  // lop3 0xE4
template <int N> void transpose32n(unsigned (&x)[N], int lane) {
    const unsigned F = 0xffffffffu;
    unsigned y[N];
    for (int i = 0; i < N; i++) y[i] = __shfl_xor_sync(F, x[i], 16);
    for (int i = 0; i < N; i++) x[i] = __byte_perm(x[i], y[i], (lane & 16) ? 0x3276u : 0x5410u);
    for (int i = 0; i < N; i++) y[i] = __shfl_xor_sync(F, x[i], 8);
    for (int i = 0; i < N; i++) x[i] = __byte_perm(x[i], y[i], (lane & 8) ? 0x3715u : 0x6240u);
    for (int j = 4; j >= 1; j >>= 1) {
        const unsigned m = j == 4 ? 0x0F0F0F0Fu : j == 2 ? 0x33333333u : 0x55555555u;
        const bool top = (lane & j) == 0;
        for (int i = 0; i < N; i++) y[i] = __shfl_xor_sync(F, x[i], j);
        for (int i = 0; i < N; i++) x[i] = bitsel(x[i], __funnelshift_l(y[i], y[i], top ? j : 32 - j), top ? m : ~m);
    }
}

// ------------------------------------------------------------ as encode_warp.cuh's

#define PW_STRIDE 132
#define STG_ROW 40
#define STG_PLANE (16 * STG_ROW)
constexpr unsigned esc_max(int V) { return V == 2 ? 32766u : 32767u; }
struct TileSum {
    unsigned nesc, nraw, nfill;
    unsigned wide;
    int origin;
    double merr;
};

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
static inline unsigned code16x2(int d0, int d1) {
    const unsigned p = prmt((unsigned)d0, (unsigned)d1, 0x5410), m = prmt(p, p, 0xBB99);
    return ((p ^ m) + (m & 0x00010001u)) | (p & 0x80008000u);
}
static inline int quant_f32(float x, double inv, double step, float &em, bool &hole) {
    const double s = __dmul_rn((double)x, inv);
    hole = !(fabs(s) < 268435456.0);
    const double sr = __dadd_rn(s, 6755399441055744.0);
    const double qd = __dsub_rn(sr, 6755399441055744.0);
    const float rec = __double2float_rn(__dmul_rn(qd, step));
    em = fmaxf(em, fabsf(__fsub_rn(x, rec)));
    return __double2loint(sr);
}

// The shared arena: the warp's staging buffer, nothing else.
static const size_t ARENA_BYTES = 4 * 2 * STG_PLANE;
static unsigned char *arena;
static float *stage_buf() { return (float *)arena; }
static inline size_t __cvta_generic_to_shared(const void *p) {
    const unsigned char *c = (const unsigned char *)p;
    if (c < arena || c >= arena + ARENA_BYTES) {
        fprintf(stderr, "lane %d: __cvta_generic_to_shared of a pointer outside shared memory\n", my_lane);
        abort();
    }
    return (size_t)(c - arena);
}

// cp.async: per lane, the copies of the open group and the committed groups
// not yet retired, oldest first.
struct Copy {
    unsigned sdst;
    const void *src;
    unsigned n;
};
static bool late_landing;  // copies land at cp_async_wait (else at issue)
thread_local std::vector<Copy> open_group;
thread_local std::vector<std::vector<Copy>> groups;
static void land(const Copy &c) { memcpy(arena + c.sdst, c.src, c.n); }
static void cp_async(unsigned sdst, const void *gsrc, unsigned n) {
    if (sdst % n || (uintptr_t)gsrc % n || sdst + n > ARENA_BYTES) {
        fprintf(stderr, "lane %d: cp.async of %u bytes to shared %u from %p: misaligned or outside the buffer\n", my_lane, n,
                sdst, gsrc);
        abort();
    }
    const Copy c{sdst, gsrc, n};
    if (!late_landing) land(c);
    open_group.push_back(c);
}
static void cp_async16(unsigned sdst, const void *gsrc) { cp_async(sdst, gsrc, 16); }
static void cp_async4(unsigned sdst, const void *gsrc) { cp_async(sdst, gsrc, 4); }
static void cp_async_commit() {
    groups.push_back(std::move(open_group));
    open_group.clear();
}
template <int N> void cp_async_wait() {
    while (groups.size() > (size_t)N) {
        if (late_landing)
            for (const Copy &c : groups.front()) land(c);
        groups.erase(groups.begin());
    }
}

#include "../encode_rank2.cuh"

// ------------------------------------------------------------ the runner

struct Field {
    unsigned ny, nx, V, has_fill, fill_bits;
    double inv, step, eb;
    float *v;  // heap block of exactly ny * nx floats, 16-byte aligned
};

static bool read_field(FILE *f, Field &F) {
    unsigned h[5];
    if (fread(h, 4, 5, f) != 5) return false;
    double d[3];
    if (fread(d, 8, 3, f) != 3) {
        fprintf(stderr, "truncated record header\n");
        exit(1);
    }
    F.ny = h[0], F.nx = h[1], F.V = h[2], F.has_fill = h[3], F.fill_bits = h[4];
    F.inv = d[0], F.step = d[1], F.eb = d[2];
    if ((F.V != 1 && F.V != 2) || (unsigned long long)F.ny * F.nx > (1ull << 28)) {
        fprintf(stderr, "bad record: ny %u nx %u V %u\n", F.ny, F.nx, F.V);
        exit(1);
    }
    const size_t n = (size_t)F.ny * F.nx;
    void *p = nullptr;
    if (posix_memalign(&p, 16, n ? 4 * n : 16)) abort();
    F.v = (float *)p;
    if (fread(F.v, 4, n, f) != n) {
        fprintf(stderr, "truncated field (%u x %u)\n", F.ny, F.nx);
        exit(1);
    }
    return true;
}

// One walk of a tile: what the lanes leave.
struct Result {
    bool done;
    TileSum ts;
    std::vector<unsigned> pw, sesc, sraw;
    std::vector<int> sq;
};

int main(int argc, char **argv) {
    FILE *in = stdin, *out = stdout;
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
        fprintf(stderr, "usage: encode_rank2_emu [in out] (else stdin to stdout)\n");
        return 2;
    }
    {
        void *p = nullptr;
        if (posix_memalign(&p, 16, ARENA_BYTES)) abort();
        arena = (unsigned char *)p;
    }
    unsigned *pw = nullptr;
    {
        void *p = nullptr;
        if (posix_memalign(&p, 16, 4 * 16 * PW_STRIDE)) abort();
        pw = (unsigned *)p;
    }
    std::vector<int> sq(4096);
    std::vector<unsigned> sesc(128), sraw(128);
    std::barrier<> b(32);
    bar = &b;
    int failed = 0;
    Field F;
    while (read_field(in, F)) {
        const unsigned gy = F.ny / 64, gx = (F.nx + 63) / 64, fgx = F.nx / 64;
        float ebf = (float)F.eb;
        if ((double)ebf > F.eb) ebf = nextafterf(ebf, -INFINITY);
        const Geo g{F.nx};
        for (unsigned ty = 0; ty < gy; ty++)
            for (unsigned tx = 0; tx < fgx; tx++) {
                const unsigned long long base = (unsigned long long)ty * 64 * F.nx + 64ull * tx;
                Result res[2];
                for (int mode = 0; mode < 2; mode++) {
                    late_landing = mode == 1;
                    memset(arena, 0xFF, ARENA_BYTES);
                    for (int i = 0; i < 16 * PW_STRIDE; i++) pw[i] = 0xDEADBEEFu;
                    std::fill(sq.begin(), sq.end(), 0x7F7F7F7F);
                    std::fill(sesc.begin(), sesc.end(), 0u);
                    std::fill(sraw.begin(), sraw.end(), 0u);
                    bool rets[32];
                    TileSum tss[32];
                    int pending[32];
                    std::vector<std::thread> th;
                    for (int l = 0; l < 32; l++)
                        th.emplace_back([&, l] {
                            my_lane = l;
                            TileSum ts{};
                            const bool r = F.V == 1 ? enc_fast2s<1>(F.v, g, base, F.inv, F.step, ebf, (int)F.has_fill,
                                                                   F.fill_bits, pw, sq.data(), sesc.data(), sraw.data(), l, ts)
                                                    : enc_fast2s<2>(F.v, g, base, F.inv, F.step, ebf, (int)F.has_fill,
                                                                   F.fill_bits, pw, sq.data(), sesc.data(), sraw.data(), l, ts);
                            rets[l] = r;
                            tss[l] = ts;
                            pending[l] = (int)(groups.size() + open_group.size());
                            groups.clear();
                            open_group.clear();
                        });
                    for (auto &t : th) t.join();
                    const unsigned tile = ty * gx + tx;
                    for (int l = 0; l < 32; l++) {
                        if (pending[l]) {
                            fprintf(stderr, "tile %u (%s landing): lane %d returned with %d cp.async groups or copies pending\n",
                                    tile, mode ? "late" : "early", l, pending[l]);
                            failed = 1;
                        }
                        if (rets[l] != rets[0] ||
                            (rets[0] && (tss[l].nesc != tss[0].nesc || tss[l].nraw != tss[0].nraw ||
                                         tss[l].origin != tss[0].origin || memcmp(&tss[l].merr, &tss[0].merr, 8)))) {
                            fprintf(stderr, "tile %u: lane %d's result differs from lane 0's (not warp-uniform)\n", tile, l);
                            failed = 1;
                        }
                    }
                    if (rets[0])
                        for (int p = 0; p < 16; p++)
                            for (int w = 128; w < PW_STRIDE; w++)
                                if (pw[p * PW_STRIDE + w] != 0xDEADBEEFu) {
                                    fprintf(stderr, "tile %u: pad word %d of plane row %d written\n", tile, w, p);
                                    failed = 1;
                                }
                    Result &R = res[mode];
                    R.done = rets[0];
                    R.ts = tss[0];
                    R.pw.assign(pw, pw + 16 * PW_STRIDE);
                    R.sesc = sesc;
                    R.sraw = sraw;
                    R.sq = sq;
                }
                const unsigned tile = ty * gx + tx;
                const Result &R = res[0], &L = res[1];
                bool same = R.done == L.done;
                if (same && R.done) {
                    same = R.ts.nesc == L.ts.nesc && R.ts.nraw == L.ts.nraw && R.ts.origin == L.ts.origin &&
                           !memcmp(&R.ts.merr, &L.ts.merr, 8) && R.pw == L.pw && R.sesc == L.sesc && R.sraw == L.sraw;
                    for (int e = 0; same && e < 4096; e++)
                        if ((R.sesc[e >> 5] >> (e & 31)) & 1) same = R.sq[e] == L.sq[e];
                }
                if (!same) {
                    fprintf(stderr, "tile %u: the walk's result depends on when cp.async copies land (early/late)\n", tile);
                    failed = 1;
                }
                unsigned hdr[2] = {tile, R.done ? 1u : 0u};
                fwrite(hdr, 4, 2, out);
                if (!R.done) continue;
                const float mf = (float)R.ts.merr;
                unsigned rec[4] = {(unsigned)R.ts.origin, R.ts.nesc, R.ts.nraw, __float_as_uint(mf)};
                if ((double)mf != R.ts.merr) {
                    fprintf(stderr, "tile %u: merr %.17g is not a float\n", tile, R.ts.merr);
                    failed = 1;
                }
                fwrite(rec, 4, 4, out);
                for (int p = 0; p < 16; p++)
                    for (int w = 0; w < 128; w++) fwrite(&R.pw[p * PW_STRIDE + (w ^ ((p >> 2) & 3))], 4, 1, out);
                fwrite(R.sraw.data(), 4, 128, out);
                fwrite(R.sesc.data(), 4, 128, out);
                unsigned listed = 0;
                for (int e = 0; e < 4096; e++)
                    if ((R.sesc[e >> 5] >> (e & 31)) & 1) {
                        fwrite(&R.sq[e], 4, 1, out);
                        listed++;
                    }
                if (listed != R.ts.nesc) {
                    fprintf(stderr, "tile %u: nesc %u but %u escape bits\n", tile, R.ts.nesc, listed);
                    failed = 1;
                }
            }
        free(F.v);
    }
    free(arena);
    free(pw);
    if (fclose(out)) return 1;
    return failed;
}
