// The staged f32 rank-3 walk (v9-v22, enc_fast3) and what it alone uses:
// cp.async staging (Stager) and the narrow coders (put_narrow). Included
// by encode_warp.cuh right after encode_ptx.cuh (the inline-PTX primitives:
// cp.async, sub_left, prmt), so that the host emulation
// (tools/encode_rank3_emu.cpp) can define those and include this file;
// encode_rank2.cuh builds on its staging and coders.

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

// Sign-magnitude codes (FORMAT.md section 4) of two residuals with
// |d| <= 32767, or d = -32768 for an escape (code 0x8000): per 16-bit half
// h of the packed pair, (h ^ m) + (m & 1) = |h| where m replicates h's
// sign (no carry leaves a half), and the sign goes back on top.
__device__ __forceinline__ unsigned code16x2(int d0, int d1) {
    const unsigned p = prmt((unsigned)d0, (unsigned)d1, 0x5410), m = prmt(p, p, 0xBB99);
    return ((p ^ m) + (m & 0x00010001u)) | (p & 0x80008000u);
}

// Quantize + check of one f32 value for the v9 walk (quant_e32), the
// check's |e| folded into em, a float max: per value one subtraction and
// one max (the raw test, e > ebf, and the largest e of the values that are
// not raw are taken from em once per z-plane; v14 kept both per value, with
// integer operations on the bits of e, 2 instructions more per value:
// PERF.md v15). No NaN reaches em: the walk leaves on a hole first.
__device__ __forceinline__ int quant_f32(float x, double inv, double step, float &em, bool &hole,
                                         double lim = QUANT_S_LIM) {
    float e;
    const int q = quant_e32(x, inv, step, e, hole, lim);
    em = fmaxf(em, e);
    return q;
}

// Quantize + check of a staged column's 16 values (quant_f32) into q, the
// largest |e| folded into em; true for a hole: a value without q or, with
// fills, the fill value (the rank-3 walk without FILLP, the rank-2 walk).
__device__ __forceinline__ bool quant_col(const float *xb, double inv, double step, bool fills, unsigned fill32,
                                          int (&q)[16], float &em) {
    bool hole = false;
#pragma unroll
    for (int y = 0; y < 16; y++) {
        const float x = xb[STG_ROW * y];
        bool h;
        q[y] = quant_f32(x, inv, step, em, h);
        hole |= h;
        hole |= fills && __float_as_uint(x) == fill32;
    }
    return hole;
}

// The warp's two plane buffers (5 KiB): one array for both instantiations.
__device__ __forceinline__ float *stage_buf() {
    __shared__ __align__(16) float stage3[ENC_W][2 * STG_PLANE];
    return stage3[threadIdx.x >> 5];
}

// Word w (0..255) of the staging rows' padding: words 32..39 of the 32 rows
// of the two plane buffers, which no copy, column or slot read touches.
// The FILLP walks keep the element-order fill bitmap there (FE: word
// z * 16 + y at w = z * 16 + y, rows 0-15), and the fill kernel (HF 5) its
// tile's slot-order fill mask (MF: word k at w = 128 + k, rows 16-31).
// Until v61 both sat in the global scratch (SC_MF, and the fill bitmap's
// own 512 bytes, now SC_UNUSED), and the tile's tail read each back through
// L2. Four consecutive words from a multiple of 4 are one 16-byte aligned
// piece.
__device__ __forceinline__ unsigned *stage_pad(int w) {
    return (unsigned *)stage_buf() + (w >> 3) * STG_ROW + 32 + (w & 7);
}

// Copies the planes of one full rank-3 f32 tile into the warp's buffers.
// 16-byte copies when every row starts on a 16-byte boundary: lane l
// copies piece l % 8 of rows l / 8 + 4u (u = 0..3); else 4-byte copies,
// lane l column l of every row. Each plane advances one pointer by
// `plane` (the rank-2 walk's Stager2 sets that step per segment).
// AL16: the caller knows every row is 16-byte aligned (encode_warp.cuh's
// AL16 kernels, dispatched so by fzgpu.cu), so the 4-byte path is not
// compiled in: its 16 unrolled copies sat in the hot loop, cold, and cost
// instruction fetch (PERF.md v40).
// PAD (padded tiles, FORMAT.md 3.2): a clipped tile (box lz x ly x lx
// short of 8 x 16 x 32) is staged whole by 4-byte copies from the nearest
// value inside: lane l's column min(l, lx - 1), row min(y, ly - 1), plane
// min(z, lz - 1); full tiles stage as above. Only the padded kernels
// compile that path in.
template <bool AL16 = false, bool PAD = false>
struct Stager {
    const float *gz;
    unsigned long long rstep, plane;
    unsigned scp;
    bool al16;
    // PAD: the tile is clipped; the lane's clamped column, the next plane,
    // the box's last plane and row, the row length, the 4-byte copies' address
    bool clip;
    const float *cx;
    int zi, zl, yl;
    unsigned long long nxp;
    unsigned scp4;
    __device__ __forceinline__ Stager(const float *src, const Geo &g, unsigned long long base, float *stg, int lane,
                                      int lz = 8, int ly = 16, int lx = 32) {
        const unsigned long long nx = g.nx;
        plane = g.ny * g.nx;
        al16 = AL16 || ((nx & 3) == 0 && (((unsigned long long)(src + base)) & 15) == 0);
        gz = src + base + (al16 ? (unsigned long long)(lane >> 3) * nx + 4 * (lane & 7) : lane);
        rstep = al16 ? 4 * nx : nx;
        scp = (unsigned)__cvta_generic_to_shared(stg) + 4u * (al16 ? STG_ROW * (lane >> 3) + 4 * (lane & 7) : lane);
        if (PAD) {
            clip = lz < 8 || ly < 16 || lx < 32;
            cx = src + base + min(lane, lx - 1);
            zi = 0;
            zl = lz - 1;
            yl = ly - 1;
            nxp = nx;
            scp4 = (unsigned)__cvta_generic_to_shared(stg) + 4u * lane;
        }
    }
    // The next plane to load is z (a fresh stager: the FILLP walk's second
    // staging of one plane).
    __device__ __forceinline__ void seek(int z) {
        gz += (unsigned long long)z * plane;
        if (PAD) zi = z;
    }
    // The bits of value (z, y, lane) of the tile from global memory (rare:
    // raw values), after plane z's residuals replaced it in the buffer;
    // planes up to min(z + 1, 7) have been loaded.
    __device__ __forceinline__ unsigned bits(int z, int y, int lane) const {
        if (PAD && clip)
            return __float_as_uint(cx[(unsigned long long)min(z, zl) * plane + (unsigned long long)min(y, yl) * nxp]);
        const unsigned long long nx = al16 ? rstep >> 2 : rstep;
        const unsigned long long lo = al16 ? (unsigned long long)(lane >> 3) * nx + 4 * (lane & 7) : lane;
        const float *p = gz - (z < 7 ? 2 : 1) * plane - lo + y * nx + lane;
        return __float_as_uint(*p);
    }
    // the next plane into buffer b (one commit group)
    __device__ __forceinline__ void load(int b) {
        if (PAD && clip) {
            const float *p = cx + (unsigned long long)min(zi, zl) * plane;
            zi++;
            const unsigned d = scp4 + 4u * STG_PLANE * b;
            // rows past the box's last (yl) repeat it: the row's address
            // moves on by a 64-bit add up to it, where min(y, yl) * nxp took
            // a sign extension and a 64-bit product a row (with the copy 8
            // instructions, 6 now in nvcc 11.8's SASS: ptxas selects between
            // the sums, also when the add is predicated in PTX; the loop was 4.4 % of the padded
            // fill kernel's instructions on coads at 1e-3; unrolled by 4, not
            // 16, it compressed at 0.98-0.99x: PERF.md v44)
#pragma unroll
            for (int y = 0; y < 16; y++) {
                cp_async4(d + 4u * STG_ROW * y, p);
                if (y < yl) p += nxp;
            }
            cp_async_commit();
            return;
        }
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

// HOT: tiles with an escape or more than HOT_RV_MAX raw values are left to
// the slow path (false), so that a walked tile always parks and has no
// escape list. NO16: also tiles with a z-plane of 16-bit codes (ts.wide
// says so), and no 16-bit coder (the narrow optimistic kernel).
// FILLP (with HF, v22): fill values are not holes; they take their
// z-plane's placeholder (FORMAT.md section 4, Holes: the mean q of the
// plane's other values, an all-fill plane the nearest earlier plane's, the
// planes before the first with values that one's; v46, the tile's mean q
// before), are left out of the check and the error, and their bits go to
// the element-order fill bitmap (stage_pad); the caller turns it into the fill
// mask. Without FILLP a fill value leaves the tile to the slow path. FILLP
// walks the tile twice (v36): the first pass quantizes every value (check,
// raw values, fill bitmap, each z-plane's sum of q and count) and parks
// each z-plane's q, 16 bits each, in the plane-buffer words that z-plane's
// codes take later (fill_park); the second takes them back, puts the
// plane's placeholder in for the fill values, and runs the Lorenzo steps
// and coders. A tile with a |q| > 32767 stages and quantizes its values
// again in the second pass instead. (Until v35 a pass of its own, through
// L2 before the walk, summed q: a fifth of the kernel's instructions and a
// third of its stalls on levitus. One pass with each plane's mean taken as
// the plane is quantized, an f64 division per plane with fill values,
// compressed 0.89-0.93x as fast: PERF.md v46.) With HOT (the optimistic
// kernel, every |q| <= 32767) FILLP walks it once since v54 (ONEP,
// fill_onepass below: 1.04-1.05x).
// AL16: every row of the tile is 16-byte aligned (Stager).
// PAD: a padded field's tile (Stager's PAD), box its extent in the field.
template <bool HF, bool HOT = false, bool NO16 = false, int V = 1, bool FILLP = false, bool AL16 = false,
          bool PAD = false>
__device__ __forceinline__ bool enc_fast3(const float *__restrict__ src, const Geo &g, unsigned long long base,
                                          double inv, double step, float ebf, unsigned fill32, unsigned *pw,
                                          int *sq, unsigned *sesc, unsigned *sraw, int lane, TileSum &ts,
                                          Box3 box = Box3{8, 16, 32}) {
    const unsigned F = 0xffffffffu;
    float *stg = stage_buf();
    Stager<AL16, PAD> st(src, g, base, stg, lane, box.lz, box.ly, box.lx);
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
    // FILLP in one pass (ONEP): the fill fields' optimistic walk (HOT)
    constexpr bool ONEP = FILLP && HOT && ENC_FILL_1P;
    // planes 1..14 stay zero where a z-plane's codes are narrow (put_narrow);
    // FILLP's second pass zeroes each z-plane's words as it takes its q back
    if (!FILLP || ONEP)
#pragma unroll
        for (int p = 1; p < 15; p++) *(uint4 *)&pw[p * PW_STRIDE + 4 * lane] = make_uint4(0, 0, 0, 0);
    // Plane z staged in buffer z % 2 (the next one's copies issued first).
    auto staged = [&](int z) -> float * {
        const int b = z & 1;
        if (z < 7) {
            st.load(b ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncwarp();
        return xcol + b * STG_PLANE;
    };
    // Rare: a value over the bound (raw). Which ones, and the largest |e|
    // of the others, from a second pass over the staged column (FILLP: the
    // fill values left out). Not unrolled: unrolled by 4 or 16 it was
    // slower on every field (code layout, PERF.md v15).
    auto rescan = [&](const float *xb, unsigned &rawm, float &em) {
        em = 0.0f;
#pragma unroll 1
        for (int y = 0; y < 16; y++) {
            float e = 0.0f;
            bool h;
            const float x = xb[STG_ROW * y];
            (void)quant_f32(x, inv, step, e, h);
            const bool fy = FILLP && __float_as_uint(x) == fill32;
            const bool r = e > ebf && !fy;
            rawm |= (unsigned)r << (15 - y);
            em = r || fy ? em : fmaxf(em, e);
        }
    };
    // Rare: raw values (rows with one: a warp OR of the lanes' masks;
    // called only for a plane whose rescan ran, so that the other planes,
    // most of them, skip the OR: every rawm is 0 there;
    // at 1e-4 about one tile in ten has one, on csm most). The
    // element-order bitmaps' words of this plane are z * 16 + y, bit
    // x; words of rows without any stay 0. Rows in increasing y, so the
    // values' bits, appended to srv for the tile's write, come in
    // element order. They are read back from global memory (L2): taken
    // from the buffer before the residuals overwrite it, the loop had
    // to run before the Lorenzo steps and cost as much (PERF.md v15).
    auto list_raw = [&](int z, unsigned rawm) {
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
    };
    // The Lorenzo steps of plane z's column q: the residuals d over its
    // buffer (db, the column's word of row 0), and their extremes.
    auto lorenzo = [&](int z, int *db, const int (&q)[16], int &dmax, int &dmin) {
        dmax = 0;
        dmin = 0;
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
    };
    // Quantizes plane z (buffer z % 2) and turns it into residuals d in
    // place; mabs: the largest |d|. False for a hole (the tile then takes
    // the slow path).
    auto quant_plane = [&](int z, unsigned &mabs) -> bool {
        float *const xb = staged(z);
        // quantize the column first: 16 independent chains the scheduler
        // can interleave; the Lorenzo steps and shuffles after them
        int q[16];
        unsigned rawm = 0;  // bit 15 - y: value y is raw
        float em = 0.0f;
        if (__any_sync(F, quant_col(xb, inv, step, HF, fill32, q, em))) {
            cp_async_wait<0>();  // nothing may land in the buffer after the slow path starts
            return false;
        }
        const bool rs = __any_sync(F, em > ebf);  // a raw value in the plane (rare)
        if (rs) rescan(xb, rawm, em);
        emx = fmaxf(emx, em);
        int dmax, dmin;
        lorenzo(z, (int *)xb, q, dmax, dmin);
        if (rs) list_raw(z, rawm);
        // the largest |d| of the z-plane picks the code width
        mabs = __reduce_max_sync(F, max((unsigned)dmax, 0u - (unsigned)dmin));
        return true;
    };
    // FILLP's z-plane z, staged at xb (both walks): each value (y, lane),
    // whether it is the fill value (f), the plane's rows of the fill bitmap,
    // every word written (nfill is counted from them), 4 at a time, and its
    // q, quantized and checked with the fill value taken as 0: q 0, no
    // error, no hole, no big q, so that none of that needs a test of f; each
    // q and f go to take(y, q, f). lim (QUANT_S_LIM16 where HOT): a q that
    // the park cannot hold is a hole, one compare (the optimistic kernel
    // gives the job up for either). em: the largest |e| of the lane's
    // values. False for a hole (once the copies in flight have landed).
    auto fill_rows = [&](int z, const float *xb, float &em, auto &&take) -> bool {
        unsigned bf[4];  // rows y - y % 4 ... y of the fill bitmap
        // the plane's 16 words of the fill bitmap (stage_pad), 4 at a time
        auto sfe4 = [&](int g) { return (uint4 *)stage_pad(16 * z + 4 * g); };
        bool hole = false;
        em = 0.0f;
#pragma unroll
        for (int y = 0; y < 16; y++) {
            const float x = xb[STG_ROW * y];
            bool h;
            const bool f = __float_as_uint(x) == fill32;
            bf[y & 3] = __ballot_sync(F, f);
            if ((y & 3) == 3 && lane == 0) *sfe4(y >> 2) = make_uint4(bf[0], bf[1], bf[2], bf[3]);
            const int qq = quant_f32(f ? 0.0f : x, inv, step, em, h, HOT ? QUANT_S_LIM16 : QUANT_S_LIM);
            hole |= h;
            take(y, qq, f);
        }
        if (__any_sync(F, hole)) {
            cp_async_wait<0>();  // nothing may land in the buffer after the walk gives the tile up
            return false;
        }
        return true;
    };
    // FILLP's park of z-plane z's q: word k (0..7) of lane l holds the q of
    // rows 2k and 2k + 1 of column l (16 bits each, 0x8000 for a fill
    // value). The 256 words are the z-plane's own words of the 16 planes
    // (plane p, words (z / 4) * 64 + 4j + ((z % 4) ^ (p / 4 % 4)), j < 16, as
    // put_narrow and the 16-bit coder write them), so coding the planes
    // before it overwrites none of them; lane l's are in planes 4 (l % 4) +
    // k % 4, j = l / 4 + 8 (k / 4): the 32 lanes' words of one k fall in 32
    // different banks (PW_STRIDE = 4 mod 32).
    unsigned *const fpark = pw + 4 * (lane & 3) * PW_STRIDE + 4 * (lane >> 2);
    auto fill_park = [&](int z, int k) -> unsigned * {
        return fpark + (k & 3) * PW_STRIDE + 32 * (k >> 2) + (z >> 2) * 64 + ((z & 3) ^ (lane & 3));
    };
    // FILLP's first pass over plane z: quantize and check, the fill bitmap,
    // raw values, the lane's sum of the plane's q (fill values add their q
    // of 0) to the scratch (psc), and the park. big: a |q| > 32767 that the
    // park cannot hold. False for a hole.
    // The sums: int in the optimistic walk (HOT: every |q| <= 32767, so a
    // plane's 512 q sum to less than 2^24), else int64. Lane l's of plane z
    // at psc[32 z + l], in sq's first 2 KiB (escapes go there later, in
    // the second pass).
    using PSum = typename std::conditional<HOT, int, long long>::type;
    PSum *const psc = (PSum *)sq;
    auto fill_quant = [&](int z, bool &big) -> bool {
        float *const xb = staged(z);
        int q[16];
        unsigned rawm = 0;  // bit 15 - y: value y is raw
        float em;
        int s0 = 0, s1 = 0;  // 8 values each: |sum| < 2^31
        if (!fill_rows(z, xb, em, [&](int y, int qq, bool f) {
                q[y] = f ? -32768 : qq;
                (y < 8 ? s0 : s1) += qq;
                if (!HOT) big |= (unsigned)(qq + 32767) > 65534u;
            }))
            return false;
        if (__any_sync(F, em > ebf)) {
            rescan(xb, rawm, em);
            list_raw(z, rawm);
        }
        emx = fmaxf(emx, em);
        psc[32 * z + lane] = (PSum)s0 + s1;
#pragma unroll
        for (int k = 0; k < 8; k++) *fill_park(z, k) = prmt((unsigned)q[2 * k], (unsigned)q[2 * k + 1], 0x5410);
        __syncwarp();  // this buffer takes plane z + 2
        return true;
    };
    // ONEP (v54): FILLP in one pass, the optimistic walk's (HOT: every |q|
    // <= 32767). Plane z's placeholder is known once the plane is
    // quantized: the warp sums its q and counts its fill values (two
    // reductions), divides (32-bit: |sum| < 2^24), puts the placeholder in
    // for the fill values and codes the plane, as quant_plane does for the
    // fields without fill. The lane's sum and fill count travel in one
    // register: a fill value's q is marked FILL_MARK (2^20) and added like
    // the others (16 q sum to less than 2^19 in magnitude), so per value
    // the walk pays the mark's select, the add and the placeholder's
    // select, where the two passes parked and unparked q (v36-v53).
    // All-fill planes take the earlier plane's placeholder (ph, carried);
    // those before the first plane with values were coded with 0 for it,
    // which gives the same codes (a constant plane's residuals are 0 but
    // for the origin): at that plane the origin and the Dy carry of row 0
    // (a[0], the constant) become its placeholder (FORMAT.md section 4,
    // Holes). v46 measured one pass with a 64-bit sum, a popc a row and an
    // f64 division a plane at 0.89-0.93x of two passes.
    constexpr int FILL_MARK = 1 << 20;
    auto fill_onepass = [&](int z, int &ph, bool &seen, unsigned &mabs) -> bool {
        float *const xb = staged(z);
        int q[16];
        unsigned rawm = 0;  // bit 15 - y: value y is raw
        float em;
        int s = 0;  // the lane's sum of q plus FILL_MARK a fill value
        if (!fill_rows(z, xb, em, [&](int y, int qq, bool f) {  // HOT: QUANT_S_LIM16
                q[y] = f ? FILL_MARK : qq;
                s += q[y];
            }))
            return false;
        const int nfl = (s + (FILL_MARK >> 1)) >> 20;  // the lane's fill values
        const unsigned nf = __reduce_add_sync(F, (unsigned)nfl);
        const int sum = (int)__reduce_add_sync(F, (unsigned)(s - nfl * FILL_MARK));
        nfill += nf;
        if (nf < 512u) {
            const int p = sum / (int)(512u - nf);  // truncated toward zero, as FORMAT.md's
            if (!seen && z > 0) {
                a[0] = p;
                origin = p;
            }
            seen = true;
            ph = p;
        }
        if (nf > 0u)
#pragma unroll
            for (int y = 0; y < 16; y++) q[y] = q[y] == FILL_MARK ? ph : q[y];
        const bool rs = __any_sync(F, em > ebf);  // a raw value in the plane (rare)
        if (rs) rescan(xb, rawm, em);
        emx = fmaxf(emx, em);
        int dmax, dmin;
        lorenzo(z, (int *)xb, q, dmax, dmin);
        if (rs) list_raw(z, rawm);
        mabs = __reduce_max_sync(F, max((unsigned)dmax, 0u - (unsigned)dmin));
        return true;
    };
    // FILLP's second pass: plane z's q back from the park (or, big, staged
    // and quantized again), ph for the fill values, the park's words zeroed
    // for the coders.
    auto fill_unpark = [&](int z, int ph, bool big, int (&q)[16]) {
        if (big) {
            // a stager of its own a plane, so that none stays live through
            // the second pass for the rare tile that needs it
            const int b = z & 1;
            if (z < 7) {
                Stager<AL16, PAD> s2(src, g, base, stg, lane, box.lz, box.ly, box.lx);
                s2.seek(z + 1);
                s2.load(b ^ 1);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncwarp();
            float *const xb = xcol + b * STG_PLANE;
#pragma unroll
            for (int y = 0; y < 16; y++) {
                const float x = xb[STG_ROW * y];
                float e = 0.0f;
                bool h;
                const int qq = quant_f32(x, inv, step, e, h);
                q[y] = __float_as_uint(x) == fill32 ? ph : qq;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const unsigned w = *fill_park(z, k);
                const int lo = (int)(w << 16) >> 16, hi = (int)w >> 16;
                q[2 * k] = lo == -32768 ? ph : lo;
                q[2 * k + 1] = hi == -32768 ? ph : hi;
            }
        }
#pragma unroll
        for (int k = 0; k < 8; k++) *fill_park(z, k) = 0u;
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
            // both word pairs (rows 8jp + dy: word j = 2jp; rows 8jp + 4 + dy:
            // j = 2jp + 1) in one transpose of 8 registers, every load before
            // the stores: 8 shuffles a stage in step, where a pair at a time
            // (4, behind the pair's stores) left the warp waiting (v57: coads
            // compress 1.01 / 1.01 / 1.02x, smooth3d 1.00x)
            unsigned x[8];
#pragma unroll
            for (int jp = 0; jp < 2; jp++)
#pragma unroll
                for (int k = 0; k < 4; k++)
                    x[4 * jp + k] = code16x2(sb[STG_ROW * 8 * jp + 8 * k], sb[STG_ROW * (8 * jp + 4) + 8 * k]);
            transpose32n<8>(x, lane);
#pragma unroll
            for (int jp = 0; jp < 2; jp++)
#pragma unroll
                for (int k = 0; k < 4; k++) pwp[32 * jp + 4 * k] = x[4 * jp + k];
        }
        __syncwarp();  // this buffer takes plane z + 2
    };
    if constexpr (ONEP) {
        int ph = 0;         // the placeholder of the last plane with values
        bool seen = false;  // a plane with values came (warp-uniform)
#pragma unroll 1
        for (int z = 0; z < 8; z++) {
            unsigned mabs;
            if (!fill_onepass(z, ph, seen, mabs)) return false;
            if (mabs > esc_max(V)) {  // an escape: the optimistic kernel gives the job up
                cp_async_wait<0>();
                return false;
            }
            code_plane(z, mabs);
        }
    } else if constexpr (FILLP) {
        bool big = false;
#pragma unroll 1
        for (int z = 0; z < 8; z++)
            if (!fill_quant(z, big)) return false;
        int phl;  // lane z: plane z's placeholder
        {
            // Each plane's sum and count once the pass is done, from what it
            // left in global scratch and the fill bitmap in the staging rows'
            // padding (fill_quant's last __syncwarp orders them): lane l
            // reads plane l / 4's quarter l % 4, the sums of lanes
            // 8 (l % 4)..+7 and the fill bitmap's rows 4 (l % 4)..+3.
            // (v46 summed each plane over the warp as the pass went, 5
            // 64-bit shuffles and 16 popc a plane: compress 0.95-0.98x of
            // v45's one sum a tile, H200 v47 call 1; a butterfly over the
            // planes as the pass went, 9 shuffles a tile, with the counts
            // taken here, gained only 1.00-1.01x of that, calls 2-3; this
            // 0.97-1.00x of v45, call 5: PERF.md v47.)
            const uint4 w = *(const uint4 *)stage_pad(4 * lane);
            const uint4 *const s4 = (const uint4 *)psc + (sizeof(PSum) / 4) * 2 * lane;
            PSum sp = 0;
#pragma unroll
            for (int i = 0; i < (int)sizeof(PSum) / 2; i++) {
                const uint4 v = s4[i];
                if constexpr (sizeof(PSum) == 4)
                    sp += (int)(v.x + v.y + v.z + v.w);
                else
                    sp += (long long)(((unsigned long long)v.y << 32 | v.x) + ((unsigned long long)v.w << 32 | v.z));
            }
            const unsigned nl = __popc(w.x) + __popc(w.y) + __popc(w.z) + __popc(w.w);
            nfill = __reduce_add_sync(F, nl);
            unsigned np = nl + __shfl_xor_sync(F, nl, 1);
            sp += __shfl_xor_sync(F, sp, 1);
            np += __shfl_xor_sync(F, np, 2);  // lanes 4z..4z+3: plane z's
            sp += __shfl_xor_sync(F, sp, 2);
            const int from = 4 * (lane & 7);
            np = __shfl_sync(F, np, from);
            sp = __shfl_sync(F, sp, from);
            phl = plane_placeholders(sp, lane < 8 ? 512u - np : 0u, lane);
        }
        // The optimistic kernel gives such a job up (fill_quant's hole), so
        // that it holds none of the second staging: cold code in its loop,
        // 288 of its 6,168 instructions (nvcc 11.8), whose removal sped
        // levitus's compress up 6-10 % and coads's 4-6 % (H200, v39 call 3;
        // the bench's bounds have no such tile: instruction fetch).
        big = !HOT && __any_sync(F, big);  // false in the optimistic kernel at compile time: no second staging compiled in
        if (big) Stager<AL16, PAD>(src, g, base, stg, lane, box.lz, box.ly, box.lx).load(0);  // the second pass stages the tile again
#pragma unroll 1
        for (int z = 0; z < 8; z++) {
            int q[16];
            fill_unpark(z, __shfl_sync(F, phl, z), big, q);
            int dmax, dmin;
            lorenzo(z, (int *)xcol + (z & 1) * STG_PLANE, q, dmax, dmin);
            const unsigned mabs = __reduce_max_sync(F, max((unsigned)dmax, 0u - (unsigned)dmin));
            if (HOT && mabs > esc_max(V)) {  // an escape: the optimistic kernel gives the job up
                cp_async_wait<0>();
                return false;
            }
            code_plane(z, mabs);
        }
    } else {
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
    }
    // it would not fit the park (with FILLP a fill mask beside the raw mask)
    if (HOT && nraw > (FILLP ? (V == 2 ? HOT_RV_MAX_FILL_V2 : HOT_RV_MAX_FILL) : (V == 2 ? HOT_RV_MAX_V2 : HOT_RV_MAX)))
        return false;
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
