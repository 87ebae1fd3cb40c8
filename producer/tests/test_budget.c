/* test_budget.c — admission against a sidecar with a 1 MiB budget
 * (FZ_TEST_SMALL_URL, FZ_TEST_SMALL_SHM_DIR): budget full under each
 * policy, room freed while blocking, a snapshot larger than the budget. */
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

static const char *url, *shm;

typedef struct {
    fzp_producer *p;
    fzp_snapshot *s;
} holder;

static void *abort_later(void *arg) {
    holder *h = arg;
    usleep(400000);
    fzp_abort(h->p, h->s);
    return NULL;
}

int main(void) {
    url = t_env_or_skip("FZ_TEST_SMALL_URL");
    shm = t_env_or_skip("FZ_TEST_SMALL_SHM_DIR");
    fzp_producer *hold = t_connect(url, shm, "ctest-hold", NULL);
    fzp_producer *fail = t_connect(url, shm, "ctest-fail", "policy", "fail", NULL);
    fzp_producer *block = t_connect(url, shm, "ctest-block", "policy", "block", "block_timeout_ms", "800", NULL);
    uint64_t big[1] = {768 * 1024 / 4}, half[1] = {512 * 1024 / 4}, huge[1] = {2 * 1024 * 1024 / 4};
    fzp_snapshot *h, *s;
    void *data;
    CHECK_RC(hold, fzp_begin(hold, "b", "v", 0, FZP_F32, 1, big, FZP_ABS, 1, NULL, &h, &data), FZP_OK);

    double t0 = t_now();
    CHECK_RC(fail, fzp_begin(fail, "b", "v", 1, FZP_F32, 1, half, FZP_ABS, 1, NULL, &s, &data), FZP_EBUDGET);
    CHECK(t_now() - t0 < 3.0, "fail policy took %.2f s", t_now() - t0);
    CHECK(strcmp(fzp_errcode(fail), "budget_full") == 0, "code %s", fzp_errcode(fail));
    CHECK_MSG(fail, "budget");
    CHECK(s == NULL, "snapshot handed out");

    t0 = t_now();
    CHECK_RC(block, fzp_begin(block, "b", "v", 2, FZP_F32, 1, half, FZP_ABS, 1, NULL, &s, &data), FZP_EBUDGET);
    double took = t_now() - t0;
    CHECK(took >= 0.7 && took < 8.0, "block policy (timeout 0.8 s) took %.2f s", took);
    CHECK(strcmp(fzp_errcode(block), "budget_full") == 0, "code %s", fzp_errcode(block));

    /* Larger than the whole budget: too_large under either policy, at once. */
    t0 = t_now();
    CHECK_RC(fail, fzp_begin(fail, "b", "v", 3, FZP_F32, 1, huge, FZP_ABS, 1, NULL, &s, &data), FZP_ESIDECAR);
    CHECK(strcmp(fzp_errcode(fail), "too_large") == 0, "code %s", fzp_errcode(fail));
    CHECK_RC(block, fzp_begin(block, "b", "v", 3, FZP_F32, 1, huge, FZP_ABS, 1, NULL, &s, &data), FZP_ESIDECAR);
    CHECK(strcmp(fzp_errcode(block), "too_large") == 0, "code %s", fzp_errcode(block));
    CHECK_MSG(block, "--budget");
    CHECK(t_now() - t0 < 3.0, "too_large took %.2f s", t_now() - t0);

    /* Blocking while another producer gives its room back: granted. */
    holder hd = {hold, h};
    pthread_t th;
    pthread_create(&th, NULL, abort_later, &hd);
    fzp_producer *patient = t_connect(url, shm, "ctest-patient", "block_timeout_ms", "20000", NULL);
    CHECK_RC(patient, fzp_begin(patient, "b", "v", 4, FZP_F32, 1, half, FZP_ABS, 1, NULL, &s, &data), FZP_OK);
    pthread_join(th, NULL);
    if (s) {
        memset(data, 0, 512 * 1024);
        CHECK_RC(patient, fzp_publish(patient, s), FZP_OK);
        fzp_result r;
        CHECK_RC(patient, fzp_wait(patient, s, 60000, &r), FZP_OK);
        fzp_snapshot_free(patient, s);
    }
    fzp_close(patient);
    fzp_close(hold);
    fzp_close(fail);
    fzp_close(block);
    return t_done("test_budget");
}
