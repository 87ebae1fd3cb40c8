/*
 * h5z_fz_example.c — write and read an FZ-compressed HDF5 dataset from C.
 *
 *   make hdf5
 *   cc -Ibuild/include $(pkg-config --cflags hdf5) hdf5/examples/h5z_fz_example.c $(pkg-config --libs hdf5) -lm
 *   HDF5_PLUGIN_PATH=build/hdf5-plugins ./a.out out.h5
 *
 * Writes a 3-D float32 field (40 x 60 x 70, chunks 10 x 60 x 70) with an
 * absolute bound of 0.01, reads it back, checks every value is within the
 * bound, and prints the ratio. Then shows that a bad bound is refused when
 * the dataset is created. Exit status 0 only if all of that held.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "h5z_fz.h"

#define NZ 40
#define NY 60
#define NX 70

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "h5z_fz_example.h5";
    const double eb = 0.01;
    size_t n = (size_t)NZ * NY * NX;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (x == NULL || y == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = i / (NY * NX), j = i / NX % NY, l = i % NX;
        x[i] = (float)(280 + 30 * sin(0.05 * k) * cos(0.07 * j) + 10 * sin(0.09 * l));
    }

    hsize_t dims[3] = {NZ, NY, NX}, chunk[3] = {10, NY, NX};
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(3, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (file < 0 || space < 0 || dcpl < 0 || H5Pset_chunk(dcpl, 3, chunk) < 0 ||
        /* MANDATORY: a chunk the filter cannot compress fails the write instead of being stored raw. */
        h5z_fz_set(dcpl, H5Z_FLAG_MANDATORY, H5Z_FZ_ABS, eb, NULL) < 0) {
        fprintf(stderr, "setting up the dataset failed\n");
        return 1;
    }
    if (H5Zfilter_avail(H5Z_FILTER_FZ) <= 0) {
        fprintf(stderr, "the FZ filter (%d) is not available: set HDF5_PLUGIN_PATH to build/hdf5-plugins\n", H5Z_FILTER_FZ);
        return 1;
    }
    hid_t dset = H5Dcreate2(file, "t", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dset < 0 || H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0) {
        fprintf(stderr, "writing failed\n");
        return 1;
    }
    H5Dclose(dset);
    H5Fclose(file);

    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    dset = file < 0 ? -1 : H5Dopen2(file, "t", H5P_DEFAULT);
    if (dset < 0 || H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) < 0) {
        fprintf(stderr, "reading failed\n");
        return 1;
    }
    double maxerr = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - (double)y[i]);
        maxerr = e > maxerr ? e : maxerr;
    }
    hsize_t stored = H5Dget_storage_size(dset);
    printf("wrote %s: %zu values, %llu bytes stored, ratio %.2f, max error %.6g (bound %g)\n", path, n,
           (unsigned long long)stored, (double)(n * sizeof *x) / (double)stored, maxerr, eb);
    H5Dclose(dset);
    H5Fclose(file);
    if (!(maxerr <= eb) || maxerr == 0) {
        fprintf(stderr, "max error %g is not within (0, %g]\n", maxerr, eb);
        return 1;
    }

    /* A negative bound: refused by the filter's set_local at creation, with its message on the error stack. */
    file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t bad = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(bad, 3, chunk);
    h5z_fz_set(bad, H5Z_FLAG_MANDATORY, H5Z_FZ_ABS, -1.0, NULL);
    hid_t refused;
    H5E_BEGIN_TRY { refused = H5Dcreate2(file, "bad", H5T_IEEE_F32LE, space, H5P_DEFAULT, bad, H5P_DEFAULT); }
    H5E_END_TRY;
    if (refused >= 0) {
        fprintf(stderr, "a negative bound was accepted\n");
        return 1;
    }
    printf("a negative bound is refused at H5Dcreate2, as expected\n");
    H5Pclose(bad);

    /* The same data as container format version 2 (opt-in): smaller, same bound; read back as any dataset. */
    hid_t v2 = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(v2, 3, chunk);
    h5z_fz_set_format(v2, H5Z_FLAG_MANDATORY, H5Z_FZ_ABS, eb, NULL, 2);
    dset = H5Dcreate2(file, "t2", H5T_IEEE_F32LE, space, H5P_DEFAULT, v2, H5P_DEFAULT);
    if (dset < 0 || H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0) {
        fprintf(stderr, "writing format version 2 failed\n");
        return 1;
    }
    H5Dclose(dset);
    H5Fclose(file); /* reopened, so the read decodes the stored chunks instead of HDF5's chunk cache */
    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    dset = file < 0 ? -1 : H5Dopen2(file, "t2", H5P_DEFAULT);
    memset(y, 0, n * sizeof *y);
    if (dset < 0 || H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) < 0) {
        fprintf(stderr, "reading format version 2 failed\n");
        return 1;
    }
    double maxerr2 = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - (double)y[i]);
        maxerr2 = e > maxerr2 ? e : maxerr2;
    }
    hsize_t stored2 = H5Dget_storage_size(dset);
    printf("format version 2: %llu bytes stored (version 1: %llu), max error %.6g\n", (unsigned long long)stored2,
           (unsigned long long)stored, maxerr2);
    if (!(maxerr2 <= eb) || maxerr2 == 0 || stored2 >= stored) {
        fprintf(stderr, "format version 2: max error %g (bound %g), %llu bytes (version 1: %llu)\n", maxerr2, eb,
                (unsigned long long)stored2, (unsigned long long)stored);
        return 1;
    }
    H5Dclose(dset);
    H5Pclose(v2);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(file);
    free(x);
    free(y);
    return 0;
}
