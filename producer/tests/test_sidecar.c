/* test_sidecar.c — against a real `fzsidecar serve` (FZ_TEST_URL,
 * FZ_TEST_SHM_DIR): round trips of f32/f64 written in place, results and
 * sidecar error codes, bad input, segment reuse, two producers at once. */
#include <dirent.h>
#include <sys/stat.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

static const char *url, *shm;

/* user/password of the sidecar's local-trust file, if it wrote one. */
static int read_auth(char *user, char *pass, size_t cap) {
    char path[1024];
    snprintf(path, sizeof path, "%s/.fzsidecar-auth", shm);
    FILE *f = fopen(path, "r");
    user[0] = pass[0] = 0;
    if (!f)
        return 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strncmp(line, "user=", 5) == 0)
            snprintf(user, cap, "%s", line + 5);
        if (strncmp(line, "password=", 9) == 0)
            snprintf(pass, cap, "%s", line + 9);
    }
    fclose(f);
    return 1;
}

static int count_segments(const char *id) {
    DIR *d = opendir(shm);
    if (!d)
        return -1;
    int n = 0;
    size_t l = strlen(id);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, id, l) == 0 && e->d_name[l] == '-')
            n++;
    closedir(d);
    return n;
}

static void roundtrip(void) {
    fzp_producer *p = t_connect(url, shm, "ctest-rt", NULL);
    CHECK(strcmp(fzp_id(p), "ctest-rt") == 0, "id %s", fzp_id(p));
    /* f32 2-D, written in place */
    uint64_t dims[2] = {64, 96};
    fzp_snapshot *s;
    void *data;
    CHECK_RC(p, fzp_begin(p, "ctest", "f32field", 7, FZP_F32, 2, dims, FZP_ABS, 1e-3, NULL, &s, &data), FZP_OK);
    if (!s)
        return;
    CHECK(((uintptr_t)data & 4095) == 0, "data not page-aligned");
    float *f = data;
    for (uint64_t i = 0; i < 64 * 96; i++)
        f[i] = (float)sin(0.01 * (double)i);
    uint64_t nb = 0;
    fzp_snapshot_data(s, NULL, &nb);
    CHECK(nb == 64 * 96 * 4, "nbytes %llu", (unsigned long long)nb);
    CHECK(fzp_snapshot_reused(s) == 0, "new segment marked reused");
    CHECK(count_segments("ctest-rt") == 1, "segment file missing");
    CHECK_RC(p, fzp_publish(p, s), FZP_OK);
    CHECK_RC(p, fzp_publish(p, s), FZP_ESTATE);
    CHECK_RC(p, fzp_abort(p, s), FZP_ESTATE);
    fzp_result r;
    CHECK_RC(p, fzp_wait(p, s, 60000, &r), FZP_OK);
    CHECK(r.ok == 1, "ok");
    CHECK(strcmp(r.key, "ctest/f32field/000000000007.fz") == 0, "key %s", r.key);
    CHECK(r.step == 7 && r.raw_bytes == 64 * 96 * 4 && r.compressed_bytes > 0, "sizes %llu %llu",
          (unsigned long long)r.raw_bytes, (unsigned long long)r.compressed_bytes);
    CHECK(r.abs_eb == 1e-3 && r.max_abs_err <= r.abs_eb && r.ratio > 1, "eb %g err %g ratio %g", r.abs_eb, r.max_abs_err, r.ratio);
    CHECK(strcmp(r.msg_id, fzp_snapshot_msg_id(s)) == 0, "msg_id");
    /* a segment snapshot: no GPU time (GPU-resident ones: producer/examples/cuda/devbench.cu) */
    CHECK(fzp_snapshot_gpu_seconds(s) == 0 && fzp_snapshot_gpu_seconds(NULL) == 0, "gpu seconds %g", fzp_snapshot_gpu_seconds(s));
    /* wait again: the same answer */
    CHECK_RC(p, fzp_wait(p, s, 0, &r), FZP_OK);
    CHECK(count_segments("ctest-rt") == 1, "segment removed before the snapshot was freed");
    CHECK(f[5] == (float)sin(0.05), "segment unmapped before the snapshot was freed");
    fzp_snapshot_free(p, s);
    CHECK(count_segments("ctest-rt") == 0, "segment not removed when the finished snapshot was freed");

    /* f64 3-D with a NaN fill, in rel mode */
    uint64_t d3[3] = {8, 16, 32};
    double fill = NAN;
    CHECK_RC(p, fzp_begin(p, "ctest", "f64field", 8, FZP_F64, 3, d3, FZP_REL, 1e-4, &fill, &s, &data), FZP_OK);
    double *g = data;
    for (uint64_t i = 0; i < 8 * 16 * 32; i++)
        g[i] = (i % 17 == 0) ? NAN : cos(0.003 * (double)i);
    CHECK_RC(p, fzp_publish(p, s), FZP_OK);
    CHECK_RC(p, fzp_wait(p, s, 60000, &r), FZP_OK);
    CHECK(r.ok && r.max_abs_err <= r.abs_eb && r.abs_eb > 0, "f64 result err %g eb %g", r.max_abs_err, r.abs_eb);
    fzp_snapshot_free(p, s);

    /* The same key with different bytes: the sidecar's "conflict" arrives unchanged. */
    CHECK_RC(p, fzp_begin(p, "ctest", "f32field", 7, FZP_F32, 2, dims, FZP_ABS, 1e-3, NULL, &s, &data), FZP_OK);
    memset(data, 0, 64 * 96 * 4);
    CHECK_RC(p, fzp_publish(p, s), FZP_OK);
    CHECK_RC(p, fzp_wait(p, s, 60000, &r), FZP_ESIDECAR);
    CHECK(r.ok == 0 && strcmp(r.error_code, "conflict") == 0, "code %s: %s", r.error_code, r.error_message);
    CHECK(strcmp(fzp_errcode(p), "conflict") == 0, "errcode %s", fzp_errcode(p));
    fzp_snapshot_free(p, s);

    /* fzp_publish_copy from the program's own buffer */
    float buf[100];
    for (int i = 0; i < 100; i++)
        buf[i] = (float)i;
    uint64_t d1[1] = {100};
    CHECK_RC(p, fzp_publish_copy(p, "ctest", "copied", 1, FZP_F32, 1, d1, FZP_ABS, 0.5, NULL, buf, sizeof buf, &s), FZP_OK);
    CHECK_RC(p, fzp_wait(p, s, 60000, &r), FZP_OK);
    fzp_snapshot_free(p, s);

    /* status */
    int64_t budget = -1, used = -1;
    CHECK_RC(p, fzp_status(p, 5000, &budget, &used, NULL, NULL), FZP_OK);
    CHECK(budget > 0 && used >= 0, "status %lld %lld", (long long)budget, (long long)used);
    fzp_close(p);
}

static void bad_input(void) {
    fzp_producer *p = t_connect(url, shm, "ctest-bad", NULL);
    uint64_t dims[2] = {4, 4};
    fzp_snapshot *s = (fzp_snapshot *)1;
    void *data = (void *)1;
    double nan = NAN;
    struct {
        const char *what, *run, *var;
        uint64_t step;
        int dtype, ndims;
        const uint64_t *dims;
        int mode;
        double bound;
        const char *needle;
    } cases[] = {
        {"bound 0", "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 0, "expected a finite number > 0"},
        {"bound < 0", "r", "v", 0, FZP_F32, 2, dims, FZP_REL, -1e-3, "expected a finite number > 0"},
        {"bound NaN", "r", "v", 0, FZP_F32, 2, dims, FZP_REL, nan, "expected a finite number > 0"},
        {"bound inf", "r", "v", 0, FZP_F32, 2, dims, FZP_REL, INFINITY, "expected a finite number > 0"},
        {"dims NULL", "r", "v", 0, FZP_F32, 2, NULL, FZP_REL, 1e-3, "dims is NULL"},
        {"ndims 0", "r", "v", 0, FZP_F32, 0, dims, FZP_REL, 1e-3, "ndims 0"},
        {"ndims 17", "r", "v", 0, FZP_F32, 17, dims, FZP_REL, 1e-3, "ndims 17"},
        {"dtype", "r", "v", 0, 3, 2, dims, FZP_REL, 1e-3, "dtype 3"},
        {"mode", "r", "v", 0, FZP_F32, 2, dims, 0, 1e-3, "mode 0"},
        {"run NULL", NULL, "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, "must not be NULL"},
        {"var NULL", "r", NULL, 0, FZP_F32, 2, dims, FZP_REL, 1e-3, "must not be NULL"},
        {"run ..", "..", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, "run \"..\""},
        {"run slash", "a/b", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, "run \"a/b\""},
        {"var empty", "r", "", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, "var \"\""},
        {"step", "r", "v", 1000000000000ULL, FZP_F32, 2, dims, FZP_REL, 1e-3, "step 1000000000000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s = (fzp_snapshot *)1;
        int rc = fzp_begin(p, cases[i].run, cases[i].var, cases[i].step, cases[i].dtype, cases[i].ndims, cases[i].dims,
                           cases[i].mode, cases[i].bound, NULL, &s, &data);
        CHECK(rc == FZP_EINVAL, "%s: status %d (%s)", cases[i].what, rc, fzp_errmsg(p));
        CHECK(strcmp(fzp_errcode(p), "invalid") == 0, "%s: code %s", cases[i].what, fzp_errcode(p));
        CHECK(strstr(fzp_errmsg(p), cases[i].needle) != NULL, "%s: message \"%s\" lacks \"%s\"", cases[i].what,
              fzp_errmsg(p), cases[i].needle);
        CHECK(s == NULL, "%s: snapshot handed out", cases[i].what);
    }
    uint64_t huge[4] = {1ULL << 20, 1ULL << 20, 1ULL << 20, 2};
    CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 4, huge, FZP_REL, 1e-3, NULL, &s, &data), FZP_EINVAL);
    CHECK_MSG(p, "2^59");
    double bigfill = 1e300;
    CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, &bigfill, &s, &data), FZP_EINVAL);
    CHECK_MSG(p, "float32 range");
    /* dims not matching the buffer's size for this dtype */
    float buf[16];
    CHECK_RC(p, fzp_publish_copy(p, "r", "v", 0, FZP_F64, 2, dims, FZP_REL, 1e-3, NULL, buf, sizeof buf, &s), FZP_EINVAL);
    CHECK_MSG(p, "buffer is 64 bytes but dims [4,4] of f64 need 128 bytes");
    CHECK(s == NULL, "snapshot handed out");
    CHECK_RC(p, fzp_publish_copy(p, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, NULL, 64, &s), FZP_EINVAL);
    /* wait on an unpublished snapshot; abort gives it back */
    CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, &s, &data), FZP_OK);
    fzp_result r;
    CHECK_RC(p, fzp_wait(p, s, 100, &r), FZP_ESTATE);
    CHECK_MSG(p, "was not published");
    CHECK(count_segments("ctest-bad") == 1, "segment missing");
    CHECK_RC(p, fzp_abort(p, s), FZP_OK);
    CHECK(count_segments("ctest-bad") == 0, "abort left the segment");
    /* a snapshot of another producer */
    fzp_producer *q = t_connect(url, shm, "ctest-bad2", NULL);
    CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, &s, &data), FZP_OK);
    CHECK_RC(q, fzp_publish(q, s), FZP_EINVAL);
    CHECK_MSG(q, "another producer");
    fzp_close(q);
    /* close frees the unpublished snapshot and gives its lease back */
    fzp_close(p);
    CHECK(count_segments("ctest-bad") == 0, "close left the segment");

    /* An shm dir that cannot be created: FZP_ESYS naming the path, and the
     * admission is given back. */
    char file[] = "/tmp/fzp-notadir-XXXXXX";
    int fd = mkstemp(file);
    close(fd);
    char notdir[128];
    snprintf(notdir, sizeof notdir, "%s/shm", file);
    char user[512], pass[512];
    fzp_producer *u = fzp_new();
    fzp_set(u, "url", url);
    fzp_set(u, "shm_dir", notdir);
    fzp_set(u, "id", "ctest-unwritable");
    if (read_auth(user, pass, sizeof user)) {
        fzp_set(u, "user", user);
        fzp_set(u, "password", pass);
    }
    CHECK_RC(u, fzp_connect(u), FZP_OK);
    CHECK_RC(u, fzp_begin(u, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, &s, &data), FZP_ESYS);
    CHECK_MSG(u, notdir);
    CHECK(strcmp(fzp_errcode(u), "system") == 0, "code %s", fzp_errcode(u));
    int64_t used = -1;
    /* The release is fire-and-forget, on another subject than the status
     * request: a loaded sidecar may read it after several status requests. */
    for (double t0 = t_now(); t_now() - t0 < 30.0;) {
        CHECK_RC(u, fzp_status(u, 5000, NULL, &used, NULL, NULL), FZP_OK);
        if (used == 0)
            break;
        usleep(20000);
    }
    CHECK(used == 0, "budget still holds %lld bytes after a failed begin", (long long)used);
    fzp_close(u);
    unlink(file);
}

static void reuse(void) {
    fzp_producer *p = t_connect(url, shm, "ctest-reuse", "reuse_segments", "1", NULL);
    uint64_t dims[1] = {1024};
    fzp_result r;
    for (int step = 0; step < 3; step++) {
        fzp_snapshot *s;
        void *data;
        CHECK_RC(p, fzp_begin(p, "ctest", "reuse", (uint64_t)step, FZP_F64, 1, dims, FZP_ABS, 1e-6, NULL, &s, &data), FZP_OK);
        double *d = data;
        CHECK(fzp_snapshot_reused(s) == (step > 0), "step %d reused=%d", step, fzp_snapshot_reused(s));
        if (step > 0)
            CHECK(d[5] == 5.0 + 1000.0 * (step - 1), "reused segment lost its bytes: %g", d[5]);
        for (int i = 0; i < 1024; i++)
            d[i] = i + 1000.0 * step;
        CHECK_RC(p, fzp_publish(p, s), FZP_OK);
        CHECK_RC(p, fzp_wait(p, s, 60000, &r), FZP_OK);
        CHECK(r.max_abs_err <= 1e-6, "err %g", r.max_abs_err);
        fzp_snapshot_free(p, s);
        CHECK(count_segments("ctest-reuse") == 1, "spare segment count %d", count_segments("ctest-reuse"));
    }
    /* poll before the result: ETIMEOUT at once, then the result */
    fzp_snapshot *s;
    void *data;
    CHECK_RC(p, fzp_begin(p, "ctest", "reuse", 99, FZP_F64, 1, dims, FZP_ABS, 1e-6, NULL, &s, &data), FZP_OK);
    CHECK_RC(p, fzp_publish(p, s), FZP_OK);
    double t0 = t_now();
    int rc = fzp_poll(p, s, &r);
    CHECK(rc == FZP_OK || rc == FZP_ETIMEOUT, "poll %d", rc);
    CHECK(t_now() - t0 < 1.0, "poll took %.2f s", t_now() - t0);
    CHECK_RC(p, fzp_wait(p, s, 60000, &r), FZP_OK);
    fzp_close(p); /* frees s and removes the spare */
    CHECK(count_segments("ctest-reuse") == 0, "close left spare segments");
}

/* A result missed by the live subscription (as while reconnecting) is found
 * in the result stream: direct get, 404 until it is stored. */
static void fallback(void) {
    fzp_producer *p = t_connect(url, shm, "ctest-fallback", "test_ignore_live_results", "1", "poll_interval_ms", "150", NULL);
    uint64_t dims[1] = {4096};
    for (int k = 0; k < 3; k++) {
        fzp_snapshot *s;
        void *data;
        CHECK_RC(p, fzp_begin(p, "ctest", "fallback", (uint64_t)k, FZP_F32, 1, dims, FZP_ABS, 1e-3, NULL, &s, &data), FZP_OK);
        for (int i = 0; i < 4096; i++)
            ((float *)data)[i] = (float)(i % 97) * 0.5f;
        CHECK_RC(p, fzp_publish(p, s), FZP_OK);
        fzp_result r;
        CHECK_RC(p, fzp_wait(p, s, 30000, &r), FZP_OK);
        char key[100];
        snprintf(key, sizeof key, "ctest/fallback/%012d.fz", k);
        CHECK(r.ok && strcmp(r.key, key) == 0, "key %s", r.key);
        fzp_snapshot_free(p, s);
    }
    fzp_close(p);
}

/* The longest producer id still yields protocol-valid message ids. */
static void long_id(void) {
    char id[129];
    memset(id, 'x', 128);
    id[128] = 0;
    fzp_producer *p = t_connect(url, shm, id, NULL);
    uint64_t dims[1] = {16};
    float v[16] = {0};
    fzp_snapshot *s;
    CHECK_RC(p, fzp_publish_copy(p, "ctest", "longid", 0, FZP_F32, 1, dims, FZP_ABS, 1, NULL, v, sizeof v, &s), FZP_OK);
    CHECK(strlen(fzp_snapshot_msg_id(s)) <= 128, "msg_id of %zu characters", strlen(fzp_snapshot_msg_id(s)));
    fzp_result r;
    CHECK_RC(p, fzp_wait(p, s, 60000, &r), FZP_OK);
    fzp_close(p);
}

/* A credentials file with a wrong password: refused at once, naming the
 * file (only where the sidecar runs with local trust and wrote one). */
static void wrong_password(void) {
    char user[512], pass[512];
    if (!read_auth(user, pass, sizeof user)) {
        printf("note: the sidecar wrote no credentials file (no local trust): wrong-password check not applicable\n");
        return;
    }
    char dir[] = "/tmp/fzp-wrongpw-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[300];
    snprintf(path, sizeof path, "%s/.fzsidecar-auth", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "v=1\nurl=%s\nuser=%s\npassword=not-%s\n", url, user, pass);
    fclose(f);
    chmod(path, 0600);
    fzp_producer *p = fzp_new();
    fzp_set(p, "shm_dir", dir);
    /* A retrying producer would give up only at the connect timeout: 20 s,
     * well above the bound, which leaves a loaded machine room. */
    fzp_set(p, "connect_timeout_ms", "20000");
    double t0 = t_now();
    CHECK_RC(p, fzp_connect(p), FZP_ECONNECT);
    CHECK(t_now() - t0 < 10.0, "refusal took %.1f s: wrong credentials must not be retried", t_now() - t0);
    CHECK(strcmp(fzp_errcode(p), "refused") == 0, "code %s", fzp_errcode(p));
    CHECK_MSG(p, path);
    fzp_close(p);
    /* and no credentials at all against a server that requires them */
    unlink(path);
    p = fzp_new();
    fzp_set(p, "shm_dir", dir);
    fzp_set(p, "url", url);
    fzp_set(p, "connect_timeout_ms", "5000");
    CHECK_RC(p, fzp_connect(p), FZP_ECONNECT);
    CHECK_MSG(p, "no credentials given");
    fzp_close(p);
    rmdir(dir);
}

/* Two producers in one process, each in its own thread. */
static void *worker(void *arg) {
    const char *id = arg;
    fzp_producer *p = t_connect(url, shm, id, NULL);
    uint64_t dims[2] = {32, 32};
    fzp_snapshot *s[5];
    for (int k = 0; k < 5; k++) {
        void *data;
        CHECK_RC(p, fzp_begin(p, id, "t", (uint64_t)k, FZP_F32, 2, dims, FZP_ABS, 1e-2, NULL, &s[k], &data), FZP_OK);
        if (!s[k])
            continue;
        float *f = data;
        for (int i = 0; i < 32 * 32; i++)
            f[i] = (float)(i * (k + 1)) * 0.01f;
        CHECK_RC(p, fzp_publish(p, s[k]), FZP_OK);
    }
    for (int k = 0; k < 5; k++) {
        fzp_result r;
        if (!s[k])
            continue;
        CHECK_RC(p, fzp_wait(p, s[k], 60000, &r), FZP_OK);
        char key[200];
        snprintf(key, sizeof key, "%s/t/%012d.fz", id, k);
        CHECK(strcmp(r.key, key) == 0, "key %s want %s", r.key, key);
        fzp_snapshot_free(p, s[k]);
    }
    fzp_close(p);
    return NULL;
}

/* Two producers of one process given no id got the same <host>-<pid>
 * (QA): the second default carries a per-process counter. */
static void default_ids(void) {
    fzp_producer *a = t_connect(url, shm, NULL, NULL), *b = t_connect(url, shm, NULL, NULL);
    char pid[32];
    snprintf(pid, sizeof pid, "-%ld", (long)getpid());
    CHECK(strcmp(fzp_id(a), fzp_id(b)) != 0, "two producers without an id share %s", fzp_id(a));
    size_t la = strlen(fzp_id(a)), lp = strlen(pid);
    CHECK(la > lp && strcmp(fzp_id(a) + la - lp, pid) == 0, "first default id %s: expected <host>%s", fzp_id(a), pid);
    CHECK(strstr(fzp_id(b), pid) != NULL, "second default id %s: expected <host>%s-<n>", fzp_id(b), pid);
    fzp_close(a);
    fzp_close(b);
}

int main(void) {
    url = t_env_or_skip("FZ_TEST_URL");
    shm = t_env_or_skip("FZ_TEST_SHM_DIR");
    roundtrip();
    default_ids();
    bad_input();
    reuse();
    fallback();
    long_id();
    wrong_password();
    pthread_t a, b;
    pthread_create(&a, NULL, worker, "ctest-thread-a");
    pthread_create(&b, NULL, worker, "ctest-thread-b");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return t_done("test_sidecar");
}
