/* fzgpu: FZSC v1 codec on NVIDIA GPUs. C ABI, loaded at run time by the Go
 * binding (package cuda). The bytes produced are identical to the CPU codec
 * in fz/ (docs/FORMAT.md is the contract).
 *
 * Model
 *  - A context owns every scratch buffer a job needs, sized once for
 *    max_tiles tiles: the per-job path never allocates, frees or blocks.
 *  - Work is enqueued on a caller's stream (cudaStream_t passed as void*);
 *    a job's result reaches caller memory in stream order: written by its
 *    last kernel where the device can write it (pinned memory, for
 *    asynchrony), else by a cudaMemcpyAsync at the end of the job, so the
 *    caller waits on its own stream only. One job per context may be in
 *    flight (a context's next job, on any stream, starts after its last one
 *    is done): use one context per stream for concurrency.
 *  - Every call selects the context's device on the calling thread first,
 *    so a caller may call from any OS thread (Go goroutines migrate).
 *  - Return codes: 0 ok; 1..99 FZGPU_E_*; >= 1000 a CUDA error (rc-1000 is
 *    the cudaError_t). fzgpu_strerror describes any of them.
 */
#ifndef FZGPU_H
#define FZGPU_H
#include <stdint.h>
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

/* ABI 4 removed fzgpu_copy_out (the copy back is the caller's cudaMemcpyAsync).
 * ABI 5 added GPU-resident snapshots: device UUIDs, priority streams, CUDA
 * IPC memory and event handles (ipc.cu). ABI 6 added fzgpu_field.version.
 * ABI 7 added fzgpu_gather (a snapshot assembled and checksummed on the
 * device). ABI 8 added fzgpu_field.tiling (flat tiles, docs/FORMAT.md 3.1).
 * ABI 9 added tiling 2 (padded box tiles, 3.2: f32 rank-3 tiles only). */
#define FZGPU_ABI_VERSION 9

enum {
    FZGPU_OK = 0,
    FZGPU_E_ARG = 1,      /* bad argument (null pointer, shape, job too large) */
    FZGPU_E_CAPACITY = 2, /* output buffer too small (reported in result.status) */
    FZGPU_E_FORMAT = 3,   /* malformed container (reported in result.status) */
    FZGPU_E_NODEVICE = 4, /* no CUDA device */
    FZGPU_E_WRONGDEVICE = 5, /* IPC memory that lies on another GPU than the one named */
    FZGPU_E_NOTREADY = 6,    /* fzgpu_event_query: the event has not completed yet */
    FZGPU_E_CUDA = 1000
};

/* Decode error codes (result.err_code), naming what was wrong in a tile. */
enum {
    FZGPU_DE_INDEX = 1,       /* chunk index entry outside the container */
    FZGPU_DE_TABLE = 2,       /* chunk too small for its tile table */
    FZGPU_DE_TILESIZE = 3,    /* tile size not a multiple of 4, < 8, past the chunk, or the tile misaligned */
    FZGPU_DE_TRAILCHUNK = 4,  /* bytes after the last tile of a chunk */
    FZGPU_DE_FLAGS = 5,       /* unknown tile flags */
    FZGPU_DE_TRUNC = 6,       /* tile data shorter than its fields */
    FZGPU_DE_ESCCOUNT = 7,    /* escape count out of range or != escape codes */
    FZGPU_DE_SLOT0 = 8,       /* non-zero code in slot 0 */
    FZGPU_DE_MASKSLOTS = 9,   /* fill/raw mask marks slots >= n */
    FZGPU_DE_RAWCOUNT = 10,   /* raw count != raw mask */
    FZGPU_DE_TRAILTILE = 11,  /* trailing bytes in a tile */
    /* version 2 code sections (docs/FORMAT.md) */
    FZGPU_DE_V2BLOCKS = 12,   /* code block mask 0, or marking blocks past the tile's values */
    FZGPU_DE_V2RATES = 13,    /* rate word 0, a rate on a group past the values, or a top unit 0 */
    FZGPU_DE_V2MAGS = 14,     /* magnitude bits on slots past the values, or a non-zero padding u16 */
    FZGPU_DE_V2SIGNS = 15     /* unused sign bits set, or an escape with sign 1 */
};

typedef struct fzgpu_ctx fzgpu_ctx;

/* A field and its codec parameters. Shapes are the folded (z, y, x) ones of
 * docs/FORMAT.md section 3. 96 bytes, no implicit padding. */
typedef struct fzgpu_field {
    uint32_t dtype;           /* 1 f32, 2 f64 */
    uint32_t mode;            /* 1 abs, 2 rel (compress only) */
    double bound;             /* compress: the user's bound */
    double step;              /* decompress: header step */
    uint64_t fill_bits;       /* fill value bits in dtype */
    uint32_t has_fill;
    uint32_t tiles_per_chunk;
    uint64_t nz, ny, nx;
    uint32_t tile[3];         /* z, y, x; product 4096 */
    uint32_t block[3];        /* z, y, x; product 128, divides tile */
    uint32_t version;         /* container version: 1 or 2 (docs/FORMAT.md) */
    uint32_t tiling;          /* 0 box tiles, 1 flat tiles (docs/FORMAT.md 3.1; tile 1x1x4096, block 1x1x128),
                                 2 padded box tiles (3.2; f32, tile 8x16x32, block 4x4x8 only) */
} fzgpu_field;

/* Filled by the device at the end of a job (80 bytes). */
typedef struct fzgpu_result {
    uint64_t bytes;        /* compress: bytes of the job's chunks (tables + tiles) */
    uint64_t outliers;     /* compress: raw values (not counting fill) */
    double max_abs_err;    /* compress: max |x - x'| over checked values */
    double abs_eb, step;   /* compress: the derived bound and step */
    double range_min, range_max; /* compress, rel: range (NaN if none) */
    uint32_t have_range;
    uint32_t status;       /* 0, FZGPU_E_CAPACITY or FZGPU_E_FORMAT */
    uint64_t err_tile;     /* decompress: job-relative tile of the first error */
    uint32_t err_code;     /* decompress: FZGPU_DE_* */
    uint32_t pad;
} fzgpu_result;

int fzgpu_abi_version(void);
int fzgpu_device_count(int *n);
/* Writes the device name (NUL-terminated) and its memory size. */
int fzgpu_device_info(int device, char *name, uint64_t name_len, uint64_t *total_mem);
void fzgpu_strerror(int rc, char *buf, uint64_t len);

/* Creates a context on a device with scratch for jobs of up to max_tiles
 * tiles (one chunk must fit: max_tiles >= tiles_per_chunk). The scratch is
 * 72 bytes per tile plus 42.5 KiB per warp the encoder keeps resident (as many as
 * fit on the device at once, or fewer for a small max_tiles); the buffers of
 * version-2 decode and of pre-coded clipped tiles grow to the largest job.
 * No environment variable changes which kernels run. */
int fzgpu_create(int device, uint64_t max_tiles, fzgpu_ctx **out);
void fzgpu_destroy(fzgpu_ctx *ctx);

/* Worst-case bytes of a compress job of `tiles` tiles of dtype. */
uint64_t fzgpu_compress_bound(uint32_t dtype, uint64_t tiles);

/* Stage 1 of compress: value range (rel) and the bound/step for the whole
 * field d_src (nz*ny*nx values), kept on the device for the following
 * fzgpu_compress calls. */
int fzgpu_prepare(fzgpu_ctx *ctx, void *stream, const fzgpu_field *f, const void *d_src);

/* Encodes chunks [first_chunk, first_chunk+nchunks) of the field d_src into
 * d_out (capacity out_cap bytes, 4-byte aligned): the chunks back to back,
 * each its tile table then its tiles. The result reaches *h_res in stream
 * order: written by the last kernel when h_res is pinned host memory (the
 * asynchronous case), else copied. */
int fzgpu_compress(fzgpu_ctx *ctx, void *stream, const fzgpu_field *f, const void *d_src,
                   uint64_t first_chunk, uint64_t nchunks, void *d_out, uint64_t out_cap,
                   fzgpu_result *h_res);

/* A snapshot's chunks assembled on the device (ABI 7; gather.cuh). Right
 * after fzgpu_compress(_at) of chunks [first_chunk, first_chunk+nchunks)
 * into d_job (job_cap bytes) on the same context and stream, copies the
 * job's bytes to d_dst + d_state[0] and each chunk's CRC32C (as the chunk
 * index holds it) to d_crc[first_chunk + i], then adds the job's bytes to
 * d_state[0]. Where they would pass dst_cap nothing is copied and
 * d_state[1] is set, but d_state[0] still grows: after the snapshot's last
 * job it is the size d_dst needs. d_state is 3 u64 of device memory, zero
 * before a snapshot's first job and left with d_state[2] = 0; jobs run in
 * chunk order (a job's fzgpu_gather after the previous one's). */
int fzgpu_gather(fzgpu_ctx *ctx, void *stream, const fzgpu_field *f, uint64_t first_chunk, uint64_t nchunks,
                 const void *d_job, uint64_t job_cap, void *d_dst, uint64_t dst_cap, uint64_t *d_state,
                 uint32_t *d_crc);

/* Streaming (ABI 2): a field larger than device memory, or arriving in
 * pieces, is compressed from a device buffer holding only part of it.
 *
 * fzgpu_range folds the value range of n values at d_src into the context's
 * running range (restarting it unless accumulate); fzgpu_prepare_range then
 * derives the bound and step from that range (rel) or from the bound (abs),
 * as fzgpu_prepare does from a whole field. fzgpu_params_copy gives another
 * context on the same device those parameters (stream-ordered on `stream`). */
int fzgpu_range(fzgpu_ctx *ctx, void *stream, const fzgpu_field *f, const void *d_src, uint64_t n,
                int accumulate);
int fzgpu_prepare_range(fzgpu_ctx *ctx, void *stream, const fzgpu_field *f);
int fzgpu_params_copy(fzgpu_ctx *dst, const fzgpu_ctx *src, void *stream);
/* fzgpu_compress where d_src holds the field's elements from index
 * src_elem0 on (C order over nz, ny, nx) rather than from 0. The caller
 * guarantees the job's tiles lie within the elements present. */
int fzgpu_compress_at(fzgpu_ctx *ctx, void *stream, const fzgpu_field *f, const void *d_src,
                      uint64_t src_elem0, uint64_t first_chunk, uint64_t nchunks, void *d_out,
                      uint64_t out_cap, fzgpu_result *h_res);

/* Decodes chunks [first_chunk, first_chunk+nchunks) of a whole container
 * d_blob (blob_size bytes, 4-byte aligned; the index starts at index_off)
 * into d_dst, the whole field. Chunk checksums are the caller's job.
 * f->version 2: the job's tiles are first rewritten as version-1 tiles in a
 * context buffer that grows to the largest job seen (at most about 57 KiB
 * per tile, in practice the size of the job's chunks plus up to 8 KiB per
 * tile); this call then waits once on the stream for the buffer's size
 * (and may allocate), unlike every other job. */
int fzgpu_decompress(fzgpu_ctx *ctx, void *stream, const fzgpu_field *f, const void *d_blob,
                     uint64_t blob_size, uint64_t index_off, uint64_t first_chunk,
                     uint64_t nchunks, void *d_dst, fzgpu_result *h_res);

/* Memory and stream helpers (so the Go side needs no libcudart). */
int fzgpu_malloc(int device, uint64_t size, void **d_ptr);
int fzgpu_free(int device, void *d_ptr);
int fzgpu_host_alloc(uint64_t size, void **h_ptr);   /* pinned */
int fzgpu_host_free(void *h_ptr);
int fzgpu_host_register(void *h_ptr, uint64_t size); /* pin an existing mapping */
int fzgpu_host_unregister(void *h_ptr);
/* Pins a read-only mapping (cudaHostRegisterReadOnly): the device only reads it. */
int fzgpu_host_register_ro(void *h_ptr, uint64_t size);
int fzgpu_stream_create(int device, void **stream);  /* non-blocking stream */
int fzgpu_stream_destroy(int device, void *stream);
int fzgpu_stream_sync(int device, void *stream);
/* kind: 1 H2D, 2 D2H, 3 D2D (cudaMemcpyDefault semantics otherwise) */
int fzgpu_memcpy_async(int device, void *dst, const void *src, uint64_t size, int kind, void *stream);
int fzgpu_memset_async(int device, void *d_ptr, int value, uint64_t size, void *stream);
int fzgpu_event_create(int device, void **ev);
/* An event whose fzgpu_event_sync sleeps instead of spinning (no timing):
 * with many lanes waiting at once, spinning threads starve the host-side
 * work (producers, checksums) of CPU. */
int fzgpu_event_create_blocking(int device, void **ev);
int fzgpu_event_destroy(int device, void *ev);
int fzgpu_event_record(int device, void *ev, void *stream);
/* Makes later work on stream wait for ev (cudaStreamWaitEvent). */
int fzgpu_stream_wait_event(int device, void *stream, void *ev);
/* Blocks the calling thread until ev has completed. */
int fzgpu_event_sync(int device, void *ev);
/* Waits for `end` and writes the milliseconds between the two events. */
int fzgpu_event_elapsed(int device, void *start, void *end, float *ms);

/* GPU-resident snapshots (ABI 5; ipc.cu): another process's device memory,
 * exported with cudaIpcGetMemHandle, compressed in place.
 *
 * fzgpu_device_uuid writes the device's 16-byte UUID (as nvidia-smi shows
 * it after "GPU-"). fzgpu_stream_create_priority creates a non-blocking
 * stream at the device's lowest priority (lowest != 0) or its highest, and
 * reports the priority it got (may be NULL).
 *
 * fzgpu_ipc_open_mem opens a 64-byte IPC memory handle on `device`
 * (cudaIpcOpenMemHandle) and reports the allocation's base and size
 * (cuMemGetAddressRange): what the handle exports, whatever the producer
 * claims. FZGPU_E_WRONGDEVICE (and nothing left open) when the memory is
 * on another device; a CUDA error when the handle cannot be opened (its
 * producer exited or freed the allocation, or it is not from this node).
 * fzgpu_ipc_close_mem undoes it. fzgpu_ipc_open_event opens an IPC event
 * handle (destroy it with fzgpu_event_destroy); fzgpu_event_query returns 0
 * once an event has completed, FZGPU_E_NOTREADY before. */
int fzgpu_device_uuid(int device, uint8_t uuid[16]);
int fzgpu_stream_create_priority(int device, int lowest, void **stream, int *priority);
int fzgpu_ipc_open_mem(int device, const void *handle, void **base, uint64_t *size);
int fzgpu_ipc_close_mem(int device, void *base);
int fzgpu_ipc_open_event(int device, const void *handle, void **ev);
int fzgpu_event_query(int device, void *ev);
/* The exporting side (tests; producers use the CUDA runtime directly):
 * the IPC handle of an allocation made on `device`, and a new interprocess
 * event (no timing) with its handle. */
int fzgpu_ipc_export_mem(int device, void *ptr, void *handle);
int fzgpu_ipc_event_create(int device, void **ev, void *handle);

#ifdef __cplusplus
}
#endif
#endif
