/* bench_ingest.c — sustained ingest with C producers that write every
 * snapshot IN PLACE (issue #28, performance): K producer processes, each
 * with its own libfzproducer producer, publish M snapshots of S bytes
 * (f32, rel 1e-3) to a running `fzsidecar serve`, at most R in flight per
 * producer over R reused segments, like a simulation with R output
 * buffers. Each step the producer writes its field straight into the
 * segment fzp_begin returned, then publishes it.
 *
 *   fzproducer_ingest --shm-dir D [--url U] [--producers K] [--snapshots M]
 *       [--bytes N] [--inflight R] [--write fresh|store|copy|none]
 *       [--threads T] [--run NAME] [--json FILE]
 *
 * --write (what each producer does per snapshot):
 *   fresh  (default) computes step t of the evolving field of `fzsidecar
 *          bench e2e` (internal/synth: travelling waves, separable per row,
 *          so one multiply-add per value from small per-step tables)
 *          straight into the segment with non-temporal stores: every
 *          snapshot is new data, written once, never read back.
 *   store  the same with ordinary stores (the CPU reads each line before
 *          writing it: twice the memory traffic).
 *   copy   memcpy of a precomputed field (what `bench e2e --fill copy` does).
 *   none   writes only a segment that is not a reused one (`--fill none`).
 * --threads T splits each write over T threads of the producer (as an
 * OpenMP simulation would write its output). Sizes that are a multiple of
 * 256 KiB are 3-D (N/256 KiB x 256 x 256, as in bench e2e); others are 1-D,
 * where fresh/store recompute a table the size of the field per step (slow:
 * use them only for small tests).
 *
 * Phases, so that start-up stays out of the numbers (as in bench e2e):
 * every producer warms up (begins R snapshots, writes, publishes, waits:
 * its segments exist, are faulted in and the sidecar has seen them); then
 * all producers at once write a private buffer R times (the host's write
 * rate with no sidecar and no DMA competing); then all start together.
 * The window runs from the first measured publish to the last result
 * (CLOCK_MONOTONIC is one clock for every process of the host).
 *
 * Prints a report and one line "INGEST_JSON {...}" (also to --json FILE).
 * Exit status 0 when every snapshot was stored, 1 otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "fzproducer.h"

#define MAX_PRODUCERS 256

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum write_mode { W_FRESH, W_STORE, W_COPY, W_NONE };
static const char *mode_names[] = {"fresh", "store", "copy", "none"};

/* What a producer sends its parent, one message per phase. */
struct msg {
    char tag; /* 'W' warmed up, 'P' probe done, 'D' done, 'E' error */
    int32_t index;
    double probe_t0, probe_t1;
    double first_publish, last_result;
    double write_s, begin_s, publish_s, wait_s;
    uint64_t raw, comp, written;
    int32_t ok, filled;
    char err[512];
};

/* ---- the field: internal/synth Fill32 (float32 arithmetic), per row ---- */

struct field {
    uint64_t n, nx, ny, nz; /* values; fastest, next two extents */
    int vi;                 /* variable index: the producer's */
    float *w;               /* per step: sx + 0.05 sx2, nx values */
    float *cy, *sz;         /* per step: per y, per (z, outer) row block */
    uint64_t nzo;           /* nz * outer blocks */
};

static int field_init(struct field *f, const uint64_t *dims, int ndims, uint64_t n, int vi) {
    memset(f, 0, sizeof *f);
    f->n = n, f->vi = vi;
    f->nx = dims[ndims - 1];
    f->ny = ndims >= 2 ? dims[ndims - 2] : 1;
    f->nz = ndims >= 3 ? dims[ndims - 3] : 1;
    f->nzo = n / (f->nx * f->ny);
    f->w = malloc(f->nx * sizeof(float));
    f->cy = malloc(f->ny * sizeof(float));
    f->sz = malloc(f->nzo * sizeof(float));
    return f->w && f->cy && f->sz ? 0 : -1;
}

static void field_step(struct field *f, uint64_t step) {
    const double pi2 = 2 * M_PI, t = (double)step, fv = f->vi;
    for (uint64_t i = 0; i < f->nx; i++) {
        double x = (double)i / (double)f->nx;
        f->w[i] = (float)(sin(pi2 * (x + 0.02 * t + 0.1 * fv)) + 0.05 * sin(pi2 * (7 * x - 0.05 * t)));
    }
    for (uint64_t y = 0; y < f->ny; y++)
        f->cy[y] = (float)cos(pi2 * ((double)y / (double)f->ny - 0.015 * t));
    for (uint64_t r = 0; r < f->nzo; r++) {
        uint64_t zi = r % f->nz, outer = r / f->nz;
        f->sz[r] = (float)(0.5 * sin(pi2 * ((double)zi / (double)f->nz + 0.01 * t) + 0.3 * (double)outer));
    }
}

/* One row: v[i] = a * w[i] + b. */
static void row(float *restrict v, const float *restrict w, uint64_t nx, float a, float b, int nt) {
    uint64_t i = 0;
#if defined(__SSE2__)
    if (nt) {
        for (; i < nx && ((uintptr_t)(v + i) & 15); i++)
            v[i] = a * w[i] + b;
        __m128 va = _mm_set1_ps(a), vb = _mm_set1_ps(b);
        for (; i + 16 <= nx; i += 16) {
            _mm_stream_ps(v + i, _mm_add_ps(_mm_mul_ps(va, _mm_loadu_ps(w + i)), vb));
            _mm_stream_ps(v + i + 4, _mm_add_ps(_mm_mul_ps(va, _mm_loadu_ps(w + i + 4)), vb));
            _mm_stream_ps(v + i + 8, _mm_add_ps(_mm_mul_ps(va, _mm_loadu_ps(w + i + 8)), vb));
            _mm_stream_ps(v + i + 12, _mm_add_ps(_mm_mul_ps(va, _mm_loadu_ps(w + i + 12)), vb));
        }
    }
#else
    (void)nt;
#endif
    for (; i < nx; i++)
        v[i] = a * w[i] + b;
}

/* Writes rows [r0, r1) of the field's current step into v. */
static void field_rows(const struct field *f, float *v, uint64_t r0, uint64_t r1, int nt) {
    const float scale = 1 + 0.5f * (float)f->vi, off = 0.1f * (float)f->vi;
    for (uint64_t r = r0; r < r1; r++) {
        float cy = f->cy[r % f->ny], sz = f->sz[r / f->ny];
        row(v + r * f->nx, f->w, f->nx, scale * cy, scale * sz + off, nt);
    }
#if defined(__SSE2__)
    if (nt)
        _mm_sfence(); /* the stores are visible before the notification */
#endif
}

/* ---- a write of one snapshot, split over T threads ---- */

struct part {
    const struct field *f;
    const void *src;
    void *dst;
    uint64_t r0, r1; /* rows, or bytes for a copy */
    enum write_mode mode;
};

static void *part_run(void *arg) {
    struct part *p = arg;
    if (p->mode == W_COPY)
        memcpy((char *)p->dst + p->r0, (const char *)p->src + p->r0, p->r1 - p->r0);
    else
        field_rows(p->f, p->dst, p->r0, p->r1, p->mode == W_FRESH);
    return NULL;
}

static int write_snapshot(const struct field *f, const void *src, void *dst, enum write_mode mode, int threads) {
    uint64_t total = mode == W_COPY ? f->n * 4 : f->n / f->nx;
    struct part parts[64];
    pthread_t tid[64];
    int t = threads < 1 ? 1 : threads > 64 ? 64 : threads, started = 0;
    for (int k = 0; k < t; k++) {
        uint64_t a = total * (uint64_t)k / (uint64_t)t, b = total * (uint64_t)(k + 1) / (uint64_t)t;
        if (mode == W_COPY)
            a &= ~(uint64_t)4095, b = k == t - 1 ? total : b & ~(uint64_t)4095;
        parts[k] = (struct part){f, src, dst, a, b, mode};
    }
    for (int k = 1; k < t; k++) {
        if (pthread_create(&tid[k], NULL, part_run, &parts[k]) != 0)
            break;
        started = k;
    }
    part_run(&parts[0]);
    for (int k = 1; k <= started; k++)
        pthread_join(tid[k], NULL);
    for (int k = started + 1; k < t; k++) /* threads that could not start */
        part_run(&parts[k]);
    return 0;
}

/* ---- one producer process ---- */

struct opts {
    const char *url, *shm, *run;
    int producers, snapshots, inflight, threads;
    uint64_t bytes;
    enum write_mode mode;
};

static void send_msg(int fd, struct msg *m) {
    const char *b = (const char *)m;
    size_t left = sizeof *m;
    while (left > 0) {
        ssize_t k = write(fd, b, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        b += k, left -= (size_t)k;
    }
}

static int wait_go(int fd) {
    char c;
    for (;;) {
        ssize_t k = read(fd, &c, 1);
        if (k == 1)
            return c == 'g' ? 0 : -1;
        if (k < 0 && errno == EINTR)
            continue;
        return -1;
    }
}

static int fail(int fd, struct msg *m, const char *what, fzp_producer *p) {
    m->tag = 'E';
    snprintf(m->err, sizeof m->err, "producer %d: %s: [%s] %s", m->index, what, p ? fzp_errcode(p) : "",
             p ? fzp_errmsg(p) : "");
    send_msg(fd, m);
    return 1;
}

static int producer(const struct opts *o, int index, int up, int down) {
    struct msg m = {.index = index};
    uint64_t n = o->bytes / 4, dims[3];
    int ndims = 1;
    if (n % (256 * 256) == 0)
        dims[0] = n / (256 * 256), dims[1] = 256, dims[2] = 256, ndims = 3;
    else
        dims[0] = n;
    struct field f;
    void *src = NULL, *probe = NULL;
    if (field_init(&f, dims, ndims, n, index) != 0 || !(probe = malloc(o->bytes)))
        return fail(up, &m, "out of memory", NULL);
    if (o->mode == W_COPY) {
        if (!(src = malloc(o->bytes)))
            return fail(up, &m, "out of memory", NULL);
        field_step(&f, 0);
        field_rows(&f, src, 0, n / f.nx, 0);
    }
    memset(probe, 0, o->bytes); /* faulted in before the probe */

    char id[160], warm[160], reuse[16];
    snprintf(id, sizeof id, "%s-p%d", o->run, index);
    snprintf(warm, sizeof warm, "%s-warmup", o->run);
    snprintf(reuse, sizeof reuse, "%d", o->inflight);
    fzp_producer *p = fzp_new();
    if (!p)
        return fail(up, &m, "out of memory", NULL);
    if ((o->url && fzp_set(p, "url", o->url)) || fzp_set(p, "shm_dir", o->shm) || fzp_set(p, "id", id) ||
        fzp_set(p, "reuse_segments", reuse) || fzp_set(p, "block_timeout_ms", "600000") || fzp_connect(p) != FZP_OK)
        return fail(up, &m, "connect", p);

    /* Warm-up: R segments, all begun before any is published. */
    fzp_snapshot *ring[64];
    int R = o->inflight;
    for (int i = 0; i < R; i++) {
        void *data;
        if (fzp_begin(p, warm, id, (uint64_t)i, FZP_F32, ndims, dims, FZP_REL, 1e-3, NULL, &ring[i], &data) != FZP_OK)
            return fail(up, &m, "warm-up begin", p);
        field_step(&f, (uint64_t)i);
        write_snapshot(&f, src, data, o->mode == W_COPY ? W_COPY : W_FRESH, o->threads);
    }
    for (int i = 0; i < R; i++)
        if (fzp_publish(p, ring[i]) != FZP_OK)
            return fail(up, &m, "warm-up publish", p);
    for (int i = 0; i < R; i++) {
        if (fzp_wait(p, ring[i], 600000, NULL) != FZP_OK)
            return fail(up, &m, "warm-up result", p);
        fzp_snapshot_free(p, ring[i]);
    }
    m.tag = 'W';
    send_msg(up, &m);
    if (wait_go(down) != 0)
        return 1;

    /* The host's write rate, all producers at once, nothing else running. */
    m.probe_t0 = now();
    for (int i = 0; i < R; i++) {
        field_step(&f, (uint64_t)(1000 + i));
        write_snapshot(&f, src, probe, o->mode == W_COPY ? W_COPY : o->mode == W_STORE ? W_STORE : W_FRESH, o->threads);
    }
    m.probe_t1 = now();
    free(probe);
    m.tag = 'P';
    send_msg(up, &m);
    if (wait_go(down) != 0)
        return 1;

    /* The measured run: at most R in flight, a reused segment each step. */
    int head = 0, count = 0;
    fzp_result res;
    for (int i = 0; i < o->snapshots || count > 0; i++) {
        if (count == R || (i >= o->snapshots && count > 0)) {
            fzp_snapshot *s = ring[head];
            double t = now();
            int rc = fzp_wait(p, s, 600000, &res);
            double t1 = now();
            m.wait_s += t1 - t;
            if (rc != FZP_OK)
                return fail(up, &m, "result", p);
            m.ok++, m.raw += res.raw_bytes, m.comp += res.compressed_bytes, m.last_result = t1;
            fzp_snapshot_free(p, s);
            head = (head + 1) % R, count--;
        }
        if (i >= o->snapshots)
            continue;
        fzp_snapshot *s;
        void *data;
        double t0 = now();
        if (fzp_begin(p, o->run, id, (uint64_t)i, FZP_F32, ndims, dims, FZP_REL, 1e-3, NULL, &s, &data) != FZP_OK)
            return fail(up, &m, "begin", p);
        double t1 = now();
        if (o->mode == W_FRESH || o->mode == W_STORE)
            field_step(&f, (uint64_t)(R + i));
        if (o->mode != W_NONE || !fzp_snapshot_reused(s)) {
            write_snapshot(&f, src, data, o->mode == W_NONE ? W_FRESH : o->mode, o->threads);
            m.filled++, m.written += o->bytes;
        }
        double t2 = now();
        if (i == 0)
            m.first_publish = t2;
        if (fzp_publish(p, s) != FZP_OK)
            return fail(up, &m, "publish", p);
        double t3 = now();
        m.begin_s += t1 - t0, m.write_s += t2 - t1, m.publish_s += t3 - t2;
        ring[(head + count) % R] = s, count++;
    }
    fzp_close(p);
    m.tag = 'D';
    send_msg(up, &m);
    return 0;
}

/* ---- the parent ---- */

static int read_msg(int fd, struct msg *m) {
    char *b = (char *)m;
    size_t left = sizeof *m;
    while (left > 0) {
        ssize_t k = read(fd, b, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k, left -= (size_t)k;
    }
    return 0;
}

static pid_t pids[MAX_PRODUCERS];
static int nkids;

static void stop_all(void) {
    for (int i = 0; i < nkids; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    for (int i = 0; i < nkids; i++)
        if (pids[i] > 0)
            waitpid(pids[i], NULL, 0);
}

/* Collects one message of the expected tag from every producer. */
static int gather(int *ups, struct msg *ms, int k, char tag) {
    for (int i = 0; i < k; i++) {
        if (read_msg(ups[i], &ms[i]) != 0) {
            fprintf(stderr, "fzproducer_ingest: producer %d exited without a report\n", i);
            return -1;
        }
        if (ms[i].tag == 'E') {
            fprintf(stderr, "fzproducer_ingest: %s\n", ms[i].err);
            return -1;
        }
        if (ms[i].tag != tag) {
            fprintf(stderr, "fzproducer_ingest: producer %d: unexpected message '%c'\n", i, ms[i].tag);
            return -1;
        }
    }
    return 0;
}

/* One start byte to every producer, each on its own pipe (on one shared
 * pipe a fast producer could take another's byte of the same phase). */
static int go(const int *downs, int k) {
    for (int i = 0; i < k; i++)
        if (write(downs[i], "g", 1) != 1)
            return -1;
    return 0;
}

static uint64_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return 0;
    if (!strcmp(end, "KiB")) v *= 1024;
    else if (!strcmp(end, "MiB")) v *= 1 << 20;
    else if (!strcmp(end, "GiB")) v *= 1 << 30;
    else if (*end) return 0;
    return (uint64_t)v;
}

static int usage(const char *why) {
    fprintf(stderr,
            "fzproducer_ingest: %s\nusage: fzproducer_ingest --shm-dir D [--url U] [--producers K] [--snapshots M] [--bytes N|256MiB]\n"
            "       [--inflight R] [--write fresh|store|copy|none] [--threads T] [--run NAME] [--json FILE]\n",
            why);
    return 2;
}

int main(int argc, char **argv) {
    struct opts o = {.run = "cingest", .producers = 8, .snapshots = 32, .inflight = 3, .threads = 1,
                     .bytes = 256ULL << 20, .mode = W_FRESH};
    const char *json = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage("every flag takes a value");
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--url")) o.url = v;
        else if (!strcmp(k, "--shm-dir")) o.shm = v;
        else if (!strcmp(k, "--run")) o.run = v;
        else if (!strcmp(k, "--json")) json = v;
        else if (!strcmp(k, "--producers")) o.producers = atoi(v);
        else if (!strcmp(k, "--snapshots")) o.snapshots = atoi(v);
        else if (!strcmp(k, "--inflight")) o.inflight = atoi(v);
        else if (!strcmp(k, "--threads")) o.threads = atoi(v);
        else if (!strcmp(k, "--bytes")) o.bytes = parse_size(v);
        else if (!strcmp(k, "--write")) {
            int m = -1;
            for (int j = 0; j < 4; j++)
                if (!strcmp(v, mode_names[j])) m = j;
            if (m < 0)
                return usage("--write: expected fresh, store, copy or none");
            o.mode = (enum write_mode)m;
        } else {
            fprintf(stderr, "fzproducer_ingest: unknown flag %s\n", k);
            return usage("unknown flag");
        }
    }
    if (!o.shm)
        return usage("--shm-dir is required (the sidecar's --shm-dir)");
    if (o.producers < 1 || o.producers > MAX_PRODUCERS || o.snapshots < 1 || o.inflight < 1 || o.inflight > 64 ||
        o.threads < 1 || o.threads > 64)
        return usage("expected 1..256 producers, >= 1 snapshots, 1..64 in flight, 1..64 threads");
    if (o.bytes == 0 || o.bytes % 4)
        return usage("--bytes: expected a positive multiple of 4 (e.g. 268435456 or 256MiB)");

    int ups[MAX_PRODUCERS], downs[MAX_PRODUCERS];
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < o.producers; i++) {
        int up[2], down[2];
        if (pipe(up) != 0 || pipe(down) != 0) {
            perror("pipe");
            stop_all();
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            stop_all();
            return 1;
        }
        if (pid == 0) {
            close(up[0]), close(down[1]);
            for (int j = 0; j < i; j++)
                close(ups[j]), close(downs[j]);
            _exit(producer(&o, i, up[1], down[0]));
        }
        close(up[1]), close(down[0]);
        ups[i] = up[0], downs[i] = down[1], pids[i] = pid, nkids = i + 1;
    }
    struct msg *ms = calloc((size_t)o.producers, sizeof *ms);
    if (!ms || gather(ups, ms, o.producers, 'W') || go(downs, o.producers)) {
        stop_all();
        return 1;
    }
    if (gather(ups, ms, o.producers, 'P')) {
        stop_all();
        return 1;
    }
    double p0 = 1e300, p1 = 0, psingle = 0;
    for (int i = 0; i < o.producers; i++) {
        p0 = fmin(p0, ms[i].probe_t0), p1 = fmax(p1, ms[i].probe_t1);
        psingle += (double)o.bytes * o.inflight / (ms[i].probe_t1 - ms[i].probe_t0);
    }
    double probe_agg = (double)o.bytes * o.inflight * o.producers / (p1 - p0);
    if (go(downs, o.producers) || gather(ups, ms, o.producers, 'D')) {
        stop_all();
        return 1;
    }
    stop_all(); /* reaps them; they have exited */
    double t0 = 1e300, t1 = 0, write_s = 0, begin_s = 0, publish_s = 0, wait_s = 0;
    uint64_t raw = 0, comp = 0, written = 0;
    int ok = 0, filled = 0;
    for (int i = 0; i < o.producers; i++) {
        t0 = fmin(t0, ms[i].first_publish), t1 = fmax(t1, ms[i].last_result);
        raw += ms[i].raw, comp += ms[i].comp, written += ms[i].written;
        write_s += ms[i].write_s, begin_s += ms[i].begin_s, publish_s += ms[i].publish_s, wait_s += ms[i].wait_s;
        ok += ms[i].ok, filled += ms[i].filled;
    }
    double win = t1 - t0, ns = (double)o.producers * o.snapshots;
    double ingest = (double)raw / win, wrate = write_s > 0 ? (double)written / write_s : 0;
    printf("C producers (libfzproducer): %d x %d snapshots x %llu bytes, %d in flight each, write %s, %d thread(s) each\n",
           o.producers, o.snapshots, (unsigned long long)o.bytes, o.inflight, mode_names[o.mode], o.threads);
    printf("stored %d of %.0f, ratio %.2f; window %.3f s (first publish -> last result)\n", ok, ns,
           comp ? (double)raw / comp : 0, win);
    printf("ingest: %.2f GB/s\n", ingest / 1e9);
    printf("producers wrote %d snapshots, %.2f GB/s each while writing, %.2f GB/s all together over the window;"
           " writing took %.0f %% of each producer's window\n",
           filled, wrate / 1e9, (double)written / win / 1e9, 100 * write_s / o.producers / win);
    printf("write probe before the run (all producers at once, private buffer, no sidecar): %.2f GB/s together, %.2f GB/s each\n",
           probe_agg / 1e9, psingle / o.producers / 1e9);
    printf("per snapshot: begin (admission + segment) %.2f ms, write %.2f ms, publish %.2f ms, waiting for results %.2f ms\n",
           1e3 * begin_s / ns, 1e3 * write_s / ns, 1e3 * publish_s / ns, 1e3 * wait_s / ns);
    char line[1024];
    snprintf(line, sizeof line,
             "{\"producer\":\"c\",\"producers\":%d,\"snapshots_per_producer\":%d,\"bytes_per_snapshot\":%llu,\"inflight\":%d,"
             "\"write\":\"%s\",\"threads\":%d,\"stored\":%d,\"raw_bytes\":%llu,\"compressed_bytes\":%llu,\"seconds\":%.6f,"
             "\"ingest_bytes_per_second\":%.0f,\"written_bytes\":%llu,\"write_bytes_per_second_each\":%.0f,"
             "\"write_share_of_window\":%.4f,\"probe_write_bytes_per_second\":%.0f,\"begin_ms\":%.3f,\"write_ms\":%.3f,"
             "\"publish_ms\":%.3f,\"wait_ms\":%.3f}",
             o.producers, o.snapshots, (unsigned long long)o.bytes, o.inflight, mode_names[o.mode], o.threads, ok,
             (unsigned long long)raw, (unsigned long long)comp, win, ingest, (unsigned long long)written, wrate,
             write_s / o.producers / win, probe_agg, 1e3 * begin_s / ns, 1e3 * write_s / ns, 1e3 * publish_s / ns,
             1e3 * wait_s / ns);
    printf("INGEST_JSON %s\n", line);
    if (json) {
        FILE *fp = fopen(json, "w");
        if (!fp || fprintf(fp, "%s\n", line) < 0 || fclose(fp) != 0) {
            fprintf(stderr, "fzproducer_ingest: write %s: %s\n", json, strerror(errno));
            return 1;
        }
    }
    return ok == (int)ns ? 0 : 1;
}
