// What the warp encoder's walks, its slow path and its tail share (included
// by encode_warp.cuh): the kernel's configuration, the plane buffer and the
// per-warp scratch layout, the tile's totals (TileSum), the per-value
// quantize and code, the plane stores, and the slot-order walks' common
// bookkeeping (FastWalk).

#ifndef ENC_W
#define ENC_W 8                 // warps per block
#endif
#define ENC_FASTS 5             // the warp encoder's FAST values: 0 (none), ranks 1-3, 4 (flat tiles)
#ifndef ENC_MINB_W
// Blocks per SM the register budget is cut for, per walk. Rank 3 needs
// ~115 registers: with 2 (128 registers, 16 warps/SM) it does not spill;
// with 3 (80 registers, 24 warps) it spills 200-300 bytes. The rank-1/2
// walks and the generic path prefer more warps. Measured on an H200, 1 GiB,
// rel 1e-2, 3 vs 2: smooth3d 597 vs 627 GB/s, hst (rank 2) 589 vs 507,
// hyg (rank 1) 863 vs 800. v30 (f32 rank 1 now enc_flat32's walk, which
// flat tiles run at 2): 2 blocks lost 2-10 % (hyg versions 1 and 2, PERF.md);
// v50 (that walk's escapes once a step, which spills at 80 registers): 2,
// hyg compress 1.02-1.12x. The f32 rank-1 kernel of fill fields (enc_fast1's
// walk, no field measured) runs at 2 as well.
// The staged walks (f32 rank 3 and, since v22, rank 2) hold 5 KiB of
// staging per warp besides the plane buffer: two blocks fit an SM anyway.
#define ENC_MINB_W(fast, tsize) ((fast) == 4 ? ENC_FLAT_MINB : (fast) == 3 || (((fast) == 1 || (fast) == 2) && (tsize) == 4) ? 2 : 3)
#endif
#ifndef ENC_FLAT_MINB
#define ENC_FLAT_MINB 2  // flat tiles' kernels (encode_flat.cuh)
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
// The FILLP walk's tiles also hold a fill mask (up to 129 words): the fill
// fields' optimistic kernel (HF 5) leaves tiles with more raw values than
// these to the full kernel.
#define HOT_RV_MAX_FILL (HOT_RV_MAX - 129)
#define HOT_RV_MAX_FILL_V2 (HOT_RV_MAX_V2 - 129)
static_assert(4 * (2 + 16 * 129 + 129 + 130 + HOT_RV_MAX_FILL) <= 12288, "a walked fill tile must fit the park");
static_assert(4 * (2 + 2081 + 129 + 130 + HOT_RV_MAX_FILL_V2) <= 12288, "a walked v2 fill tile must fit the park");
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
#define SC_Q 0          // int32 q, then residuals, in element order (16 KiB; the FILLP walk: lanes' plane sums)
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
// Bytes SC_UNUSED.. are unused since v61: they held the staged rank-3 walk's
// element-order fill bitmap (v22-v60), which now sits in the staging rows'
// padding (encode_rank3.cuh's stage_pad). The warps' scratch keeps the
// stride that v61 measured.
#define SC_UNUSED 43008
#define SC_BYTES 43520
// The v9 walk's raw values (u32 bits, in element order) as it finds them,
// in the slow path's code and flag space, which the walk does not use: up
// to SC_RV_MAX; a tile with more takes them from the field at its write
// (a region of its own, 16 KiB a warp more, measured the same).
#define SC_RV SC_CODE
#ifndef SC_RV_MAX
#define SC_RV_MAX 3072          // a test build sets it low, to run the tiles with more through their fallback
#endif

// The fill fields' optimistic walk in one pass (encode_rank3.cuh's ONEP,
// v54); 0: in two passes, as the full kernel's FILLP walk (A/B).
#ifndef ENC_FILL_1P
#define ENC_FILL_1P 1
#endif

struct TileSum {
    unsigned nesc, nraw, nfill;
    unsigned wide;  // the narrow-only walk gave the tile up for a z-plane of 16-bit codes
    int origin;
    double merr;
};

#define QUANT_S_LIM 268435456.0  // a value has a q when |s| < 2^28 (FORMAT.md section 4)
#define QUANT_S_LIM16 32767.5    // ... a q of 16 bits (|q| <= 32767) when |s| < 32767.5

// Quantize + check of one f32 value (FORMAT.md section 4) for the f32
// walks (encode_rank3.cuh's quant_f32, the clipped row walk): s, q and x'
// as in quant_q, but the check's difference is taken in f32: x - x' is
// exact there (for |q| >= 2, x and x' are within a factor of 2 (Sterbenz);
// for q = 0, x' = 0; for |q| = 1 no float x lies below x'/2 while s >= 0.5),
// so e = |x - x'| equals the f64 difference and e <= eb holds exactly when
// e <= ebf, the largest float <= eb. That saves a conversion, a double
// subtraction and the double compare and max per value. Returns q; sets
// hole for values without q (|s| >= 2^28, NaN, Inf; e is then meaningless),
// or, with lim = QUANT_S_LIM16, also for values whose q would not fit 16 bits
// (|q| <= 32767 exactly when |s| < 32767.5, ties going to even): the fill
// fields' optimistic walk, which gives such a tile up either way.
__device__ __forceinline__ int quant_e32(float x, double inv, double step, float &e, bool &hole,
                                         double lim = QUANT_S_LIM) {
    const double s = __dmul_rn((double)x, inv);
    hole = !(fabs(s) < lim);
    const double sr = __dadd_rn(s, 6755399441055744.0);
    const double qd = __dsub_rn(sr, 6755399441055744.0);
    const float rec = __double2float_rn(__dmul_rn(qd, step));
    e = fabsf(__fsub_rn(x, rec));
    return __double2loint(sr);
}

// The holes' placeholders of a tile's z-planes (FORMAT.md section 4,
// Holes), for walks that sum each plane before coding it: lane z (z < the
// tile's planes, at most 32) holds plane z's sum of q and count of values
// with q, the other lanes 0. Lane z gets plane z's placeholder: the plane's
// mean q (truncated toward zero), else the nearest earlier plane's with
// values, else (the planes before the first with values) the first's; 0
// when no plane has values.
// S: int where every |q| <= 32767 (a plane's sum of 512 q fits), else
// long long (a 64-bit division).
template <typename S>
__device__ __forceinline__ int plane_placeholders(S psum, unsigned pcnt, int lane) {
    const unsigned F = 0xffffffffu;
    const unsigned has = __ballot_sync(F, pcnt > 0);
    const int own = pcnt ? (int)(psum / (S)pcnt) : 0;
    const unsigned before = has & ((1u << lane) - 1u);
    return has ? __shfl_sync(F, own, pcnt ? lane : before ? 31 - __clz(before) : __ffs(has) - 1) : 0;
}

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
    bool hole = !(fabs(s) < QUANT_S_LIM);
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
// A tile of one row (rank 1, flat tiles: 16 KiB) has its lines spread over
// the lanes: with a row a lane, lane 0 alone issued its 129 prefetches, 6 %
// of the f32 rank-1 kernel's instructions and 5 % of its stall samples
// (ncu SourceCounters, hyg version 2 at 1e-2, PERF.md v50).
template <typename T>
__device__ __forceinline__ void prefetch_tile(const T *src, const Geo &g, unsigned long long base, int lz, int ly,
                                              int lx, int lane) {
    const unsigned long long plane = g.ny * g.nx;
    const unsigned bytes = (unsigned)(lx * sizeof(T));
    if (lz * ly == 1) {
        const char *row = (const char *)(src + base);
        for (unsigned off = 128u * (unsigned)lane; off < bytes; off += 32u * 128u)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(row + off));
        if (lane == 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + bytes - 1));
        return;
    }
    for (int r = lane; r < lz * ly; r += 32) {
        const int z = r / ly, y = r - z * ly;
        const char *row = (const char *)(src + base + z * plane + (unsigned long long)y * g.nx);
        for (unsigned off = 0; off < bytes; off += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + off));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + bytes - 1));
    }
}
