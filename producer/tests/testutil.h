/* testutil.h — tiny test harness for the libfzproducer tests (run by ctest).
 * A test needing a sidecar reads its address from the environment the Go
 * driver (producer/producer_test.go) sets, and exits 77 (ctest: skipped)
 * without it. */
#ifndef FZP_TESTUTIL_H
#define FZP_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <time.h>

#include "fzproducer.h"

static int t_failures = 0;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            __atomic_add_fetch(&t_failures, 1, __ATOMIC_SEQ_CST);                           \
        }                                                                                   \
    } while (0)

/* rc must be want; on mismatch print the producer's message. */
#define CHECK_RC(p, rc, want)                                                                        \
    do {                                                                                             \
        int rc_ = (rc);                                                                              \
        CHECK(rc_ == (want), "got status %d, want %d: [%s] %s", rc_, (want), fzp_errcode(p), fzp_errmsg(p)); \
    } while (0)

#define CHECK_MSG(p, needle) \
    CHECK(strstr(fzp_errmsg(p), needle) != NULL, "message \"%s\" lacks \"%s\"", fzp_errmsg(p), needle)

static inline double t_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline const char *t_env_or_skip(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) {
        printf("SKIP: %s not set (the Go driver producer/producer_test.go starts a sidecar and sets it)\n", name);
        exit(77);
    }
    return v;
}

/* A connected producer for the sidecar at url / shm; extra key=value options follow (NULL-terminated). */
static inline fzp_producer *t_connect(const char *url, const char *shm, const char *id, ...) {
    fzp_producer *p = fzp_new();
    if (!p) {
        fprintf(stderr, "fzp_new: out of memory\n");
        exit(1);
    }
    if (fzp_set(p, "url", url) || fzp_set(p, "shm_dir", shm) || (id && fzp_set(p, "id", id)) ||
        fzp_set(p, "connect_timeout_ms", "10000")) {
        fprintf(stderr, "fzp_set: %s\n", fzp_errmsg(p));
        exit(1);
    }
    va_list ap;
    va_start(ap, id);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k)
            break;
        const char *v = va_arg(ap, const char *);
        if (fzp_set(p, k, v) != FZP_OK) {
            fprintf(stderr, "fzp_set(%s=%s): %s\n", k, v, fzp_errmsg(p));
            exit(1);
        }
    }
    va_end(ap);
    if (fzp_connect(p) != FZP_OK) {
        fprintf(stderr, "fzp_connect(%s): [%s] %s\n", url, fzp_errcode(p), fzp_errmsg(p));
        exit(1);
    }
    return p;
}

static inline int t_done(const char *name) {
    if (t_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, t_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
