/* test_api.c — argument checking and failures that need no sidecar: NULL
 * pointers, bad options, wrong call order, no server (an error within the
 * timeout), the local-trust credentials file. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static void write_file(const char *path, const char *text) {
    unlink(path);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    chmod(path, 0600);
}

/* A connect that must fail at once on the credentials file, naming why. */
static void refused(const char *shm, const char *needle) {
    fzp_producer *p = fzp_new();
    fzp_set(p, "shm_dir", shm);
    fzp_set(p, "connect_timeout_ms", "300");
    CHECK_RC(p, fzp_connect(p), FZP_ECONNECT);
    CHECK(strcmp(fzp_errcode(p), "refused") == 0, "code %s", fzp_errcode(p));
    CHECK_MSG(p, needle);
    fzp_close(p);
}

int main(void) {
    /* NULL producer: status codes, never a crash. */
    CHECK(fzp_errmsg(NULL) != NULL && strlen(fzp_errmsg(NULL)) > 0, "errmsg(NULL)");
    CHECK(fzp_set(NULL, "url", "x") == FZP_EINVAL, "set NULL");
    CHECK(fzp_connect(NULL) == FZP_EINVAL, "connect NULL");
    uint64_t dims[2] = {4, 4};
    fzp_snapshot *s = NULL;
    void *data = NULL;
    CHECK(fzp_begin(NULL, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, &s, &data) == FZP_EINVAL, "begin NULL");
    CHECK(fzp_publish(NULL, NULL) == FZP_EINVAL, "publish NULL");
    CHECK(fzp_wait(NULL, NULL, 0, NULL) == FZP_EINVAL, "wait NULL");
    CHECK(fzp_abort(NULL, NULL) == FZP_EINVAL, "abort NULL");
    CHECK(fzp_snapshot_data(NULL, NULL, NULL) == FZP_EINVAL, "data NULL");
    CHECK(fzp_status(NULL, 0, NULL, NULL, NULL, NULL) == FZP_EINVAL, "status NULL");
    fzp_snapshot_free(NULL, NULL);
    fzp_close(NULL);
    CHECK(strlen(fzp_version()) > 0, "version");

    fzp_producer *p = fzp_new();
    fzp_producer *q = fzp_new();
    CHECK(p && q, "fzp_new");
    CHECK_RC(p, fzp_set(p, NULL, "x"), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "url", NULL), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "colour", "blue"), FZP_EINVAL);
    CHECK_MSG(p, "unknown option \"colour\"");
    CHECK(strcmp(fzp_errcode(p), "invalid") == 0, "code %s", fzp_errcode(p));
    CHECK_RC(p, fzp_set(p, "policy", "sometimes"), FZP_EINVAL);
    CHECK_MSG(p, "expected block or fail");
    CHECK_RC(p, fzp_set(p, "id", "has.dot"), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "id", ""), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "prefix", "a b"), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "block_timeout_ms", "soon"), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "block_timeout_ms", "-5"), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "poll_interval_ms", "0"), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "reuse_segments", "99999"), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "shm_dir", ""), FZP_EINVAL);
    CHECK_RC(p, fzp_set(p, "nkey", "/x"), FZP_EINVAL);
    /* Errors are per producer: q is untouched by p's. */
    CHECK(strcmp(fzp_errmsg(q), "") == 0, "q's message: %s", fzp_errmsg(q));
    CHECK_RC(p, fzp_set(p, "policy", "fail"), FZP_OK);
    CHECK(strcmp(fzp_errmsg(p), "") == 0, "message cleared on success");

    /* Call order. */
    CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, &s, &data), FZP_ESTATE);
    CHECK(s == NULL && data == NULL, "outputs cleared on failure");
    CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, NULL, &data), FZP_EINVAL);
    CHECK_RC(p, fzp_publish(p, NULL), FZP_EINVAL);
    CHECK_RC(p, fzp_wait(p, NULL, 10, NULL), FZP_EINVAL);
    CHECK_RC(p, fzp_status(p, 100, NULL, NULL, NULL, NULL), FZP_ESTATE);

    /* No server: an error within the connect timeout, not a hang. */
    char shm[] = "/tmp/fzp-api-XXXXXX";
    CHECK(mkdtemp(shm) != NULL, "mkdtemp");
    CHECK_RC(p, fzp_set(p, "url", "nats://127.0.0.1:1"), FZP_OK);
    CHECK_RC(p, fzp_set(p, "shm_dir", shm), FZP_OK);
    CHECK_RC(p, fzp_set(p, "connect_timeout_ms", "700"), FZP_OK);
    double t0 = t_now();
    CHECK_RC(p, fzp_connect(p), FZP_ECONNECT);
    double took = t_now() - t0;
    CHECK(took < 5.0, "connect gave up after %.1f s, want < 5 s (timeout 0.7 s)", took);
    CHECK(strcmp(fzp_errcode(p), "unavailable") == 0, "code %s", fzp_errcode(p));
    CHECK_MSG(p, "nats://127.0.0.1:1");
    fzp_close(p);
    /* A password in the URL never reaches a message. */
    p = fzp_new();
    fzp_set(p, "url", "nats://127.0.0.1:1,nats://u:hunter2@127.0.0.1:5");
    fzp_set(p, "shm_dir", shm);
    fzp_set(p, "connect_timeout_ms", "200");
    CHECK_RC(p, fzp_connect(p), FZP_ECONNECT);
    CHECK(strstr(fzp_errmsg(p), "hunter2") == NULL, "password in message: %s", fzp_errmsg(p));
    CHECK_MSG(p, "nats://***@127.0.0.1:5");
    fzp_close(p);

    /* Local trust: with no credentials the producer reads <shm>/.fzsidecar-auth,
     * including its url (here a closed port, which the message names). */
    char auth[300];
    snprintf(auth, sizeof auth, "%s/.fzsidecar-auth", shm);
    write_file(auth, "# fzsidecar producer credentials\nv=1\nurl=nats://127.0.0.1:2\nuser=producer\npassword=secret\nprefix=fz\nfuture=ignored\n");
    p = fzp_new();
    fzp_set(p, "shm_dir", shm);
    fzp_set(p, "connect_timeout_ms", "300");
    CHECK_RC(p, fzp_connect(p), FZP_ECONNECT);
    CHECK_MSG(p, "nats://127.0.0.1:2");
    CHECK(strstr(fzp_errmsg(p), "secret") == NULL, "password leaked into the message: %s", fzp_errmsg(p));
    fzp_close(p);
    /* Caller's url wins over the file's. */
    p = fzp_new();
    fzp_set(p, "shm_dir", shm);
    fzp_set(p, "url", "nats://127.0.0.1:3");
    fzp_set(p, "connect_timeout_ms", "300");
    CHECK_RC(p, fzp_connect(p), FZP_ECONNECT);
    CHECK_MSG(p, "nats://127.0.0.1:3");
    fzp_close(p);
    /* Refused with a reason (docs/PROTOCOL.md section 1): an unknown
     * version, group/other permission bits, a symbolic link, another owner. */
    write_file(auth, "v=2\nuser=x\n");
    refused(shm, "version 2");
    write_file(auth, "v=1\nurl=nats://127.0.0.1:2\nuser=producer\npassword=x\n");
    chmod(auth, 0644);
    refused(shm, "mode 0644");
    chmod(auth, 0600);
    char real[320];
    snprintf(real, sizeof real, "%s/real-auth", shm);
    rename(auth, real);
    CHECK(symlink(real, auth) == 0, "symlink");
    refused(shm, "symbolic link");
    unlink(auth);
    rename(real, auth);
    if (geteuid() == 0) { /* only root can give a file away */
        CHECK(chown(auth, 65534, 65534) == 0, "chown");
        refused(shm, "owned by uid 65534");
    }
    unlink(auth);

    /* A shm dir that is a file cannot hold segments; fzp_begin would say
     * so (tested with a sidecar in test_sidecar); options accept it. */
    fzp_close(q);
    rmdir(shm);
    return t_done("test_api");
}
