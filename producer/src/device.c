/* GPU-resident snapshots (docs/PROTOCOL.md section 4.1): what a device
 * notification needs from the CUDA driver, which is loaded at run time
 * (libcuda.so.1), so libfzproducer builds and runs without the CUDA
 * toolkit; only fzp_publish_device needs a GPU.
 *
 * For a device pointer it finds the allocation (base, size), its IPC
 * handle and the GPU's UUID, and records an interprocess event on the
 * caller's stream after the work that writes the field. Events are pooled
 * per producer and reused once a snapshot's result has arrived (the
 * sidecar caches what it opened, per handle). */
#define _GNU_SOURCE
#include "device.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fzproducer.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
    char b[64];
} ipc_handle;
typedef struct {
    char b[16];
} cu_uuid;

#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_EVENT_INTERPROCESS 0x4

static struct {
    int loaded;
    char err[512];
    CUresult (*init)(unsigned);
    CUresult (*ptr_attr)(void *, int, CUdeviceptr);
    CUresult (*addr_range)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*ipc_mem)(ipc_handle *, CUdeviceptr);
    CUresult (*device_get)(int *, int);
    CUresult (*uuid)(cu_uuid *, int);
    CUresult (*push)(void *);
    CUresult (*pop)(void **);
    CUresult (*ev_create)(void **, unsigned);
    CUresult (*ev_record)(void *, void *);
    CUresult (*ipc_ev)(ipc_handle *, void *);
    CUresult (*ev_destroy)(void *);
    CUresult (*errstr)(CUresult, const char **);
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cu.err, sizeof cu.err, "the CUDA driver (libcuda.so.1) cannot be loaded: %s", dlerror());
        return;
    }
    struct {
        void **fn;
        const char *name, *alt;
    } syms[] = {
        {(void **)&cu.init, "cuInit", NULL},
        {(void **)&cu.ptr_attr, "cuPointerGetAttribute", NULL},
        {(void **)&cu.addr_range, "cuMemGetAddressRange_v2", NULL},
        {(void **)&cu.ipc_mem, "cuIpcGetMemHandle", NULL},
        {(void **)&cu.device_get, "cuDeviceGet", NULL},
        {(void **)&cu.uuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"},
        {(void **)&cu.push, "cuCtxPushCurrent_v2", NULL},
        {(void **)&cu.pop, "cuCtxPopCurrent_v2", NULL},
        {(void **)&cu.ev_create, "cuEventCreate", NULL},
        {(void **)&cu.ev_record, "cuEventRecord", NULL},
        {(void **)&cu.ipc_ev, "cuIpcGetEventHandle", NULL},
        {(void **)&cu.ev_destroy, "cuEventDestroy_v2", NULL},
        {(void **)&cu.errstr, "cuGetErrorString", NULL},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(h, syms[i].name);
        if (!*syms[i].fn && syms[i].alt)
            *syms[i].fn = dlsym(h, syms[i].alt);
        if (!*syms[i].fn) {
            snprintf(cu.err, sizeof cu.err, "the CUDA driver lacks %s (too old a driver?)", syms[i].name);
            return;
        }
    }
    CUresult r = cu.init(0);
    if (r != 0) {
        const char *m = NULL;
        cu.errstr(r, &m);
        snprintf(cu.err, sizeof cu.err, "cuInit: CUDA error %d (%s)", r, m ? m : "?");
        return;
    }
    cu.loaded = 1;
}

static int cu_fail(char *err, size_t cap, CUresult r, const char *what) {
    const char *m = NULL;
    if (cu.errstr)
        cu.errstr(r, &m);
    snprintf(err, cap, "%s: CUDA error %d (%s)", what, r, m ? m : "?");
    return FZP_ESYS;
}

struct dev_event {
    void *ctx, *ev;
    ipc_handle h;
};

struct fzp_dev_state {
    pthread_mutex_t mu;
    struct dev_event **free;
    int nfree;
};

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void base64(const unsigned char *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = in[i] << 16 | (i + 1 < n ? in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[o] = 0;
}

int fzp_dev_available(char *err, size_t cap) {
    pthread_once(&cu_once, cu_load);
    if (!cu.loaded) {
        snprintf(err, cap, "%s", cu.err);
        return FZP_ESYS;
    }
    return FZP_OK;
}

int fzp_dev_prepare(struct fzp_dev_state **statep, const void *dptr, uint64_t nbytes, void *stream, char *json,
                    size_t cap, uint64_t *offset, void **evp, char *err, size_t errcap) {
    *evp = NULL;
    int rc = fzp_dev_available(err, errcap);
    if (rc != FZP_OK)
        return rc;
    if (!*statep) {
        struct fzp_dev_state *st = calloc(1, sizeof *st);
        if (!st) {
            snprintf(err, errcap, "out of memory");
            return FZP_ENOMEM;
        }
        pthread_mutex_init(&st->mu, NULL);
        *statep = st;
    }
    struct fzp_dev_state *st = *statep;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)dptr;
    unsigned mtype = 0;
    int ordinal = -1;
    void *ctx = NULL;
    CUresult r = cu.ptr_attr(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r != 0 || mtype != CU_MEMORYTYPE_DEVICE) {
        snprintf(err, errcap, "%p is not GPU device memory (%s): publish host memory with fzp_begin/fzp_publish_copy", dptr,
                 r != 0 ? "unknown to the CUDA driver" : "host or managed memory");
        return FZP_EINVAL;
    }
    if ((r = cu.ptr_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p)) != 0)
        return cu_fail(err, errcap, r, "cuPointerGetAttribute(device)");
    if ((r = cu.ptr_attr(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p)) != 0)
        return cu_fail(err, errcap, r, "cuPointerGetAttribute(context)");
    CUdeviceptr base = 0;
    size_t size = 0;
    if ((r = cu.addr_range(&base, &size, p)) != 0)
        return cu_fail(err, errcap, r, "cuMemGetAddressRange");
    if (p - base + nbytes > size) {
        snprintf(err, errcap, "the field's %llu bytes at %p run past the end of its allocation (%zu bytes from %p)",
                 (unsigned long long)nbytes, dptr, size, (void *)(uintptr_t)base);
        return FZP_EINVAL;
    }
    ipc_handle mh;
    if ((r = cu.ipc_mem(&mh, base)) != 0) {
        cu_fail(err, errcap, r, "cuIpcGetMemHandle");
        size_t n = strlen(err);
        snprintf(err + n, errcap - n, ": the buffer must come from cudaMalloc/cuMemAlloc (CuPy and PyTorch pools do), not from "
                                      "cudaMallocAsync pools, cuMemCreate or managed memory");
        return FZP_EINVAL;
    }
    int dev;
    cu_uuid u;
    if ((r = cu.device_get(&dev, ordinal)) != 0 || (r = cu.uuid(&u, dev)) != 0)
        return cu_fail(err, errcap, r, "cuDeviceGetUuid");
    /* an event of this context from the pool, or a new one */
    struct dev_event *de = NULL;
    pthread_mutex_lock(&st->mu);
    for (int i = st->nfree - 1; i >= 0; i--) {
        if (st->free[i]->ctx == ctx) {
            de = st->free[i];
            st->free[i] = st->free[--st->nfree];
            break;
        }
    }
    pthread_mutex_unlock(&st->mu);
    if ((r = cu.push(ctx)) != 0)
        return cu_fail(err, errcap, r, "cuCtxPushCurrent");
    if (!de) {
        de = calloc(1, sizeof *de);
        if (!de) {
            cu.pop(&ctx);
            snprintf(err, errcap, "out of memory");
            return FZP_ENOMEM;
        }
        de->ctx = ctx;
        if ((r = cu.ev_create(&de->ev, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)) != 0 ||
            (r = cu.ipc_ev(&de->h, de->ev)) != 0) {
            if (de->ev)
                cu.ev_destroy(de->ev);
            free(de);
            void *c;
            cu.pop(&c);
            return cu_fail(err, errcap, r, "create an interprocess event");
        }
    }
    r = cu.ev_record(de->ev, stream);
    void *c;
    cu.pop(&c);
    if (r != 0) {
        fzp_dev_release(st, de, 0);
        return cu_fail(err, errcap, r, "cuEventRecord on the given stream");
    }
    char hm[100], he[100];
    base64((const unsigned char *)mh.b, 64, hm);
    base64((const unsigned char *)de->h.b, 64, he);
    const unsigned char *ub = (const unsigned char *)u.b;
    int n = snprintf(json, cap,
                     "\"device\":{\"gpu\":\"GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\","
                     "\"mem_handle\":\"%s\",\"alloc_size\":%zu,\"event_handle\":\"%s\"}",
                     ub[0], ub[1], ub[2], ub[3], ub[4], ub[5], ub[6], ub[7], ub[8], ub[9], ub[10], ub[11], ub[12], ub[13], ub[14],
                     ub[15], hm, size, he);
    if (n < 0 || (size_t)n >= cap) {
        fzp_dev_release(st, de, 0);
        snprintf(err, errcap, "device reference longer than %zu bytes", cap);
        return FZP_EINVAL;
    }
    *offset = p - base;
    *evp = de;
    return FZP_OK;
}

void fzp_dev_release(struct fzp_dev_state *st, void *evp, int reuse) {
    struct dev_event *de = evp;
    if (!de)
        return;
    if (reuse && st) {
        pthread_mutex_lock(&st->mu);
        struct dev_event **nf = realloc(st->free, (size_t)(st->nfree + 1) * sizeof *nf);
        if (nf) {
            st->free = nf;
            st->free[st->nfree++] = de;
            pthread_mutex_unlock(&st->mu);
            return;
        }
        pthread_mutex_unlock(&st->mu);
    }
    /* Destroying an event the sidecar still waits on is safe: CUDA frees
     * it once its work has completed. */
    if (cu.loaded)
        cu.ev_destroy(de->ev);
    free(de);
}

void fzp_dev_state_free(struct fzp_dev_state *st) {
    if (!st)
        return;
    for (int i = 0; i < st->nfree; i++) {
        if (cu.loaded)
            cu.ev_destroy(st->free[i]->ev);
        free(st->free[i]);
    }
    free(st->free);
    pthread_mutex_destroy(&st->mu);
    free(st);
}
