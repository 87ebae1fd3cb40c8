/* heat2d.c — a 2-D heat-equation mini-app that hands every N-th step to an
 * fzsidecar through libfzproducer. The new temperature field of an output
 * step is computed straight into the shared-memory segment (no copy), and
 * the next step reads it from there; results are collected while the
 * simulation keeps computing.
 *
 *   heat2d [--url U] [--shm-dir D] [--id ID] [--run R] [--nx 256] [--ny 192]
 *          [--steps 200] [--every 20] [--bound 1e-3] [--mode abs|rel]
 *          [--dtype f32|f64] [--reuse N] [--dump DIR] [--sleep-ms MS]
 *
 * Prints one line per stored step ("stored step S key K ratio R max_err E
 * abs_eb B") and exits 1 if any snapshot failed. --dump DIR writes each
 * published field as DIR/step-S.raw (little-endian, C order) so a test can
 * compare what `fzsidecar get` returns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fzproducer.h"

#define MAX_PENDING 4

typedef struct {
    fzp_snapshot *snap;
    long step;
} pending;

static int collect(fzp_producer *p, pending *q, int *nq, int64_t timeout_ms, int *failures) {
    /* Waits for the oldest pending snapshot (timeout 0: only finished ones). */
    while (*nq > 0) {
        fzp_result r;
        int rc = fzp_wait(p, q[0].snap, timeout_ms, &r);
        if (rc == FZP_ETIMEOUT)
            return 0;
        if (rc == FZP_OK)
            printf("stored step %ld key %s ratio %.2f max_err %.6g abs_eb %.6g\n", q[0].step, r.key, r.ratio, r.max_abs_err,
                   r.abs_eb);
        else {
            printf("FAILED step %ld: [%s] %s\n", q[0].step, fzp_errcode(p), fzp_errmsg(p));
            (*failures)++;
        }
        fflush(stdout);
        fzp_snapshot_free(p, q[0].snap);
        memmove(q, q + 1, (size_t)(*nq - 1) * sizeof *q);
        (*nq)--;
    }
    return 0;
}

static void dump(const char *dir, long step, const void *data, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/step-%ld.raw", dir, step);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "heat2d: cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    const char *url = NULL, *shm = NULL, *id = NULL, *run = "heat2d", *dumpdir = NULL, *reuse = "2";
    long nx = 256, ny = 192, steps = 200, every = 20, sleep_ms = 0;
    double bound = 1e-3;
    int mode = FZP_ABS, dtype = FZP_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "heat2d: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--url")) url = v;
        else if (!strcmp(a, "--shm-dir")) shm = v;
        else if (!strcmp(a, "--id")) id = v;
        else if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--dump")) dumpdir = v;
        else if (!strcmp(a, "--reuse")) reuse = v;
        else if (!strcmp(a, "--nx")) nx = atol(v);
        else if (!strcmp(a, "--ny")) ny = atol(v);
        else if (!strcmp(a, "--steps")) steps = atol(v);
        else if (!strcmp(a, "--every")) every = atol(v);
        else if (!strcmp(a, "--sleep-ms")) sleep_ms = atol(v);
        else if (!strcmp(a, "--bound")) bound = atof(v);
        else if (!strcmp(a, "--mode")) mode = !strcmp(v, "rel") ? FZP_REL : FZP_ABS;
        else if (!strcmp(a, "--dtype")) dtype = !strcmp(v, "f64") ? FZP_F64 : FZP_F32;
        else {
            fprintf(stderr, "heat2d: unknown flag %s\n", a);
            return 2;
        }
    }
    if (nx < 3 || ny < 3 || steps < 1 || every < 1) {
        fprintf(stderr, "heat2d: need nx, ny >= 3 and steps, every >= 1\n");
        return 2;
    }
    fzp_producer *p = fzp_new();
    if (!p) return 1;
    if ((url && fzp_set(p, "url", url)) || (shm && fzp_set(p, "shm_dir", shm)) || (id && fzp_set(p, "id", id)) ||
        fzp_set(p, "reuse_segments", reuse) || fzp_set(p, "publish_timeout_ms", "120000") || fzp_set(p, "connect_timeout_ms", "30000") ||
        fzp_connect(p) != FZP_OK) {
        fprintf(stderr, "heat2d: [%s] %s\n", fzp_errcode(p), fzp_errmsg(p));
        fzp_close(p);
        return 1;
    }
    size_t n = (size_t)nx * (size_t)ny, esz = dtype == FZP_F32 ? 4 : 8;
    /* The field lives in double precision in the simulation; an f32 output
     * step stores it rounded to float32. */
    double *u = malloc(n * sizeof *u), *w = malloc(n * sizeof *w);
    if (!u || !w) return 1;
    for (long j = 0; j < ny; j++)
        for (long i = 0; i < nx; i++) {
            double x = (double)i / (double)(nx - 1), y = (double)j / (double)(ny - 1);
            u[j * nx + i] = 100.0 * exp(-40.0 * ((x - 0.3) * (x - 0.3) + (y - 0.6) * (y - 0.6))) + 20.0 * x * y;
        }
    const double alpha = 0.2; /* dt * kappa / dx^2, stable for < 0.25 */
    pending q[MAX_PENDING];
    int nq = 0, failures = 0;
    uint64_t dims[2] = {(uint64_t)ny, (uint64_t)nx};
    double *a = u, *b = w, *cur = u;
    for (long step = 1; step <= steps; step++) {
        int output = step % every == 0;
        fzp_snapshot *s = NULL;
        void *data = NULL;
        if (output) {
            if (cur != a && cur != b) { /* still reading the last segment (every == 1): it may go away below */
                memcpy(a, cur, n * sizeof *a);
                cur = a;
            }
            collect(p, q, &nq, 0, &failures);
            if (nq == MAX_PENDING)
                collect(p, q, &nq, 300000, &failures); /* back-pressure: wait for the oldest */
            int rc = fzp_begin(p, run, "temperature", (uint64_t)step, dtype, 2, dims, mode, bound, NULL, &s, &data);
            if (rc != FZP_OK) {
                printf("FAILED step %ld: begin: [%s] %s\n", step, fzp_errcode(p), fzp_errmsg(p));
                failures++;
                s = NULL;
            }
        }
        /* f64 output steps compute the new field straight into the segment;
         * the next step reads it from there (reading is allowed while the
         * sidecar works, writing is not). */
        double *dst = (s && dtype == FZP_F64) ? (double *)data : (cur == a ? b : a);
        for (long j = 0; j < ny; j++)
            for (long i = 0; i < nx; i++) {
                size_t k = (size_t)(j * nx + i);
                if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                    dst[k] = cur[k]; /* fixed boundary */
                else
                    dst[k] = cur[k] + alpha * (cur[k - 1] + cur[k + 1] + cur[k - nx] + cur[k + nx] - 4.0 * cur[k]);
            }
        cur = dst;
        if (s) {
            if (dtype == FZP_F32) /* stored in single precision: rounded into the segment */
                for (size_t k = 0; k < n; k++)
                    ((float *)data)[k] = (float)cur[k];
            if (dumpdir)
                dump(dumpdir, step, data, n * esz);
            int rc = fzp_publish(p, s);
            if (rc != FZP_OK) {
                printf("FAILED step %ld: publish: [%s] %s\n", step, fzp_errcode(p), fzp_errmsg(p));
                failures++;
                if (cur == (double *)data) { /* keep the field: it is about to be freed */
                    memcpy(a, cur, n * sizeof *a);
                    cur = a;
                }
                fzp_snapshot_free(p, s);
            } else {
                printf("published step %ld\n", step);
                fflush(stdout);
                q[nq].snap = s;
                q[nq].step = step;
                nq++;
            }
        }
        if (sleep_ms > 0) {
            struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    collect(p, q, &nq, 300000, &failures);
    fzp_close(p);
    free(a);
    free(b);
    if (failures) {
        fprintf(stderr, "heat2d: %d snapshot(s) failed\n", failures);
        return 1;
    }
    return 0;
}
