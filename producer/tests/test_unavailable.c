/* test_unavailable.c — a NATS server without a sidecar (FZ_TEST_BARE_URL):
 * fzp_begin reports "unavailable" within its timeout under both policies. */
#include <unistd.h>

#include "testutil.h"

int main(void) {
    const char *url = t_env_or_skip("FZ_TEST_BARE_URL");
    char shm[] = "/tmp/fzp-bare-XXXXXX";
    if (!mkdtemp(shm))
        return 1;
    uint64_t dims[1] = {16};
    fzp_snapshot *s;
    void *data;
    const char *policies[] = {"fail", "block"};
    for (int i = 0; i < 2; i++) {
        fzp_producer *p = t_connect(url, shm, "ctest-bare", "policy", policies[i], "block_timeout_ms", "1000",
                                    "request_timeout_ms", "1000", NULL);
        double t0 = t_now();
        CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 1, dims, FZP_ABS, 1, NULL, &s, &data), FZP_EUNAVAILABLE);
        double took = t_now() - t0;
        CHECK(took < 4.0, "%s: gave up after %.2f s (timeouts 1 s)", policies[i], took);
        CHECK(strcmp(fzp_errcode(p), "unavailable") == 0, "code %s", fzp_errcode(p));
        CHECK_MSG(p, "no sidecar answered");
        int64_t b;
        CHECK_RC(p, fzp_status(p, 500, &b, NULL, NULL, NULL), FZP_EUNAVAILABLE);
        fzp_close(p);
    }
    rmdir(shm);
    return t_done("test_unavailable");
}
