/* test_enospc.c — a segment that does not fit its filesystem fails at
 * fzp_begin with FZP_ESYS (fallocate's ENOSPC), never with SIGBUS while the
 * simulation writes. Run by producer_test.go (TestNoSpace) with
 * FZ_TEST_FULL_DIR on a 1 MiB tmpfs it mounts; the segments there are
 * never published (the sidecar's shm dir is elsewhere). */
#include <unistd.h>

#include "testutil.h"

int main(void) {
    const char *url = t_env_or_skip("FZ_TEST_URL");
    const char *shm = t_env_or_skip("FZ_TEST_SHM_DIR");
    const char *full = t_env_or_skip("FZ_TEST_FULL_DIR");
    char path[1024], line[1024], user[512] = "", pass[512] = "";
    snprintf(path, sizeof path, "%s/.fzsidecar-auth", shm);
    FILE *f = fopen(path, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = 0;
            if (!strncmp(line, "user=", 5)) snprintf(user, sizeof user, "%s", line + 5);
            if (!strncmp(line, "password=", 9)) snprintf(pass, sizeof pass, "%s", line + 9);
        }
        fclose(f);
    }
    fzp_producer *p = user[0] ? t_connect(url, full, "ctest-enospc", "user", user, "password", pass, NULL)
                              : t_connect(url, full, "ctest-enospc", NULL);
    uint64_t half[1] = {512 * 1024 / 4}, more[1] = {768 * 1024 / 4};
    fzp_snapshot *a, *b;
    void *data;
    CHECK_RC(p, fzp_begin(p, "r", "v", 0, FZP_F32, 1, half, FZP_ABS, 1, NULL, &a, &data), FZP_OK);
    if (a)
        memset(data, 0x3f, 512 * 1024); /* every page is reserved: no SIGBUS */
    CHECK_RC(p, fzp_begin(p, "r", "v", 1, FZP_F32, 1, more, FZP_ABS, 1, NULL, &b, &data), FZP_ESYS);
    CHECK(strcmp(fzp_errcode(p), "system") == 0, "code %s", fzp_errcode(p));
    CHECK_MSG(p, "filesystem is full");
    CHECK_MSG(p, full);
    CHECK(b == NULL, "snapshot handed out");
    /* the failed begin gave its admission back: only a's bytes are held. The
     * release is fire-and-forget, on another subject than the status
     * request: a loaded sidecar may read it after several status requests. */
    int64_t used = -1;
    for (double t0 = t_now(); t_now() - t0 < 30.0;) {
        CHECK_RC(p, fzp_status(p, 5000, NULL, &used, NULL, NULL), FZP_OK);
        if (used == 512 * 1024)
            break;
        usleep(20000);
    }
    CHECK(used == 512 * 1024, "budget holds %lld bytes, want %d", (long long)used, 512 * 1024);
    CHECK_RC(p, fzp_abort(p, a), FZP_OK);
    fzp_close(p);
    return t_done("test_enospc");
}
