/*
 * fzproducer.h — hand snapshots to an fzsidecar from C, C++ or Fortran.
 *
 * libfzproducer implements the producer side of protocol v1
 * (docs/PROTOCOL.md) on the NATS C client; the Go package ingest
 * (ingest.Producer) is the reference implementation and this API mirrors it.
 * No Go runtime runs inside the simulation process.
 *
 * One snapshot, start to end:
 *
 *     fzp_producer *p = fzp_new();                  // NULL only when out of memory
 *     fzp_set(p, "url", "nats://127.0.0.1:4222");   // every option is optional
 *     if (fzp_connect(p) != FZP_OK) { fprintf(stderr, "%s\n", fzp_errmsg(p)); ... }
 *     uint64_t dims[2] = {ny, nx};                   // slowest -> fastest (C order)
 *     fzp_snapshot *s; void *buf;
 *     if (fzp_begin(p, "run1", "temperature", step, FZP_F64, 2, dims, FZP_REL, 1e-3,
 *                   NULL, &s, &buf) == FZP_OK) {
 *         compute_into((double *)buf);               // the field is written IN PLACE
 *         fzp_publish(p, s);                         // do not touch buf after this
 *         fzp_result r;
 *         int rc = fzp_wait(p, s, 60000, &r);        // FZP_OK: r.key, r.ratio, ...
 *         fzp_snapshot_free(p, s);
 *     }
 *     fzp_close(p);
 *
 * Status codes. Every function returns an int status: FZP_OK (0) or one of
 * the FZP_E* values below. After a failure fzp_errmsg(p) says what was wrong
 * and what is expected, and fzp_errcode(p) gives a short code string. When
 * the sidecar answered with an error, that string is the sidecar's code
 * unchanged ("budget_full", "too_large", "invalid", "size_mismatch", ... —
 * docs/PROTOCOL.md section 6); errors found by the library use the protocol's
 * codes where one fits ("invalid", "unavailable") and otherwise "system",
 * "state", "closed", "timeout" or "refused". Nothing in this library calls
 * abort() or exit(), and no call hangs longer than the timeout it is given
 * or the producer's configured timeouts.
 *
 * Threading. A producer holds no global state: any number of producers may
 * live in one process (each has its own NATS connection). Calls on ONE
 * producer (and its snapshots) must not overlap: use one producer per
 * thread, or serialize the calls; fzp_errmsg/fzp_errcode describe the last
 * failed call on that producer. Internally the NATS client runs its own
 * threads, which receive results while the simulation computes; the library
 * synchronises with them, and all callbacks stay inside the library.
 * Do not call into a producer from a signal handler.
 *
 * Sizes are 64-bit throughout (uint64_t dims and byte counts).
 *
 * Credentials. With no "token", "user", "password" or "creds" option set,
 * fzp_connect reads "<shm_dir>/.fzsidecar-auth" (written by a zero-config
 * `fzsidecar serve`) and uses its user and password, and its url when no
 * "url" was set. A missing file means "no authentication" (servers without
 * auth, or an external server configured otherwise).
 */
#ifndef FZPRODUCER_H
#define FZPRODUCER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FZP_BUILDING) && defined(__GNUC__)
#define FZP_API __attribute__((visibility("default")))
#else
#define FZP_API
#endif

#define FZP_VERSION_MAJOR 1
#define FZP_VERSION_MINOR 0
/** Protocol version spoken (docs/PROTOCOL.md). */
#define FZP_PROTOCOL_VERSION 1

/** Status codes returned by every function. */
enum fzp_status {
    FZP_OK = 0,
    FZP_EINVAL = 1,       /**< bad argument (NULL pointer, name, dims, bound, option ...); code "invalid" */
    FZP_ENOMEM = 2,       /**< out of memory; code "system" */
    FZP_ESYS = 3,         /**< operating-system error: shm dir, file creation, ENOSPC, mmap; code "system" */
    FZP_ECONNECT = 4,     /**< could not connect to the NATS server; code "unavailable" (or "refused" for bad credentials/TLS) */
    FZP_EUNAVAILABLE = 5, /**< connected, but no sidecar answered in time; code "unavailable" */
    FZP_EBUDGET = 6,      /**< admission refused: the in-flight budget is full (per the policy); code "budget_full" */
    FZP_ESIDECAR = 7,     /**< the sidecar answered with an error; fzp_errcode / fzp_result.error_code hold its code */
    FZP_EPUBLISH = 8,     /**< the snapshot stream refused the notification, or no PubAck within publish_timeout_ms */
    FZP_ETIMEOUT = 9,     /**< fzp_wait: no result within the timeout (the snapshot is still pending: wait again) */
    FZP_ESTATE = 10,      /**< call not valid in this state (e.g. publish twice, begin before connect) */
    FZP_ECLOSED = 11      /**< the producer was closed */
};

/** Element types (little-endian IEEE-754). */
enum fzp_dtype { FZP_F32 = 1, FZP_F64 = 2 };

/** Error-bound modes: absolute, or relative to (max - min) of the field. */
enum fzp_mode { FZP_ABS = 1, FZP_REL = 2 };

/** Most dimensions a snapshot may have. */
#define FZP_MAX_DIMS 16

typedef struct fzp_producer fzp_producer;
typedef struct fzp_snapshot fzp_snapshot;

/**
 * The outcome of one snapshot, as the sidecar reported it. Strings are
 * NUL-terminated (cut, never overflowing, if the sidecar sent longer ones).
 * The layout is fixed (Python ctypes and Fortran bind(C) mirror it).
 */
typedef struct fzp_result {
    int32_t ok;                  /**< 1: stored; 0: failed (error_code says why) */
    int32_t reserved;
    uint64_t step;
    uint64_t raw_bytes;          /**< bytes of the field */
    uint64_t compressed_bytes;   /**< bytes stored */
    double ratio;                /**< raw / compressed */
    double abs_eb;               /**< absolute error bound used */
    double max_abs_err;          /**< largest error measured at compression */
    double seconds;              /**< sidecar time for this snapshot */
    char msg_id[160];
    char key[512];               /**< object key in the sink, e.g. run/var/000000000012.fz */
    char error_code[64];         /**< sidecar code ("budget_full", "conflict", ...), "" when ok */
    char error_message[1024];
} fzp_result;

/** Library version string, e.g. "1.0 (protocol 1, nats.c 3.4.1)". */
FZP_API const char *fzp_version(void);

/** A new, unconnected producer; NULL only when out of memory. Free with fzp_close. */
FZP_API fzp_producer *fzp_new(void);

/**
 * Sets an option (before fzp_connect). Keys:
 *   url                  NATS URL(s), comma-separated (default nats://127.0.0.1:4222,
 *                        or the url in <shm_dir>/.fzsidecar-auth)
 *   token | user | password | creds   credentials (creds: a .creds file)
 *   nkey                 (not supported by this library: use creds)
 *   tls_ca               CA file to verify the server (enables TLS)
 *   tls_cert, tls_key    client certificate and key
 *   prefix               subject prefix (default "fz"; the sidecar's --subject-prefix)
 *   shm_dir              segment directory (default /dev/shm/fzsidecar; the sidecar's --shm-dir)
 *   id                   producer id, 1-128 of A-Z a-z 0-9 _ - (default <hostname>-<pid>; -2, -3, ... appended for a process's later producers)
 *   policy               "block" (default) or "fail": what fzp_begin does when the budget is full
 *   block_timeout_ms     how long a "block" admission waits for room (default 60000)
 *   reuse_segments       finished segments kept for later snapshots of the same size (default 0)
 *   connect_timeout_ms   how long fzp_connect keeps trying (default 10000)
 *   publish_timeout_ms   how long fzp_publish retries for a PubAck (default 60000)
 *   poll_interval_ms     results not seen live are looked up after this (default 2000)
 *   request_timeout_ms   one admission request when policy is "fail" (default 5000)
 *   test_ignore_live_results  "1": drop results arriving on the subscription, so that
 *                        only the result-stream look-up finds them (for tests of that path)
 * Returns FZP_EINVAL for an unknown key or a bad value, FZP_ESTATE after fzp_connect.
 */
FZP_API int fzp_set(fzp_producer *p, const char *key, const char *value);

/** Connects (retrying up to connect_timeout_ms) and subscribes to this producer's results. */
FZP_API int fzp_connect(fzp_producer *p);

/** The producer id in use (after fzp_connect, or once set). Never NULL. */
FZP_API const char *fzp_id(const fzp_producer *p);

/** Message of the last failed call on p ("" if none). Never NULL (also for p == NULL). */
FZP_API const char *fzp_errmsg(const fzp_producer *p);

/** Code string of the last failed call on p ("" if none); see the top of this file. */
FZP_API const char *fzp_errcode(const fzp_producer *p);

/**
 * Asks the sidecar for budget (per the producer's policy) and creates a
 * segment of exactly product(dims) * element size bytes. On FZP_OK, *snap
 * is the snapshot and *data points at its bytes in the shared-memory
 * segment, page-aligned: write the field there in place, C order
 * (dims[0] slowest, dims[ndims-1] fastest). A Fortran array a(n1,n2,n3) has
 * dims {n3, n2, n1}. A reused segment still holds its previous contents.
 *   run, var    1-128 of A-Z a-z 0-9 . _ - starting with a letter or digit
 *   step        0 .. 999999999999
 *   dtype       FZP_F32 or FZP_F64;  mode  FZP_ABS or FZP_REL
 *   ndims       1..16;  dims  the extents (0 allowed: an empty field)
 *   bound       finite and > 0
 *   fill        NULL, or a value marking missing elements (NaN and +-inf allowed)
 * Errors: FZP_EINVAL (arguments), FZP_EBUDGET (budget_full), FZP_ESIDECAR
 * (e.g. too_large: larger than the sidecar's whole budget), FZP_EUNAVAILABLE,
 * FZP_ESYS (shm dir not writable, no space: ENOSPC is reported here, never a SIGBUS later).
 */
FZP_API int fzp_begin(fzp_producer *p, const char *run, const char *var, uint64_t step, int dtype,
              int ndims, const uint64_t *dims, int mode, double bound, const double *fill,
              fzp_snapshot **snap, void **data);

/**
 * fzp_begin + a copy of src_bytes bytes from src into the segment +
 * fzp_publish, for a field that already lives in the program's own memory.
 * src_bytes must equal product(dims) * element size (FZP_EINVAL otherwise,
 * naming both sizes). On FZP_OK *snap is published: fzp_wait for it, then
 * fzp_snapshot_free. On failure *snap is NULL.
 */
FZP_API int fzp_publish_copy(fzp_producer *p, const char *run, const char *var, uint64_t step, int dtype,
                     int ndims, const uint64_t *dims, int mode, double bound, const double *fill,
                     const void *src, uint64_t src_bytes, fzp_snapshot **snap);

/** The snapshot's bytes again, and their number (either pointer may be NULL). */
FZP_API int fzp_snapshot_data(const fzp_snapshot *snap, void **data, uint64_t *nbytes);

/** The snapshot's message id ("" for NULL). */
FZP_API const char *fzp_snapshot_msg_id(const fzp_snapshot *snap);

/** 1 if the segment is a reused one (holds an earlier snapshot's bytes), else 0. */
FZP_API int fzp_snapshot_reused(const fzp_snapshot *snap);

/**
 * The sidecar's GPU time for a GPU-resident snapshot (fzp_publish_device),
 * in seconds, once its result is in: the result's gpu_seconds, the span of
 * the sidecar's device work on it (docs/PROTOCOL.md section 5). 0 before
 * the result, for segment snapshots and for NULL. (Not in fzp_result, whose
 * layout the Python and Fortran bindings mirror.)
 */
FZP_API double fzp_snapshot_gpu_seconds(const fzp_snapshot *snap);

/**
 * Announces the snapshot. Retries with the same Nats-Msg-Id until the
 * stream acknowledges it (a restarting sidecar neither loses nor duplicates
 * it) or publish_timeout_ms passes. From here on the segment must not be
 * written. On failure the segment is removed and the snapshot cannot be
 * published again (free it).
 */
FZP_API int fzp_publish(fzp_producer *p, fzp_snapshot *snap);

/**
 * Waits up to timeout_ms (0: just look; < 0: no limit) for the result.
 * When a look-up in the result stream is due (every poll_interval_ms while
 * pending), even timeout 0 may take up to 250 ms.
 *   FZP_OK        stored; *res filled (res may be NULL)
 *   FZP_ESIDECAR  the sidecar reported an error; res->error_code holds its code
 *   FZP_ETIMEOUT  no result yet; the snapshot is still pending
 * The segment stays mapped until the snapshot is freed (fzp_snapshot_free),
 * which then reuses (reuse_segments) or removes it. Results published
 * while the connection was down are looked up in the result stream
 * (docs/PROTOCOL.md section 6), so a sidecar restart loses none.
 */
FZP_API int fzp_wait(fzp_producer *p, fzp_snapshot *snap, int64_t timeout_ms, fzp_result *res);

/** fzp_wait with timeout 0. */
FZP_API int fzp_poll(fzp_producer *p, fzp_snapshot *snap, fzp_result *res);

/**
 * Gives the admission back and removes the segment of a snapshot that was
 * not published, and frees it. FZP_ESTATE (nothing freed) after fzp_publish.
 */
FZP_API int fzp_abort(fzp_producer *p, fzp_snapshot *snap);

/**
 * Frees a snapshot in any state: not published -> as fzp_abort; published
 * without a result yet -> its segment is unlinked (safe for the sidecar) and
 * its result will be ignored; with a result -> its segment is kept for reuse
 * (reuse_segments) or removed. The data pointer is invalid afterwards.
 * NULL is fine.
 */
FZP_API void fzp_snapshot_free(fzp_producer *p, fzp_snapshot *snap);

/**
 * GPU-resident snapshots (docs/PRODUCERS.md): publishes a field that lies in
 * this process's GPU memory, without copying it to the host. The sidecar
 * (`fzsidecar serve --backend gpu` on the same node and GPU; its status
 * must list the "cuda_ipc" feature, else FZP_ESIDECAR with code
 * "device_unsupported") opens the allocation over CUDA IPC, waits for an
 * event this call records on `stream` after the work queued so far (the
 * kernels that write the field), and compresses the field in place on the
 * GPU; only the compressed bytes cross PCIe.
 *   dptr, nbytes  the field in device memory: cudaMalloc'd (or any pointer
 *                 into such an allocation: CuPy and PyTorch pools are fine;
 *                 cudaMallocAsync pools, cuMemCreate and managed memory are
 *                 not exportable: FZP_EINVAL); nbytes = product(dims) * element size
 *   stream        the CUDA stream (cudaStream_t) that writes the field;
 *                 NULL for the legacy default stream
 * The other arguments are those of fzp_begin. No admission is asked (the
 * bytes hold no shared memory). On FZP_OK *snap is published: do not write
 * the buffer until fzp_wait has returned its result (success or error; the
 * sidecar has then stopped reading it), then free the snapshot. The CUDA
 * driver (libcuda.so.1) is loaded at run time: the library builds without
 * the CUDA toolkit; FZP_ESYS ("system") where no driver is installed.
 */
FZP_API int fzp_publish_device(fzp_producer *p, const char *run, const char *var, uint64_t step, int dtype, int ndims,
                               const uint64_t *dims, int mode, double bound, const double *fill, const void *dptr,
                               uint64_t nbytes, void *stream, fzp_snapshot **snap);

/** Sidecar load: budget bytes, bytes held, holds, snapshots in flight (any pointer may be NULL). */
FZP_API int fzp_status(fzp_producer *p, int64_t timeout_ms, int64_t *budget_bytes, int64_t *used_bytes,
               int64_t *holds, int64_t *in_flight);

/**
 * Closes the connection, removes spare segments and the segments of all
 * snapshots, frees every snapshot not yet freed (their pointers become
 * invalid) and frees p. NULL is fine.
 */
FZP_API void fzp_close(fzp_producer *p);

#ifdef __cplusplus
}
#endif
#endif /* FZPRODUCER_H */
