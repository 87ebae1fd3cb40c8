/* test_lease.c — a fill slower than the admission lease, against a sidecar
 * with a 1 MiB budget and a 2 s lease (FZ_TEST_LEASE_URL,
 * FZ_TEST_LEASE_SHM_DIR): the library renews the lease while the snapshot
 * is begun, so another producer is not admitted into the bytes its segment
 * still occupies (the budget would run over); after the result no hold is
 * left (no renewal outlives the publish). */
#include <unistd.h>

#include "testutil.h"

int main(void) {
    const char *url = t_env_or_skip("FZ_TEST_LEASE_URL");
    const char *shm = t_env_or_skip("FZ_TEST_LEASE_SHM_DIR");
    fzp_producer *a = t_connect(url, shm, "ctest-slowfill", NULL);
    fzp_producer *b = t_connect(url, shm, "ctest-other", "policy", "fail", NULL);
    uint64_t big[1] = {768 * 1024 / 4}, half[1] = {512 * 1024 / 4};
    fzp_snapshot *s = NULL, *o = NULL;
    void *data, *odata;
    CHECK_RC(a, fzp_begin(a, "l", "v", 0, FZP_F32, 1, big, FZP_ABS, 1, NULL, &s, &data), FZP_OK);
    if (!s)
        return t_done("test_lease");
    /* The fill: two leases, so the lease must be renewed three times (every
     * half lease). The lease is 2 s, not shorter, so that a renewal delayed
     * on a loaded machine (the grant's answer, the renewer thread and the
     * sidecar reading it each late) still arrives before the lease ends. */
    for (int i = 0; i < 8; i++) {
        memset(data, i, 768 * 1024);
        usleep(500000);
    }
    CHECK_RC(b, fzp_begin(b, "l", "v", 1, FZP_F32, 1, half, FZP_ABS, 1, NULL, &o, &odata), FZP_EBUDGET);
    if (o) /* admitted into the begun snapshot's bytes: the lease lapsed */
        fzp_abort(b, o);
    CHECK_RC(a, fzp_publish(a, s), FZP_OK);
    fzp_result r;
    CHECK_RC(a, fzp_wait(a, s, 60000, &r), FZP_OK);
    fzp_snapshot_free(a, s);

    /* Longer than a renewal period: a renewal sent after the result would
     * show as a hold. */
    usleep(1500000);
    int64_t budget = 0, used = -1, holds = -1, in_flight = -1;
    CHECK_RC(a, fzp_status(a, 5000, &budget, &used, &holds, &in_flight), FZP_OK);
    CHECK(used == 0 && holds == 0, "after the result: %lld bytes in %lld holds, want none", (long long)used, (long long)holds);
    o = NULL;
    CHECK_RC(b, fzp_begin(b, "l", "v", 2, FZP_F32, 1, half, FZP_ABS, 1, NULL, &o, &odata), FZP_OK);
    if (o)
        CHECK_RC(b, fzp_abort(b, o), FZP_OK);
    fzp_close(a);
    fzp_close(b);
    return t_done("test_lease");
}
