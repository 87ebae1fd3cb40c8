/*
 * h5z_fz.c — HDF5 filter plugin for the FZ codec (filter H5Z_FILTER_FZ).
 *
 * HDF5 loads this library from HDF5_PLUGIN_PATH and asks it for its filter
 * class. Each chunk of a dataset becomes one FZSC container (docs/FORMAT.md),
 * exactly what `fzsidecar compress` writes for the chunk's values, so the
 * ratio is the standalone container's and any FZ tool can read a chunk.
 *
 * The codec is libfz.so (the Go c-shared library, fz.h). It is opened with
 * dlopen on first use rather than linked, because HDF5 dlopens every file in
 * the plugin directory: a missing or misplaced libfz then becomes an HDF5
 * error that says where it looked, instead of a plugin HDF5 cannot load.
 *
 * Every failure pushes a message on the HDF5 error stack and returns the
 * callback's failure value (0 from the filter, -1 from can_apply/set_local);
 * nothing here aborts or reads past a buffer, whatever the chunk holds.
 */
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <H5PLextern.h>
#include <hdf5.h>

#include "fz.h"
#include "h5z_fz.h"

#define FILTER_NAME "fz (fzsidecar error-bounded lossy compression; docs/FORMATS.md)"

/* Pushes "fz filter: <message>" on the default error stack. */
#define FZ_H5_ERROR(min, ...) \
    H5Epush2(H5E_DEFAULT, __FILE__, __func__, __LINE__, H5E_ERR_CLS, H5E_PLINE, (min), "fz filter: " __VA_ARGS__)

/* ---- libfz, opened once per process ---- */

typedef const char *(*fn_last_error)(void);
typedef int (*fn_abi_version)(void);
typedef void (*fn_free)(void *);
typedef fz_status (*fn_compress)(const void *, uint64_t, int32_t, const uint64_t *, int32_t, int32_t, double,
                                 const double *, const fz_options *, void **, uint64_t *, fz_stats *);
typedef fz_status (*fn_read_header)(const void *, uint64_t, fz_info *);
typedef fz_status (*fn_decompress)(const void *, uint64_t, void *, uint64_t, const fz_options *, fz_info *);

static struct {
    fn_last_error last_error;
    fn_abi_version abi_version;
    fn_free free;
    fn_compress compress;
    fn_read_header read_header;
    fn_decompress decompress;
    int ok;
    char why[2048]; /* why loading failed, with every path tried */
} libfz;

static pthread_once_t libfz_once = PTHREAD_ONCE_INIT;

static void *try_open(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        size_t n = strlen(libfz.why);
        const char *e = dlerror();
        snprintf(libfz.why + n, sizeof libfz.why - n, "%s%s", n ? "; " : "", e ? e : path);
    }
    return h;
}

/*
 * Uses a libfz already loaded with RTLD_GLOBAL (the Python package loads its
 * own so): a second copy would be a second Go runtime in the process, which
 * Go does not support. Otherwise looks for libfz.so in $FZ_LIBFZ, next to
 * this plugin, in ../lib beside the plugin's directory (the build/ layout:
 * build/hdf5-plugins + build/lib), then through the dynamic loader's path.
 */
static void load_libfz(void) {
    void *h = NULL;
    const char *env = getenv("FZ_LIBFZ");
    Dl_info loaded;
    void *sym = dlsym(RTLD_DEFAULT, "fz_abi_version");
    if (sym != NULL && dladdr(sym, &loaded) != 0 && loaded.dli_fname != NULL &&
        (h = dlopen(loaded.dli_fname, RTLD_NOW | RTLD_NOLOAD)) != NULL) {
        /* h is that copy (RTLD_NOLOAD: a handle to it, never a new load) */
    } else if (env != NULL && env[0] != 0) {
        h = try_open(env);
    } else {
        Dl_info self;
        char path[PATH_MAX];
        if (dladdr((void *)&load_libfz, &self) != 0 && self.dli_fname != NULL) {
            const char *slash = strrchr(self.dli_fname, '/');
            int dir = slash ? (int)(slash - self.dli_fname) : 0;
            if (slash != NULL && snprintf(path, sizeof path, "%.*s/libfz.so", dir, self.dli_fname) < (int)sizeof path) {
                h = try_open(path);
            }
            if (h == NULL && slash != NULL &&
                snprintf(path, sizeof path, "%.*s/../lib/libfz.so", dir, self.dli_fname) < (int)sizeof path) {
                h = try_open(path);
            }
        }
        if (h == NULL) {
            h = try_open("libfz.so");
        }
    }
    if (h == NULL) {
        return;
    }
    libfz.why[0] = 0;
    libfz.last_error = (fn_last_error)dlsym(h, "fz_last_error");
    libfz.abi_version = (fn_abi_version)dlsym(h, "fz_abi_version");
    libfz.free = (fn_free)dlsym(h, "fz_free");
    libfz.compress = (fn_compress)dlsym(h, "fz_compress");
    libfz.read_header = (fn_read_header)dlsym(h, "fz_read_header");
    libfz.decompress = (fn_decompress)dlsym(h, "fz_decompress");
    if (!libfz.last_error || !libfz.abi_version || !libfz.free || !libfz.compress || !libfz.read_header ||
        !libfz.decompress) {
        snprintf(libfz.why, sizeof libfz.why, "libfz.so lacks fz_compress/fz_decompress/...: not a libfz build");
        return; /* a Go c-shared library cannot be unloaded: keep the handle */
    }
    if (libfz.abi_version() != FZ_ABI_VERSION) {
        snprintf(libfz.why, sizeof libfz.why, "libfz.so has ABI version %d, this plugin was built for %d",
                 libfz.abi_version(), FZ_ABI_VERSION);
        return;
    }
    libfz.ok = 1;
}

static int need_libfz(void) {
    pthread_once(&libfz_once, load_libfz);
    if (!libfz.ok) {
        FZ_H5_ERROR(H5E_CANTLOAD, "cannot load libfz.so (set FZ_LIBFZ to its path, or put it beside the plugin or in ../lib): %s",
                    libfz.why);
        return 0;
    }
    return 1;
}

/* ---- cd_values ---- */

typedef struct params {
    int mode;
    double bound;
    int has_fill;
    double fill;
    unsigned format_version; /* container version written: 1 or 2 */
    int dtype;
    int rank;
    uint64_t dims[H5Z_FZ_MAX_RANK];
    uint64_t raw_bytes; /* bytes of one chunk */
} params;

static double f64_of(const unsigned *cd) {
    uint64_t bits = (uint64_t)(cd[0] & 0xffffffffu) | ((uint64_t)(cd[1] & 0xffffffffu) << 32);
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

/* A container format version to write: 1 (0 means 1) or 2; 0 if bad (error pushed). */
static unsigned format_version_of(unsigned v, const char *where) {
    if (v == 0) {
        return 1;
    }
    if (v > 2) {
        FZ_H5_ERROR(H5E_BADVALUE, "%s format version %u: expected 1 (the default) or 2", where, v);
        return 0;
    }
    return v;
}

/* Checks what the user gives: cd[0..n) with n = 3 or >= 6 (the first 6 are
   checked; the 7th, the format version, by the caller). */
static int parse_user(size_t n, const unsigned *cd, params *p) {
    if (n < H5Z_FZ_CD_USER_MIN || (n > H5Z_FZ_CD_USER_MIN && n < H5Z_FZ_CD_USER)) {
        FZ_H5_ERROR(H5E_BADVALUE,
                    "%zu cd_values: expected 3 (mode, bound low/high 32 bits), 6 (plus has_fill, fill low/high 32 bits) "
                    "or 7 (plus the format version)",
                    n);
        return 0;
    }
    p->format_version = 1;
    p->mode = (int)cd[H5Z_FZ_CD_MODE];
    if (p->mode != H5Z_FZ_ABS && p->mode != H5Z_FZ_REL) {
        FZ_H5_ERROR(H5E_BADVALUE, "cd_values[0] mode %u: expected 1 (abs) or 2 (rel)", cd[H5Z_FZ_CD_MODE]);
        return 0;
    }
    p->bound = f64_of(cd + H5Z_FZ_CD_BOUND);
    if (!(p->bound > 0) || isinf(p->bound)) {
        FZ_H5_ERROR(H5E_BADVALUE, "cd_values[1..2] bound %g: expected a finite float64 > 0 (low 32 bits, then high 32 bits)",
                    p->bound);
        return 0;
    }
    p->has_fill = 0;
    p->fill = 0;
    if (n >= H5Z_FZ_CD_USER) {
        if (cd[H5Z_FZ_CD_HAS_FILL] > H5Z_FZ_FILL_DATASET) {
            FZ_H5_ERROR(H5E_BADVALUE, "cd_values[3] has_fill %u: expected 0 (none), 1 (cd_values[4..5]) or 2 (the dataset's fill value)",
                        cd[H5Z_FZ_CD_HAS_FILL]);
            return 0;
        }
        p->has_fill = (int)cd[H5Z_FZ_CD_HAS_FILL];
        if (p->has_fill) {
            p->fill = f64_of(cd + H5Z_FZ_CD_FILL);
        }
    }
    return 1;
}

/* Checks the full cd_values that set_local wrote (what the filter runs with). */
static int parse_all(size_t n, const unsigned *cd, params *p) {
    if (n < H5Z_FZ_CD_DIMS + 1) {
        FZ_H5_ERROR(H5E_BADVALUE, "%zu cd_values: the dataset's parameters are missing (set_local did not run; at least %d expected)",
                    n, H5Z_FZ_CD_DIMS + 1);
        return 0;
    }
    if (!parse_user(H5Z_FZ_CD_USER, cd, p)) {
        return 0;
    }
    if (p->has_fill > 1) {
        FZ_H5_ERROR(H5E_BADVALUE, "cd_values[3] has_fill %d: set_local resolves 2 to 1, so a stored 2 means a damaged filter message",
                    p->has_fill);
        return 0;
    }
    unsigned layout = cd[H5Z_FZ_CD_LAYOUT];
    if (layout < 1 || layout > H5Z_FZ_LAYOUT_VERSION_MAX) {
        FZ_H5_ERROR(H5E_BADVALUE, "cd_values[6] layout version %u: this plugin reads versions 1 to %d (a newer plugin wrote the file?)",
                    layout, H5Z_FZ_LAYOUT_VERSION_MAX);
        return 0;
    }
    p->dtype = (int)cd[H5Z_FZ_CD_DTYPE];
    if (p->dtype != FZ_F32 && p->dtype != FZ_F64) {
        FZ_H5_ERROR(H5E_BADVALUE, "cd_values[7] dtype %u: expected 1 (float32) or 2 (float64)", cd[H5Z_FZ_CD_DTYPE]);
        return 0;
    }
    p->rank = (int)cd[H5Z_FZ_CD_RANK];
    size_t want = (size_t)(H5Z_FZ_CD_DIMS + p->rank) + (layout == 2);
    if (p->rank < 1 || p->rank > H5Z_FZ_MAX_RANK || n != want) {
        FZ_H5_ERROR(H5E_BADVALUE, "cd_values[8] rank %u with %zu cd_values: expected rank 1..%d and %s values",
                    cd[H5Z_FZ_CD_RANK], n, H5Z_FZ_MAX_RANK, layout == 2 ? "10 + rank (layout 2)" : "9 + rank");
        return 0;
    }
    if (layout == 2) {
        char where[32];
        snprintf(where, sizeof where, "cd_values[%d]", H5Z_FZ_CD_DIMS + p->rank);
        if ((p->format_version = format_version_of(cd[H5Z_FZ_CD_DIMS + p->rank], where)) == 0) {
            return 0;
        }
    }
    uint64_t bytes = p->dtype == FZ_F32 ? 4 : 8;
    for (int i = 0; i < p->rank; i++) {
        p->dims[i] = cd[H5Z_FZ_CD_DIMS + i];
        if (p->dims[i] == 0 || bytes > UINT64_MAX / p->dims[i]) {
            FZ_H5_ERROR(H5E_BADVALUE, "cd_values[%d] chunk dim %u: expected > 0 with a chunk size that fits 64 bits",
                        H5Z_FZ_CD_DIMS + i, cd[H5Z_FZ_CD_DIMS + i]);
            return 0;
        }
        bytes *= p->dims[i];
    }
    p->raw_bytes = bytes;
    return 1;
}

/* ---- class callbacks ---- */

/* The dataset must hold little-endian IEEE float32 or float64 values. */
static int dtype_of(hid_t type_id) {
    if (H5Tget_class(type_id) != H5T_FLOAT) {
        FZ_H5_ERROR(H5E_BADTYPE, "the dataset's type is not floating point: expected float32 or float64");
        return 0;
    }
    size_t size = H5Tget_size(type_id);
    if (size != 4 && size != 8) {
        FZ_H5_ERROR(H5E_BADTYPE, "a %zu-byte float type: expected float32 or float64", size);
        return 0;
    }
    if (H5Tget_order(type_id) != H5T_ORDER_LE) {
        FZ_H5_ERROR(H5E_BADTYPE, "a big-endian float type: expected little-endian float32 or float64 (e.g. H5T_IEEE_F32LE)");
        return 0;
    }
    if (H5Tequal(type_id, size == 4 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE) <= 0) {
        FZ_H5_ERROR(H5E_BADTYPE, "a non-IEEE %zu-byte float type: expected IEEE float32 or float64", size);
        return 0;
    }
    return size == 4 ? FZ_F32 : FZ_F64;
}

/* The dataset's chunk dims and rank; -1 (HDF5 error pushed) unless it is
   chunked with a rank of 1..H5Z_FZ_MAX_RANK. */
static int chunk_dims(hid_t dcpl_id, hsize_t dims[H5S_MAX_RANK]) {
    int rank = H5Pget_chunk(dcpl_id, H5S_MAX_RANK, dims);
    if (rank < 1 || rank > H5Z_FZ_MAX_RANK) {
        FZ_H5_ERROR(H5E_BADVALUE, "chunk rank %d: expected a chunked dataset of rank 1..%d", rank, H5Z_FZ_MAX_RANK);
        return -1;
    }
    return rank;
}

static htri_t can_apply(hid_t dcpl_id, hid_t type_id, hid_t space_id) {
    (void)space_id;
    if (dtype_of(type_id) == 0) {
        return -1;
    }
    hsize_t dims[H5S_MAX_RANK];
    int rank = chunk_dims(dcpl_id, dims);
    if (rank < 0) {
        return -1;
    }
    return 1;
}

/* Appends layout version, dtype, rank and chunk dims to the user's cd_values. */
static herr_t set_local(hid_t dcpl_id, hid_t type_id, hid_t space_id) {
    (void)space_id;
    unsigned flags = 0;
    size_t n = H5Z_FZ_CD_MAX;
    unsigned cd[H5Z_FZ_CD_MAX];
    if (H5Pget_filter_by_id2(dcpl_id, H5Z_FILTER_FZ, &flags, &n, cd, 0, NULL, NULL) < 0) {
        FZ_H5_ERROR(H5E_CANTGET, "cannot read the filter's cd_values from the dataset creation property list");
        return -1;
    }
    if (!need_libfz()) { /* fail at creation, not at the first write */
        return -1;
    }
    params p;
    /* A copied dataset (h5repack, H5Ocopy) brings its old local values (9 or
       more): keep the user's part and, from layout 2, the format version. */
    if (!parse_user(n > H5Z_FZ_CD_USER ? H5Z_FZ_CD_USER : n, cd, &p)) {
        return -1;
    }
    if (n == H5Z_FZ_CD_USER_MAX) {
        if ((p.format_version = format_version_of(cd[H5Z_FZ_CD_USER_FORMAT], "cd_values[6]")) == 0) {
            return -1;
        }
    } else if (n > H5Z_FZ_CD_USER_MAX && cd[H5Z_FZ_CD_LAYOUT] == 2) {
        params old;
        if (!parse_all(n, cd, &old)) {
            return -1;
        }
        p.format_version = old.format_version;
    } else if (n > H5Z_FZ_CD_USER_MAX && cd[H5Z_FZ_CD_LAYOUT] != 1) {
        FZ_H5_ERROR(H5E_BADVALUE, "%zu cd_values: expected 3, 6 or 7 (a copied dataset's: layout version 1 or 2 in cd_values[6], not %u)",
                    n, cd[H5Z_FZ_CD_LAYOUT]);
        return -1;
    }
    int dtype = dtype_of(type_id);
    if (dtype == 0) {
        return -1;
    }
    /* As fz_compress checks (fz/params.go), but now: otherwise every chunk fails
       later, stored uncompressed under h5py's optional flag, an error at close
       (after which HDF5 1.10 may crash) under a mandatory one. */
    if (p.has_fill == 1 && dtype == FZ_F32 && !isinf(p.fill) && isinf((double)(float)p.fill)) {
        FZ_H5_ERROR(H5E_BADVALUE, "cd_values[4..5] fill value %g is outside the float32 range of the dataset", p.fill);
        return -1;
    }
    hsize_t dims[H5S_MAX_RANK];
    int rank = chunk_dims(dcpl_id, dims);
    if (rank < 0) {
        return -1;
    }
    if (n < H5Z_FZ_CD_USER) {
        cd[H5Z_FZ_CD_HAS_FILL] = cd[H5Z_FZ_CD_FILL] = cd[H5Z_FZ_CD_FILL + 1] = 0;
    }
    if (p.has_fill == H5Z_FZ_FILL_DATASET) {
        /* The dataset's fill value (NetCDF's _FillValue) is also what HDF5
           pads edge chunks with: as FZ's fill it stays exact and out of the range. */
        H5D_fill_value_t defined;
        double fill = 0;
        if (H5Pfill_value_defined(dcpl_id, &defined) < 0 || defined == H5D_FILL_VALUE_UNDEFINED ||
            H5Pget_fill_value(dcpl_id, H5T_NATIVE_DOUBLE, &fill) < 0) {
            FZ_H5_ERROR(H5E_BADVALUE, "cd_values[3] = 2 asks for the dataset's fill value, but it has none defined");
            return -1;
        }
        uint64_t bits;
        memcpy(&bits, &fill, 8);
        cd[H5Z_FZ_CD_HAS_FILL] = 1;
        cd[H5Z_FZ_CD_FILL] = (unsigned)(bits & 0xffffffffu);
        cd[H5Z_FZ_CD_FILL + 1] = (unsigned)(bits >> 32);
    }
    /* Layout 1 for format version 1: what plugins before version 2 wrote and read. */
    cd[H5Z_FZ_CD_LAYOUT] = p.format_version == 1 ? H5Z_FZ_LAYOUT_VERSION : 2;
    cd[H5Z_FZ_CD_DTYPE] = (unsigned)dtype;
    cd[H5Z_FZ_CD_RANK] = (unsigned)rank;
    for (int i = 0; i < rank; i++) {
        if (dims[i] > UINT_MAX) { /* HDF5 limits chunk dims to 32 bits; checked because cd_values are 32-bit */
            FZ_H5_ERROR(H5E_BADVALUE, "chunk dim %llu does not fit a 32-bit cd_value", (unsigned long long)dims[i]);
            return -1;
        }
        cd[H5Z_FZ_CD_DIMS + i] = (unsigned)dims[i];
    }
    size_t stored = (size_t)(H5Z_FZ_CD_DIMS + rank);
    if (p.format_version != 1) {
        cd[stored++] = p.format_version;
    }
    if (H5Pmodify_filter(dcpl_id, H5Z_FILTER_FZ, flags, stored, cd) < 0) {
        FZ_H5_ERROR(H5E_CANTSET, "cannot store the filter's cd_values in the dataset creation property list");
        return -1;
    }
    return 0;
}

static size_t compress_chunk(const params *p, size_t nbytes, size_t *buf_size, void **buf) {
    if ((uint64_t)nbytes != p->raw_bytes) {
        FZ_H5_ERROR(H5E_BADVALUE, "a chunk of %zu bytes: the chunk shape in cd_values needs %llu", nbytes,
                    (unsigned long long)p->raw_bytes);
        return 0;
    }
    void *out = NULL;
    uint64_t out_len = 0;
    fz_options opts;
    memset(&opts, 0, sizeof opts);
    opts.struct_size = sizeof opts;
    opts.format_version = p->format_version;
    fz_status st = libfz.compress(*buf, (uint64_t)nbytes, p->dtype, p->dims, p->rank, p->mode, p->bound,
                                  p->has_fill ? &p->fill : NULL, &opts, &out, &out_len, NULL);
    if (st != FZ_OK) {
        FZ_H5_ERROR(H5E_CANTFILTER, "compressing a chunk: %s", libfz.last_error());
        return 0;
    }
    void *hbuf = H5allocate_memory((size_t)out_len, 0);
    if (hbuf == NULL) {
        libfz.free(out);
        FZ_H5_ERROR(H5E_CANTALLOC, "cannot allocate %llu bytes for a compressed chunk", (unsigned long long)out_len);
        return 0;
    }
    memcpy(hbuf, out, (size_t)out_len);
    libfz.free(out);
    H5free_memory(*buf);
    *buf = hbuf;
    *buf_size = (size_t)out_len;
    return (size_t)out_len;
}

static size_t decompress_chunk(const params *p, size_t nbytes, size_t *buf_size, void **buf) {
    fz_info info;
    fz_status st = libfz.read_header(*buf, (uint64_t)nbytes, &info);
    if (st != FZ_OK) {
        FZ_H5_ERROR(H5E_CANTFILTER, "a stored chunk is not a valid FZ container (corrupted file?): %s", libfz.last_error());
        return 0;
    }
    if (info.dtype != p->dtype || info.raw_bytes != p->raw_bytes) {
        FZ_H5_ERROR(H5E_CANTFILTER,
                    "a stored chunk decodes to %llu bytes of dtype %d, the dataset's chunk is %llu bytes of dtype %d (corrupted file?)",
                    (unsigned long long)info.raw_bytes, info.dtype, (unsigned long long)p->raw_bytes, p->dtype);
        return 0;
    }
    int same_shape = info.ndims == p->rank;
    for (int i = 0; same_shape && i < p->rank; i++) {
        same_shape = info.dims[i] == p->dims[i];
    }
    if (!same_shape) {
        FZ_H5_ERROR(H5E_CANTFILTER, "a stored chunk holds a field of %d dims (first %llu), not the dataset's chunk shape of rank %d (corrupted file?)",
                    info.ndims, (unsigned long long)info.dims[0], p->rank);
        return 0;
    }
    void *hbuf = H5allocate_memory((size_t)p->raw_bytes, 0);
    if (hbuf == NULL) {
        FZ_H5_ERROR(H5E_CANTALLOC, "cannot allocate %llu bytes for a chunk", (unsigned long long)p->raw_bytes);
        return 0;
    }
    fz_options opts;
    memset(&opts, 0, sizeof opts);
    opts.struct_size = sizeof opts;
    opts.max_raw_bytes = p->raw_bytes;
    st = libfz.decompress(*buf, (uint64_t)nbytes, hbuf, p->raw_bytes, &opts, NULL);
    if (st != FZ_OK) {
        H5free_memory(hbuf);
        FZ_H5_ERROR(H5E_CANTFILTER, "decompressing a stored chunk (corrupted file?): %s", libfz.last_error());
        return 0;
    }
    H5free_memory(*buf);
    *buf = hbuf;
    *buf_size = (size_t)p->raw_bytes;
    return (size_t)p->raw_bytes;
}

static size_t filter(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[], size_t nbytes,
                     size_t *buf_size, void **buf) {
    params p;
    if (!parse_all(cd_nelmts, cd_values, &p) || !need_libfz()) {
        return 0;
    }
    if (flags & H5Z_FLAG_REVERSE) {
        return decompress_chunk(&p, nbytes, buf_size, buf);
    }
    return compress_chunk(&p, nbytes, buf_size, buf);
}

static const H5Z_class2_t fz_class = {
    H5Z_CLASS_T_VERS, (H5Z_filter_t)H5Z_FILTER_FZ, 1, 1, FILTER_NAME, can_apply, set_local, filter,
};

H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }

const void *H5PLget_plugin_info(void) { return &fz_class; }
