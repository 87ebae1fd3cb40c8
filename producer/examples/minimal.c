/* minimal.c — the shortest complete producer: one 2-D field written in place. */
#include <stdio.h>

#include "fzproducer.h"

int main(int argc, char **argv) {
    fzp_producer *p = fzp_new();
    if (argc > 1) fzp_set(p, "url", argv[1]);     /* default nats://127.0.0.1:4222 */
    if (argc > 2) fzp_set(p, "shm_dir", argv[2]); /* default /dev/shm/fzsidecar */
    if (fzp_connect(p) != FZP_OK) {
        fprintf(stderr, "%s\n", fzp_errmsg(p));
        fzp_close(p);
        return 1;
    }
    uint64_t dims[2] = {100, 200}; /* slowest -> fastest: f[j][i] */
    fzp_snapshot *s;
    void *data;
    fzp_result r;
    int rc = fzp_begin(p, "minimal-c", "field", 0, FZP_F32, 2, dims, FZP_REL, 1e-3, NULL, &s, &data);
    if (rc == FZP_OK) {
        float *f = data; /* the shared-memory segment */
        for (int j = 0; j < 100; j++)
            for (int i = 0; i < 200; i++)
                f[j * 200 + i] = (float)(i * j);
        rc = fzp_publish(p, s);
        if (rc == FZP_OK)
            rc = fzp_wait(p, s, 60000, &r);
        fzp_snapshot_free(p, s);
    }
    if (rc == FZP_OK)
        printf("stored %s: ratio %.1f, max error %g (bound %g)\n", r.key, r.ratio, r.max_abs_err, r.abs_eb);
    else
        fprintf(stderr, "[%s] %s\n", fzp_errcode(p), fzp_errmsg(p));
    fzp_close(p);
    return rc == FZP_OK ? 0 : 1;
}
