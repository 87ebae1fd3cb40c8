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
//     rank-3 tiles with fill values the v9 walk in two passes (FILLP: the
//     first finds the placeholder) instead of the slow path; v54: in one
//     pass in the optimistic kernel (HF 5), each z-plane's placeholder
//     found as the plane is quantized (ENC_FILL_1P).
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

// The pieces, in the order they build on each other:
#include "encode_common.cuh"      // configuration, scratch layout, per-value coding
#include "encode_ptx.cuh"         // the staged walks' inline-PTX primitives (cp.async, sub_left, prmt)
#include "encode_rank3.cuh"       // the staged f32 rank-3 walk
#include "encode_slot_walks.cuh"  // the slot-order walks (f64, rank 1)
#include "encode_flat.cuh"        // the flat walk (flat tiles)
#include "encode_rank2.cuh"       // the staged f32 rank-2 walk
#include "encode_slow.cuh"        // the slow path, the masks
#include "encode_rows3.cuh"       // the row walk for clipped rank-3 tiles (PCT; holes only with a fill value)
#include "encode_write.cuh"       // a version-1 tile's layout and write
#include "encode_v2.cuh"          // version 2's code section
#include "tile_order.cuh"         // the job's full tiles and clipped tile j (encode_clipped.cuh)
#include "encode_clipped.cuh"     // pre-coded clipped tiles (PCT)

// FAST: the one fast path compiled in (0 none, else the rank of the shape),
// so each instantiation's registers are allocated for one walk only.
// HF: 0 has_fill read at run time; 1 no fill, 2 fill, known at compile
// time (one copy of the walk per kernel instead of two); 3 and 4
// the optimistic kernels: no fill, full tiles only, no slow
// path; 4 also without the 16-bit coder. They run first, 4 then 3 then
// the full kernel, and each runs only if the ones before it gave the job
// up: at the first tile its walk cannot take, a kernel sets its bit in
// *abortf and stops (4: bit 0 for 16-bit codes, bit 1 for anything else;
// 3: bit 1), and every kernel of the job gets abortf. 5: the optimistic
// kernel of fields with a fill value (the FILLP walk, hot: one pass; pre-coded
// clipped tiles copied), before the full kernel HF 2; it gives up with
// bit 1.
// V: the container version written (1 or 2; encode_v2.cuh): a template
// parameter, so that version 1's kernels hold no code of version 2's (and
// their machine code is what it was before version 2).
// PC: the copy of tiles pre-coded by encode_clipped_kernel (PCT) compiled
// in. Rank 3 always has it (v24's A/B: the smooth field unchanged); rank 2
// has a kernel with it for jobs with clipped tiles and one without, since
// in the f32 rank-2 kernel the copy path raised nvcc 11.8's spills from
// 40 / 52 to 132 / 152 bytes, and hst (no clipped tiles) compressed 4-6 %
// slower after v25 (PERF.md v25).
// AL16: every full tile's rows are 16-byte aligned (src and nx % 4 == 0;
// fzgpu.cu dispatches so), and the staged walk stages them without
// Stager's 4-byte copies, cold code in its loop that costs instruction
// fetch (PERF.md v40): the fill fields' optimistic kernel (HF 5; levitus
// compress +4-7 %, coads +2-4 %) and f32 rank 2 (hst +1 %, version 2
// +2-3 %) come with it and without (a device-resident snapshot may start
// at any multiple of its element size). The smooth field's optimistic
// kernels (HF 3, 4) were measured 1-2 % slower with it (v40 calls 1-3)
// and have it not.
// PAD: the job's field has padded box tiles (FORMAT.md 3.2; f32 rank 3
// only, fzgpu.cu): every tile is coded as a full one, the clipped ones by
// the same walks with their loads clamped to the field (Stager's PAD,
// pad_off), so no tile takes the slow path for being clipped and none is
// pre-coded. The box kernels do not compile that code in.
template <typename T, int FAST, int HF = 0, int V = 1, int PC = (FAST == 3), bool AL16 = false, bool PAD = false>
__global__ void __launch_bounds__(ENC_W * 32, ENC_MINB_W(FAST, sizeof(T)))
    encode_warp_kernel(const T *__restrict__ src, Geo g, const DevParams *__restrict__ prm, int has_fill_arg,
                       unsigned long long fill_bits, unsigned long long tile0, unsigned long long ntiles,
                       unsigned *__restrict__ out, unsigned long long cap, unsigned long long *status,
                       unsigned *tsize, unsigned long long *tprefix, unsigned *touts, double *terr,
                       unsigned *ticket, unsigned *err, unsigned char *scratch, unsigned *abortf,
                       const unsigned *__restrict__ pre, const unsigned long long *__restrict__ soffs) {
#ifndef ENC_WARP_SMEM  // the host emulation (tools/encode_warp_emu.cpp) names its own array
    extern __shared__ __align__(16) unsigned enc_smem[];
#define ENC_WARP_SMEM enc_smem
#endif
    const int has_fill = HF == 5 ? 1 : HF >= 3 ? 0 : HF ? HF - 1 : has_fill_arg;
    grid_wait();  // params, statuses and ticket from the kernels before (launch_dependent)
    constexpr bool opt = (HF == 3 || HF == 4 || HF == 5) && FAST == 3 && sizeof(T) == 4,
                   opt8 = opt && HF == 4, optf = opt && HF == 5;
    // the bits of *abortf that make this kernel stop (it sets them) and run
    constexpr unsigned quit_bits = opt8 ? 3u : 2u;
    if ((opt || (FAST == 3 && HF < 3 && sizeof(T) == 4)) && abortf) {  // the kernels of an optimistic job
        const unsigned a = *(const volatile unsigned *)abortf;
        if (!opt && !(a & 2u)) return;                                // an optimistic kernel did the job
        if (opt && !opt8 && !optf && (!(a & 1u) || (a & 2u))) return;  // the narrow one did it, or it cannot
    }
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    unsigned *pw = ENC_WARP_SMEM + wib * PW_WORDS;
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
    // parking cost 10-26 % there (PERF.md v12); again with v30's f32 rank-1
    // walk, whose look-back polls are 14 % of its instructions (v31: hyg
    // compress -7 to -21 % with the scanner, spills 128 / 304 -> 380 / 724
    // bytes in the version-2 kernel; branch r1-scan).
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
        if (lane == 0) r = ticket_inc(ticket);
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
        tile_box<optf>(g, t, z0, y0, x0, lz, ly, lx);
        // PAD: the tile's box, for the clamped staging; coded as a full tile
        const Box3 box{lz, ly, lx};
        if (PAD) {
            lz = g.tz;
            ly = g.ty;
            lx = g.tx;
        }
        const bool full = lz == g.tz && ly == g.ty && lx == g.tx;
        if (!PAD && PC && (FAST == 3 || FAST == 2) && V == 1 && pre && !full && tsize[rel]) {
            // pre-coded by encode_clipped_kernel (encode_clipped.cuh): its size,
            // raw count and error are in the tables, its bytes in pre at the
            // offset soffs holds. Publish the size, then park the bytes (or,
            // too big to park, wait for the prefix and copy them out).
            const unsigned size = tsize[rel];
            // (the no-fill optimistic kernels take jobs of whole tiles only:
            // never here, and their code as before soffs)
            const unsigned long long soff = opt && !optf ? tprefix[rel] : soffs[rel];
            Parked P;
            if (scan) unpark_issue(P);
            publish_size(status, rel, size, lane);
            unsigned tk = 0;
            if (scan) {
                if (unpark_finish(P)) return;
                tk = take_async();
            }
            const uint4 *s4 = (const uint4 *)(pre + soff / 4);
            if (scan && size <= SC_PARK_BYTES) {
                uint4 *p4 = (uint4 *)park;
                for (unsigned i = lane; i < (size + 15) >> 4; i += 32) p4[i] = __ldcs(s4 + i);
                __syncwarp();
                if (lane == 0) {
                    const unsigned long long tb = tables_before<optf>(g, t, tile0);
                    pstate[0] = (unsigned)rel;
                    pstate[1] = size;
                    pstate[2] = (unsigned)tb;
                    pstate[3] = (unsigned)(tb >> 32);
                }
            } else {
                // too big to park: an optimistic kernel gives the job up (its
                // scanner may stop before this tile's prefix, should another
                // warp give up)
                if (optf) {
                    if (lane == 0) atomicOr(abortf, 2u);
                    return;
                }
                const unsigned long long excl =
                    scan ? await_prefix(status, rel, size, lane) : lookback(status, rel, size, lane);
                if (lane == 0) tprefix[rel] = excl;
                unsigned *o = tile_out(out, cap, err, tables_before<optf>(g, t, tile0), excl, size, lane);
                if (o)
                    for (unsigned i = lane; i < size / 4; i += 32) o[i] = __ldcs(pre + soff / 4 + i);
            }
            __syncwarp();
            rel = scan ? (unsigned long long)__shfl_sync(0xffffffffu, tk, 0) - 1 : take();
            continue;
        }
        // the optimistic kernels walk full tiles only: a clipped one not
        // pre-coded gives the job up here, so that no code for clipped
        // tiles (the prefetch, 123 instructions, nvcc 11.8) sits in their
        // loop, cold (instruction fetch: PERF.md item 3)
        if (opt && !full) {
            if (lane == 0) atomicOr(abortf, 2u);
            return;
        }
        const unsigned long long base = (z0 * g.ny + y0) * g.nx + x0;
        if (!(staged || staged2) || !full) prefetch_tile(src, g, base, lz, ly, lx, lane);
        TileSum ts;
        ts.nraw = ts.nfill = ts.wide = 0;
        bool done = false;
        if (FAST == 3 && full) {
            if constexpr (staged)
                done = opt8 ? enc_fast3<false, true, true, V, false, false, PAD>(src, g, base, inv, step, ebf, 0, pw, sq,
                                                                                 sesc, sraw, lane, ts, box)
                       : optf ? enc_fast3<true, true, false, V, true, AL16, PAD>(src, g, base, inv, step, ebf,
                                                                           (unsigned)fill_bits, pw, sq, sesc, sraw, lane, ts,
                                                                           box)
                       : hot ? enc_fast3<false, true, false, V, false, false, PAD>(src, g, base, inv, step, ebf, 0, pw, sq,
                                                                                   sesc, sraw, lane, ts, box)
                       : has_fill ? enc_fast3<true, false, false, V, true, false, PAD>(src, g, base, inv, step, ebf,
                                                                           (unsigned)fill_bits, pw, sq, sesc, sraw,
                                                                           lane, ts, box)
                                : enc_fast3<false, false, false, V, false, false, PAD>(src, g, base, inv, step, ebf, 0, pw,
                                                                                       sq, sesc, sraw, lane, ts, box);
            else
                done = enc_fast3_v6<T, V>(src, g, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw, lane, ts);
        } else if (FAST == 2 && full) {
            if constexpr (staged2)
                done = enc_fast2s<V, AL16>(src, g, base, inv, step, ebf, has_fill, (unsigned)fill_bits, pw, sq, sesc,
                                           sraw, lane, ts);
            else
                done = enc_fast2<T, V>(src, g, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw, lane, ts);
        }
        else if (FAST == 1 && full) {
            // f32 without a fill value: the element-order walk with the f32
            // check (encode_flat.cuh; it takes fill values for holes, so
            // fields with one keep enc_fast1)
            if constexpr (sizeof(T) == 4)
                done = has_fill ? enc_fast1<T, V>(src, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw,
                                                  lane, ts)
                                : enc_flat32<V, false>(src, g, base, inv, step, ebf, 0, 0u, pw, sq, sesc, sraw, lane, ts);
            else
                done = enc_fast1<T, V>(src, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw, lane, ts);
        }
        else if (FAST == 4 && full && flat_walkable(g)) {
            if constexpr (sizeof(T) == 4)
                done = enc_flat32<V>(src, g, base, inv, step, ebf, has_fill, (unsigned)fill_bits, pw, sq, sesc, sraw,
                                     lane, ts);
            else
                done = enc_flat<T, V>(src, g, base, inv, step, eb, has_fill, fill_bits, pw, sq, sesc, sraw, lane, ts);
        }
        __syncwarp();
        if (opt && !done) {  // a tile the walk cannot take: a kernel after this one redoes the job
            if (lane == 0) atomicOr(abortf, opt8 && ts.wide ? 1u : 2u);
            return;
        }
        if (!done)
            enc_slow<T, FAST, V, PAD>(src, g, z0, y0, x0, lz, ly, lx, inv, step, eb, has_fill, fill_bits, pw, sc, lane, ts);
        else {
            if (ts.nraw) {
                if (FAST == 3)  // the fast paths take full tiles only
                    raw_mask_rows3(sraw, (unsigned *)(sc + SC_MR), lane);
                else if (FAST == 4)
                    raw_mask_flat(sraw, (unsigned *)(sc + SC_MR), g, flat_r0(g, base), TILE, lane);
                else
                    raw_mask_sparse(sraw, (unsigned *)(sc + SC_MR), lz, ly, lx, g, lane);
            }
            // the FILLP walk's fill mask: the same transform as the raw
            // mask's, from the fill bitmap in the staging rows' padding
            // (stage_pad); the fill kernel's mask goes there too (mf4)
            if constexpr (staged && (HF == 2 || HF == 5))
                if (ts.nfill) {
                    auto fe = [&](int i) { return *stage_pad(i); };
                    if constexpr (HF == 5)
                        raw_mask_rows3_at(fe, [&](int w) { return stage_pad(128 + w); }, lane);
                    else
                        raw_mask_rows3_at(fe, [&](int w) { return (unsigned *)(sc + SC_MF) + w; }, lane);
                }
        }
        __syncwarp();
        bool quit = false;  // the optimistic kernel's job was given up
        auto tail = [&]() -> unsigned {
            Parked P;
            if (scan) unpark_issue(P);
            // the fill kernel's fill mask: the lane's 16 bytes in the staging
            // rows' padding (stage_pad: no round trip through L2 in the tile's
            // tail, v61); every other kernel's in the scratch (SC_MF)
            const uint4 *mf4 = nullptr;
            if constexpr (staged && HF == 5) mf4 = (const uint4 *)stage_pad(128 + 4 * lane);
            const auto L = tile_layout_v<T, V>(pw, sc, ts, lane, mf4);
            publish_size(status, rel, L.size, lane);  // later tiles wait for it: before the error fold
            double M = ts.merr;
            if (!((staged || staged2) && done))  // enc_fast3 and enc_fast2s fold their own
    #pragma unroll
                for (int o2 = 16; o2 > 0; o2 >>= 1) M = fmax(M, __shfl_xor_sync(0xffffffffu, M, o2));
            // the tile's raw values that the field has (Stats.Outliers): a
            // clipped padded tile's cells outside repeat edge values
            const unsigned outs = PAD && ts.nraw && !(box.lz == g.tz && box.ly == g.ty && box.lx == g.tx)
                                      ? raw_inside(sraw, box, lane)
                                      : ts.nraw;
            if (lane == 0) {
                tsize[rel] = L.size;
                touts[rel] = outs;
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
                tile_write<T, 1, true, PAD>(TileStore<scan>(true), park, L, ts, pw, sc, src, g, z0, y0, x0, ly, lx, true, lane,
                                            mf4);
            } else {
            if (!parks) {  // the scanner: too big to park (rare), so the warp waits here
                const unsigned long long excl =
                    scan ? await_prefix(status, rel, L.size, lane) : lookback(status, rel, L.size, lane);
                if (lane == 0) tprefix[rel] = excl;
                o = tile_out(out, cap, err, tables_before<optf>(g, t, tile0), excl, L.size, lane);
            }
            if (o)
                tile_write<T, FAST == 3 ? 1 : 4, false, PAD>(TileStore<scan>(parks), o, L, ts, pw, sc, src, g, z0, y0, x0, ly, lx,
                                                 staged && done, lane, mf4);
            }
            if (parks) {
                __syncwarp();
                if (lane == 0) {
                    const unsigned long long tb = tables_before<optf>(g, t, tile0);
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
