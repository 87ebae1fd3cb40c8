// fzgpu: the FZSC codec (docs/FORMAT.md, container versions 1 and 2) as
// CUDA kernels. This file is the dispatch (grid sizes, buffers, which
// kernel, the C API of fzgpu.h); the kernels live in one file per stage:
//
// Compress, per job (a run of whole chunks):
//   range.cuh            range_kernel + params_kernel: once per field (REL):
//                        min/max, then eb and step
//   encode_warp.cuh      encode_warp_kernel (v6-v22): one warp per tile,
//                        persistent, tiles by ticket: the default. Its
//                        pieces: encode_common.cuh (scratch layout, per-value
//                        coding), encode_ptx.cuh (cp.async and other
//                        inline PTX of the staged walks), encode_rank3.cuh
//                        (the staged f32 rank-3 walk), encode_rank2.cuh (the staged f32 rank-2
//                        walk), encode_slot_walks.cuh (f64, rank 1),
//                        encode_flat.cuh (flat tiles' walk, FAST 4),
//                        encode_slow.cuh (any other tile; masks),
//                        encode_write.cuh (a v1 tile's layout and write),
//                        encode_v2.cuh (version 2's code section)
//   encode_clipped.cuh   encode_clipped_kernel (PCT): a version-1 rank-3 or
//                        rank-2 job's clipped tiles, coded before the warp
//                        encoder (rank 3 by the row walk, encode_rows3.cuh)
//   offsets.cuh          each tile's output offset: the sum of the sizes of
//                        earlier tiles, from a decoupled look-back or the
//                        scanner warp, so the output lands at a place that
//                        depends only on the sizes (never on scheduling)
//   tables.cuh           tables_kernel: tile-size tables, stats, the result
//   gather.cuh           GPU-resident snapshots: the job's bytes appended to
//                        the snapshot's device buffer with each chunk's
//                        CRC32C (crc32c.cuh; fzgpu_gather)
// Decompress, per job (decode.cuh):
//   chunk_scan.cuh       chunk_scan_kernel: one block per chunk validates
//                        its tile table, tile sizes -> offsets
//   transcode.cuh        version 2 only: the tiles rewritten as version-1
//                        tiles, which the decoders below then take
//   decode_warp.cuh      decode_warp_kernel: one warp per tile, its walks in
//                        decode_fast.cuh (full staged tiles),
//                        decode_generic.cuh (any box) and decode_flat.cuh
//                        (flat tiles, R = 4); a tile that
//                        does not check out goes on a list for the block
//                        decoder (decode_list_kernel), which rejects it as
//                        the CPU decoder does (or decodes it);
//                        tile_order.cuh: which tile a warp takes (full
//                        tiles first, for rank-3 fill fields)
// Padded box tiles (FORMAT.md 3.2, f32 rank 3): the PAD instantiations of
// the warp encoder and decoder walk every tile whole (clamped staging,
// stores kept to the box); no clipped kernel runs for them.
// Shared by all: device_common.cuh (geometry, parameters, scans; the exact
// quantize in quantize.cuh), flat.cuh (flat tiles, FORMAT.md 3.1: a flat
// job is a rank-1 job whose neighbours are the field's 3-D ones),
// mask_corners.cuh (a mask element's parity
// transform: the slow path), job.cuh (a job's state, full-tile tables),
// transpose.cuh (32x32 bit transposes). Performance notes: PERF.md.
//
// Bit-exactness with the CPU: the build uses -fmad=false and every floating
// step is an explicit round-to-nearest intrinsic.
#include "fzgpu.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <float.h>
#include <stdlib.h>
#include <type_traits>

// CUDA feeds every stream through one of CUDA_DEVICE_MAX_CONNECTIONS
// hardware queues (8 by default); streams that share a queue are served in
// the order their work was issued, so a job parked on an event (its upload)
// holds up every stream behind it. A streamer runs 13 streams per device
// (4 lanes x 3 + the upload stream). Measured on an H200 (bench e2e, 8 x 256
// MiB producers, two runs each): 8 queues 0.94 / 0.94 of pinned H2D, 32
// queues 0.97 / 0.97. The variable is read when the CUDA context is
// created, so it is set when the library is loaded, unless the process
// already set it.
__attribute__((constructor)) static void fzgpu_connections(void) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
}

// The kernels, one file per stage; the dispatch (grid sizes, buffers,
// which kernel) is the host part below them.
#include "device_common.cuh"  // geometry, parameters, quantize, scans
#include "range.cuh"          // range pass and parameters (REL)
#include "job.cuh"            // a job's state, full-tile tables
#include "transpose.cuh"      // 32x32 bit transposes
#include "offsets.cuh"        // tile offsets: look-back and scanner
#include "mask_corners.cuh"   // a mask element's parity transform (the slow path)
#include "encode_warp.cuh"    // the warp encoder (v6-v22) and its walks

// The fill fields' optimistic kernel (encode_warp.cuh's HF 5) before the
// full kernel; 0 leaves them to the full kernel alone (A/B).
#ifndef ENC_FILL_OPT
#define ENC_FILL_OPT 1
#endif

// The warp encoder instantiation for a dtype (1 f32, 2 f64) and fast path
// (the rank of the standard tile shape, 0 none, 4 flat tiles: flat.cuh).
// opt: 1 the optimistic kernel, 2 the one without the 16-bit coder, 3 the
// optimistic kernel of fields with a fill value (encode_warp.cuh's HF 5).
// pc: the job has pre-coded clipped tiles (PCT; rank 2 has a kernel with
// their copy and one without, encode_warp.cuh's PC). al16: every full
// tile's rows are 16-byte aligned: the fill fields' optimistic kernel and
// f32 rank 2's without the 4-byte copies (encode_warp.cuh's AL16).
// The f32 kernel of walk FAST for a field with or without a fill value:
// without one, its walks have no fill test a value (HF 1; rank 1: and no
// enc_fast1).
template <int FAST, int V, int PC = 0, bool AL16 = false>
static const void *enc_kernel_f32_fill(int has_fill) {
    return has_fill ? (const void *)encode_warp_kernel<float, FAST, 0, V, PC, AL16>
                    : (const void *)encode_warp_kernel<float, FAST, 1, V, PC, AL16>;
}

template <int V>
static const void *enc_kernel_v(unsigned dtype, int fast, int has_fill, int opt, int pc, bool al16) {
    if (dtype == 1) {
        switch (fast) {
        // ranks 1 and 2 and flat tiles: by fill value (HF 0 or 1)
        case 1: return enc_kernel_f32_fill<1, V>(has_fill);
        case 2:
            if (al16) return pc ? enc_kernel_f32_fill<2, V, 1, true>(has_fill) : enc_kernel_f32_fill<2, V, 0, true>(has_fill);
            return pc ? enc_kernel_f32_fill<2, V, 1>(has_fill) : enc_kernel_f32_fill<2, V, 0>(has_fill);
        case 4: return enc_kernel_f32_fill<4, V>(has_fill);
        case 3:
            if (opt == 3 && al16) return (const void *)encode_warp_kernel<float, 3, 5, V, 1, true>;
            if (opt)
                return opt == 3   ? (const void *)encode_warp_kernel<float, 3, 5, V>
                       : opt == 2 ? (const void *)encode_warp_kernel<float, 3, 4, V>
                                  : (const void *)encode_warp_kernel<float, 3, 3, V>;
            return has_fill ? (const void *)encode_warp_kernel<float, 3, 2, V> : (const void *)encode_warp_kernel<float, 3, 1, V>;
        default: return (const void *)encode_warp_kernel<float, 0, 0, V>;
        }
    }
    switch (fast) {
    case 1: return (const void *)encode_warp_kernel<double, 1, 0, V>;
    case 2: return pc ? (const void *)encode_warp_kernel<double, 2, 0, V, 1> : (const void *)encode_warp_kernel<double, 2, 0, V, 0>;
    case 4: return (const void *)encode_warp_kernel<double, 4, 0, V>;
    case 3: return (const void *)encode_warp_kernel<double, 3, 0, V>;
    default: return (const void *)encode_warp_kernel<double, 0, 0, V>;
    }
}
// The padded kernels (encode_warp.cuh's PAD; make_geo takes padded
// tiles for f32 rank 3 only): the same choices, no pre-coded tiles.
template <int V>
static const void *enc_kernel_pad(int has_fill, int opt, bool al16) {
    if (opt == 3)
        return al16 ? (const void *)encode_warp_kernel<float, 3, 5, V, 1, true, true>
                    : (const void *)encode_warp_kernel<float, 3, 5, V, 1, false, true>;
    if (opt == 2) return (const void *)encode_warp_kernel<float, 3, 4, V, 1, false, true>;
    if (opt == 1) return (const void *)encode_warp_kernel<float, 3, 3, V, 1, false, true>;
    return has_fill ? (const void *)encode_warp_kernel<float, 3, 2, V, 1, false, true>
                    : (const void *)encode_warp_kernel<float, 3, 1, V, 1, false, true>;
}
// ver: the container version the kernel writes (1 or 2; version 2 has no
// pre-coded tiles). pad: the padded kernels (dtype 1, fast 3 only).
static const void *enc_kernel(unsigned dtype, int fast, int has_fill, int opt = 0, unsigned ver = 1, int pc = 0,
                              bool al16 = false, bool pad = false) {
    if (pad) return ver == 2 ? enc_kernel_pad<2>(has_fill, opt, al16) : enc_kernel_pad<1>(has_fill, opt, al16);
    return ver == 2 ? enc_kernel_v<2>(dtype, fast, has_fill, opt, 0, al16) : enc_kernel_v<1>(dtype, fast, has_fill, opt, pc, al16);
}

// encode_clipped_kernel (PCT) number 2 * (f64) + (rank 2).
static const void *clipped_kernel(int i) {
    switch (i) {
    case 0: return (const void *)encode_clipped_kernel<float, 3>;
    case 1: return (const void *)encode_clipped_kernel<float, 2>;
    case 2: return (const void *)encode_clipped_kernel<double, 3>;
    default: return (const void *)encode_clipped_kernel<double, 2>;
    }
}

#include "tables.cuh"          // tile-size tables, the job's result
#include "crc32c.cuh"          // CRC32C on the device
#include "gather.cuh"          // GPU-resident snapshots: device assembly

// ---------------------------------------------------------------- decode

#include "decode.cuh"

// ---------------------------------------------------------------- host

struct fzgpu_ctx {
    int device;
    unsigned long long max_tiles;
    unsigned long long *status, *tprefix, *toff, *derr;
    unsigned *tsize, *touts, *ticket, *eerr, *emeta;
    unsigned long long *eoff;
    double *terr, *partials, *acc;
    JobAcc *jacc;
    DevParams *params;
    fzgpu_result *res;
    unsigned char *scratch;       // warp encoder: SC_BYTES per resident warp
    int range_blocks;                 // blocks of the range pass (one wave)
    unsigned long long enc_blocks[2 * ENC_FASTS]; // warp encoder: blocks resident at once, per enc_kernel (dtype, fast)
    unsigned long long clip_blocks[4]; // encode_clipped_kernel's: (f64, rank 2) in bits 1, 0
    int job_clean;                 // status, ticket, eerr and jacc are zero (tables_kernel leaves them so)
    unsigned *dlist, *dcount;      // warp decoder: tiles left for the block decoder, their number
    int dec_clean;                 // derr is ~0 and dcount 0 (decode_finish_kernel leaves them so)
    long long meta_key[8];         // the tile shape and plane emeta / eoff were made for (meta_kernel)
    int meta_ok;                   // emeta / eoff hold meta_key's tables
    unsigned dlist_blocks;         // block decoder over that list: blocks resident at once
    // version-2 decode (transcode.cuh): the job's tiles as version-1 tiles,
    // their sizes and offsets; v2buf grows to the largest job's bound
    unsigned *v2size;
    unsigned long long *v2off;
    unsigned char *v2buf;
    unsigned long long v2cap;
    // pre-coded clipped tiles (encode_clipped.cuh): their bytes, grown to the
    // largest job's bound; the bump pointer and the ticket
    unsigned *pctbuf;
    unsigned long long pctcap, *pctctr;
};

#define CK(x)                                         \
    do {                                              \
        cudaError_t e_ = (x);                         \
        if (e_ != cudaSuccess) return FZGPU_E_CUDA + (int)e_; \
    } while (0)

extern "C" int fzgpu_abi_version(void) { return FZGPU_ABI_VERSION; }

extern "C" int fzgpu_device_count(int *n) {
    if (!n) return FZGPU_E_ARG;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        *n = 0;
        return FZGPU_E_NODEVICE;
    }
    CK(e);
    return 0;
}

extern "C" int fzgpu_device_info(int device, char *name, uint64_t name_len, uint64_t *total_mem) {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, device));
    if (name && name_len) {
        strncpy(name, p.name, name_len - 1);
        name[name_len - 1] = 0;
    }
    if (total_mem) *total_mem = p.totalGlobalMem;
    return 0;
}

extern "C" void fzgpu_strerror(int rc, char *buf, uint64_t len) {
    if (!buf || !len) return;
    const char *m;
    char tmp[256];
    switch (rc) {
    case 0: m = "ok"; break;
    case FZGPU_E_ARG: m = "invalid argument"; break;
    case FZGPU_E_CAPACITY: m = "output buffer too small"; break;
    case FZGPU_E_FORMAT: m = "malformed container"; break;
    case FZGPU_E_NODEVICE: m = "no CUDA device"; break;
    case FZGPU_E_WRONGDEVICE: m = "the memory lies on another GPU"; break;
    case FZGPU_E_NOTREADY: m = "not ready"; break;
    default:
        if (rc >= FZGPU_E_CUDA) {
            snprintf(tmp, sizeof tmp, "CUDA error %d: %s", rc - FZGPU_E_CUDA,
                     cudaGetErrorString((cudaError_t)(rc - FZGPU_E_CUDA)));
            m = tmp;
        } else {
            m = "unknown error";
        }
    }
    strncpy(buf, m, len - 1);
    buf[len - 1] = 0;
}

extern "C" uint64_t fzgpu_compress_bound(uint32_t dtype, uint64_t tiles) {
    // word0+origin, 16 planes of mask+32 blocks, escapes, two masks, raw count+values, table entry.
    // Version 2's code section is up to 68 bytes longer (8324 bytes), but a
    // tile with raw values for all 4096 slots has no fill mask (516 bytes):
    // this bound holds for both versions.
    uint64_t per = 8 + 16 * (4 + 512) + (4 + 4 * 4095) + 2 * (4 + 512) + 4 + 4096ull * (dtype == 2 ? 8 : 4) + 4;
    return per * tiles;
}

// The blocks of ENC_W warps of an encoder kernel k (persistent: tiles taken
// by ticket) resident at once on sms SMs, at most what max_tiles need and at
// least one; 0 on error.
static cudaError_t resident_blocks(const void *k, int sms, unsigned long long max_tiles, unsigned long long *blocks) {
    int nb = 0;
    *blocks = 0;
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, k, ENC_W * 32, ENC_SMEM);
    if (e != cudaSuccess) return e;
    unsigned long long b = (unsigned long long)nb * (unsigned long long)sms;
    const unsigned long long need = (max_tiles + ENC_W - 1) / ENC_W;
    if (b > need) b = need;
    *blocks = b ? b : 1;
    return cudaSuccess;
}

extern "C" int fzgpu_create(int device, uint64_t max_tiles, fzgpu_ctx **out) {
    if (!out || max_tiles == 0 || max_tiles > (1ull << 40)) return FZGPU_E_ARG;
    *out = NULL;
    CK(cudaSetDevice(device));
    fzgpu_ctx *c = (fzgpu_ctx *)calloc(1, sizeof *c);
    if (!c) return FZGPU_E_ARG;
    c->device = device;
    c->max_tiles = max_tiles;
    cudaError_t e = cudaSuccess;
#define AL(p, n)                                                            \
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->p, (size_t)(n) * sizeof(*c->p));
    AL(status, 3 * max_tiles);  // the full kernels', the optimistic kernel's, the narrow one's
    AL(tprefix, max_tiles);
    AL(toff, max_tiles);
    AL(tsize, max_tiles);
    AL(touts, max_tiles);
    AL(terr, max_tiles);
    AL(ticket, 4);  // the full kernels' ticket, the optimistic kernel's, the narrow one's, their abort bits
    AL(eerr, 1);
    AL(derr, 1);
    AL(partials, 2 * RANGE_BLOCKS_MAX);
    AL(acc, 2);
    AL(params, 1);
    AL(res, 1);
    AL(jacc, 1);
    AL(emeta, TILE);
    AL(eoff, TILE);
    AL(dlist, max_tiles);
    AL(dcount, 2);  // the list's count, the job's masked tiles (mask_census_kernel)
    AL(v2size, max_tiles);
    AL(v2off, max_tiles);
#undef AL
    // The warp encoder is persistent: as many blocks as fit on the device
    // (or as the largest job needs), each warp with its own scratch.
    int sms = 0;
    unsigned long long slots = 0;
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    for (int i = 0; i < 2 * ENC_FASTS && e == cudaSuccess; i++) {
        const unsigned dt = i / ENC_FASTS ? 2 : 1;
        const int fast = i % ENC_FASTS;
        const void *k = enc_kernel(dt, fast, 0);
        // Both container versions' kernels; the grid and scratch are sized
        // by version 1's (a grid needs no more blocks than fit at once: the
        // kernels are persistent, tiles taken by ticket).
        for (unsigned v = 1; v <= 2 && e == cudaSuccess; v++) {
            const void *kv = enc_kernel(dt, fast, 0, 0, v);
            e = cudaFuncSetAttribute(kv, cudaFuncAttributeMaxDynamicSharedMemorySize, ENC_SMEM);
            if (e == cudaSuccess && enc_kernel(dt, fast, 1, 0, v) != kv)
                e = cudaFuncSetAttribute(enc_kernel(dt, fast, 1, 0, v), cudaFuncAttributeMaxDynamicSharedMemorySize, ENC_SMEM);
            for (int o = 1; o <= 3 && e == cudaSuccess && dt == 1 && fast == 3; o++)
                e = cudaFuncSetAttribute(enc_kernel(1, 3, 0, o, v), cudaFuncAttributeMaxDynamicSharedMemorySize, ENC_SMEM);
            // the AL16 kernels: the fill fields' optimistic one, f32 rank 2's
            // (with and without a fill value: rank 3's one serves both)
            for (int hf = 0; hf <= (fast == 2) && e == cudaSuccess && dt == 1 && (fast == 3 || fast == 2); hf++)
                e = cudaFuncSetAttribute(enc_kernel(1, fast, hf, fast == 3 ? 3 : 0, v, 0, true),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, ENC_SMEM);
            // the padded kernels (f32 rank 3), as {has_fill, opt, al16}: the
            // full ones, the three optimistic ones, the fill one with AL16
            static const int padk[6][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 2, 0}, {1, 3, 0}, {1, 3, 1}};
            for (int i = 0; i < 6 && e == cudaSuccess && dt == 1 && fast == 3; i++)
                e = cudaFuncSetAttribute(enc_kernel(1, 3, padk[i][0], padk[i][1], v, 0, padk[i][2] != 0, true),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, ENC_SMEM);
        }
        // rank 2's kernels with the copy of pre-coded tiles (version 1)
        for (int a = 0; a < 1 + (dt == 1) && e == cudaSuccess && fast == 2; a++)
            for (int hf = 0; hf <= 1 && e == cudaSuccess; hf++)
                e = cudaFuncSetAttribute(enc_kernel(dt, 2, hf, 0, 1, 1, a), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         ENC_SMEM);
        if (e == cudaSuccess) e = resident_blocks(k, sms, max_tiles, &c->enc_blocks[i]);
        if (c->enc_blocks[i] > slots) slots = c->enc_blocks[i];
    }
    for (int i = 0; i < 4 && e == cudaSuccess; i++) {
        const void *ck = clipped_kernel(i);
        e = cudaFuncSetAttribute(ck, cudaFuncAttributeMaxDynamicSharedMemorySize, ENC_SMEM);
        if (e == cudaSuccess) e = resident_blocks(ck, sms, max_tiles, &c->clip_blocks[i]);
        if (c->clip_blocks[i] > slots) slots = c->clip_blocks[i];
    }
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->scratch, (size_t)slots * ENC_W * SC_BYTES);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->pctctr, 2 * sizeof(unsigned long long));
    int rf = 0, rd = 0;
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&rf, range_kernel<float>, 256, 0);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&rd, range_kernel<double>, 256, 0);
    c->range_blocks = sms * (rf < rd ? rf : rd);
    if (c->range_blocks < 1) c->range_blocks = 1;
    if (c->range_blocks > RANGE_BLOCKS_MAX) c->range_blocks = RANGE_BLOCKS_MAX;
    c->dlist_blocks = (unsigned)(sms > 0 ? sms : 1) * DEC_LIST_MINB;
    // The warp decoder needs 37 KiB per block for its 6 blocks per SM: ask
    // for the largest shared-memory carveout rather than the driver's guess
    // (the padded tiles' kernels too, the last two, since v44: the same
    // speed on the H200, whose driver gave them 6 blocks an SM anyway).
    const void *dwk[18] = {
        (const void *)decode_warp_kernel<float, 1, false>,  (const void *)decode_warp_kernel<float, 2, false>,
        (const void *)decode_warp_kernel<float, 3, false>,  (const void *)decode_warp_kernel<double, 1, false>,
        (const void *)decode_warp_kernel<double, 2, false>, (const void *)decode_warp_kernel<double, 3, false>,
        (const void *)decode_warp_kernel<float, 1, true>,   (const void *)decode_warp_kernel<float, 2, true>,
        (const void *)decode_warp_kernel<float, 3, true>,   (const void *)decode_warp_kernel<double, 1, true>,
        (const void *)decode_warp_kernel<double, 2, true>,  (const void *)decode_warp_kernel<double, 3, true>,
        (const void *)decode_warp_kernel<float, 4, false>,  (const void *)decode_warp_kernel<double, 4, false>,
        (const void *)decode_warp_kernel<float, 4, true>,   (const void *)decode_warp_kernel<double, 4, true>,
        (const void *)decode_warp_kernel<float, 3, false, true>, (const void *)decode_warp_kernel<float, 3, true, true>};
    for (int i = 0; i < 18 && e == cudaSuccess; i++)
        e = cudaFuncSetAttribute(dwk[i], cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (e != cudaSuccess) {
        fzgpu_destroy(c);
        return FZGPU_E_CUDA + (int)e;
    }
    if (e == cudaSuccess) {  // gather.cuh's powers of x (the same on every device)
        unsigned x8[64];
        crc32c_x8_table(x8);
        e = cudaMemcpyToSymbol(c_crc_x8, x8, sizeof x8);
    }
    if (e != cudaSuccess) {
        fzgpu_destroy(c);
        return FZGPU_E_CUDA + (int)e;
    }
    // Params are valid even if a job runs without prepare (abs defaults).
    *out = c;
    return 0;
}

extern "C" void fzgpu_destroy(fzgpu_ctx *c) {
    if (!c) return;
    cudaSetDevice(c->device);
    cudaFree(c->status);
    cudaFree(c->tprefix);
    cudaFree(c->toff);
    cudaFree(c->tsize);
    cudaFree(c->touts);
    cudaFree(c->terr);
    cudaFree(c->ticket);
    cudaFree(c->eerr);
    cudaFree(c->derr);
    cudaFree(c->partials);
    cudaFree(c->jacc);
    cudaFree(c->acc);
    cudaFree(c->params);
    cudaFree(c->res);
    cudaFree(c->emeta);
    cudaFree(c->eoff);
    cudaFree(c->dlist);
    cudaFree(c->dcount);
    cudaFree(c->v2size);
    cudaFree(c->v2off);
    cudaFree(c->v2buf);
    cudaFree(c->pctbuf);
    cudaFree(c->pctctr);
    cudaFree(c->scratch);
    free(c);
}

static int make_geo(const fzgpu_field *f, Geo *g) {
    if (!f || (f->dtype != 1 && f->dtype != 2)) return FZGPU_E_ARG;
    if ((f->version != 1 && f->version != 2) || f->tiling > 2) return FZGPU_E_ARG;  // container versions this build writes and reads
    int tz = f->tile[0], ty = f->tile[1], tx = f->tile[2], bz = f->block[0], by = f->block[1], bx = f->block[2];
    if (tz < 1 || ty < 1 || tx < 1 || tz * ty * tx != TILE) return FZGPU_E_ARG;
    if (bz < 1 || by < 1 || bx < 1 || bz * by * bx != 128 || tz % bz || ty % by || tx % bx) return FZGPU_E_ARG;
    if (f->nz == 0 || f->ny == 0 || f->nx == 0 || f->tiles_per_chunk == 0) return FZGPU_E_ARG;
    *g = Geo{};
    g->nz = f->nz;
    g->ny = f->ny;
    g->nx = f->nx;
    if (f->tiling == 1) {
        // flat tiles (FORMAT.md 3.1, flat.cuh): the kernels see a rank-1 field
        // of every value, and the plane and row lengths for the neighbours;
        // planes of 2^24 values or more are the CPU codec's (the in-tile
        // arithmetic is 32-bit)
        if (tz != 1 || ty != 1 || tx != TILE || bz != 1 || by != 1 || bx != 128) return FZGPU_E_ARG;
        if (f->ny > (1u << 24) || f->nx > (1u << 24) || f->ny * f->nx >= (1u << 24)) return FZGPU_E_ARG;
        if (f->nz > ~0ull / (f->ny * f->nx)) return FZGPU_E_ARG;
        g->flat = 1;
        g->fnx = (unsigned)f->nx;
        g->fP = (unsigned)(f->ny * f->nx);
        g->nz = g->ny = 1;
        g->nx = f->nz * f->ny * f->nx;
    }
    g->gz = (g->nz + tz - 1) / tz;
    g->gy = (g->ny + ty - 1) / ty;
    g->gx = (g->nx + tx - 1) / tx;
    g->tiles = g->gz * g->gy * g->gx;
    g->tz = tz;
    g->ty = ty;
    g->tx = tx;
    g->bz = bz;
    g->by = by;
    g->bx = bx;
    g->per_chunk = f->tiles_per_chunk;
    auto magic = [](unsigned long long d) -> unsigned long long {
        return d >= 2 && d <= 0xFFFFFFFFull ? ~0ull / d + (~0ull % d == d - 1 ? 2 : 1) : 0ull;
    };
    g->mgx = magic(g->gx);
    g->mgy = magic(g->gy);
    g->mpc = magic(g->per_chunk);
    g->mfnx = magic(g->fnx);
    g->mfP = magic(g->fP);
    g->fast = tz == KPT && ty == NWARPS && tx == 32;
    g->fast3 = tz == 8 && ty == 16 && tx == 32 && bz == 4 && by == 4 && bx == 8;
    g->fast2 = tz == 1 && ty == 64 && tx == 64 && bz == 1 && by == 16 && bx == 8;
    g->fast1 = tz == 1 && ty == 1 && tx == 4096 && bz == 1 && by == 1 && bx == 128;
    // padded box tiles (FORMAT.md 3.2): the padded kernels walk f32 rank-3
    // tiles; other padded fields are the CPU codec's (cuda/backend.go's
    // onGPU), or, without a clipped tile, box tiles to the kernels
    if (f->tiling == 2) {
        if (f->dtype != 1 || !g->fast3) return FZGPU_E_ARG;
        g->padded = 1;
    }
    for (int k = 0; k < KPT; k++) {
        // slot of element (k, 0, 0) of a full tile (FORMAT.md section 3)
        g->skoff[k] = g->fast ? (unsigned)((k / bz) * bz * ty * tx + (k % bz) * by * bx) : 0u;
        g->koff[k] = g->fast ? (unsigned long long)k * g->ny * g->nx : 0ull;
    }
    return 0;
}

// Clipped tiles: the warp encoder walks tiles in order, and a clipped
// tile's slow path held every later tile's prefix; the block-per-tile v5
// encoder was faster on fields where most tiles are clipped (H200: era5
// 744x33x49 v6 0.82-0.91x of v5, plot3d 0.73-0.89x). Since v24 version-1
// rank-3 jobs code their clipped tiles first (PCT, 1.44-1.89x of v5 on era5
// and plot3d, PERF.md v24), since v25 rank-2 jobs too, and v5 is gone
// (PERF.md v25); rank-1 fields (one clipped tile at most) and fields of
// more than 2^32 tiles take the warp encoder's slow path in tile order.
#ifndef ENC_PCT
#define ENC_PCT 1  // pre-coded clipped tiles (encode_clipped.cuh); 0: the slow path in tile order
#endif

// tile_order.cuh's full_before on the host (64-bit quotients).
static unsigned long long full_before_host(const Geo &g, unsigned long long t, uint3 fl) {
    const unsigned long long ix = t % g.gx, iy = t / g.gx % g.gy, iz = t / (g.gx * g.gy);
    unsigned long long f = (iz < fl.x ? iz : fl.x) * fl.y * fl.z;
    if (iz < fl.x) f += iy * fl.z + (iy < fl.y ? ix : 0);
    return f;
}

// The values in the clipped tiles of tiles [tile0, tile0 + nt), by tile
// rows (iz, iy): a row is clipped along z or y (every tile of it clipped),
// or only its last tile along x is.
static unsigned long long clipped_values(const Geo &g, unsigned long long tile0, unsigned long long nt, uint3 fl) {
    const unsigned long long end = tile0 + nt, lxc = g.nx - (unsigned long long)fl.z * g.tx;
    unsigned long long v = 0;
    for (unsigned long long r = tile0 / g.gx; r * g.gx < end; r++) {
        const unsigned long long iz = r / g.gy, iy = r % g.gy;
        const unsigned long long lz = iz < fl.x ? g.tz : g.nz - iz * g.tz, ly = iy < fl.y ? g.ty : g.ny - iy * g.ty;
        const unsigned long long a = (r * g.gx > tile0 ? r * g.gx : tile0) - r * g.gx;
        const unsigned long long b = ((r + 1) * g.gx < end ? (r + 1) * g.gx : end) - r * g.gx;  // ix in [a, b)
        const unsigned long long nfx = b > fl.z ? (a < fl.z ? fl.z - a : 0) : b - a;         // full along x
        const unsigned long long cx = lxc && a <= fl.z && b > fl.z ? lxc : 0;                 // the clipped x tile
        v += lz * ly < (unsigned long long)g.tz * g.ty ? lz * ly * (nfx * g.tx + cx) : lz * ly * cx;
    }
    return v;
}

// The rank whose standard tile shape (FORMAT.md section 3) the field's
// header names, which picks the warp decoder's walks; 0 for any other
// shape, which only the block decoder takes.
static int tile_rank(const Geo &g) { return g.fast3 ? 3 : g.fast2 ? 2 : g.fast1 ? 1 : 0; }

// Tiles of chunks [first, first+n), or 0 if out of range.
static unsigned long long job_tiles(const Geo &g, uint64_t first, uint64_t n, unsigned long long *tile0) {
    unsigned long long chunks = (g.tiles + g.per_chunk - 1) / g.per_chunk;
    if (n == 0 || first >= chunks || n > chunks - first) return 0;
    *tile0 = first * g.per_chunk;
    unsigned long long end = (first + n) * g.per_chunk;
    if (end > g.tiles) end = g.tiles;
    return end - *tile0;
}

// Launches kernel k as a programmatic dependent of the stream's previous
// kernel: its launch overlaps that kernel's last blocks, and k's grid_wait()
// keeps the order of memory (about -0.5 % on a 1 GiB compress, PERF.md v14).
static cudaError_t launch_dependent(const void *k, dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                    void **args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelExC(&cfg, k, args);
}

// params_kernel as a dependent of the range pass.
static cudaError_t launch_params(const double *partials, int nparts, int rel, double bound, DevParams *p,
                                 cudaStream_t st) {
    void *args[] = {(void *)&partials, (void *)&nparts, (void *)&rel, (void *)&bound, (void *)&p};
    return launch_dependent((const void *)params_kernel, dim3(1), dim3(FOLD_T), 0, st, args);
}

// Where a job's last kernel writes its result: straight to h_res when the
// device can write it (pinned host memory), else to the context, and the
// caller copies it (the copy-engine round trip after the last kernel cost
// 1 % of a 1 GiB compress, PERF.md v14).
static fzgpu_result *result_target(fzgpu_ctx *c, fzgpu_result *h_res) {
    cudaPointerAttributes pa;
    if (cudaPointerGetAttributes(&pa, h_res) == cudaSuccess && pa.type == cudaMemoryTypeHost && pa.devicePointer)
        return (fzgpu_result *)pa.devicePointer;
    (void)cudaGetLastError();  // pageable memory is no error here
    return c->res;
}

extern "C" int fzgpu_prepare(fzgpu_ctx *c, void *stream, const fzgpu_field *f, const void *d_src) {
    Geo g;
    if (!c || !d_src) return FZGPU_E_ARG;
    int rc = make_geo(f, &g);
    if (rc) return rc;
    CK(cudaSetDevice(c->device));
    cudaStream_t st = (cudaStream_t)stream;
    int rel = f->mode == 2;
    unsigned long long n = g.nz * g.ny * g.nx;
    int nparts = 0;
    if (rel) {
        nparts = c->range_blocks;
        if (f->dtype == 1)
            range_kernel<float><<<nparts, 256, 0, st>>>((const float *)d_src, n, f->has_fill, f->fill_bits, c->partials);
        else
            range_kernel<double><<<nparts, 256, 0, st>>>((const double *)d_src, n, f->has_fill, f->fill_bits, c->partials);
        CK(cudaGetLastError());
    }
    CK(launch_params(c->partials, nparts, rel, f->bound, c->params, st));
    return 0;
}

extern "C" int fzgpu_compress(fzgpu_ctx *c, void *stream, const fzgpu_field *f, const void *d_src,
                              uint64_t first_chunk, uint64_t nchunks, void *d_out, uint64_t out_cap,
                              fzgpu_result *h_res) {
    Geo g;
    if (!c || !d_src || !d_out || !h_res || ((uintptr_t)d_out & 3)) return FZGPU_E_ARG;
    int rc = make_geo(f, &g);
    if (rc) return rc;
    unsigned long long tile0, nt = job_tiles(g, first_chunk, nchunks, &tile0);
    if (nt == 0 || nt > c->max_tiles || nt > 0x7FFFFFFFull) return FZGPU_E_ARG;
    CK(cudaSetDevice(c->device));
    cudaStream_t st = (cudaStream_t)stream;
    // PCT (encode_clipped.cuh): version-1 rank-3 and rank-2 jobs with
    // clipped tiles code those first, in a kernel of their own; the warp
    // encoder then copies them (version 2: its generic path takes them).
    uint3 fl = make_uint3(0, 0, 0);
    unsigned long long nfull = nt;
    if (ENC_PCT && !g.padded && f->version == 1 && (g.fast3 || g.fast2) && g.tiles <= 0xFFFFFFFFull &&
        (g.nz % g.tz || g.ny % g.ty || g.nx % g.tx)) {
        fl = make_uint3((unsigned)(g.nz / g.tz), (unsigned)(g.ny / g.ty), (unsigned)(g.nx / g.tx));
        nfull = full_before_host(g, tile0 + nt, fl) - full_before_host(g, tile0, fl);
    }
    const unsigned long long nclip = nt - nfull;
    const bool pct = nclip > 0;
    if (!c->job_clean) {  // the first job, or one after a failed launch
        job_init_kernel<<<(unsigned)((3 * c->max_tiles + 1023) / 1024), 256, 0, st>>>(c->status, 3 * c->max_tiles, c->ticket,
                                                                                c->eerr, c->jacc);
        CK(cudaGetLastError());
    }
    c->job_clean = 0;
    unsigned long long *status_opt = nullptr, *status_opt8 = nullptr;
    {
        const int fast = g.flat ? 4 : g.fast3 ? 3 : g.fast2 ? 2 : g.fast1 ? 1 : 0;
        unsigned long long nb = (nt + ENC_W - 1) / ENC_W;
        const unsigned long long cap_b = c->enc_blocks[(f->dtype == 2 ? ENC_FASTS : 0) + fast];
        if (nb > cap_b) nb = cap_b;
        const void *src = d_src;
        // every full tile's rows 16-byte aligned (x0 is a multiple of 32)
        const bool rows16 = ((uintptr_t)src & 15) == 0 && g.nx % 4 == 0;
        const bool pad = g.padded;  // every tile coded whole: no pre-coded tiles, every tile walked as full
        const void *k = enc_kernel(f->dtype, fast, f->has_fill, 0, f->version, pct, rows16, pad);
        const unsigned *pre = nullptr;
        if (pct) {
            // room for the clipped tiles at ratio 2, plus 1 KiB each (masks,
            // alignment); a tile that does not fit is walked in tile order
            const unsigned long long need =
                clipped_values(g, tile0, nt, fl) * (f->dtype == 2 ? 8 : 4) / 2 + nclip * 1024;
            if (need > c->pctcap) {
                CK(cudaStreamSynchronize(st));  // jobs before on this stream may still read it
                cudaFree(c->pctbuf);
                c->pctbuf = NULL;
                c->pctcap = 0;
                const unsigned long long cap = (need + (1ull << 20) - 1) & ~((1ull << 20) - 1);
                CK(cudaMalloc((void **)&c->pctbuf, (size_t)cap));
                c->pctcap = cap;
            }
            CK(cudaMemsetAsync(c->pctctr, 0, 2 * sizeof(unsigned long long), st));
            unsigned long long nbc = (nclip + ENC_W - 1) / ENC_W;
            const int ki = 2 * (f->dtype == 2) + (fast == 2);
            if (nbc > c->clip_blocks[ki]) nbc = c->clip_blocks[ki];
            unsigned *side = c->pctbuf;
            const unsigned long long side_cap = c->pctcap;
            void *args[] = {(void *)&src, (void *)&g, (void *)&c->params, (void *)&f->has_fill, (void *)&f->fill_bits,
                            (void *)&tile0, (void *)&nt, (void *)&fl, (void *)&nfull, (void *)&nclip, (void *)&side,
                            (void *)&side_cap, (void *)&c->pctctr, (void *)&c->tsize, (void *)&c->toff,
                            (void *)&c->touts, (void *)&c->terr, (void *)&c->scratch};
            const void *kc = clipped_kernel(ki);
            CK(launch_dependent(kc, dim3((unsigned)nbc), dim3(ENC_W * 32), ENC_SMEM, st, args));
            pre = c->pctbuf;
        }
        // The optimistic kernels (no slow path: smaller kernels, PERF.md v19)
        // take the job first where they can: f32 rank-3 tiles, all full, no
        // fill. The narrow one (no 16-bit coder either) runs first; at the
        // first tile it cannot take it stops, and the optimistic one (for
        // 16-bit codes) or the full kernel redoes the job; at a tile the
        // optimistic one cannot take (a value without q, an escape, too many
        // raw values) the full kernel does. A kernel whose job is done
        // returns at once. Statuses and tickets are apart per kernel, so
        // none sees another's. Fields with a fill value have one optimistic
        // kernel (ENC_FILL_OPT; the FILLP walk without the slow path) for
        // jobs whose clipped tiles are pre-coded (it copies them) or that
        // have none; it comes with and without AL16 (rows16).
        const bool allfull = pad || (g.nz % g.tz == 0 && g.ny % g.ty == 0 && g.nx % g.tx == 0);
        // The fill kernel's tile loop holds no 64-bit quotients: fields below
        // 2^32 tiles only (the smooth ones keep them: without, they measured
        // 2 % slower, v41 call 1).
        const bool t32 = g.tiles <= 0xFFFFFFFFull;
        const bool opt = f->dtype == 1 && fast == 3 && !f->has_fill && allfull;
        const bool optf = ENC_FILL_OPT && f->dtype == 1 && fast == 3 && f->has_fill && (allfull || pct) && t32;
        unsigned *abortf = opt || optf ? c->ticket + 3 : nullptr;
        auto launch = [&](const void *kern, unsigned long long *status, unsigned *ticket) {
            void *args[] = {(void *)&src, (void *)&g, (void *)&c->params, (void *)&f->has_fill, (void *)&f->fill_bits,
                            (void *)&tile0, (void *)&nt, (void *)&d_out, (void *)&out_cap, (void *)&status,
                            (void *)&c->tsize, (void *)&c->tprefix, (void *)&c->touts, (void *)&c->terr,
                            (void *)&ticket, (void *)&c->eerr, (void *)&c->scratch, (void *)&abortf, (void *)&pre,
                            (void *)&c->toff};
            return launch_dependent(kern, dim3((unsigned)nb), dim3(ENC_W * 32), ENC_SMEM, st, args);
        };
        for (int o = 2; opt && o >= 1; o--)  // the narrow kernel, then the optimistic one
            CK(launch(enc_kernel(1, 3, 0, o, f->version, 0, false, pad), c->status + (unsigned long long)o * c->max_tiles,
                      c->ticket + o));
        if (optf) CK(launch(enc_kernel(1, 3, 1, 3, f->version, 0, rows16, pad), c->status + c->max_tiles, c->ticket + 1));
        CK(launch(k, c->status, c->ticket));
        status_opt = opt || optf ? c->status + c->max_tiles : nullptr;
        status_opt8 = opt || optf ? c->status + 2 * c->max_tiles : nullptr;
    }
    CK(cudaGetLastError());
    fzgpu_result *dres = result_target(c, h_res);
    {
        unsigned *o = (unsigned *)d_out;
        void *args[] = {(void *)&g,        (void *)&tile0,   (void *)&nt,      (void *)&c->tsize, (void *)&c->tprefix,
                        (void *)&c->touts, (void *)&c->terr, (void *)&o,       (void *)&out_cap,  (void *)&c->eerr,
                        (void *)&c->params, (void *)&c->jacc, (void *)&dres, (void *)&c->status, (void *)&c->ticket,
                        (void *)&status_opt, (void *)&status_opt8};
        CK(launch_dependent((const void *)tables_kernel, dim3((unsigned)((nt + 255) / 256)), dim3(256), 0, st, args));
    }
    c->job_clean = 1;
    if (dres == c->res) CK(cudaMemcpyAsync(h_res, c->res, sizeof(fzgpu_result), cudaMemcpyDeviceToHost, st));
    return 0;
}

extern "C" int fzgpu_gather(fzgpu_ctx *c, void *stream, const fzgpu_field *f, uint64_t first_chunk, uint64_t nchunks,
                            const void *d_job, uint64_t job_cap, void *d_dst, uint64_t dst_cap, uint64_t *d_state,
                            uint32_t *d_crc) {
    Geo g;
    if (!c || !d_job || !d_dst || !d_state || !d_crc || ((uintptr_t)d_job & 3) || ((uintptr_t)d_dst & 3))
        return FZGPU_E_ARG;
    int rc = make_geo(f, &g);
    if (rc) return rc;
    unsigned long long tile0, nt = job_tiles(g, first_chunk, nchunks, &tile0);
    if (nt == 0 || nt > c->max_tiles || nchunks > 0x7FFFFFFFull) return FZGPU_E_ARG;
    CK(cudaSetDevice(c->device));
    gather_kernel<<<(unsigned)nchunks, GATHER_T, 0, (cudaStream_t)stream>>>(
        g.per_chunk, tile0, nt, first_chunk, c->tprefix, c->tsize, (const unsigned *)d_job, job_cap,
        (unsigned *)d_dst, dst_cap, (unsigned long long *)d_state, d_crc);
    CK(cudaGetLastError());
    return 0;
}

extern "C" int fzgpu_range(fzgpu_ctx *c, void *stream, const fzgpu_field *f, const void *d_src, uint64_t n,
                           int accumulate) {
    if (!c || (n && !d_src) || !f || (f->dtype != 1 && f->dtype != 2)) return FZGPU_E_ARG;
    CK(cudaSetDevice(c->device));
    cudaStream_t st = (cudaStream_t)stream;
    int nparts = 0;
    if (n) {
        nparts = (int)((n + 255) / 256 < (uint64_t)c->range_blocks ? (n + 255) / 256 : (uint64_t)c->range_blocks);
        if (f->dtype == 1)
            range_kernel<float><<<nparts, 256, 0, st>>>((const float *)d_src, n, f->has_fill, f->fill_bits, c->partials);
        else
            range_kernel<double><<<nparts, 256, 0, st>>>((const double *)d_src, n, f->has_fill, f->fill_bits, c->partials);
        CK(cudaGetLastError());
    }
    range_fold_kernel<<<1, FOLD_T, 0, st>>>(c->partials, nparts, c->acc, accumulate);
    CK(cudaGetLastError());
    return 0;
}

extern "C" int fzgpu_prepare_range(fzgpu_ctx *c, void *stream, const fzgpu_field *f) {
    if (!c || !f) return FZGPU_E_ARG;
    CK(cudaSetDevice(c->device));
    int rel = f->mode == 2;
    params_kernel<<<1, FOLD_T, 0, (cudaStream_t)stream>>>(c->acc, rel ? 1 : 0, rel, f->bound, c->params);
    CK(cudaGetLastError());
    return 0;
}

extern "C" int fzgpu_params_copy(fzgpu_ctx *dst, const fzgpu_ctx *src, void *stream) {
    if (!dst || !src || dst->device != src->device) return FZGPU_E_ARG;
    CK(cudaSetDevice(dst->device));
    CK(cudaMemcpyAsync(dst->params, src->params, sizeof(DevParams), cudaMemcpyDeviceToDevice, (cudaStream_t)stream));
    return 0;
}

extern "C" int fzgpu_compress_at(fzgpu_ctx *c, void *stream, const fzgpu_field *f, const void *d_src,
                                 uint64_t src_elem0, uint64_t first_chunk, uint64_t nchunks, void *d_out,
                                 uint64_t out_cap, fzgpu_result *h_res) {
    if (!f || !d_src || (f->dtype != 1 && f->dtype != 2)) return FZGPU_E_ARG;
    uint64_t es = f->dtype == 1 ? 4 : 8;
    if (src_elem0 > UINT64_MAX / es || (uintptr_t)d_src < src_elem0 * es) return FZGPU_E_ARG;
    // The kernels index the field from element 0; shifting the base keeps
    // every address they form inside [d_src, d_src + span) (the caller's
    // span covers the job's tiles).
    const void *base = (const void *)((uintptr_t)d_src - (uintptr_t)(src_elem0 * es));
    return fzgpu_compress(c, stream, f, base, first_chunk, nchunks, d_out, out_cap, h_res);
}

// The decode kernels of a job for one dtype: the warp decoder for every
// tile, then the block decoder for the tiles it left on its list (or for
// every tile of a shape without a warp walk).
// b, toff, tsize: the job's version-1 tiles (the container's, or the
// version-2 tiles rewritten by transcode_v2).
template <typename T>
static int launch_decode(const fzgpu_ctx *c, const Geo &g, const fzgpu_field *f, const unsigned char *b,
                         const unsigned long long *toff, const unsigned *tsize, unsigned long long tile0,
                         unsigned long long nt, T *dst, cudaStream_t st) {
    // flat tiles (flat.cuh): the warp decoder's flat walk where it applies
    // (decode_flat.cuh), else the block decoder takes every tile
    const int rank = g.flat ? (flat_dec_walkable(g) ? 4 : 0) : tile_rank(g);
    if (rank) {
        // Fields without a fill value: count the tiles with masks, so that
        // the decoder can take the masked walks for all where many have
        // them (decode_warp.cuh, mcount). Not for flat tiles: dec_flat's
        // masked walk differs from its plain one by a few warp-uniform
        // operations a word, and era5 flat decoded faster without (H200,
        // PERF.md v27: 625 -> 670 GB/s at 1e-3, the same at 1e-2 and 1e-4).
        const unsigned *mcount = nullptr;
        if (!f->has_fill && rank != 4 && DEC_MASKS_ALL_PCT <= 100) {
            unsigned *census = c->dcount + 1;
            void *args[] = {(void *)&b, (void *)&toff, (void *)&tsize, (void *)&nt, (void *)&census};
            CK(launch_dependent((const void *)mask_census_kernel, dim3((unsigned)((nt + 255) / 256)), dim3(256), 0, st,
                                args));
            mcount = census;
        }
        const unsigned wb = (unsigned)((nt + DEC_W - 1) / DEC_W);
        auto k = rank == 4 ? decode_warp_kernel<T, 4, false> : rank == 3 ? decode_warp_kernel<T, 3, false>
               : rank == 2 ? decode_warp_kernel<T, 2, false> : decode_warp_kernel<T, 1, false>;
        if (f->has_fill)  // the walks that apply masks for every tile (decode_warp.cuh, FK)
            k = rank == 4 ? decode_warp_kernel<T, 4, true> : rank == 3 ? decode_warp_kernel<T, 3, true>
              : rank == 2 ? decode_warp_kernel<T, 2, true> : decode_warp_kernel<T, 1, true>;
        // padded tiles (f32 rank 3, make_geo): every tile through the full-tile walks
        if constexpr (std::is_same<T, float>::value)
            if (g.padded) k = f->has_fill ? decode_warp_kernel<T, 3, true, true> : decode_warp_kernel<T, 3, false, true>;
        // Fill fields of rank 3 with clipped tiles: the full tiles first
        // (tile_order.cuh). Only there: measured on an H200 (1 GiB, same
        // call), levitus and coads gained 23-53 % on top of FK, era5 8-42 %,
        // but plot3d (the same tile structure as era5) lost up to 36 % and
        // stageIV (rank 2) 11 %: partial sectors read back from DRAM where
        // rows are not 32-byte multiples (tile_order.cuh, PERF.md dec v23).
        uint3 fl = make_uint3(0, 0, 0);
        // (Not for padded tiles, which all take the full-tile walks: their
        // full tiles first decoded 0.89-0.99x as fast as tile order, v43.)
        if (f->has_fill && rank == 3 && !g.padded && g.tiles <= 0xFFFFFFFFull && (g.nz % g.tz || g.ny % g.ty || g.nx % g.tx) &&
            g.nz >= (unsigned long long)g.tz && g.ny >= (unsigned long long)g.ty && g.nx >= (unsigned long long)g.tx)
            fl = make_uint3((unsigned)(g.nz / g.tz), (unsigned)(g.ny / g.ty), (unsigned)(g.nx / g.tx));
        double step = f->step;
        unsigned long long fill_bits = f->fill_bits;
        void *args[] = {(void *)&g,    (void *)&b,        (void *)&tile0,     (void *)&nt,        (void *)&step,
                        (void *)&toff, (void *)&tsize,    (void *)&dst,       (void *)&c->dlist,  (void *)&c->dcount,
                        (void *)&fill_bits, (void *)&fl, (void *)&mcount};
        CK(launch_dependent((const void *)k, dim3(wb), dim3(DEC_W * 32), 0, st, args));
    }
    {
        double step = f->step;
        int has_fill = f->has_fill;
        unsigned long long fill_bits = f->fill_bits;
        const unsigned *list = rank ? c->dlist : NULL;
        unsigned nall = (unsigned)nt;
        void *args[] = {(void *)&g,       (void *)&b,        (void *)&tile0,   (void *)&step,    (void *)&has_fill,
                        (void *)&fill_bits, (void *)&toff,   (void *)&tsize,   (void *)&dst,     (void *)&c->derr,
                        (void *)&c->emeta, (void *)&c->eoff, (void *)&list,    (void *)&c->dcount, (void *)&nall};
        CK(launch_dependent((const void *)decode_list_kernel<T>, dim3(c->dlist_blocks), dim3(NT), 0, st, args));
    }
    return 0;
}

// Version 2: rewrites the job's tiles (chunk_scan_kernel's toff, tsize) as
// version-1 tiles in c->v2buf, with their sizes and offsets (transcode.cuh).
// The buffer's size is a bound from the blob's size and the job's tiles,
// so nothing waits on the device (transcode.cuh's header): span bounds the
// bytes of the job's chunks (all of the blob after the header, and at most
// V2_TILE_MAX + 4 per tile: a longer chunk holds a tile that is rejected),
// plus V2_SLACK per tile.
static int transcode_v2(fzgpu_ctx *c, const Geo &g, const unsigned char *b, unsigned long long blob_size,
                        unsigned long long index_off, unsigned long long first_chunk, unsigned long long tile0,
                        unsigned long long nt, cudaStream_t st) {
    const unsigned long long room = blob_size - index_off, most = nt * (V2_TILE_MAX + 4ull);
    const unsigned long long span = room < most ? room : most;
    const unsigned long long need = span + V2_SLACK * nt;
    if (need > c->v2cap) {
        // the first version-2 job sizes it (in MiB); jobs of as many tiles
        // fit then. The jobs before on this stream may still read it.
        const unsigned long long cap = (need + (1ull << 20) - 1) & ~((1ull << 20) - 1);
        CK(cudaStreamSynchronize(st));
        cudaFree(c->v2buf);
        c->v2buf = NULL;
        c->v2cap = 0;
        CK(cudaMalloc((void **)&c->v2buf, (size_t)cap));
        c->v2cap = cap;
    }
    const unsigned blocks = (unsigned)((nt + TC_W - 1) / TC_W);
    transcode_v2_kernel<<<blocks, TC_W * 32, 0, st>>>(g, b, index_off, first_chunk, tile0, nt, span, c->toff,
                                                      c->tsize, c->v2size, c->v2off, c->v2buf, c->derr);
    CK(cudaGetLastError());
    return 0;
}

extern "C" int fzgpu_decompress(fzgpu_ctx *c, void *stream, const fzgpu_field *f, const void *d_blob,
                                uint64_t blob_size, uint64_t index_off, uint64_t first_chunk, uint64_t nchunks,
                                void *d_dst, fzgpu_result *h_res) {
    Geo g;
    if (!c || !d_blob || !d_dst || !h_res || ((uintptr_t)d_blob & 3)) return FZGPU_E_ARG;
    int rc = make_geo(f, &g);  // versions 1 and 2: the same geometry and chunk layout
    if (rc) return rc;
    unsigned long long tile0, nt = job_tiles(g, first_chunk, nchunks, &tile0);
    if (nt == 0 || nt > c->max_tiles || nt > 0x7FFFFFFFull || (index_off & 3)) return FZGPU_E_ARG;
    if (index_off > blob_size || (first_chunk + nchunks) > (blob_size - index_off) / 24) return FZGPU_E_ARG;
    if (!(f->step > 0)) return FZGPU_E_ARG;
    CK(cudaSetDevice(c->device));
    cudaStream_t st = (cudaStream_t)stream;
    // A decode's fixed costs are stream operations before and after the
    // decoder, each a launch the host makes while the device waits: the
    // block decoder's tables only when the tile shape changes, the error
    // word and counts set only after a job that did not finish (the last
    // kernel leaves them set), the kernels as programmatic dependents and
    // the result straight to pinned memory.
    const long long key[8] = {g.tz, g.ty, g.tx, g.bz, g.by, g.bx, (long long)g.ny, (long long)g.nx};
    if (!c->meta_ok || memcmp(key, c->meta_key, sizeof key)) {
        c->meta_ok = 0;
        meta_kernel<<<TILE / 256, 256, 0, st>>>(g, c->emeta, c->eoff);
        CK(cudaGetLastError());
        memcpy(c->meta_key, key, sizeof key);
        c->meta_ok = 1;
    }
    if (!c->dec_clean) {
        CK(cudaMemsetAsync(c->derr, 0xFF, sizeof(unsigned long long), st));
        CK(cudaMemsetAsync(c->dcount, 0, 2 * sizeof(unsigned), st));
    }
    c->dec_clean = 0;  // until this job's decode_finish_kernel is launched
    {
        const unsigned char *blob = (const unsigned char *)d_blob;
        void *args[] = {(void *)&g,     (void *)&blob,    (void *)&blob_size, (void *)&index_off, (void *)&first_chunk,
                        (void *)&tile0, (void *)&c->toff, (void *)&c->tsize,  (void *)&c->derr};
        CK(launch_dependent((const void *)chunk_scan_kernel, dim3((unsigned)nchunks), dim3(NT), 0, st, args));
    }
    const unsigned char *b = (const unsigned char *)d_blob;
    const unsigned long long *toff = c->toff;
    const unsigned *tsize = c->tsize;
    if (f->version == 2) {
        if ((rc = transcode_v2(c, g, b, blob_size, index_off, first_chunk, tile0, nt, st))) return rc;
        b = c->v2buf;
        toff = c->v2off;
        tsize = c->v2size;
    }
    rc = f->dtype == 1 ? launch_decode<float>(c, g, f, b, toff, tsize, tile0, nt, (float *)d_dst, st)
                       : launch_decode<double>(c, g, f, b, toff, tsize, tile0, nt, (double *)d_dst, st);
    if (rc) return rc;
    fzgpu_result *dres = result_target(c, h_res);
    {
        void *args[] = {(void *)&c->derr, (void *)&c->dcount, (void *)&dres};
        CK(launch_dependent((const void *)decode_finish_kernel, dim3(1), dim3(1), 0, st, args));
    }
    c->dec_clean = 1;
    if (dres == c->res) CK(cudaMemcpyAsync(h_res, c->res, sizeof(fzgpu_result), cudaMemcpyDeviceToHost, st));
    return 0;
}

extern "C" int fzgpu_malloc(int device, uint64_t size, void **d_ptr) {
    if (!d_ptr) return FZGPU_E_ARG;
    CK(cudaSetDevice(device));
    CK(cudaMalloc(d_ptr, size ? size : 4));
    return 0;
}
extern "C" int fzgpu_free(int device, void *d_ptr) {
    CK(cudaSetDevice(device));
    CK(cudaFree(d_ptr));
    return 0;
}
extern "C" int fzgpu_host_alloc(uint64_t size, void **h_ptr) {
    if (!h_ptr) return FZGPU_E_ARG;
    CK(cudaHostAlloc(h_ptr, size ? size : 4, cudaHostAllocPortable));
    return 0;
}
extern "C" int fzgpu_host_free(void *h_ptr) {
    CK(cudaFreeHost(h_ptr));
    return 0;
}
extern "C" int fzgpu_host_register(void *h_ptr, uint64_t size) {
    CK(cudaHostRegister(h_ptr, size, cudaHostRegisterPortable));
    return 0;
}
extern "C" int fzgpu_host_unregister(void *h_ptr) {
    CK(cudaHostUnregister(h_ptr));
    return 0;
}
extern "C" int fzgpu_stream_create(int device, void **stream) {
    if (!stream) return FZGPU_E_ARG;
    CK(cudaSetDevice(device));
    CK(cudaStreamCreateWithFlags((cudaStream_t *)stream, cudaStreamNonBlocking));
    return 0;
}
extern "C" int fzgpu_stream_destroy(int device, void *stream) {
    CK(cudaSetDevice(device));
    CK(cudaStreamDestroy((cudaStream_t)stream));
    return 0;
}
extern "C" int fzgpu_stream_sync(int device, void *stream) {
    CK(cudaSetDevice(device));
    CK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}
extern "C" int fzgpu_memcpy_async(int device, void *dst, const void *src, uint64_t size, int kind, void *stream) {
    CK(cudaSetDevice(device));
    cudaMemcpyKind k = kind == 1 ? cudaMemcpyHostToDevice
                       : kind == 2 ? cudaMemcpyDeviceToHost
                       : kind == 3 ? cudaMemcpyDeviceToDevice
                                   : cudaMemcpyDefault;
    CK(cudaMemcpyAsync(dst, src, size, k, (cudaStream_t)stream));
    return 0;
}
extern "C" int fzgpu_memset_async(int device, void *d_ptr, int value, uint64_t size, void *stream) {
    CK(cudaSetDevice(device));
    CK(cudaMemsetAsync(d_ptr, value, size, (cudaStream_t)stream));
    return 0;
}
extern "C" int fzgpu_event_create(int device, void **ev) {
    if (!ev) return FZGPU_E_ARG;
    CK(cudaSetDevice(device));
    CK(cudaEventCreate((cudaEvent_t *)ev));
    return 0;
}
extern "C" int fzgpu_event_create_blocking(int device, void **ev) {
    if (!ev) return FZGPU_E_ARG;
    CK(cudaSetDevice(device));
    CK(cudaEventCreateWithFlags((cudaEvent_t *)ev, cudaEventBlockingSync | cudaEventDisableTiming));
    return 0;
}
extern "C" int fzgpu_event_destroy(int device, void *ev) {
    CK(cudaSetDevice(device));
    CK(cudaEventDestroy((cudaEvent_t)ev));
    return 0;
}
extern "C" int fzgpu_event_record(int device, void *ev, void *stream) {
    CK(cudaSetDevice(device));
    CK(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream));
    return 0;
}
extern "C" int fzgpu_stream_wait_event(int device, void *stream, void *ev) {
    CK(cudaSetDevice(device));
    CK(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0));
    return 0;
}
extern "C" int fzgpu_event_sync(int device, void *ev) {
    CK(cudaSetDevice(device));
    CK(cudaEventSynchronize((cudaEvent_t)ev));
    return 0;
}
extern "C" int fzgpu_host_register_ro(void *h_ptr, uint64_t size) {
    CK(cudaHostRegister(h_ptr, size, cudaHostRegisterPortable | cudaHostRegisterReadOnly));
    return 0;
}
extern "C" int fzgpu_event_elapsed(int device, void *start, void *end, float *ms) {
    if (!ms) return FZGPU_E_ARG;
    CK(cudaSetDevice(device));
    CK(cudaEventSynchronize((cudaEvent_t)end));
    CK(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
    return 0;
}
