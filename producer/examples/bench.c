/* bench.c — publish-to-result latency and producer CPU per snapshot of
 * libfzproducer, the same loop as producer/bench_test.go runs for the Go
 * producer (BenchmarkProducer): one snapshot at a time, each written in
 * place (a memcpy of a precomputed f32 field into the reused segment, as a
 * simulation writes its output), published, and waited for.
 *
 *   fzproducer_bench --url U --shm-dir D [--id ID] --bytes N [--snapshots M] [--warmup W] [--reuse R]
 *
 * Prints one JSON line: latency (publish call to result) mean/p50/p90 in
 * ms, producer CPU (user+sys of this process) per snapshot in ms, the fill
 * (memcpy) and begin (admission + segment) times per snapshot. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fzproducer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The field both benchmarks publish: f32, 3-D when it tiles 256x256. */
static void field(float *v, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        v[i] = (float)(50.0 * sin((double)i * 0.0007) + 20.0 * cos((double)i * 0.00013));
}

int main(int argc, char **argv) {
    const char *url = NULL, *shm = NULL, *id = "cbench", *reuse = "2";
    unsigned long long bytes = 4ULL << 20;
    int snapshots = 10, warmup = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--url")) url = argv[i + 1];
        else if (!strcmp(argv[i], "--shm-dir")) shm = argv[i + 1];
        else if (!strcmp(argv[i], "--id")) id = argv[i + 1];
        else if (!strcmp(argv[i], "--bytes")) bytes = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--snapshots")) snapshots = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reuse")) reuse = argv[i + 1];
        else {
            fprintf(stderr, "fzproducer_bench: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    if (bytes == 0 || bytes % 4 || snapshots < 1) {
        fprintf(stderr, "fzproducer_bench: --bytes must be a positive multiple of 4, --snapshots >= 1\n");
        return 2;
    }
    uint64_t n = bytes / 4, dims[3];
    int ndims = 1;
    if (n % (256 * 256) == 0) {
        dims[0] = n / (256 * 256), dims[1] = 256, dims[2] = 256, ndims = 3;
    } else
        dims[0] = n;
    float *src = malloc(bytes);
    double *lat = calloc((size_t)snapshots, sizeof *lat);
    if (!src || !lat)
        return 1;
    field(src, n);
    fzp_producer *p = fzp_new();
    if ((url && fzp_set(p, "url", url)) || (shm && fzp_set(p, "shm_dir", shm)) || fzp_set(p, "id", id) ||
        fzp_set(p, "reuse_segments", reuse) || fzp_connect(p) != FZP_OK) {
        fprintf(stderr, "fzproducer_bench: %s\n", fzp_errmsg(p));
        return 1;
    }
    double fill = 0, begin = 0, c0 = 0;
    for (int k = -warmup; k < snapshots; k++) {
        if (k == 0) {
            c0 = cpu();
            fill = begin = 0;
        }
        double t0 = now();
        fzp_snapshot *s;
        void *data;
        int rc = fzp_begin(p, "bench", id, (uint64_t)(k + warmup), FZP_F32, ndims, dims, FZP_REL, 1e-3, NULL, &s, &data);
        double t1 = now();
        if (rc == FZP_OK) {
            memcpy(data, src, bytes);
            double t2 = now();
            rc = fzp_publish(p, s);
            if (rc == FZP_OK)
                rc = fzp_wait(p, s, 600000, NULL);
            double t3 = now();
            if (k >= 0) {
                begin += t1 - t0, fill += t2 - t1, lat[k] = t3 - t2;
            }
            fzp_snapshot_free(p, s);
        }
        if (rc != FZP_OK) {
            fprintf(stderr, "fzproducer_bench: snapshot %d: [%s] %s\n", k, fzp_errcode(p), fzp_errmsg(p));
            return 1;
        }
    }
    double c = cpu() - c0, sum = 0;
    for (int k = 0; k < snapshots; k++)
        sum += lat[k];
    qsort(lat, (size_t)snapshots, sizeof *lat, cmp);
    printf("{\"producer\":\"c\",\"bytes\":%llu,\"snapshots\":%d,\"latency_ms_mean\":%.3f,\"latency_ms_p50\":%.3f,"
           "\"latency_ms_p90\":%.3f,\"cpu_ms_per_snapshot\":%.3f,\"fill_ms_per_snapshot\":%.3f,\"begin_ms_per_snapshot\":%.3f}\n",
           bytes, snapshots, 1e3 * sum / snapshots, 1e3 * lat[snapshots / 2], 1e3 * lat[(snapshots * 9) / 10],
           1e3 * c / snapshots, 1e3 * fill / snapshots, 1e3 * begin / snapshots);
    fzp_close(p);
    free(src);
    free(lat);
    return 0;
}
