/*
 * Test of libfz's store ABI, run by libfz_test.go:
 *   store DIR
 * DIR is a store holding run "r1" with variables "a" (steps 0, 1, 2) and
 * "b" (step 5), each an f64 field of 16x8x4 whose value i is step*1000 + i
 * (absolute bound 1e-6), written by the Go test through the sinks package.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"

static int failures;

#define CHECK(cond, ...)                                                        \
	do {                                                                        \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
			fprintf(stderr, __VA_ARGS__);                                       \
			fprintf(stderr, " (last error: %s)\n", fz_last_error());            \
			failures++;                                                         \
		}                                                                       \
	} while (0)

enum { N = 16 * 8 * 4 };

static int field_ok(const double *v, uint64_t step, uint64_t first, uint64_t n) {
	for (uint64_t i = 0; i < n; i++)
		if (fabs(v[i] - (double)(step * 1000 + first + i)) > 1e-6) return 0;
	return 1;
}

static fz_store shared;

static void *reader(void *arg) {
	(void)arg;
	intptr_t bad = 0;
	double v[N];
	for (int r = 0; r < 20; r++) {
		uint64_t step = (uint64_t)(r % 3);
		if (fz_store_read(shared, "r1", "a", step, v, sizeof v, NULL) != FZ_OK || !field_ok(v, step, 0, N)) bad++;
		if (fz_store_read(shared, "r1", "a", 9, v, sizeof v, NULL) != FZ_ENOTFOUND || !strstr(fz_last_error(), "0, 1, 2"))
			bad++;
	}
	return (void *)bad;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: store DIR\n");
		return 2;
	}
	fz_store s = 0;
	CHECK(fz_store_open(argv[1], &s) == FZ_OK && s != 0, "open %s", argv[1]);

	char *names = NULL;
	uint64_t n = 0;
	CHECK(fz_store_runs(s, &names, &n) == FZ_OK && n == 1 && strcmp(names, "r1") == 0, "runs: %s", names);
	fz_free(names);
	CHECK(fz_store_vars(s, "r1", &names, &n) == FZ_OK && n == 2 && strcmp(names, "a\nb") == 0, "vars: %s", names);
	fz_free(names);
	uint64_t *steps = NULL;
	CHECK(fz_store_steps(s, "r1", "a", &steps, &n) == FZ_OK && n == 3 && steps[0] == 0 && steps[2] == 2, "steps");
	fz_free(steps);
	char *json = NULL;
	CHECK(fz_store_list_json(s, "r1", NULL, &json) == FZ_OK && strstr(json, "\"var\":\"b\",\"step\":5"), "json: %s", json);
	fz_free(json);

	fz_entry e;
	CHECK(fz_store_stat(s, "r1", "a", 1, &e) == FZ_OK, "stat");
	CHECK(e.info.dtype == FZ_F64 && e.info.ndims == 3 && e.info.dims[0] == 16 && e.info.raw_bytes == N * 8 &&
	          e.stored_bytes == e.info.compressed_bytes && e.info.bound == 1e-6 && e.created_unix_ns > 0,
	      "entry fields");

	double v[N];
	CHECK(fz_store_read(s, "r1", "b", 5, v, sizeof v, &e) == FZ_OK && field_ok(v, 5, 0, N), "read b/5");
	CHECK(e.info.raw_bytes == sizeof v, "read fills the entry");
	CHECK(fz_store_read_region(s, "r1", "a", 2, 3, 7, v, 4 * 8 * 4 * 8, NULL) == FZ_OK && field_ok(v, 2, 3 * 32, 4 * 32),
	      "region 3:7 of a/2");

	/* errors */
	CHECK(fz_store_read(s, "r1", "a", 1, v, sizeof v - 8, NULL) == FZ_ESIZE && strstr(fz_last_error(), "needs 4096"),
	      "wrong size");
	CHECK(fz_store_read(s, "r1", "zz", 1, v, sizeof v, NULL) == FZ_ENOTFOUND && strstr(fz_last_error(), "existing variables: a, b"),
	      "missing var");
	CHECK(fz_store_vars(s, "nope", &names, &n) == FZ_ENOTFOUND && names == NULL && strstr(fz_last_error(), "r1"),
	      "missing run");
	CHECK(fz_store_stat(s, "r1", "../etc", 1, &e) == FZ_EINVAL, "bad name");
	CHECK(fz_store_stat(s, NULL, "a", 1, &e) == FZ_EINVAL, "NULL run");
	CHECK(fz_store_read_region(s, "r1", "a", 2, 7, 3, v, 32, NULL) == FZ_EINVAL, "bad region");
	CHECK(fz_store_runs(s + 1000, &names, &n) == FZ_EINVAL && strstr(fz_last_error(), "not open"), "bad handle");
	fz_store bad = 0;
	/* A malformed URL is the caller's mistake (FZ_EINVAL), saying what is expected. */
	CHECK(fz_store_open("ftp://x/y", &bad) == FZ_EINVAL && bad == 0 && strstr(fz_last_error(), "scheme"), "bad URL");
	CHECK(fz_store_open("http://x", &bad) == FZ_EINVAL && bad == 0 && strstr(fz_last_error(), "unknown scheme \"http\"") &&
	          strstr(fz_last_error(), "s3://bucket"),
	      "http URL");
	CHECK(fz_store_open("s3://", &bad) == FZ_EINVAL && bad == 0 && strstr(fz_last_error(), "no bucket") &&
	          strstr(fz_last_error(), "expected s3://bucket"),
	      "s3 URL without a bucket");
	CHECK(fz_store_open("s3://b/../x", &bad) == FZ_EINVAL && bad == 0 && strstr(fz_last_error(), "prefix"), "s3 prefix ..");
	CHECK(fz_store_open("file://host/x", &bad) == FZ_EINVAL && bad == 0 && strstr(fz_last_error(), "must be local"),
	      "file URL with a host");
	CHECK(fz_store_open("", &bad) == FZ_EINVAL && bad == 0, "empty URL");
	/* vars of no run: refused (fz_store_list_json lists every run's) */
	names = NULL;
	CHECK(fz_store_vars(s, "", &names, &n) == FZ_EINVAL && names == NULL && n == 0 && strstr(fz_last_error(), "fz_store_runs"),
	      "vars of run \"\"");
	CHECK(fz_store_open("/nonexistent/fz-store", &bad) == FZ_EIO && bad == 0 && strstr(fz_last_error(), "does not exist"),
	      "missing directory");

	/* readers in threads on one handle */
	shared = s;
	pthread_t th[4];
	for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, reader, NULL);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(th[i], &r);
		CHECK(r == NULL, "thread %d: %ld failures", i, (long)(intptr_t)r);
	}

	CHECK(fz_store_close(s) == FZ_OK, "close");
	CHECK(fz_store_close(s) == FZ_EINVAL, "close twice");
	CHECK(fz_store_read(s, "r1", "a", 1, v, sizeof v, NULL) == FZ_EINVAL, "read after close");
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("libfz store test: OK\n");
	return 0;
}
