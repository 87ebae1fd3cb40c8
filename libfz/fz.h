/*
 * fz.h — C ABI of libfz: the fzsidecar codec (docs/FORMAT.md containers) and
 * read access to a store written by `fzsidecar serve` (docs/SINKS.md layout).
 *
 * libfz.so is the Go code of the fz and sinks packages built with
 * `go build -buildmode=c-shared` (`make libfz` puts it into build/lib/ and this
 * header into build/include/). It is meant for post-processing tools and
 * language bindings (Python, an HDF5 filter); it runs the CPU codec only.
 *
 * Conventions
 *  - Every function returns an fz_status: FZ_OK (0) or an error code. After an
 *    error, fz_last_error() returns a message saying what was wrong and what is
 *    expected. The message is per thread (thread-local) and stays valid until
 *    the next libfz call on the same thread.
 *  - All functions are safe to call from several threads at once. Store
 *    handles may be shared between threads; fz_store_close waits for calls
 *    in flight on that handle to return.
 *  - Sizes and counts are 64-bit. Arrays are C order; dims go from the slowest
 *    to the fastest dimension (dims[ndims-1] varies fastest). Values are the
 *    host's (little-endian) float or double.
 *  - Bad input (corrupt containers, wrong sizes, NULL pointers where a value
 *    is required) returns an error; it never aborts the host process. An
 *    unexpected internal failure is caught at the boundary and returned as
 *    FZ_EINTERNAL.
 *  - Memory that libfz allocates for the caller (compressed bytes, listings)
 *    comes from malloc and is released with fz_free (or free()).
 */
#ifndef FZ_H
#define FZ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: fz_options.format_version (was a reserved word that version 1 ignored). */
#define FZ_ABI_VERSION 2
#define FZ_MAX_DIMS 16

/* Status codes. */
typedef int fz_status;
#define FZ_OK 0
#define FZ_EINVAL 1     /* a bad argument: dtype, mode, bound, dims, NULL pointer, region, name */
#define FZ_EFORMAT 2    /* the bytes are not a valid container (corrupt, truncated, wrong version) */
#define FZ_ECHECKSUM 3  /* stored bytes do not match their CRC32C */
#define FZ_ESIZE 4      /* a caller buffer has the wrong size (the message gives the needed size) */
#define FZ_ENOTFOUND 5  /* run, variable or step not in the store (the message lists what exists) */
#define FZ_EIO 6        /* the store could not be read (disk, network, S3 credentials) */
#define FZ_EINTERNAL 7  /* a bug in libfz, caught before it reached the host */

/* Element types and error-bound modes (the values of docs/FORMAT.md). */
#define FZ_F32 1
#define FZ_F64 2
#define FZ_ABS 1 /* the bound is an absolute error */
#define FZ_REL 2 /* the bound is relative to the value range (max - min of finite non-fill values) */

/* Message of the last failed call on this thread ("" if none). */
const char *fz_last_error(void);

/* FZ_ABI_VERSION of the library (compare with the header's). */
int fz_abi_version(void);

/* Releases memory libfz returned (NULL is fine). */
void fz_free(void *p);

/*
 * Options of the codec calls; NULL means all defaults. Set struct_size to
 * sizeof(fz_options) (fields added later go at the end).
 */
typedef struct fz_options {
    uint32_t struct_size;
    int32_t workers;          /* parallel workers; 0: all cores. Output bytes never depend on it */
    uint32_t tiles_per_chunk; /* compress: chunk size in tiles of 4096 values; 0: 256 (the CLI's). Changes the bytes */
    uint32_t format_version;  /* compress: container version to write, 1 or 2 (docs/FORMAT.md); 0: 1, the default.
                                 2 is smaller and opt-in; decompress reads every version and ignores this.
                                 Since FZ_ABI_VERSION 2 (version 1 ignored this word) */
    uint64_t max_raw_bytes;   /* decompress: refuse containers decoding to more; 0: no limit */
} fz_options;

/* What the header of a container says (fz_read_header). */
typedef struct fz_info {
    int32_t dtype;            /* FZ_F32 or FZ_F64 */
    int32_t mode;             /* FZ_ABS or FZ_REL */
    int32_t ndims;            /* 1..FZ_MAX_DIMS */
    int32_t has_fill;         /* 1 if the field has a fill value */
    uint64_t dims[FZ_MAX_DIMS]; /* slowest -> fastest; entries past ndims are 0 */
    double bound;             /* the bound as given (absolute or relative) */
    double abs_eb;            /* absolute bound every finite non-fill value meets */
    double fill;              /* the fill value (0 when has_fill is 0) */
    double range_min;         /* of finite non-fill values; NaN when not computed */
    double range_max;
    uint64_t elements;        /* product of dims */
    uint64_t raw_bytes;       /* decompressed size */
    uint64_t compressed_bytes;/* container size implied by the chunk index */
    uint64_t header_bytes;    /* header plus chunk index: the prefix fz_read_header needs */
    uint64_t chunks;
    double ratio;             /* raw_bytes / compressed_bytes (0 when empty) */
    uint32_t version;         /* container format version */
    uint32_t reserved;
} fz_info;

/* What one compression measured (fz_compress). */
typedef struct fz_stats {
    uint64_t raw_bytes;
    uint64_t compressed_bytes;
    double abs_eb;      /* absolute bound used */
    double max_abs_err; /* largest |x - x'| over finite non-fill values */
    uint64_t outliers;  /* values stored losslessly (not counting fill) */
    double ratio;
} fz_stats;

/* ---- codec ---- */

/*
 * Compresses src (src_len bytes: the elements of dims in dtype) with an error
 * bound. fill, if not NULL, marks elements equal (bit for bit in dtype) to
 * *fill as missing: they round-trip exactly. The container is returned in
 * *out (malloc'd, release with fz_free) and *out_len; stats may be NULL. The
 * bytes are identical to `fzsidecar compress` with the same parameters.
 */
fz_status fz_compress(const void *src, uint64_t src_len, int32_t dtype, const uint64_t *dims, int32_t ndims,
                      int32_t mode, double bound, const double *fill, const fz_options *opts,
                      void **out, uint64_t *out_len, fz_stats *stats);

/*
 * Parses and checks the header and chunk index. blob may be only a prefix of
 * the container: with at least 88 bytes the call either succeeds or fails
 * with FZ_ESIZE and info->header_bytes set to the prefix length it needs.
 */
fz_status fz_read_header(const void *blob, uint64_t blob_len, fz_info *info);

/* The decompressed size of a container in bytes (from its header). */
fz_status fz_decompressed_size(const void *blob, uint64_t blob_len, uint64_t *raw_bytes);

/*
 * Decompresses a whole container (every chunk CRC-checked) into dst, which
 * must hold exactly the decompressed size (dst_len == raw_bytes). info may be
 * NULL; otherwise it receives the header.
 */
fz_status fz_decompress(const void *blob, uint64_t blob_len, void *dst, uint64_t dst_len,
                        const fz_options *opts, fz_info *info);

/*
 * Decompresses indices [lo, hi) of the slowest dimension (dims[0]), as
 * `fzsidecar get --region lo:hi`, decoding only the chunks that hold them.
 * dst_len must be exactly (hi - lo) * dims[1] * ... * dims[ndims-1] * element
 * size; fz_region_size computes it.
 */
fz_status fz_decompress_region(const void *blob, uint64_t blob_len, uint64_t lo, uint64_t hi,
                               void *dst, uint64_t dst_len);

/* The byte size of region [lo, hi) of dims[0] of a container. */
fz_status fz_region_size(const void *blob, uint64_t blob_len, uint64_t lo, uint64_t hi, uint64_t *bytes);

/* ---- store: read snapshots that `fzsidecar serve` stored ---- */

/* A store handle; 0 is never a valid handle. */
typedef uint64_t fz_store;

/*
 * Opens a store: "file:///path", a plain directory path, or
 * "s3://bucket[/prefix]" (endpoint and credentials from AWS_ENDPOINT_URL,
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, as the CLI's --sink).
 * A malformed URL (another scheme, no bucket, a bad prefix): FZ_EINVAL; a
 * store that cannot be reached or a directory that does not exist: FZ_EIO.
 *
 * libfz writes nothing to stderr unless the environment variable
 * FZ_LIBFZ_LOG is set when it loads: 1 (or warn) for the stores' warnings
 * (retried S3 requests, skipped catalog objects), info or debug for more.
 */
fz_status fz_store_open(const char *url, fz_store *store);

/* Closes a store; waits for calls in flight on it. Unknown handles: FZ_EINVAL. */
fz_status fz_store_close(fz_store store);

/*
 * Listings. Names are returned as one malloc'd string of names separated by
 * '\n' (no trailing newline; "" when none), *count set to how many. Names are
 * 1-128 characters of [A-Za-z0-9._-].
 */
fz_status fz_store_runs(fz_store store, char **names, uint64_t *count);
/* Variables of run, which must be named: "" is FZ_EINVAL (fz_store_list_json lists every run's). */
fz_status fz_store_vars(fz_store store, const char *run, char **names, uint64_t *count);
/* Steps of run/var in increasing order, as a malloc'd array. */
fz_status fz_store_steps(fz_store store, const char *run, const char *var, uint64_t **steps, uint64_t *count);

/*
 * The whole catalog under run (all runs if run is NULL or "") and var (all
 * variables if NULL or ""), as a malloc'd JSON array of objects
 *   {"run","var","step","dtype","dims","mode","bound","abs_eb","max_abs_err",
 *    "raw_bytes","stored_bytes","crc32c","created","ratio"}; crc32c is a string
 *    of 8 hex digits, as `fzsidecar ls --json` and restore.json write it
 * sorted by run, var, step: one call for tools that show everything.
 */
fz_status fz_store_list_json(fz_store store, const char *run, const char *var, char **json);

/* Catalog entry of one stored snapshot (fz_store_stat). */
typedef struct fz_entry {
    fz_info info;        /* the container header (fetched with two ranged reads) */
    double max_abs_err;  /* measured when it was compressed; 0 if unknown */
    uint64_t stored_bytes;
    uint32_t crc32c;     /* of the whole blob */
    uint32_t reserved;
    int64_t created_unix_ns; /* when it was stored; 0 if unknown */
} fz_entry;

/* Header and catalog entry of run/var/step, without fetching the data. */
fz_status fz_store_stat(fz_store store, const char *run, const char *var, uint64_t step, fz_entry *entry);

/*
 * Reads and decodes run/var/step into dst (dst_len == entry.info.raw_bytes).
 * The blob's CRC32C is checked. entry may be NULL.
 */
fz_status fz_store_read(fz_store store, const char *run, const char *var, uint64_t step,
                        void *dst, uint64_t dst_len, fz_entry *entry);

/*
 * Reads indices [lo, hi) of the slowest dimension of run/var/step with ranged
 * reads of only the chunks that hold them (each chunk CRC-checked). dst_len is
 * the region's byte size (see fz_decompress_region). entry may be NULL.
 */
fz_status fz_store_read_region(fz_store store, const char *run, const char *var, uint64_t step,
                               uint64_t lo, uint64_t hi, void *dst, uint64_t dst_len, fz_entry *entry);

#ifdef __cplusplus
}
#endif
#endif /* FZ_H */
