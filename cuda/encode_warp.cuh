// Encoder v6/v9/v11-v15: one warp per tile, persistent (included by fzgpu.cu).
//
// Why a warp and not a block: the v1-v5 block encoder spent most of its time
// waiting (≈ 9 block barriers per tile, serial thread-0 sections, look-back
// with 15 warps parked). A warp needs no barriers (__syncwarp only), keeps
// the Lorenzo neighbours in registers instead of shared memory, and each SM
// holds 16-24 independent tiles in flight to hide latency.
//
// Per tile:
//   fast path (full tiles of the rank-1, -2 or -3 shapes of FORMAT.md, no
//     fill, NaN, Inf or |s| >= 2^28): v6 walks the tile in slot order, 32
//     slots (one u32 word of each bit plane) per step, lane l = bit l of the
//     word. Quantize + exact check, Lorenzo with neighbours from shuffles and
//     carried registers, codes, and a 32x32 bit transpose per two words
//     straight into the tile's bit planes in shared memory (8.4 KiB per
//     warp). Escapes and check-failed raw values (rare; they keep q) go to
//     per-warp scratch in element order. v9 (f32 rank 3, enc_fast3) stages
//     each z-plane with cp.async and gives each lane a column instead; v11
//     codes its z-planes with small residuals in 2-, 4- or 8-bit fields;
//     v15 lists its raw values' bits as it finds them, and the raw mask of
//     its tiles is built by rows (raw_mask_rows3). v22: f32 rank-2 tiles
//     take a walk of the same structure (encode_rank2.cuh), and full f32
//     rank-3 tiles with fill values the v9 walk after a placeholder pass
//     (FILLP) instead of the slow path.
//   slow path (anything else: clipped tiles, other shapes, values without
//     q): the generic algorithm, four elements per lane per round, through
//     per-warp scratch in global memory (L1-resident). It must stay fast:
//     a slow tile holds up the look-back of every later tile.
//   tail (both): zero-block masks, layout, the tile's size published, then
//     its output offset and the writes. Container version 2 (the kernels
//     instantiated with V = 2): the same walks with version 2's escape
//     threshold, then encode_v2.cuh's layout and write of the group-rate
//     code section; version 1's kernels hold none of that code. The offset comes from a decoupled
//     look-back, or (v12, the f32 rank-3 kernel) from the scanner: one warp
//     turns published sizes into prefixes in tile order while each tile
//     warp parks its tile's bytes in scratch, walks its next tile, and only
//     then reads the parked tile's prefix and copies the bytes out.
// Tiles are taken in ticket order, so every tile a warp looks back at
// belongs to a warp already running: the look-back always finishes. A warp
// never waits for a prefix while it holds a tile whose size is not yet
// published, so the scanner always reaches the tile waited for. A warp
// takes its next ticket only once its tile is written or parked and its
// parked tile's wait is over (the atomic is read at the end of the tail):
// taken earlier (to prefetch), tickets stop starting in order and waits
// chain (v9, v13, v14).
// Numbers and the versions tried: cuda/PERF.md.

#ifndef ENC_W
#define ENC_W 8                 // warps per block
#endif
#ifndef ENC_MINB_W
// Blocks per SM the register budget is cut for, per walk. Rank 3 needs
// ~115 registers: with 2 (128 registers, 16 warps/SM) it does not spill;
// with 3 (80 registers, 24 warps) it spills 200-300 bytes. The rank-1/2
// walks and the generic path prefer more warps. Measured on an H200, 1 GiB,
// rel 1e-2, 3 vs 2: smooth3d 597 vs 627 GB/s, hst (rank 2) 589 vs 507,
// hyg (rank 1) 863 vs 800.
// The staged walks (f32 rank 3 and, since v22, rank 2) hold 5 KiB of
// staging per warp besides the plane buffer: two blocks fit an SM anyway.
#define ENC_MINB_W(fast, tsize) ((fast) == 3 || ((fast) == 2 && (tsize) == 4) ? 2 : 3)
#endif
// The f32 rank-3 kernels are kept small: the less code, the fewer
// instruction-fetch stalls (PERF.md v19, -10 % on the smooth field): one
// kernel without fill and one with (has_fill known at compile time: one
// copy of the walk each); for fields of full tiles without fill, the
// optimistic kernels first (encode_warp_kernel, HF 3 and 4); the 16-bit
// coder's two word pairs in a loop (one copy).
// A walked tile of 16 planes (2 + 16 * 129 words), the raw mask and count
// (130) and its listed raw values fits the park (3072 words) up to 876:
// the no-fill kernels' walk leaves a tile with more to the slow path, so
// that every walked tile parks.
#define HOT_RV_MAX 876
static_assert(4 * (2 + 16 * 129 + 130 + HOT_RV_MAX) <= 12288, "a walked tile must fit the park (SC_PARK_BYTES)");
// Container version 2's code section is up to 2081 words (block mask, 32
// rate words, 1920 of magnitude units, 128 of signs), 17 more than version
// 1's 16 planes: its hot walks leave tiles with more than 859 raw values.
#define HOT_RV_MAX_V2 859
static_assert(4 * (2 + 2081 + 130 + HOT_RV_MAX_V2) <= 12288, "a walked v2 tile must fit the park (SC_PARK_BYTES)");
// The largest residual magnitude a code carries in container version V:
// |d| above it is an escape (version 1: |d| >= 32768, code 0x8000; version
// 2: |d| >= 32767, magnitude 32767). The walks code escapes as 0x8000 in
// both; encode_v2.cuh turns them into version 2's at the write.
__host__ __device__ constexpr unsigned esc_max(int V) { return V == 2 ? 32766u : 32767u; }
// Each tile the v9 walk does not stage is prefetched into L2 at its start.
// Measured (v6, smooth3d 1 GiB, 1e-2): 594 / 597 GB/s without / with.
// Taking the next ticket early (to prefetch it, or to stage its first plane
// during the tail) costs more than it hides: 420 (v6) and 897 vs 1087 (v9),
// since tickets then no longer start in order and look-backs wait longer.
// (Prefetching the staged tiles too was no faster, v9.)

#define PW_STRIDE 132           // words per plane row in shared memory (LDS.128-aligned)
#define PW_WORDS (16 * PW_STRIDE)
#define ENC_SMEM (ENC_W * PW_WORDS * 4)
// Per-warp scratch in global memory (bytes).
#define SC_Q 0          // int32 q, then residuals, in element order (16 KiB)
#define SC_CODE 16384   // u16 codes in slot order (8 KiB)
#define SC_FL 24576     // u8 element flags: 1 has q, 2 fill, 4 raw, 8 escape (4 KiB)
#define SC_ESC 28672    // u32[128] element-order escape bits
#define SC_RAW 29184    // u32[128] element-order raw bits
#define SC_MF 29696     // u32[128] fill mask, slot order
#define SC_MR 30208     // u32[128] raw mask, slot order
// A finished tile's bytes while it waits for its offset (the scanner). Its own
// space: sharing the slow path's (v10b) made a tile wait for the offset of
// the parked one before each slow walk, 3-5x slower on fields with fill.
#define SC_PARK 30720
#define SC_PARK_BYTES 12288
// The staged rank-3 walk of tiles with fill values: its element-order fill
// bitmap (u32[128], word z * 16 + y, bit x), turned into the fill mask after
// the walk (v22).
#define SC_FE 43008
#define SC_BYTES 43520
// The v9 walk's raw values (u32 bits, in element order) as it finds them,
// in the slow path's code and flag space, which the walk does not use: up
// to SC_RV_MAX; a tile with more takes them from the field at its write
// (a region of its own, 16 KiB a warp more, measured the same).
#define SC_RV SC_CODE
#ifndef SC_RV_MAX
#define SC_RV_MAX 3072          // a test build sets it low, to run the tiles with more through their fallback
#endif

struct TileSum {
    unsigned nesc, nraw, nfill;
    unsigned wide;  // the narrow-only walk gave the tile up for a z-plane of 16-bit codes
    int origin;
    double merr;
};

// Quantize + check of one value (FORMAT.md section 4), branch-free.
// Returns true for a hole (fill, |s| >= 2^28, NaN, Inf: no q; only the
// slow path handles those). raw: q is valid but the check failed, so the
// value is stored raw and keeps its q (FORMAT.md 4.3): the fast paths
// handle that, since with step = 2 eb it happens to about ulp(x)/eb of
// all values (one or more per tile at tight bounds).
template <typename T>
__device__ __forceinline__ bool quant1(T v, double inv, double step, double eb, int has_fill,
                                       unsigned long long fill_bits, int &q, double &er, bool &raw) {
    const double X = (double)v;
    const double s = __dmul_rn(X, inv);
    q = quant_q<T>(v, s, step, er);
    bool hole = !(fabs(s) < 268435456.0);
    if (has_fill) hole = hole || Bits<T>::of(v) == fill_bits;
    raw = !(er <= eb);
    return hole;
}

// The 16-bit code of a residual; sets esc for |d| > esc_max(V).
template <int V>
__device__ __forceinline__ unsigned code_of(int d, bool &esc) {
    const int sg = d >> 31;
    const unsigned mag = (unsigned)((d ^ sg) - sg);
    esc = mag > esc_max(V);
    return esc ? 0x8000u : (mag | ((unsigned)sg & 0x8000u));
}

// Stores a transposed pair of words: lanes 0-15 hold plane (lane) of word
// w0, lanes 16-31 plane (lane-16) of word w1.
// Plane p's words sit XOR (p / 4) % 4 inside their 16-byte block: with
// the row stride of 132 words alone, the 32 lanes of one store hit 8 banks
// 4 times over (word pairs w, w + 16) or 2 times (w, w + 1); with the XOR
// all 32 hit distinct banks. Blocks stay whole for the 16-byte reads.
__device__ __forceinline__ void put_planes(unsigned *pw, unsigned t, int w0, int w1, int lane) {
    pw[(lane & 15) * PW_STRIDE + ((lane < 16 ? w0 : w1) ^ ((lane >> 2) & 3))] = t;
}
// Block `lane` of plane p in word order.
__device__ __forceinline__ uint4 pw_block(const unsigned *pw, int p, int lane) {
    uint4 b = *(const uint4 *)&pw[p * PW_STRIDE + 4 * lane];
    const int f = (p >> 2) & 3;
    if (f & 1) b = make_uint4(b.y, b.x, b.w, b.z);
    if (f & 2) b = make_uint4(b.z, b.w, b.x, b.y);
    return b;
}

// Records the escapes and raw values of one step (rare): an escape's
// residual into scratch q and its bit into the element-order escape
// bitmap; a raw value's bit into the element-order raw bitmap.
__device__ __forceinline__ void note_rare(bool esc, bool raw, int d, int e, int *sq, unsigned *sesc,
                                          unsigned *sraw) {
    if (esc) {
        sq[e] = d;
        atomicOr(&sesc[e >> 5], 1u << (e & 31));
    }
    if (raw) atomicOr(&sraw[e >> 5], 1u << (e & 31));
}

// What the three fast walks share per value: the quantize bookkeeping,
// the code (element 0's is 0 and its q the tile's origin) and the rare
// escapes and raw values, plus the tile's totals.
template <typename T, int V>
struct FastWalk {
    double inv, step, eb;
    int has_fill;
    unsigned long long fill_bits;
    int *sq;
    unsigned *sesc, *sraw;
    int lane;
    double merr = 0;
    unsigned nesc = 0, nraw = 0;
    int origin = 0;
    bool bad = false;  // a value without q: the tile goes to the slow path

    __device__ __forceinline__ int quant(T v, bool &raw) {
        int q;
        double er;
        bad |= quant1<T>(v, inv, step, eb, has_fill, fill_bits, q, er, raw);
        merr = !raw && er > merr ? er : merr;
        return q;
    }
    // e: the lane's element; first: this step holds element 0 (lane 0).
    __device__ __forceinline__ unsigned code(int d, int q, bool raw, bool first, int e) {
        bool esc;
        unsigned c = code_of<V>(d, esc);
        if (first) {
            origin = __shfl_sync(0xffffffffu, q, 0);
            if (lane == 0) {
                c = 0;
                esc = false;
            }
        }
        if (__any_sync(0xffffffffu, esc || raw)) {
            nesc += __popc(__ballot_sync(0xffffffffu, esc));
            nraw += __popc(__ballot_sync(0xffffffffu, raw));
            note_rare(esc, raw, d, e, sq, sesc, sraw);
        }
        return c;
    }
    // false (and a reset) if a hole showed up since the last call
    __device__ __forceinline__ bool clean() {
        const bool b = __any_sync(0xffffffffu, bad);
        bad = false;
        return !b;
    }
    __device__ __forceinline__ void done(TileSum &ts) const {
        ts.nesc = nesc;
        ts.nraw = nraw;
        ts.origin = origin;
        ts.merr = merr;
    }
};

// Asks L2 for every line of a tile before the walk reads it. The walks
// read a few rows per step and use them at once, so without this each step
// waits for DRAM; with it most steps hit L2. Costs no registers.
template <typename T>
__device__ __forceinline__ void prefetch_tile(const T *src, const Geo &g, unsigned long long base, int lz, int ly,
                                              int lx, int lane) {
    const unsigned long long plane = g.ny * g.nx;
    const unsigned bytes = (unsigned)(lx * sizeof(T));
    for (int r = lane; r < lz * ly; r += 32) {
        const int z = r / ly, y = r - z * ly;
        const char *row = (const char *)(src + base + z * plane + (unsigned long long)y * g.nx);
        for (unsigned off = 0; off < bytes; off += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + off));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + bytes - 1));
    }
}

// ---- fast paths. Each returns false (and leaves partial state that the
// slow path overwrites) as soon as a hole shows up.

// Rank 3 (v9, f32): lane = x. Each z-plane (16 rows of 32 values, 2 KiB)
// is staged in shared memory by cp.async one plane ahead, so no registers
// wait for DRAM. Lane x reads its column, quantizes it, takes Dy in
// registers, Dz against a carried register per y and Dx by one shuffle,
// and writes the residual d over its own value. Lane (dy, dx) of word pair
// (j, k) then reads slot (dy, dx) of both words, codes them and runs one
// 32x32 transpose, as in v6. Rows are padded to 40 words, so the copies,
// the column reads and the slot reads all hit 32 banks with addresses that
// are one register plus an immediate. One copy of the code serves both
// buffers, the buffer offset a register (coding since v11, quantize since
// v13: the copy per buffer cost instruction fetch). Escapes and raw values
// are found once per plane (the extremes of d, a raw bitmask per lane) and
// recorded by ballots; escapes are rewritten as d = -32768 (code 0x8000)
// before the plane is coded.
// v6 (enc_fast3_v6, still used for f64, whose staging would not fit two
// blocks per SM) walks the tile in slot order with two shuffles and a vote
// per value and loads 32-byte row pieces into registers.
#define STG_ROW 40              // words per staged row (32 values + 8 of padding: banks)
#define STG_PLANE (16 * STG_ROW)

__device__ __forceinline__ void cp_async16(unsigned sdst, const void *gsrc) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sdst), "l"(gsrc));
}
__device__ __forceinline__ void cp_async4(unsigned sdst, const void *gsrc) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sdst), "l"(gsrc));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// b - b(lane - 1); lane 0 keeps b. The shuffle's own in-range predicate
// guards the subtraction: one instruction less than a select on the lane.
__device__ __forceinline__ int sub_left(int b) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
        "shfl.sync.up.b32 t|p, %0, 1, 0, 0xffffffff;\n\t"
        "@p sub.s32 %0, %0, t;\n\t}"
        : "+r"(b));
    return b;
}

// Bytes of a and b by a prmt selector whose nibbles may ask for sign
// replication (bit 3), which __byte_perm does not promise.
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
    unsigned r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

// Sign-magnitude codes (FORMAT.md section 4) of two residuals with
// |d| <= 32767, or d = -32768 for an escape (code 0x8000): per 16-bit half
// h of the packed pair, (h ^ m) + (m & 1) = |h| where m replicates h's
// sign (no carry leaves a half), and the sign goes back on top.
__device__ __forceinline__ unsigned code16x2(int d0, int d1) {
    const unsigned p = prmt((unsigned)d0, (unsigned)d1, 0x5410), m = prmt(p, p, 0xBB99);
    return ((p ^ m) + (m & 0x00010001u)) | (p & 0x80008000u);
}

// Quantize + check of one f32 value (FORMAT.md section 4) for the v9 walk.
// s, q and x' as in quant_q, but the check's difference is taken in f32:
// x - x' is exact there (for |q| >= 2, x and x' are within a factor of 2
// (Sterbenz); for q = 0, x' = 0; for |q| = 1 no float x lies below x'/2
// while s >= 0.5), so e = |x - x'| equals the f64 difference and
// e <= eb holds exactly when e <= ebf, the largest float <= eb. That saves
// a conversion, a double subtraction and the double max per value.
// Returns q; sets hole for values without q (|s| >= 2^28, NaN, Inf) and
// folds the check's |e| into em, a float max: per value one subtraction and
// one max (the raw test, e > ebf, and the largest e of the values that are
// not raw are taken from em once per z-plane; v14 kept both per value, with
// integer operations on the bits of e, 2 instructions more per value:
// PERF.md v15). No NaN reaches em: the walk leaves on a hole first.
__device__ __forceinline__ int quant_f32(float x, double inv, double step, float &em, bool &hole) {
    const double s = __dmul_rn((double)x, inv);
    hole = !(fabs(s) < 268435456.0);
    const double sr = __dadd_rn(s, 6755399441055744.0);
    const double qd = __dsub_rn(sr, 6755399441055744.0);
    const float rec = __double2float_rn(__dmul_rn(qd, step));
    em = fmaxf(em, fabsf(__fsub_rn(x, rec)));
    return __double2loint(sr);
}

// The warp's two plane buffers (5 KiB): one array for both instantiations.
__device__ __forceinline__ float *stage_buf() {
    __shared__ __align__(16) float stage3[ENC_W][2 * STG_PLANE];
    return stage3[threadIdx.x >> 5];
}

// Copies the planes of one full rank-3 f32 tile into the warp's buffers.
// 16-byte copies when every row starts on a 16-byte boundary: lane l
// copies piece l % 8 of rows l / 8 + 4u (u = 0..3); else 4-byte copies,
// lane l column l of every row. Each plane advances one pointer.
struct Stager {
    const float *gz;
    unsigned long long rstep, plane;
    unsigned scp;
    bool al16;
    __device__ __forceinline__ Stager(const float *src, const Geo &g, unsigned long long base, float *stg, int lane) {
        const unsigned long long nx = g.nx;
        plane = g.ny * g.nx;
        al16 = (nx & 3) == 0 && (((unsigned long long)(src + base)) & 15) == 0;
        gz = src + base + (al16 ? (unsigned long long)(lane >> 3) * nx + 4 * (lane & 7) : lane);
        rstep = al16 ? 4 * nx : nx;
        scp = (unsigned)__cvta_generic_to_shared(stg) + 4u * (al16 ? STG_ROW * (lane >> 3) + 4 * (lane & 7) : lane);
    }
    // The bits of value (z, y, lane) of the tile from global memory (rare:
    // raw values), after plane z's residuals replaced it in the buffer;
    // planes up to min(z + 1, 7) have been loaded.
    __device__ __forceinline__ unsigned bits(int z, int y, int lane) const {
        const unsigned long long nx = al16 ? rstep >> 2 : rstep;
        const unsigned long long lo = al16 ? (unsigned long long)(lane >> 3) * nx + 4 * (lane & 7) : lane;
        const float *p = gz - (z < 7 ? 2 : 1) * plane - lo + y * nx + lane;
        return __float_as_uint(*p);
    }
    // the next plane into buffer b (one commit group)
    __device__ __forceinline__ void load(int b) {
        const float *p = gz;
        gz += plane;
        const unsigned d = scp + 4u * STG_PLANE * b;
        if (al16) {
#pragma unroll
            for (int u = 0; u < 4; u++) {
                cp_async16(d + 16u * STG_ROW * u, p);
                p += rstep;
            }
        } else {
#pragma unroll
            for (int y = 0; y < 16; y++) {
                cp_async4(d + 4u * STG_ROW * y, p);
                p += rstep;
            }
        }
        cp_async_commit();
    }
};

// Codes of one z-plane whose residuals all have |d| < 2^(W-1), W = 2, 4
// or 8 bits each (most planes at loose bounds: on the smooth field at
// 1e-2, |d| <= 1 in 83 % of them): the sign-magnitude code then has its
// magnitude in planes 0..W-2 and its sign in plane 15, and planes W-1..14
// are zero. Packing W-bit codes, 32 / W to a register, needs W / 2
// transposes instead of 8 (the 16-bit path), and writes W of the 16
// planes; the tile's walk zeroes the others once.
// Word n = 4j + k of the z-plane (rows 4j + dy, columns 8k + dx) is field
// n % (32 / W) of register n / (32 / W); after the transpose lane b holds
// bit b % W of field b / W, i.e. plane b % W of that word, in every
// register.
template <int W>
__device__ __forceinline__ void put_narrow(const int *sb, unsigned *pw, int z, int lane) {
    constexpr int C = 32 / W, R = W / 2;
    constexpr unsigned FM = (1u << W) - 1, LSB = 0xffffffffu / FM;  // one bit per field
    unsigned x[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        unsigned p;
        if (W == 8) {  // words (r, 0..3): the low bytes of four residuals
            p = __byte_perm(__byte_perm((unsigned)sb[STG_ROW * 4 * r], (unsigned)sb[STG_ROW * 4 * r + 8], 0x0040),
                            __byte_perm((unsigned)sb[STG_ROW * 4 * r + 16], (unsigned)sb[STG_ROW * 4 * r + 24], 0x0040),
                            0x5410);
        } else {
            p = 0;
#pragma unroll
            for (int f = 0; f < C; f++) {
                const int n = r * C + f;
                p |= ((unsigned)sb[STG_ROW * 4 * (n >> 2) + 8 * (n & 3)] & FM) << (W * f);
            }
        }
        if (W > 2) {  // two's complement fields to sign-magnitude (no carry leaves a field)
            const unsigned s = (p >> (W - 1)) & LSB;
            p = ((p ^ (s * FM)) + s) | (p & (LSB << (W - 1)));
        }  // W = 2: d in {-1, 0, 1} is its own code
        x[r] = p;
    }
    transpose32n<R>(x, lane);
    const int b = lane % W, pl = b == W - 1 ? 15 : b;
    unsigned *const o = pw + pl * PW_STRIDE + 4 * (lane / W) + (z >> 2) * 64 + ((z & 3) ^ ((pl >> 2) & 3));
#pragma unroll
    for (int r = 0; r < R; r++) o[4 * C * r] = x[r];
}

// The placeholder of a full rank-3 f32 tile for the FILLP walk (FORMAT.md
// section 4, Holes): trunc(sum of q / count) over the values that are not
// the fill value (int64 sum, truncated toward zero, 0 without any), from a
// pass over the tile before the walk (the walk codes each z-plane as it goes,
// so the placeholder must be known first). Loads through L2 only: the walk
// stages the same lines right after. False if a value other than the fill
// value has no q (NaN, Inf, |s| >= 2^28): the slow path takes the tile.
__device__ __forceinline__ bool fill_placeholder3(const float *__restrict__ src, const Geo &g, unsigned long long base,
                                                  double inv, unsigned fill32, int lane, int &ph) {
    const unsigned long long nx = g.nx, plane = g.ny * g.nx;
    long long sum = 0;
    unsigned cnt = 0;
    bool hole = false;
    // The tile's 128 rows into L2 at once (first and last byte of each: a
    // row may straddle two lines), so that the rounds below wait for L2,
    // not for DRAM, one after another (H200, levitus 1 GiB: +4-5 % against
    // one round at a time from DRAM; coads within 1 %).
    for (int r = lane; r < 128; r += 32) {
        const float *const row = src + base + (r >> 4) * plane + (r & 15) * nx;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + 31));
    }
#pragma unroll 2
    for (int z = 0; z < 8; z++) {
        const float *const p = src + base + z * plane + lane;
        float v[16];
#pragma unroll
        for (int y = 0; y < 16; y++) v[y] = __ldcg(p + y * nx);
#pragma unroll
        for (int y = 0; y < 16; y++) {
            const bool f = __float_as_uint(v[y]) == fill32;
            const double s = __dmul_rn((double)v[y], inv);
            const bool ok = fabs(s) < 268435456.0;
            hole |= !f && !ok;
            const int q = __double2loint(__dadd_rn(s, 6755399441055744.0));  // as quant_f32
            const bool has = !f && ok;
            sum += has ? q : 0;
            cnt += has;
        }
    }
    if (__any_sync(0xffffffffu, hole)) return false;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    cnt = __reduce_add_sync(0xffffffffu, cnt);
    ph = cnt ? (int)(sum / (long long)cnt) : 0;
    return true;
}

// HOT: tiles with an escape or more than HOT_RV_MAX raw values are left to
// the slow path (false), so that a walked tile always parks and has no
// escape list. NO16: also tiles with a z-plane of 16-bit codes (ts.wide
// says so), and no 16-bit coder (the narrow optimistic kernel).
// FILLP (with HF, v22): fill values are not holes; they take the tile's
// placeholder ph (fill_placeholder3), are left out of the check and the
// error, and their bits go to the element-order fill bitmap (SC_FE); the
// caller turns it into the fill mask. Without FILLP a fill value leaves the
// tile to the slow path.
template <bool HF, bool HOT = false, bool NO16 = false, int V = 1, bool FILLP = false>
__device__ __forceinline__ bool enc_fast3(const float *__restrict__ src, const Geo &g, unsigned long long base,
                                          double inv, double step, float ebf, unsigned fill32, unsigned *pw,
                                          int *sq, unsigned *sesc, unsigned *sraw, int lane, TileSum &ts,
                                          int ph = 0) {
    const unsigned F = 0xffffffffu;
    float *stg = stage_buf();
    Stager st(src, g, base, stg, lane);
    const int dy = lane >> 3, dx = lane & 7;
    float *const xcol = stg + lane;                  // value (y, lane): xcol[STG_ROW * y]
    const int *const slot = (const int *)stg + STG_ROW * dy + dx;  // slot (dy, dx) of word pair (j, k)
    // plane p of word w sits at pw[p * PW_STRIDE + (w ^ ((p / 4) % 4))] (put_planes):
    // lanes 0-15 store plane lane of w0, lanes 16-31 plane lane - 16 of w0 + 16
    unsigned *const pwl = pw + (lane & 15) * PW_STRIDE + (lane >> 4) * 16;
    const int pws = (lane >> 2) & 3;
    // Dy q of the previous plane, per y, updated in place. (v9-v12 kept two
    // arrays and a copy of the quantize half per plane parity so that the
    // carry needed no moves; nvcc moved the registers anyway, 16 per plane,
    // and the second copy cost instruction fetch: PERF.md v13.)
    int a[16];
#pragma unroll
    for (int y = 0; y < 16; y++) a[y] = 0;
    float emx = 0.0f;  // the largest |e| of the lane's values that are not raw
    unsigned nraw = 0, nesc = 0, nfill = 0;
    int origin = 0;
    st.load(0);
    // planes 1..14 stay zero where a z-plane's codes are narrow (put_narrow)
#pragma unroll
        for (int p = 1; p < 15; p++) *(uint4 *)&pw[p * PW_STRIDE + 4 * lane] = make_uint4(0, 0, 0, 0);
    // Quantizes plane z (buffer z % 2) and turns it into residuals d in
    // place; mabs: the largest |d|. False for a hole (the tile then takes
    // the slow path).
    auto quant_plane = [&](int z, unsigned &mabs) -> bool {
        const int b = z & 1;
        if (z < 7) {
            st.load(b ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncwarp();
        float *const xb = xcol + b * STG_PLANE;
        // quantize the column first: 16 independent chains the scheduler
        // can interleave; the Lorenzo steps and shuffles after them
        int q[16];
        unsigned rawm = 0;  // bit 15 - y: value y is raw
        unsigned film = 0;  // FILLP: bit 15 - y: value y is the fill value
        bool hole = false;
        float em = 0.0f;
#pragma unroll
        for (int y = 0; y < 16; y++) {
            const float x = xb[STG_ROW * y];
            bool h;
            if (FILLP) {
                const bool f = __float_as_uint(x) == fill32;
                const float e0 = em;
                const int qq = quant_f32(x, inv, step, em, h);
                em = f ? e0 : em;
                q[y] = f ? ph : qq;
                hole |= h && !f;
                film |= (unsigned)f << (15 - y);
            } else {
                q[y] = quant_f32(x, inv, step, em, h);
                hole |= h;
                if (HF) hole |= __float_as_uint(x) == fill32;
            }
        }
        if (__any_sync(F, hole)) {
            cp_async_wait<0>();  // nothing may land in the buffer after the slow path starts
            return false;
        }
        // Rare: a value over the bound (raw). Which ones, and the largest
        // |e| of the others, from a second pass over the column (the
        // residuals have not replaced it yet). Not unrolled: unrolled by 4
        // or 16 it was slower on every field (code layout, PERF.md v15).
        if (__any_sync(F, em > ebf)) {
            em = 0.0f;
#pragma unroll 1
            for (int y = 0; y < 16; y++) {
                float e = 0.0f;
                bool h;
                (void)quant_f32(xb[STG_ROW * y], inv, step, e, h);
                const bool fy = FILLP && ((film >> (15 - y)) & 1u);
                const bool r = e > ebf && !fy;
                rawm |= (unsigned)r << (15 - y);
                em = r || fy ? em : fmaxf(em, e);
            }
        }
        emx = fmaxf(emx, em);
        if (FILLP) {  // the plane's rows of the fill bitmap, every word written
            unsigned *const sfe = sraw + (SC_FE - SC_RAW) / 4;
#pragma unroll
            for (int y = 0; y < 16; y++) {
                const unsigned bf = __ballot_sync(F, (film >> (15 - y)) & 1u);
                if (lane == 0) sfe[z * 16 + y] = bf;
                nfill += __popc(bf);
            }
        }
        int *const db = (int *)xb;
        int dmax = 0, dmin = 0;
#pragma unroll
        for (int y = 0; y < 16; y++) {
            const int A = (int)((unsigned)q[y] - (unsigned)(y ? q[y - 1] : 0));
            const int B = (int)((unsigned)A - (unsigned)a[y]);
            a[y] = A;
            int d = sub_left(B);
            if (y == 0 && z == 0) {
                origin = __shfl_sync(F, d, 0);  // element 0's q: the tile's origin, its code 0
                if (lane == 0) d = 0;
            }
            db[STG_ROW * y] = d;
            dmax = max(dmax, d);
            dmin = min(dmin, d);
        }
        __syncwarp();
        // Rare: raw values (rows with one: a warp OR of the lanes' masks;
        // at 1e-4 about one tile in ten has one, on csm most). The
        // element-order bitmaps' words of this plane are z * 16 + y, bit
        // x; words of rows without any stay 0. Rows in increasing y, so the
        // values' bits, appended to srv for the tile's write, come in
        // element order. They are read back from global memory (L2): taken
        // from the buffer before the residuals overwrite it, the loop had
        // to run before the Lorenzo steps and cost as much (PERF.md v15).
        unsigned *const srv = sraw + (SC_RV - SC_RAW) / 4;  // an offset, not a register
        for (unsigned rows = __reduce_or_sync(F, rawm); rows;) {
            const int bit = 31 - __clz(rows), y = 15 - bit;
            rows ^= 1u << bit;
            const bool r = (rawm >> bit) & 1u;
            const unsigned br = __ballot_sync(F, r);
            if (lane == 0) sraw[z * 16 + y] = br;
            const unsigned i = nraw + __popc(br & ((1u << lane) - 1));
            if (r && i < SC_RV_MAX) srv[i] = st.bits(z, y, lane);
            nraw += __popc(br);
        }
        // the largest |d| of the z-plane picks the code width
        mabs = __reduce_max_sync(F, max((unsigned)dmax, 0u - (unsigned)dmin));
        return true;
    };
    // Codes plane z from buffer z % 2. One copy of this code for both
    // buffers (the offset is a register): with a copy per buffer, the four
    // code widths made the kernel 16 % larger and 1e-4 5 % slower (PERF.md v11).
    auto code_plane = [&](int z, unsigned mabs) {
        int *const db = (int *)xcol + (z & 1) * STG_PLANE;
        // Escapes (rare): record d, then code them as 0x8000 (d = -32768).
        if (!HOT && mabs > esc_max(V)) {
#pragma unroll 1
            for (int y = 0; y < 16; y++) {
                const int d = db[STG_ROW * y];
                const bool esc = (unsigned)abs(d) > esc_max(V);  // element 0 holds 0
                const unsigned be = __ballot_sync(F, esc);
                if (esc) {
                    sq[z * 512 + y * 32 + lane] = d;
                    db[STG_ROW * y] = -32768;
                }
                if (lane == 0) sesc[z * 16 + y] = be;
                nesc += __popc(be);
            }
            __syncwarp();
        }
        const int *const sb = slot + (z & 1) * STG_PLANE;
        if (mabs <= 1u) {
            put_narrow<2>(sb, pw, z, lane);
        } else if (mabs <= 7u) {
            put_narrow<4>(sb, pw, z, lane);
        } else if (NO16 || mabs <= 127u) {
            put_narrow<8>(sb, pw, z, lane);
        } else {
            const int wz = (z >> 2) * 64 + (z & 3);
            unsigned *const pwp = pwl + (wz ^ pws);
            auto pair = [&](int jp) {
                unsigned x[4];
#pragma unroll
                for (int k = 0; k < 4; k++)  // rows 8jp + dy (word j = 2jp) and 8jp + 4 + dy (j = 2jp + 1)
                    x[k] = code16x2(sb[STG_ROW * 8 * jp + 8 * k], sb[STG_ROW * (8 * jp + 4) + 8 * k]);
                transpose32n<4>(x, lane);
#pragma unroll
                for (int k = 0; k < 4; k++) pwp[32 * jp + 4 * k] = x[k];
            };
#pragma unroll 1
            for (int jp = 0; jp < 2; jp++) pair(jp);
        }
        __syncwarp();  // this buffer takes plane z + 2
    };
#pragma unroll 1
    for (int z = 0; z < 8; z++) {
        unsigned mabs;
        if (!quant_plane(z, mabs)) return false;
        if (HOT && mabs > esc_max(V)) {  // an escape: the slow path takes the tile
            cp_async_wait<0>();
            return false;
        }
        if (NO16 && mabs > 127u) {  // 16-bit codes: the kernel with that coder takes the job
            cp_async_wait<0>();
            ts.wide = 1;
            return false;
        }
        code_plane(z, mabs);
    }
    if (HOT && nraw > (V == 2 ? HOT_RV_MAX_V2 : HOT_RV_MAX)) return false;  // it would not fit the park
    ts.nesc = nesc;
    ts.nraw = nraw;
    if (FILLP) ts.nfill = nfill;
    ts.origin = origin;
    // every lane: the tile's largest |e| of the values that are not raw (one
    // warp max over the bits: non-negative floats order as their bits; the
    // caller's fold of ts.merr, 5 double shuffles, is skipped for this walk)
    ts.merr = (double)__uint_as_float(__reduce_max_sync(F, __float_as_uint(emx)));
    return true;
}

// Rank 3: tile 8x16x32, sub-blocks 4x4x8. Word w = 64i + 16j + 4k + a holds
// slots of sub-block (i, j, k) at dz = a: lane l = (dy, dx) = (l/8, l%8),
// element (4i+a, 4j+dy, 8k+dx). Walk: z outer (runtime), k, then j inner
// (unrolled), so the neighbour at x-1 for dx = 0 is the previous k's word
// (carry cx[j]), at y-1 for dy = 0 the previous j's word (carry cy) and at
// z-1 the previous z's word (carry cz[j][k]). d = Dz(Dy(Dx q)).
template <typename T, int V>
__device__ __forceinline__ bool enc_fast3_v6(const T *__restrict__ src, const Geo &g, unsigned long long base,
                                          double inv, double step, double eb, int has_fill,
                                          unsigned long long fill_bits, unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw,
                                          int lane, TileSum &ts) {
    const int dy = lane >> 3, dx = lane & 7;
    const unsigned long long nx = g.nx, nx4 = 4 * g.nx, plane = g.ny * g.nx;
    const T *p0 = src + base + (unsigned long long)dy * nx + dx;
    const int srcx = dx ? lane - 1 : lane + 7, srcy = dy ? lane - 8 : lane + 24;
    int cz[4][4], cx[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        cx[j] = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) cz[j][k] = 0;
    }
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
#pragma unroll 1
    for (int z = 0; z < 8; z++) {
        // rows 4j + dy of this z: k and the lane add immediate offsets
        const T *r0 = p0 + z * plane, *r1 = r0 + nx4, *r2 = r1 + nx4, *r3 = r2 + nx4;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const T v[4] = {__ldcs(r0 + 8 * k), __ldcs(r1 + 8 * k), __ldcs(r2 + 8 * k), __ldcs(r3 + 8 * k)};
            int cy = 0;
            unsigned c[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                bool raw;
                const int q = W.quant(v[j], raw);
                const int gx = __shfl_sync(0xffffffffu, dx == 7 ? cx[j] : q, srcx);
                const int A = (int)((unsigned)q - (unsigned)((k > 0 || dx > 0) ? gx : 0));
                cx[j] = q;
                const int gy = __shfl_sync(0xffffffffu, dy == 3 ? cy : A, srcy);
                const int B = (int)((unsigned)A - (unsigned)((j > 0 || dy > 0) ? gy : 0));
                cy = A;
                const int d = (int)((unsigned)B - (unsigned)cz[j][k]);
                cz[j][k] = B;
                c[j] = W.code(d, q, raw, k == 0 && j == 0 && z == 0, z * 512 + (4 * j + dy) * 32 + 8 * k + dx);
            }
            const int wz = (z >> 2) * 64 + 4 * k + (z & 3);
            put_planes(pw, transpose32(c[0] | c[1] << 16, lane), wz, wz + 16, lane);
            put_planes(pw, transpose32(c[2] | c[3] << 16, lane), wz + 32, wz + 48, lane);
        }
        if (!W.clean()) return false;
    }
    W.done(ts);
    return true;
}

// Rank 1: tile 1x1x4096, sub-blocks of 128: slot = element. Word w holds
// elements 32w..32w+31; d = q - q(x-1), the left neighbour of lane 0 is
// lane 31 of the previous word (carry).
template <typename T, int V>
__device__ __forceinline__ bool enc_fast1(const T *__restrict__ src, unsigned long long base, double inv,
                                          double step, double eb, int has_fill, unsigned long long fill_bits,
                                          unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw, int lane,
                                          TileSum &ts) {
    const T *p0 = src + base + lane;
    const int srcx = lane ? lane - 1 : 31;
    int carry = 0;
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
#pragma unroll 1
    for (int w0 = 0; w0 < 128; w0 += 8) {
        T v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = __ldcs(p0 + 32 * (w0 + u));
        unsigned c[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            bool raw;
            const int q = W.quant(v[u], raw);
            const int gx = __shfl_sync(0xffffffffu, lane == 31 ? carry : q, srcx);
            const int d = (int)((unsigned)q - (unsigned)((w0 + u > 0 || lane > 0) ? gx : 0));
            carry = q;
            c[u] = W.code(d, q, raw, w0 + u == 0, 32 * (w0 + u) + lane);
        }
        unsigned t[4];
#pragma unroll
        for (int u = 0; u < 4; u++) t[u] = c[2 * u] | c[2 * u + 1] << 16;
        transpose32n<4>(t, lane);
#pragma unroll
        for (int u = 0; u < 4; u++) put_planes(pw, t[u], w0 + 2 * u, w0 + 2 * u + 1, lane);
        if (!W.clean()) return false;
    }
    W.done(ts);
    return true;
}

// Rank 2: tile 64x64 (y, x), sub-blocks 16x8. Word w = 4(8j + k) + a holds
// rows 16j + 4a + dy (dy = l/8 < 4), columns 8k + dx. Walk: j outer
// (runtime), k, then a inner (unrolled). x-1 for dx = 0: the previous k's
// word (carry cx[a]); y-1 for dy = 0: the previous a's word (cy), or for
// a = 0 the previous j's last word (cj[k]). d = Dy(Dx q).
template <typename T, int V>
__device__ __forceinline__ bool enc_fast2(const T *__restrict__ src, const Geo &g, unsigned long long base,
                                          double inv, double step, double eb, int has_fill,
                                          unsigned long long fill_bits, unsigned *pw, int *sq, unsigned *sesc, unsigned *sraw,
                                          int lane, TileSum &ts) {
    const int dy = lane >> 3, dx = lane & 7;
    const unsigned long long nx = g.nx;
    const T *p0 = src + base + (unsigned long long)dy * nx + dx;
    const int srcx = dx ? lane - 1 : lane + 7, srcy = dy ? lane - 8 : lane + 24;
    int cj[8], cx[4];
#pragma unroll
    for (int k = 0; k < 8; k++) cj[k] = 0;
#pragma unroll
    for (int a = 0; a < 4; a++) cx[a] = 0;
    FastWalk<T, V> W{inv, step, eb, has_fill, fill_bits, sq, sesc, sraw, lane};
#pragma unroll 1
    for (int j = 0; j < 4; j++) {
        const T *pj = p0 + (unsigned long long)(16 * j) * nx;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            T v[4];
#pragma unroll
            for (int a = 0; a < 4; a++) v[a] = __ldcs(pj + (unsigned long long)(4 * a) * nx + 8 * k);
            unsigned c[4];
            int cy = cj[k];
#pragma unroll
            for (int a = 0; a < 4; a++) {
                bool raw;
                const int q = W.quant(v[a], raw);
                const int gx = __shfl_sync(0xffffffffu, dx == 7 ? cx[a] : q, srcx);
                const int A = (int)((unsigned)q - (unsigned)((k > 0 || dx > 0) ? gx : 0));
                cx[a] = q;
                const int gy = __shfl_sync(0xffffffffu, dy == 3 ? cy : A, srcy);
                const int d = (int)((unsigned)A - (unsigned)((j > 0 || a > 0 || dy > 0) ? gy : 0));
                cy = A;
                c[a] = W.code(d, q, raw, j == 0 && k == 0 && a == 0, (16 * j + 4 * a + dy) * 64 + 8 * k + dx);
            }
            cj[k] = cy;
            const int w = 4 * (8 * j + k);
            put_planes(pw, transpose32(c[0] | c[1] << 16, lane), w, w + 1, lane);
            put_planes(pw, transpose32(c[2] | c[3] << 16, lane), w + 2, w + 3, lane);
        }
        if (!W.clean()) return false;
    }
    W.done(ts);
    return true;
}

#include "encode_rank2.cuh"

// ---- slow path: any tile, holes included (FORMAT.md sections 3-5 as
// written), through the warp's scratch. Latency matters more than
// instructions here: a slow tile holds up the look-back of every later
// tile, so each round works on four elements per lane with independent
// loads, and coordinates come from multiply-high division.

// e / d for e < 2^12, d <= 2^12: m = ceil(2^24 / d) is exact there.
__device__ __forceinline__ int div12(int e, unsigned m) { return (int)__umulhi((unsigned)e << 8, m); }
static __host__ __device__ __forceinline__ unsigned magic12(int d) { return (unsigned)((0xFFFFFFull + d) / d); }

// Slot of element (z, y, x) of a tile clipped to (lz, ly, lx) (FORMAT.md
// section 3), with the sub-block shape known at compile time for the
// standard shapes (FAST = rank) and read from g otherwise.
template <int FAST>
__device__ __forceinline__ int slot_std(int z, int y, int x, int lz, int ly, int lx, const Geo &g) {
    if (FAST == 0) return slot_of(z, y, x, lz, ly, lx, g);
    constexpr int BZ = FAST == 3 ? 4 : 1, BY = FAST == 3 ? 4 : FAST == 2 ? 16 : 1, BX = FAST == 1 ? 128 : 8;
    const int i = z / BZ, dz = z % BZ, ez = min(BZ, lz - i * BZ);
    const int j = y / BY, dy = y % BY, ey = min(BY, ly - j * BY);
    const int k = x / BX, dx = x % BX, ex = min(BX, lx - k * BX);
    return i * BZ * ly * lx + ez * j * BY * lx + ez * ey * k * BX + (dz * ey + dy) * ex + dx;
}

template <typename T, int FAST, int V>
__device__ void enc_slow(const T *__restrict__ src, const Geo &g, unsigned long long z0, unsigned long long y0,
                         unsigned long long x0, int lz, int ly, int lx, double inv, double step, double eb,
                         int has_fill, unsigned long long fill_bits, unsigned *pw, unsigned char *sc, int lane,
                         TileSum &ts) {
    constexpr int U = 4;  // elements per lane per round
    int *sq = (int *)(sc + SC_Q);
    unsigned short *scode = (unsigned short *)(sc + SC_CODE);
    unsigned char *sfl = sc + SC_FL;
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    unsigned *smf = (unsigned *)(sc + SC_MF), *smr = (unsigned *)(sc + SC_MR);
    const int n = lz * ly * lx, P = ly * lx;
    const unsigned mP = magic12(P), mX = magic12(lx);
    // a fast path may have set bits before it gave up
    for (int i = lane; i < 128; i += 32) {
        sesc[i] = 0;
        sraw[i] = 0;
    }
    for (int i = lane; i < TILE / 8; i += 32) ((uint4 *)scode)[i] = make_uint4(0, 0, 0, 0);  // slots >= n: 0
    __syncwarp();
    // 1. quantize + check
    unsigned nraw = 0, nfill = 0, cnt = 0;
    long long sum = 0;
    double merr = 0;
    for (int e0 = 0; e0 < n; e0 += 32 * U) {
        T v[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = e0 + 32 * u + lane;
            if (e < n) {
                const int z = div12(e, mP), r = e - z * P, y = div12(r, mX), x = r - y * lx;
                v[u] = src[((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = e0 + 32 * u + lane;
            if (e >= n) continue;
            unsigned char f = 0;
            int q = 0;
            if (has_fill && Bits<T>::of(v[u]) == fill_bits) {
                f = 2;
                nfill++;
            } else {
                const double sv = __dmul_rn((double)v[u], inv);
                if (!(fabs(sv) < 268435456.0)) {
                    f = 4;
                    nraw++;
                } else {
                    double er;
                    q = quant_q<T>(v[u], sv, step, er);
                    f = 1;
                    sum += q;
                    cnt++;
                    if (!(er <= eb)) {
                        f = 5;
                        nraw++;
                    } else {
                        merr = fmax(merr, er);
                    }
                }
            }
            if (f & 4) atomicOr(&sraw[e >> 5], 1u << (e & 31));
            sq[e] = q;
            sfl[e] = f;
        }
    }
    const unsigned NR = __reduce_add_sync(0xffffffffu, nraw);
    const unsigned NF = __reduce_add_sync(0xffffffffu, nfill);
    const unsigned C = __reduce_add_sync(0xffffffffu, cnt);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
        merr = fmax(merr, __shfl_xor_sync(0xffffffffu, merr, o));
    }
    __syncwarp();
    if (NR | NF) {
        // holes take the placeholder: trunc(mean of the tile's q)
        const int ph = C ? (int)(sum / (long long)C) : 0;
        for (int e = lane; e < n; e += 32)
            if (!(sfl[e] & 1)) sq[e] = ph;
    }
    __syncwarp();
    ts.origin = sq[0];
    // 2. Lorenzo + codes, 128 elements a round from the top down: each
    //    residual overwrites its q once every lane has read its neighbours
    //    (all at lower indices), so lower rounds still see q.
    unsigned nesc = 0;
    for (int c0 = (n - 1) & ~(32 * U - 1); c0 >= 0; c0 -= 32 * U) {
        int d[U], zz[U], yy[U], xx[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = c0 + 32 * u + lane;
            d[u] = 0;
            zz[u] = yy[u] = xx[u] = 0;
            if (e < n) {
                const int z = div12(e, mP), r = e - z * P, y = div12(r, mX), x = r - y * lx;
                zz[u] = z;
                yy[u] = y;
                xx[u] = x;
                unsigned v = (unsigned)sq[e];
                if (x) v -= (unsigned)sq[e - 1];
                if (y) v -= (unsigned)sq[e - lx];
                if (x && y) v += (unsigned)sq[e - lx - 1];
                if (z) {
                    v -= (unsigned)sq[e - P];
                    if (x) v += (unsigned)sq[e - P - 1];
                    if (y) v += (unsigned)sq[e - P - lx];
                    if (x && y) v -= (unsigned)sq[e - P - lx - 1];
                }
                d[u] = (int)v;
            }
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int e = c0 + 32 * u + lane;
            if (e < n) {
                sq[e] = d[u];
                bool esc;
                unsigned c = code_of<V>(d[u], esc);
                if (e == 0) {
                    c = 0;
                    esc = false;
                }
                if (esc) {
                    sfl[e] |= 8;
                    nesc++;
                    atomicOr(&sesc[e >> 5], 1u << (e & 31));
                }
                scode[slot_std<FAST>(zz[u], yy[u], xx[u], lz, ly, lx, g)] = (unsigned short)c;
            }
        }
    }
    __syncwarp();
    // 3. fill / raw masks: parity Lorenzo of the element bitmaps, slot order
    if (NR | NF) {
        for (int i = lane; i < 128; i += 32) {
            smf[i] = 0;
            smr[i] = 0;
        }
        __syncwarp();
        for (int e = lane; e < n; e += 32) {
            const int z = div12(e, mP), r = e - z * P, y = div12(r, mX), x = r - y * lx;
            const unsigned m = (x > 0) << 12 | (y > 0) << 13 | (z > 0) << 14;
            const int sl = slot_std<FAST>(z, y, x, lz, ly, lx, g);
            if (NF && xor_corners(sfl, e, m, P, lx, 2)) atomicOr(&smf[sl >> 5], 1u << (sl & 31));
            if (NR && xor_corners(sfl, e, m, P, lx, 4)) atomicOr(&smr[sl >> 5], 1u << (sl & 31));
        }
    }
    __syncwarp();
    // 4. bit planes by warp transpose, two words at a time
    for (int m = 0; m < 64; m += U) {
        unsigned c[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            c[u] = (unsigned)scode[64 * (m + u) + lane] | (unsigned)scode[64 * (m + u) + 32 + lane] << 16;
#pragma unroll
        for (int u = 0; u < U; u++) put_planes(pw, transpose32(c[u], lane), 2 * (m + u), 2 * (m + u) + 1, lane);
    }
    ts.nesc = __reduce_add_sync(0xffffffffu, nesc);
    ts.nraw = NR;
    ts.nfill = NF;
    ts.merr = merr;
}

// The raw mask of a tile whose raw values all kept their q (a fast path):
// the parity Lorenzo transform of the element-order raw bitmap, by
// toggling the 2^3 forward corners of each raw element (they are few).
__device__ __forceinline__ void raw_mask_sparse(const unsigned *sraw, unsigned *smr, int lz, int ly, int lx,
                                                const Geo &g, int lane) {
    for (int i = lane; i < 128; i += 32) smr[i] = 0;
    __syncwarp();
    const int P = ly * lx;
    for (int w = lane; w < 128; w += 32) {
        unsigned b = sraw[w];
        while (b) {
            const int e = 32 * w + __ffs(b) - 1;
            b &= b - 1;
            const int z = e / P, r = e - z * P, y = r / lx, x = r - y * lx;
            // Unrolled, as in v14: only the rank-1 and -2 walks call this
            // since v15 (rank 3: raw_mask_rows3). Rolled up it cost them
            // 2-3 % (code layout); in the rank-3 kernel, its 13 KiB of
            // unrolled code had pushed the walk out of the instruction cache
            // (PERF.md v15).
            for (int c = 0; c < 8; c++) {
                const int zc = z + (c >> 2), yc = y + ((c >> 1) & 1), xc = x + (c & 1);
                if (zc < lz && yc < ly && xc < lx) {
                    const int sl = slot_of(zc, yc, xc, lz, ly, lx, g);
                    atomicXor(&smr[sl >> 5], 1u << (sl & 31));
                }
            }
        }
    }
    __syncwarp();
}

// The raw mask of a full rank-3 tile (8 x 16 x 32, sub-blocks 4 x 4 x 8)
// from its element-order raw bitmap (word z * 16 + y, bit x), by rows: the
// parity transform XORs each row with itself shifted by one in x (r ^ r <<
// 1), then with the row before it in y and the same two rows of plane
// z - 1. Slot word (z / 4) * 64 + j * 16 + k * 4 + z % 4 holds byte k
// (x = 8k .. 8k + 7) of rows y = 4j .. 4j + 3 in its bytes 0-3. Lane
// (z, j) = (l / 4, l % 4) writes its four slot words: no atomics, divisions
// or zeroing (raw_mask_sparse: about 100 instructions and 8 atomics a value).
__device__ __forceinline__ void raw_mask_rows3(const unsigned *sraw, unsigned *smr, int lane) {
    const int z = lane >> 2, j = lane & 3;
    auto row = [&](int zz, int y) -> unsigned {
        const unsigned r = zz >= 0 && y >= 0 ? sraw[zz * 16 + y] : 0u;
        return r ^ (r << 1);
    };
    unsigned b[4], prev = row(z, 4 * j - 1) ^ row(z - 1, 4 * j - 1);
#pragma unroll
    for (int dy = 0; dy < 4; dy++) {
        const unsigned cur = row(z, 4 * j + dy) ^ row(z - 1, 4 * j + dy);
        b[dy] = cur ^ prev;
        prev = cur;
    }
    unsigned *const o = smr + (z >> 2) * 64 + j * 16 + (z & 3);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const unsigned sel = k | (k + 4) << 4;
        o[4 * k] = __byte_perm(__byte_perm(b[0], b[1], sel), __byte_perm(b[2], b[3], sel), 0x5410);
    }
    __syncwarp();
}

// Zero-block mask of a slot-order bitmap of 128 words (lane k: block k).
__device__ __forceinline__ unsigned block_mask128(const unsigned *m, int lane) {
    const uint4 b = ((const uint4 *)m)[lane];
    return __ballot_sync(0xffffffffu, (b.x | b.y | b.z | b.w) != 0);
}

// Stores of a tile's bytes. A parked tile (the scanner) is read back a tile
// later, after the walks have streamed tens of MB through L2, so its lines
// are stored with the lowest eviction priority (evict_last); bytes written
// to their place in the output are not read again (evict_normal). One
// tile_write for both, the policy a register (a copy per policy was 3 %
// slower on the smooth field). Without the scanner (HINT false): plain
// stores (the policy stores cost the f64 rank-1 walk 2 %).
template <bool HINT>
struct TileStore {
    unsigned long long pol;
    __device__ __forceinline__ explicit TileStore(bool keep) {
        if (HINT) {
            if (keep)
                asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
            else
                asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
        }
    }
    __device__ __forceinline__ void operator()(unsigned *p, unsigned v) const {
        if (HINT)
            asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;" ::"l"(p), "r"(v), "l"(pol) : "memory");
        else
            *p = v;
    }
};

// Writes a zero-block coded bitmap (mask word, then the non-zero blocks).
template <typename ST>
__device__ __forceinline__ void put_blocks(const ST &st, unsigned *o, unsigned at, unsigned bm, uint4 b,
                                           int lane) {
    if (lane == 0) st(o + at, bm);
    if ((bm >> lane) & 1) {
        unsigned *dst = o + at + 1 + 4 * __popc(bm & ((1u << lane) - 1));
        st(dst, b.x);
        st(dst + 1, b.y);
        st(dst + 2, b.z);
        st(dst + 3, b.w);
    }
}

// Writes the set bits' values of an element-order bitmap (128 words) in
// element order: val(e) for each e with its bit set, `wpv` words each.
// U: the unroll count of the loop over the four groups of 32 words (rare:
// escapes, raw values); the rank-3 kernel keeps it rolled up for the
// instruction cache, the others unrolled as in v14 (PERF.md v15).
template <int U, typename F>
__device__ __forceinline__ void put_listed(unsigned *o, const unsigned *bits, int wpv, int lane, F val) {
    unsigned pos = 0;
#pragma unroll U
    for (int w0 = 0; w0 < 128; w0 += 32) {
        unsigned b = bits[w0 + lane];
        const unsigned cntb = __popc(b);
        const unsigned inc = warp_incl_scan<32>(cntb, lane);
        unsigned k = pos + inc - cntb;
        while (b) {
            const int bit = __ffs(b) - 1;
            b &= b - 1;
            val((w0 + lane) * 32 + bit, o + (unsigned long long)k * wpv);
            k++;
        }
        pos += __shfl_sync(0xffffffffu, inc, 31);
    }
}

// Where a tile's bytes go and how many there are. Lane p keeps plane p's
// block mask and word offset.
struct TileLayout {
    unsigned my_bm, my_at;
    unsigned pm, esc_at, fill_at, raw_at, fbm, rbm, size;
};

#include "tile_tail.cuh"

template <typename T>
__device__ __forceinline__ TileLayout tile_layout(const unsigned *pw, const unsigned char *sc, const TileSum &ts,
                                                  int lane) {
    TileLayout L;
    // Only the ballots in the loop: lane p keeps plane p's mask, and the
    // planes' offsets come from one 16-lane scan after it (a running offset
    // in the loop took 17 instructions a plane on the tile's serial tail).
    unsigned bm = 0;
#pragma unroll
    for (int p = 0; p < 16; p++) {
        const uint4 b = *(const uint4 *)&pw[p * PW_STRIDE + 4 * lane];
        const unsigned m = __ballot_sync(0xffffffffu, (b.x | b.y | b.z | b.w) != 0);
        bm = lane == p ? m : bm;
    }
    const unsigned words = bm ? 1 + 4 * __popc(bm) : 0;  // 0 for lanes >= 16
    const unsigned inc = warp_incl_scan<16>(words, lane);
    L.my_bm = bm;
    L.my_at = 2 + inc - words;
    L.pm = __ballot_sync(0xffffffffu, bm != 0);
    unsigned at = 2 + __shfl_sync(0xffffffffu, inc, 15);
    tail_layout<T>(L, at, sc, ts, lane);
    return L;
}

// Bytes before the tiles of tile t's chunk that are not tiles: the size
// tables of its chunk and the chunks before it (chunk c's tiles follow its
// size table).
__device__ __forceinline__ unsigned long long tables_before(const Geo &g, unsigned long long t,
                                                            unsigned long long tile0) {
    const unsigned long long chunk = t <= 0xFFFFFFFFull ? div_m(t, g.per_chunk, g.mpc) : t / g.per_chunk;
    return 4 * (min((chunk + 1) * g.per_chunk, g.tiles) - tile0);
}

// The tile's place in the output, or null (and the error flag) if it does
// not fit; tb from tables_before.
__device__ __forceinline__ unsigned *tile_out(unsigned *out, unsigned long long cap, unsigned *err,
                                              unsigned long long tb, unsigned long long excl, unsigned size,
                                              int lane) {
    const unsigned long long off = excl + tb;  // bytes
    if (off + size > cap) {
        if (lane == 0) atomicOr(err, 1u);
        return nullptr;
    }
    return out + off / 4;
}

// Writes the tile's bytes after its code section (FORMAT.md section 5:
// escapes, fill mask, raw mask and values), the same in both container
// versions. WALKED: a tile of a hot walk (enc_fast3's HOT: no escapes, its
// raw values listed), for which the escape list and the raw fallback are
// not compiled.
template <typename T, int LU, bool WALKED, typename ST>
__device__ __forceinline__ void tile_write_tail(const ST &st, unsigned *o, unsigned esc_at, unsigned fill_at,
                                                unsigned raw_at, unsigned fbm, unsigned rbm, const TileSum &ts,
                                                const unsigned char *sc, const T *src, const Geo &g,
                                                unsigned long long z0, unsigned long long y0, unsigned long long x0,
                                                int ly, int lx, bool listed, int lane) {
    const unsigned NR = ts.nraw, NF = ts.nfill, E = ts.nesc;
    if (!WALKED && E) {
        const int *sq = (const int *)(sc + SC_Q);
        if (lane == 0) st(o + esc_at, E);
        put_listed<LU>(o + esc_at + 1, (const unsigned *)(sc + SC_ESC), 1, lane,
                   [&](int e, unsigned *dst) { st(dst, (unsigned)sq[e]); });
    }
    if (NF) put_blocks(st, o, fill_at, fbm, ((const uint4 *)(sc + SC_MF))[lane], lane);
    if (NR) {
        put_blocks(st, o, raw_at, rbm, ((const uint4 *)(sc + SC_MR))[lane], lane);
        const unsigned rv = raw_at + 1 + 4 * __popc(rbm);
        if (lane == 0) st(o + rv, NR);
        if (sizeof(T) == 4 && listed && NR <= SC_RV_MAX) {  // the v9 walk listed them
            const unsigned *srv = (const unsigned *)(sc + SC_RV);
#pragma unroll 1
            for (unsigned i = lane; i < NR; i += 32) st(o + rv + 1 + i, srv[i]);
            return;
        }
        if (WALKED) return;
        const int P = ly * lx;
        put_listed<LU>(o + rv + 1, (const unsigned *)(sc + SC_RAW), sizeof(T) / 4, lane, [&](int e, unsigned *dst) {
            // listed: a full 8 x 16 x 32 tile (shifts, not divisions)
            const int z = listed ? e >> 9 : e / P, r = e - z * P, y = listed ? r >> 5 : r / lx, x = r - y * lx;
            const unsigned long long b = Bits<T>::of(src[((z0 + z) * g.ny + y0 + y) * g.nx + x0 + x]);
            st(dst, (unsigned)b);
            if (sizeof(T) == 8) st(dst + 1, (unsigned)(b >> 32));
        });
    }
}

// Writes the tile's bytes (FORMAT.md section 5), container version 1.
template <typename T, int LU, bool WALKED, typename ST>
__device__ __forceinline__ void tile_write(const ST &st, unsigned *o, const TileLayout &L, const TileSum &ts, const unsigned *pw,
                                           const unsigned char *sc, const T *src, const Geo &g,
                                           unsigned long long z0, unsigned long long y0, unsigned long long x0,
                                           int ly, int lx, bool listed, int lane) {
    const unsigned NR = ts.nraw, NF = ts.nfill, E = ts.nesc;
    if (lane == 0) {
        st(o, L.pm | (E ? 1u << 16 : 0) | (NF ? 1u << 17 : 0) | (NR ? 1u << 18 : 0));
        st(o + 1, (unsigned)ts.origin);
    }
    for (unsigned rest = L.pm; rest; rest &= rest - 1) {
        const int p = __ffs(rest) - 1;
        const unsigned bm = __shfl_sync(0xffffffffu, L.my_bm, p), pat = __shfl_sync(0xffffffffu, L.my_at, p);
        put_blocks(st, o, pat, bm, pw_block(pw, p, lane), lane);
    }
    tile_write_tail<T, LU, WALKED>(st, o, L.esc_at, L.fill_at, L.raw_at, L.fbm, L.rbm, ts, sc, src, g, z0, y0, x0, ly,
                                   lx, listed, lane);
}

#include "encode_v2.cuh"

// FAST: the one fast path compiled in (0 none, else the rank of the shape),
// so each instantiation's registers are allocated for one walk only.
// HF: 0 has_fill read at run time; 1 no fill, 2 fill, known at compile
// time (one copy of the walk per kernel instead of two); 3 and 4
// the optimistic kernels: no fill, full tiles only, no slow
// path; 4 also without the 16-bit coder. They run first, 4 then 3 then
// the full kernel, and each runs only if the ones before it gave the job
// up: at the first tile its walk cannot take, a kernel sets its bit in
// *abortf and stops (4: bit 0 for 16-bit codes, bit 1 for anything else;
// 3: bit 1), and every kernel of the job gets abortf.
// V: the container version written (1 or 2; encode_v2.cuh): a template
// parameter, so that version 1's kernels hold no code of version 2's (and
// their machine code is what it was before version 2).
template <typename T, int FAST, int HF = 0, int V = 1>
__global__ void __launch_bounds__(ENC_W * 32, ENC_MINB_W(FAST, sizeof(T)))
    encode_warp_kernel(const T *__restrict__ src, Geo g, const DevParams *__restrict__ prm, int has_fill_arg,
                       unsigned long long fill_bits, unsigned long long tile0, unsigned long long ntiles,
                       unsigned *__restrict__ out, unsigned long long cap, unsigned long long *status,
                       unsigned *tsize, unsigned long long *tprefix, unsigned *touts, double *terr,
                       unsigned *ticket, unsigned *err, unsigned char *scratch, unsigned *abortf) {
    extern __shared__ __align__(16) unsigned enc_smem[];
    const int has_fill = HF >= 3 ? 0 : HF ? HF - 1 : has_fill_arg;
    grid_wait();  // params, statuses and ticket from the kernels before (launch_dependent)
    constexpr bool opt = (HF == 3 || HF == 4) && FAST == 3 && sizeof(T) == 4,
                   opt8 = opt && HF == 4;
    // the bits of *abortf that make this kernel stop (it sets them) and run
    constexpr unsigned quit_bits = opt8 ? 3u : 2u;
    if ((opt || (FAST == 3 && HF < 2 && sizeof(T) == 4)) && abortf) {  // the kernels of an optimistic job
        const unsigned a = *(const volatile unsigned *)abortf;
        if (!opt && !(a & 2u)) return;                      // an optimistic kernel did the job
        if (opt && !opt8 && (!(a & 1u) || (a & 2u))) return;  // the narrow one did it, or it cannot
    }
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    unsigned *pw = enc_smem + wib * PW_WORDS;
    unsigned char *sc = scratch + ((unsigned long long)blockIdx.x * ENC_W + wib) * SC_BYTES;
    int *sq = (int *)(sc + SC_Q);
    unsigned *sesc = (unsigned *)(sc + SC_ESC), *sraw = (unsigned *)(sc + SC_RAW);
    const double eb = prm->eb, step = prm->step, inv = prm->inv;
    const float ebf = __double2float_rd(eb);  // e <= eb for a float e exactly when e <= ebf
    for (int i = lane; i < 128; i += 32) {  // the fast paths only set bits
        sesc[i] = 0;
        sraw[i] = 0;
    }
    __syncwarp();
    auto take = [&]() -> unsigned long long {
        unsigned long long r = 0;
        if (lane == 0) r = atomicAdd(ticket, 1u);
        return __shfl_sync(0xffffffffu, r, 0);
    };
    // the v9 walk stages its tiles with cp.async one plane ahead
    constexpr bool staged = FAST == 3 && sizeof(T) == 4;
    // the staged rank-2 walk (encode_rank2.cuh): the same staging, no
    // optimistic kernels or listed raw values
    constexpr bool staged2 = FAST == 2 && sizeof(T) == 4;
    // The scanner and parked tiles for the staged walks only (rank 3 since
    // v12; rank 2 since v22, H200, hst 1 GiB: 1438 / 1311 / 1216 GB/s with
    // them, 1273 / 1232 / 1135 with the look-back): on the rank-1 fields (24
    // warps per SM) the look-back costs 2-6 % (no-look-back probe), and
    // parking cost 10-26 % there (PERF.md v12).
    constexpr bool scan = staged || staged2;
    // The scanner is the warp that takes ticket 0: a warp known to be
    // running, whatever else shares the device (block 0 need not be resident
    // when other blocks of the kernel are). Ticket k > 0 is tile k - 1.
    unsigned long long rel = take();
    if (scan) {
        if (rel == 0) {
            scan_sizes(status, ntiles, lane, opt ? abortf : nullptr, quit_bits);
            return;
        }
        rel -= 1;
    }
    // The parked tile (the scanner): its size is published and its bytes wait
    // in the scratch while the warp walks its next tile; by then the
    // scanner has (nearly always) turned the size into its prefix.
    unsigned *const park = (unsigned *)(sc + SC_PARK);
    // Its tile, size and tables_before sit in pad words of the plane buffer
    // (words 128-131 of plane row 0, which no plane uses) rather than in
    // registers that would stay live through the whole walk (the spill
    // counts came out about the same either way; not timed separately).
    volatile unsigned *const pstate = pw + 128;
    if (lane == 0) pstate[0] = ~0u;  // jobs have < 2^31 tiles
    __syncwarp();
    // The next ticket, issued after the parked tile's wait and read at the
    // end of the tail (taken before that wait, it stalls later tiles behind
    // the waits: coads -35 %, PERF.md v14). PTX, not atomicAdd: ptxas turns
    // atomicAdd (and atom.add, and inc to 2^32 - 1) into a warp-aggregated
    // atomic with a shuffle of its result right after it, which waits there.
    auto take_async = [&]() -> unsigned {
        unsigned r = 0;
        if (lane == 0) asm volatile("atom.global.inc.u32 %0, [%1], 0x7fffffff;" : "=r"(r) : "l"(ticket) : "memory");
        return r;
    };
    // The parked tile while it is being unparked: the first poll of its
    // prefix and its first 2 KiB are loaded by unpark_issue before the next
    // tile's layout, the wait is in unpark_finish after its publish, so the
    // round trips overlap each other and the layout. The poll goes first:
    // issued after the loads it cost 2 % (PERF.md v14).
    struct Parked {
        unsigned rel, size;
        unsigned long long tb, st;
        uint4 b[4];
    };
    auto unpark_issue = [&](Parked &P) {
        P.rel = pstate[0];
        P.size = pstate[1];
        P.tb = (unsigned long long)pstate[3] << 32 | pstate[2];
        if (P.rel == ~0u) return;
        P.st = 0;
        if (lane == 0) P.st = ld_vol(&status[P.rel]);
        const uint4 *const p4 = (const uint4 *)park;
        const unsigned n4 = (P.size + 15) >> 4;
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (32u * u + lane < n4) P.b[u] = __ldcg(p4 + 32 * u + lane);
    };
    // Waits for the parked tile's prefix (never while the warp holds a tile
    // whose size is unpublished) and copies the tile out.
    auto unpark_finish = [&](Parked &P) -> bool {
        if (P.rel == ~0u) return false;
        if (opt) {
            bool quit = false;
            if (lane == 0)
                while ((P.st >> 62) != 2) {
                    if (*(const volatile unsigned *)abortf & quit_bits) {
                        quit = true;
                        break;
                    }
                    P.st = ld_vol(&status[P.rel]);
                }
            if (__any_sync(0xffffffffu, quit)) return true;
        } else if (lane == 0)
            while ((P.st >> 62) != 2) P.st = ld_vol(&status[P.rel]);
        const unsigned long long excl = __shfl_sync(0xffffffffu, (P.st & ST_VAL) - P.size, 0);
        if (lane == 0) tprefix[P.rel] = excl;
        const uint4 *const p4 = (const uint4 *)park;
        const unsigned n4 = (P.size + 15) >> 4, nw = P.size >> 2;
        unsigned *o = tile_out(out, cap, err, P.tb, excl, P.size, lane);
        if (o) {
            auto put = [&](unsigned i, const uint4 &v) {
                const unsigned w = 4 * i;
                if (w < nw) o[w] = v.x;
                if (w + 1 < nw) o[w + 1] = v.y;
                if (w + 2 < nw) o[w + 2] = v.z;
                if (w + 3 < nw) o[w + 3] = v.w;
            };
#pragma unroll
            for (int u = 0; u < 4; u++) put(32u * u + lane, P.b[u]);
            for (unsigned i0 = 128; i0 < n4; i0 += 128) {
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (i0 + 32u * u + lane < n4) P.b[u] = __ldcg(p4 + i0 + 32 * u + lane);
#pragma unroll
                for (int u = 0; u < 4; u++) put(i0 + 32u * u + lane, P.b[u]);
            }
        }
        __syncwarp();
        if (lane == 0) pstate[0] = ~0u;
        __syncwarp();
        return false;
    };
    // hot: the walk leaves tiles with an escape or more than HOT_RV_MAX raw
    // values to the slow path (or, in an optimistic kernel, gives the job
    // up), so that a walked tile always parks and its write needs no escape
    // list, raw fallback or too-big wait: that code (the second write) runs
    // for slow tiles only. Smaller hot code: PERF.md v19.
    constexpr bool hot = (staged && HF == 1 && scan) || opt;
    for (; rel < ntiles;) {
        const unsigned long long t = tile0 + rel;
        unsigned long long z0, y0, x0;
        int lz, ly, lx;
        tile_box(g, t, z0, y0, x0, lz, ly, lx);
        const bool full = lz == g.tz && ly == g.ty && lx == g.tx;
        const unsigned long long base = (z0 * g.ny + y0) * g.nx + x0;
        if (!(staged || staged2) || !full) prefetch_tile(src, g, base, lz, ly, lx, lane);
        TileSum ts;
        ts.nraw = ts.nfill = ts.wide = 0;
        bool done = false;
        int ph = 0;  // the FILLP walk's placeholder
        if (FAST == 3 && full) {
            if constexpr (staged)
                done = opt8 ? enc_fast3<false, true, true, V>(src, g, base, inv, step, ebf, 0, pw, sq, sesc, sraw, lane, ts)
                       : hot ? enc_fast3<false, true, false, V>(src, g, base, inv, step, ebf, 0, pw, sq, sesc, sraw, lane, ts)
                       : has_fill ? fill_placeholder3(src, g, base, inv, (unsigned)fill_bits, lane, ph) &&
                                        enc_fast3<true, false, false, V, true>(src, g, base, inv, step, ebf,
                                                                               (unsigned)fill_bits, pw, sq, sesc, sraw,
                                                                               lane, ts, ph)
                                : enc_fast3<false, false, false, V>(src, g, base, inv, step, ebf, 0, pw, sq, sesc, sraw, lane, ts);
            else
                done = enc_fast3_v6<T, V>(src, g, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw, lane, ts);
        } else if (FAST == 2 && full) {
            if constexpr (staged2)
                done = enc_fast2s<V>(src, g, base, inv, step, ebf, has_fill, (unsigned)fill_bits, pw, sq, sesc, sraw,
                                     lane, ts);
            else
                done = enc_fast2<T, V>(src, g, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw, lane, ts);
        }
        else if (FAST == 1 && full)
            done = enc_fast1<T, V>(src, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw, lane, ts);
        __syncwarp();
        if (opt && !done) {  // a tile the walk cannot take: a kernel after this one redoes the job
            if (lane == 0) atomicOr(abortf, opt8 && ts.wide ? 1u : 2u);
            return;
        }
        if (!done)
            enc_slow<T, FAST, V>(src, g, z0, y0, x0, lz, ly, lx, inv, step, eb, has_fill, fill_bits, pw, sc, lane, ts);
        else {
            if (ts.nraw) {
                if (FAST == 3)  // the fast paths take full tiles only
                    raw_mask_rows3(sraw, (unsigned *)(sc + SC_MR), lane);
                else
                    raw_mask_sparse(sraw, (unsigned *)(sc + SC_MR), lz, ly, lx, g, lane);
            }
            // the FILLP walk's fill mask: the same transform as the raw mask's
            if (staged && HF == 2 && ts.nfill)
                raw_mask_rows3((const unsigned *)(sc + SC_FE), (unsigned *)(sc + SC_MF), lane);
        }
        __syncwarp();
        bool quit = false;  // the optimistic kernel's job was given up
        auto tail = [&]() -> unsigned {
            Parked P;
            if (scan) unpark_issue(P);
            const auto L = tile_layout_v<T, V>(pw, sc, ts, lane);
            publish_size(status, rel, L.size, lane);  // later tiles wait for it: before the error fold
            double M = ts.merr;
            if (!((staged || staged2) && done))  // enc_fast3 and enc_fast2s fold their own
    #pragma unroll
                for (int o2 = 16; o2 > 0; o2 >>= 1) M = fmax(M, __shfl_xor_sync(0xffffffffu, M, o2));
            if (lane == 0) {
                tsize[rel] = L.size;
                touts[rel] = ts.nraw;
                terr[rel] = M;
            }
            unsigned *o = park;
            const bool parks = scan && L.size <= SC_PARK_BYTES;
            // The ticket goes out here, before the rare too-big tile's own wait
            // below: taken after it, every tile paid +0.7 % (1e-2) / +1.2 % (1e-4)
            // (PERF.md v14). That wait needs only earlier tiles, so holding the
            // later ticket across it cannot deadlock.
            unsigned tk = 0;
            if (scan) {
                if (unpark_finish(P)) {
                    quit = true;
                    return tk;
                }
                tk = take_async();
            }
            if (hot && done) {
                tile_write<T, 1, true>(TileStore<scan>(true), park, L, ts, pw, sc, src, g, z0, y0, x0, ly, lx, true, lane);
            } else {
            if (!parks) {  // the scanner: too big to park (rare), so the warp waits here
                const unsigned long long excl =
                    scan ? await_prefix(status, rel, L.size, lane) : lookback(status, rel, L.size, lane);
                if (lane == 0) tprefix[rel] = excl;
                o = tile_out(out, cap, err, tables_before(g, t, tile0), excl, L.size, lane);
            }
            if (o)
                tile_write<T, FAST == 3 ? 1 : 4, false>(TileStore<scan>(parks), o, L, ts, pw, sc, src, g, z0, y0, x0, ly, lx,
                                                 staged && done, lane);
            }
            if (parks) {
                __syncwarp();
                if (lane == 0) {
                    const unsigned long long tb = tables_before(g, t, tile0);
                    pstate[0] = (unsigned)rel;
                    pstate[1] = L.size;
                    pstate[2] = (unsigned)tb;
                    pstate[3] = (unsigned)(tb >> 32);
                }
            }
            if (ts.nesc | ts.nraw) {
                __syncwarp();
                for (int i = lane; i < 128; i += 32) {
                    sesc[i] = 0;
                    sraw[i] = 0;
                }
            }
            __syncwarp();  // pw and scratch are reused by the next tile
            return tk;
        };
        const unsigned tk = tail();
        if (opt && quit) return;
        rel = scan ? (unsigned long long)__shfl_sync(0xffffffffu, tk, 0) - 1 : take();
    }
    if (scan) {
        Parked P;
        unpark_issue(P);
        unpark_finish(P);
    }
}
