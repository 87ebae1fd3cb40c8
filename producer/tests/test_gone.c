/* test_gone.c — the sidecar (and its embedded NATS server) disappears for
 * good while producers are connected: every call ends with an error within
 * its configured timeout, never a hang. Run by producer_test.go
 * (TestSidecarGone), which kills the sidecar when this program prints
 * "KILL ME" and then answers with a line on stdin. */
#include <unistd.h>

#include "testutil.h"

int main(void) {
    const char *url = t_env_or_skip("FZ_TEST_URL");
    const char *shm = t_env_or_skip("FZ_TEST_SHM_DIR");
    fzp_producer *blk = t_connect(url, shm, "ctest-gone-block", "block_timeout_ms", "1000", "publish_timeout_ms", "1500", NULL);
    fzp_producer *fl = t_connect(url, shm, "ctest-gone-fail", "policy", "fail", "request_timeout_ms", "1000", NULL);
    uint64_t dims[1] = {1024};
    fzp_snapshot *s1, *s2, *s3;
    void *data;
    fzp_result r;
    CHECK_RC(blk, fzp_begin(blk, "gone", "v", 1, FZP_F32, 1, dims, FZP_ABS, 1, NULL, &s1, &data), FZP_OK);
    memset(data, 0, 4096);
    CHECK_RC(blk, fzp_publish(blk, s1), FZP_OK);
    CHECK_RC(blk, fzp_wait(blk, s1, 30000, &r), FZP_OK);
    CHECK_RC(blk, fzp_begin(blk, "gone", "v", 2, FZP_F32, 1, dims, FZP_ABS, 1, NULL, &s2, &data), FZP_OK);
    memset(data, 0, 4096);

    printf("KILL ME\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 2;

    double t0 = t_now();
    CHECK_RC(blk, fzp_publish(blk, s2), FZP_EPUBLISH);
    CHECK(t_now() - t0 < 6.0, "publish gave up after %.1f s (publish_timeout 1.5 s)", t_now() - t0);
    CHECK(strcmp(fzp_errcode(blk), "unavailable") == 0, "publish code %s: %s", fzp_errcode(blk), fzp_errmsg(blk));
    CHECK_RC(blk, fzp_wait(blk, s2, 100, &r), FZP_ESTATE);

    t0 = t_now();
    CHECK_RC(blk, fzp_begin(blk, "gone", "v", 3, FZP_F32, 1, dims, FZP_ABS, 1, NULL, &s3, &data), FZP_EUNAVAILABLE);
    CHECK(t_now() - t0 < 4.0, "block begin gave up after %.1f s (block_timeout 1 s)", t_now() - t0);
    CHECK_MSG(blk, "no sidecar answered");

    t0 = t_now();
    CHECK_RC(fl, fzp_begin(fl, "gone", "v", 4, FZP_F32, 1, dims, FZP_ABS, 1, NULL, &s3, &data), FZP_EUNAVAILABLE);
    CHECK(t_now() - t0 < 3.0, "fail begin gave up after %.1f s (request_timeout 1 s)", t_now() - t0);

    t0 = t_now();
    CHECK_RC(fl, fzp_status(fl, 1000, NULL, NULL, NULL, NULL), FZP_EUNAVAILABLE);
    CHECK(t_now() - t0 < 3.0, "status gave up after %.1f s", t_now() - t0);

    t0 = t_now();
    fzp_close(blk);
    fzp_close(fl);
    CHECK(t_now() - t0 < 15.0, "close took %.1f s", t_now() - t0);
    return t_done("test_gone");
}
