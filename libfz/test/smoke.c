/*
 * Smoke test of libfz's codec ABI, run by libfz_test.go:
 *   smoke DIR
 * compresses a known 3-D float field, writes it to DIR/field.raw and the
 * container to DIR/field.fz (the Go test compares it with fz.Compress), and checks header, decompression, the
 * bound, regions, fill values and that bad input gives errors, not crashes.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"

static int failures;

#define CHECK(cond, ...)                                              \
	do {                                                              \
		if (!(cond)) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                             \
			fprintf(stderr, " (last error: %s)\n", fz_last_error());  \
			failures++;                                               \
		}                                                             \
	} while (0)

enum { NZ = 20, NY = 30, NX = 40, N = NZ * NY * NX };

static float field[N];

static void *decode_in_thread(void *arg) {
	const void **a = arg;
	uint64_t len = *(const uint64_t *)a[1];
	float *out = malloc(sizeof(float) * N);
	intptr_t bad = 0;
	for (int r = 0; r < 20; r++) {
		if (fz_decompress(a[0], len, out, sizeof(float) * N, NULL, NULL) != FZ_OK) bad++;
		/* a failing call on this thread must leave its own message */
		if (fz_decompress(a[0], 10, out, 4, NULL, NULL) != FZ_ESIZE || strstr(fz_last_error(), "88") == NULL) bad++;
	}
	free(out);
	return (void *)bad;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: smoke DIR\n");
		return 2;
	}
	CHECK(fz_abi_version() == FZ_ABI_VERSION, "abi %d", fz_abi_version());
	for (int z = 0; z < NZ; z++)
		for (int y = 0; y < NY; y++)
			for (int x = 0; x < NX; x++)
				field[(z * NY + y) * NX + x] = (float)(sin(0.1 * x) * cos(0.07 * y) + 0.01 * z);

	uint64_t dims[3] = {NZ, NY, NX};
	void *blob = NULL;
	uint64_t blen = 0;
	fz_stats st;
	fz_status s = fz_compress(field, sizeof field, FZ_F32, dims, 3, FZ_ABS, 1e-3, NULL, NULL, &blob, &blen, &st);
	CHECK(s == FZ_OK, "compress status %d", s);
	CHECK(st.compressed_bytes == blen && st.raw_bytes == sizeof field, "stats sizes %llu %llu",
	      (unsigned long long)st.compressed_bytes, (unsigned long long)st.raw_bytes);
	CHECK(st.max_abs_err <= 1e-3 && st.ratio > 1, "stats err %g ratio %g", st.max_abs_err, st.ratio);
	char path[4096];
	snprintf(path, sizeof path, "%s/field.fz", argv[1]);
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(blob, 1, blen, f) == blen && fclose(f) == 0, "writing %s", path);
	snprintf(path, sizeof path, "%s/field.raw", argv[1]);
	f = fopen(path, "wb");
	CHECK(f && fwrite(field, 1, sizeof field, f) == sizeof field && fclose(f) == 0, "writing %s", path);

	fz_info info;
	CHECK(fz_read_header(blob, blen, &info) == FZ_OK, "read_header");
	CHECK(info.dtype == FZ_F32 && info.mode == FZ_ABS && info.ndims == 3 && info.dims[0] == NZ &&
	          info.dims[1] == NY && info.dims[2] == NX && info.dims[3] == 0, "header fields");
	CHECK(info.bound == 1e-3 && info.abs_eb == 1e-3 && !info.has_fill, "bound %g abs %g", info.bound, info.abs_eb);
	CHECK(info.raw_bytes == sizeof field && info.compressed_bytes == blen && info.elements == N, "sizes");
	/* the header alone (a prefix) is enough */
	fz_info pre;
	CHECK(fz_read_header(blob, info.header_bytes, &pre) == FZ_OK && pre.raw_bytes == sizeof field, "prefix header");
	CHECK(fz_read_header(blob, info.header_bytes - 1, &pre) == FZ_ESIZE && pre.header_bytes == info.header_bytes,
	      "short prefix says how much it needs: %llu", (unsigned long long)pre.header_bytes);
	uint64_t raw = 0;
	CHECK(fz_decompressed_size(blob, blen, &raw) == FZ_OK && raw == sizeof field, "size %llu", (unsigned long long)raw);

	float *out = malloc(sizeof field);
	fz_options o = {sizeof(fz_options), 1, 0, 0, 0};
	CHECK(fz_decompress(blob, blen, out, sizeof field, &o, &info) == FZ_OK, "decompress");
	double maxerr = 0;
	for (int i = 0; i < N; i++) maxerr = fmax(maxerr, fabs((double)out[i] - field[i]));
	CHECK(maxerr <= 1e-3 && maxerr == st.max_abs_err, "max error %g, stats say %g", maxerr, st.max_abs_err);

	/* region 5:9 of the slowest dimension equals that slab of the whole decode */
	uint64_t rb = 0;
	CHECK(fz_region_size(blob, blen, 5, 9, &rb) == FZ_OK && rb == 4 * NY * NX * sizeof(float), "region size");
	float *reg = malloc(rb);
	CHECK(fz_decompress_region(blob, blen, 5, 9, reg, rb) == FZ_OK, "region");
	CHECK(memcmp(reg, out + 5 * NY * NX, rb) == 0, "region differs from the whole decode");
	CHECK(fz_decompress_region(blob, blen, 9, 5, reg, rb) == FZ_EINVAL && strstr(fz_last_error(), "9:5"), "bad region");
	CHECK(fz_decompress_region(blob, blen, 0, NZ + 1, reg, rb) == FZ_EINVAL, "region past the end");
	CHECK(fz_decompress_region(blob, blen, 5, 9, reg, rb - 4) == FZ_ESIZE, "region wrong size");
	free(reg);

	/* bad arguments and corrupt input: error codes and messages */
	CHECK(fz_decompress(blob, blen, out, sizeof field - 4, NULL, NULL) == FZ_ESIZE &&
	          strstr(fz_last_error(), "needs 96000"), "wrong dst size");
	CHECK(fz_decompress(blob, blen, NULL, sizeof field, NULL, NULL) == FZ_EINVAL, "NULL dst");
	CHECK(fz_decompress(NULL, 100, out, sizeof field, NULL, NULL) == FZ_EINVAL, "NULL blob");
	void *b2 = NULL;
	uint64_t l2 = 0;
	CHECK(fz_compress(field, sizeof field - 4, FZ_F32, dims, 3, FZ_ABS, 1e-3, NULL, NULL, &b2, &l2, NULL) == FZ_EINVAL &&
	          strstr(fz_last_error(), "95996 bytes"), "wrong src size");
	CHECK(fz_compress(field, sizeof field, 7, dims, 3, FZ_ABS, 1e-3, NULL, NULL, &b2, &l2, NULL) == FZ_EINVAL, "dtype");
	CHECK(fz_compress(field, sizeof field, FZ_F32, dims, 3, 9, 1e-3, NULL, NULL, &b2, &l2, NULL) == FZ_EINVAL, "mode");
	CHECK(fz_compress(field, sizeof field, FZ_F32, dims, 3, FZ_ABS, -1, NULL, NULL, &b2, &l2, NULL) == FZ_EINVAL, "bound");
	CHECK(fz_compress(field, sizeof field, FZ_F32, dims, 17, FZ_ABS, 1e-3, NULL, NULL, &b2, &l2, NULL) == FZ_EINVAL, "ndims");
	CHECK(fz_compress(field, sizeof field, FZ_F32, NULL, 3, FZ_ABS, 1e-3, NULL, NULL, &b2, &l2, NULL) == FZ_EINVAL, "dims NULL");
	CHECK(fz_compress(field, sizeof field, FZ_F32, dims, 3, FZ_ABS, 1e-3, NULL, NULL, NULL, &l2, NULL) == FZ_EINVAL, "out NULL");
	fz_options small = {4, 0, 0, 0, 0};
	CHECK(fz_compress(field, sizeof field, FZ_F32, dims, 3, FZ_ABS, 1e-3, NULL, &small, &b2, &l2, NULL) == FZ_EINVAL &&
	          strstr(fz_last_error(), "struct_size"), "struct_size");
	CHECK(b2 == NULL && l2 == 0, "failed compress leaves no output");

	unsigned char *bad = malloc(blen);
	memcpy(bad, blob, blen);
	bad[blen / 2] ^= 0x40; /* a payload byte: the chunk CRC catches it */
	CHECK(fz_decompress(bad, blen, out, sizeof field, NULL, NULL) == FZ_EFORMAT && strstr(fz_last_error(), "chunk"),
	      "corrupt payload");
	memcpy(bad, blob, blen);
	bad[0] = 'X';
	CHECK(fz_read_header(bad, blen, &pre) == FZ_EFORMAT && strstr(fz_last_error(), "magic"), "bad magic");
	CHECK(fz_decompress(blob, blen - 1, out, sizeof field, NULL, NULL) == FZ_EFORMAT, "truncated container");
	CHECK(fz_decompress_region(blob, blen - 1, 0, 1, out, NY * NX * 4) == FZ_EFORMAT, "truncated region");
	fz_options cap = {sizeof(fz_options), 0, 0, 0, 1000};
	CHECK(fz_decompress(blob, blen, out, sizeof field, &cap, NULL) == FZ_EINVAL, "max_raw_bytes");
	CHECK(fz_decompress(blob, blen, out, sizeof field, NULL, NULL) == FZ_OK && fz_last_error()[0] == 0,
	      "success clears the message");
	free(bad);

	/* format_version: 0 and 1 write version 1 (the same bytes as no options), 2 writes version 2, which
	 * decodes within the bound; field-v2.fz is compared with fz.Compress by the Go test; 3 is refused */
	for (uint32_t v = 0; v <= 2; v++) {
		fz_options fv = {sizeof(fz_options), 0, 0, v, 0};
		void *bv = NULL;
		uint64_t lv = 0;
		CHECK(fz_compress(field, sizeof field, FZ_F32, dims, 3, FZ_ABS, 1e-3, NULL, &fv, &bv, &lv, NULL) == FZ_OK,
		      "compress format_version %u", v);
		CHECK(fz_read_header(bv, lv, &pre) == FZ_OK && pre.version == (v ? v : 1), "format_version %u wrote version %u", v,
		      pre.version);
		if (v < 2) {
			CHECK(lv == blen && memcmp(bv, blob, blen) == 0, "format_version %u differs from the default container", v);
		} else {
			CHECK(fz_decompress(bv, lv, out, sizeof field, NULL, &pre) == FZ_OK && pre.version == 2, "decompress version 2");
			double e2 = 0;
			for (int i = 0; i < N; i++) e2 = fmax(e2, fabs((double)out[i] - field[i]));
			CHECK(e2 <= 1e-3, "version 2 max error %g", e2);
			snprintf(path, sizeof path, "%s/field-v2.fz", argv[1]);
			f = fopen(path, "wb");
			CHECK(f && fwrite(bv, 1, lv, f) == lv && fclose(f) == 0, "writing %s", path);
			printf("format version 2: %llu bytes (version 1: %llu)\n", (unsigned long long)lv, (unsigned long long)blen);
		}
		fz_free(bv);
	}
	fz_options v3 = {sizeof(fz_options), 0, 0, 3, 0};
	CHECK(fz_compress(field, sizeof field, FZ_F32, dims, 3, FZ_ABS, 1e-3, NULL, &v3, &b2, &l2, NULL) == FZ_EINVAL &&
	          strstr(fz_last_error(), "format_version = 3: expected 1 or 2"), "format_version 3");
	CHECK(b2 == NULL && l2 == 0, "refused format_version leaves no output");

	/* f64 with a fill value, relative bound, rank 1: fill round-trips exactly */
	enum { M = 10000 };
	double *d = malloc(M * sizeof(double)), *dd = malloc(M * sizeof(double));
	for (int i = 0; i < M; i++) d[i] = (i % 17 == 0) ? -9999.0 : 100.0 * sin(0.001 * i);
	double fill = -9999.0;
	uint64_t dm[1] = {M};
	s = fz_compress(d, M * sizeof(double), FZ_F64, dm, 1, FZ_REL, 1e-4, &fill, NULL, &b2, &l2, &st);
	CHECK(s == FZ_OK, "f64 compress");
	CHECK(fz_decompress(b2, l2, dd, M * sizeof(double), NULL, &info) == FZ_OK, "f64 decompress");
	CHECK(info.has_fill && info.fill == -9999.0 && info.mode == FZ_REL && info.dtype == FZ_F64, "f64 header");
	int fills = 0;
	for (int i = 0; i < M; i++) {
		if (d[i] == fill) {
			fills += dd[i] == fill;
		} else {
			CHECK(fabs(dd[i] - d[i]) <= info.abs_eb, "f64 value %d off the bound", i);
		}
	}
	CHECK(fills == (M + 16) / 17, "fill values kept: %d", fills);
	fz_free(b2);
	free(d);
	free(dd);

	/* several threads at once, each with its own error message */
	pthread_t th[4];
	const void *arg[2] = {blob, &blen};
	for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, decode_in_thread, arg);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(th[i], &r);
		CHECK(r == NULL, "thread %d: %ld failures", i, (long)(intptr_t)r);
	}

	fz_free(blob);
	free(out);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("libfz smoke test: OK (%llu -> %llu bytes, ratio %.2f, max error %g)\n", (unsigned long long)sizeof field,
	       (unsigned long long)blen, st.ratio, maxerr);
	return 0;
}
