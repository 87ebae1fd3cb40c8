/*
 * h5z_fz.h — the FZ HDF5 filter: its id and the layout of its cd_values
 * (docs/FORMATS.md §2 is the contract; this header and the plugin agree with it).
 *
 * A C program needs only this header and HDF5: h5z_fz_set() adds the filter
 * to a dataset creation property list; HDF5 loads the plugin (libh5zfz.so)
 * from HDF5_PLUGIN_PATH when the dataset is created or read.
 */
#ifndef H5Z_FZ_H
#define H5Z_FZ_H

#include <stdint.h>
#include <string.h>

#include <hdf5.h>

/* From HDF5's range for testing (256-511) until one is registered with The HDF Group. */
#define H5Z_FILTER_FZ 310

/* cd_values: what the user gives (3, 6 or 7 values) ... */
#define H5Z_FZ_CD_MODE 0     /* 1 abs, 2 rel (per chunk: max - min of the chunk's finite non-fill values) */
#define H5Z_FZ_CD_BOUND 1    /* [1] low, [2] high 32 bits of the bound as an IEEE float64 */
#define H5Z_FZ_CD_HAS_FILL 3 /* 0: no fill value, 1: [4],[5] hold it, 2: the dataset's fill value (set_local makes it 1) */
#define H5Z_FZ_CD_FILL 4     /* [4] low, [5] high 32 bits of the fill value as an IEEE float64 */
#define H5Z_FZ_CD_USER_MIN 3
#define H5Z_FZ_CD_USER 6
#define H5Z_FZ_CD_USER_FORMAT 6 /* 7th user value, optional: container format version, 1 (0 means 1) or 2 */
#define H5Z_FZ_CD_USER_MAX 7
/* ... and what set_local stores from the dataset in their place. */
#define H5Z_FZ_CD_LAYOUT 6   /* layout version of these cd_values: 1, or 2 when the format version is 2 */
#define H5Z_FZ_CD_DTYPE 7    /* 1 float32, 2 float64 (little-endian) */
#define H5Z_FZ_CD_RANK 8     /* rank of the chunk, 1..16 */
#define H5Z_FZ_CD_DIMS 9     /* the chunk's dims, slowest -> fastest, one value each */
/* Layout 2 only: [9 + rank] the container format version chunks are written in (2). Layout 1 writes version 1. */
#define H5Z_FZ_LAYOUT_VERSION 1   /* what a dataset writing format version 1 stores (as before version 2 existed) */
#define H5Z_FZ_LAYOUT_VERSION_MAX 2
#define H5Z_FZ_MAX_RANK 16
#define H5Z_FZ_CD_MAX (H5Z_FZ_CD_DIMS + H5Z_FZ_MAX_RANK + 1)

#define H5Z_FZ_FILL_NONE 0
#define H5Z_FZ_FILL_VALUE 1
#define H5Z_FZ_FILL_DATASET 2

#define H5Z_FZ_ABS 1
#define H5Z_FZ_REL 2

/*
 * Adds the FZ filter to a dataset creation property list (the dataset must be
 * chunked; its type float32 or float64). fill may be NULL. format_version is
 * the container version chunks are written in: 1 (the default; 0 means 1) or
 * 2 (smaller; opt-in: reading needs a plugin and libfz with version 2). flags is
 * H5Z_FLAG_MANDATORY (a chunk the filter cannot compress fails the write) or
 * H5Z_FLAG_OPTIONAL (HDF5 stores such a chunk unfiltered, as h5py's
 * compression= does). Returns HDF5's status.
 */
static inline herr_t h5z_fz_set_format(hid_t dcpl, unsigned flags, int mode, double bound, const double *fill,
                                        unsigned format_version) {
    unsigned cd[H5Z_FZ_CD_USER_MAX];
    uint64_t bits;
    memcpy(&bits, &bound, 8);
    cd[H5Z_FZ_CD_MODE] = (unsigned)mode;
    cd[H5Z_FZ_CD_BOUND] = (unsigned)(bits & 0xffffffffu);
    cd[H5Z_FZ_CD_BOUND + 1] = (unsigned)(bits >> 32);
    cd[H5Z_FZ_CD_HAS_FILL] = fill != NULL;
    bits = 0;
    if (fill != NULL) {
        memcpy(&bits, fill, 8);
    }
    cd[H5Z_FZ_CD_FILL] = (unsigned)(bits & 0xffffffffu);
    cd[H5Z_FZ_CD_FILL + 1] = (unsigned)(bits >> 32);
    cd[H5Z_FZ_CD_USER_FORMAT] = format_version;
    /* Version 1 gives the 6 values older plugins know. */
    return H5Pset_filter(dcpl, H5Z_FILTER_FZ, flags, format_version <= 1 ? H5Z_FZ_CD_USER : H5Z_FZ_CD_USER_MAX, cd);
}

/* h5z_fz_set_format with the default container format version, 1. */
static inline herr_t h5z_fz_set(hid_t dcpl, unsigned flags, int mode, double bound, const double *fill) {
    return h5z_fz_set_format(dcpl, flags, mode, bound, fill, 1);
}

#endif /* H5Z_FZ_H */
