// devbench: ingest throughput of GPU-resident snapshots (fzp_publish_device)
// against `fzsidecar serve --backend gpu`, with the pinned host-to-device
// bandwidth measured in the same run for comparison.
//
//   devbench [--size BYTES] [--buffers B] [--snapshots M] [--inflight K] [--warmup W] [--rel R] [--die]
//
// The field is the smooth bench field of `fzsidecar bench` (smooth3d: 256 x
// 1024 x size/4/(256*1024) float32, the same formula, computed on the GPU).
// B device buffers hold it; snapshots cycle through them with up to K
// published and not yet answered. Reported: bytes per second from the first
// publish to the last result, the pinned H2D rate, and per snapshot the
// time publish takes and publish-to-result (the producer's stall: the
// buffer is reusable once the result is in). --warmup W publishes W more
// snapshots first, at full concurrency and untimed, so the sidecar's pools
// (pinned blobs) reach their steady size. --die publishes one snapshot
// and kills itself (SIGKILL) at once: the sidecar must report it and go on.
#include <cuda_runtime.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fzproducer.h"

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

__global__ void smooth3d(float *f, unsigned long long nz, unsigned long long ny, unsigned long long nx) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nz * ny * nx) return;
    unsigned long long x = i % nx, y = (i / nx) % ny, z = i / (nx * ny);
    double fz = (double)z / nz, fy = (double)y / ny, fx = (double)x / nx;
    f[i] = (float)(sin(6 * fz + 1) * cos(9 * fy) + 0.5 * sin(13 * fx + 5 * fy) + fz * fx);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    unsigned long long size = 1ull << 30;
    int nbuf = 8, snaps = 64, inflight = 4, die = 0, warm = 0;
    double rel = 1e-3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--die")) { die = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--size")) size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--buffers")) nbuf = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--snapshots")) snaps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--inflight")) inflight = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup")) warm = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rel")) rel = atof(argv[++i]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    unsigned long long nz = 256, ny = 1024, nx = size / 4 / (256 * 1024);
    size = nz * ny * nx * 4;
    if (inflight > nbuf) inflight = nbuf;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float **buf = (float **)calloc(nbuf, sizeof *buf);
    for (int b = 0; b < nbuf; b++) {
        CK(cudaMalloc(&buf[b], size));
        smooth3d<<<(unsigned)((size / 4 + 255) / 256), 256, 0, st>>>(buf[b], nz, ny, nx);
        CK(cudaGetLastError());
    }
    CK(cudaStreamSynchronize(st));

    // pinned H2D in this run: median of 10 copies of min(size, 1 GiB)
    double h2d = 0;
    if (!die) {
        size_t hb = size < (1ull << 30) ? size : (1ull << 30);
        void *h;
        CK(cudaMallocHost(&h, hb));
        memset(h, 1, hb);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        double ms[10];
        for (int r = -2; r < 10; r++) {
            CK(cudaEventRecord(e0, st));
            CK(cudaMemcpyAsync(buf[0], h, hb, cudaMemcpyHostToDevice, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float m;
            CK(cudaEventElapsedTime(&m, e0, e1));
            if (r >= 0) ms[r] = m;
        }
        qsort(ms, 10, sizeof ms[0], cmpd);
        h2d = hb / (ms[5] / 1e3);
        CK(cudaFreeHost(h));
        smooth3d<<<(unsigned)((size / 4 + 255) / 256), 256, 0, st>>>(buf[0], nz, ny, nx); // restore the field
        CK(cudaStreamSynchronize(st));
    }

    fzp_producer *p = fzp_new();
    if (!p || fzp_connect(p) != FZP_OK) {
        fprintf(stderr, "connect: %s\n", fzp_errmsg(p));
        return 1;
    }
    uint64_t dims[3] = {nz, ny, nx};
    if (die) {
        fzp_snapshot *s;
        if (fzp_publish_device(p, "devbench", "die", 0, FZP_F32, 3, dims, FZP_REL, rel, NULL, buf[0], size, st, &s) != FZP_OK) {
            fprintf(stderr, "publish: %s\n", fzp_errmsg(p));
            return 1;
        }
        printf("published %s; killing myself\n", fzp_snapshot_msg_id(s));
        fflush(stdout);
        raise(SIGKILL);
    }
    // --warmup W: W more snapshots at full concurrency before the timed
    // ones (the sidecar's pools reach their steady size), not counted
    if (warm < 0) warm = 0;
    const int total = snaps + warm;
    fzp_snapshot **pend = (fzp_snapshot **)calloc(total, sizeof *pend);
    double *tpub = (double *)calloc(total, sizeof *tpub), *lat0 = (double *)calloc(total, sizeof *lat0);
    double *lat = lat0 + warm;  // the timed snapshots' latencies
    double pubsum = 0, t0 = 0, tend = 0;
    int failed = 0, next_wait = 0;
    double ratio = 0, maxerr = 0, abseb = 0, gpusum = 0;
    // warm-up: one snapshot per buffer (opens the IPC handles in the sidecar)
    for (int s = -nbuf; s < total; s++) {
        int idx = s < 0 ? s + nbuf : s;
        if (s == warm) t0 = now();
        if (s >= 0 && s - next_wait >= inflight) { // wait for the oldest
            fzp_result r;
            int rc = fzp_wait(p, pend[next_wait], -1, &r);
            lat0[next_wait] = now() - tpub[next_wait];
            if (rc != FZP_OK) { fprintf(stderr, "snapshot %d: %s\n", next_wait, fzp_errmsg(p)); failed++; }
            ratio = r.ratio, maxerr = r.max_abs_err, abseb = r.abs_eb;
            if (next_wait >= warm) gpusum += fzp_snapshot_gpu_seconds(pend[next_wait]);
            fzp_snapshot_free(p, pend[next_wait]);
            next_wait++;
        }
        double a = now();
        fzp_snapshot *sn;
        if (fzp_publish_device(p, "devbench", "smooth3d", (uint64_t)(s + nbuf), FZP_F32, 3, dims, FZP_REL, rel, NULL, buf[idx % nbuf],
                               size, st, &sn) != FZP_OK) {
            fprintf(stderr, "publish: %s (%s)\n", fzp_errmsg(p), fzp_errcode(p));
            return 1;
        }
        if (s < 0) { // warm-up: wait at once
            fzp_result r;
            if (fzp_wait(p, sn, -1, &r) != FZP_OK) { fprintf(stderr, "warm-up: %s\n", fzp_errmsg(p)); return 1; }
            fzp_snapshot_free(p, sn);
            continue;
        }
        if (s >= warm) pubsum += now() - a;
        tpub[s] = a;
        pend[s] = sn;
    }
    for (; next_wait < total; next_wait++) {
        fzp_result r;
        int rc = fzp_wait(p, pend[next_wait], -1, &r);
        lat0[next_wait] = now() - tpub[next_wait];
        if (rc != FZP_OK) { fprintf(stderr, "snapshot %d: %s\n", next_wait, fzp_errmsg(p)); failed++; }
        ratio = r.ratio, maxerr = r.max_abs_err, abseb = r.abs_eb;
        if (next_wait >= warm) gpusum += fzp_snapshot_gpu_seconds(pend[next_wait]);
        fzp_snapshot_free(p, pend[next_wait]);
    }
    tend = now();
    qsort(lat, snaps, sizeof lat[0], cmpd);
    double rate = (double)size * snaps / (tend - t0);
    printf("devbench: %d snapshots of %.0f MiB (smooth3d %llux%llux%llu f32, rel %g), %d buffers, %d in flight, %d failed, after %d untimed\n",
           snaps, size / 1048576.0, nz, ny, nx, rel, nbuf, inflight, failed, warm);
    printf("devbench: ratio %.1f max_err %.3g (abs bound %.3g)\n", ratio, maxerr, abseb);
    printf("devbench: ingest %.1f GB/s over %.3f s; pinned H2D %.1f GB/s; ingest/H2D %.2fx\n", rate / 1e9, tend - t0, h2d / 1e9,
           rate / h2d);
    printf("devbench: publish call %.3f ms/snapshot; publish-to-result (stall) p50 %.3f ms, p90 %.3f ms, max %.3f ms\n",
           pubsum * 1e3 / snaps, lat[snaps / 2] * 1e3, lat[snaps * 9 / 10] * 1e3, lat[snaps - 1] * 1e3);
    printf("devbench: the sidecar's GPU time per snapshot (results' gpu_seconds, fzp_snapshot_gpu_seconds) %.3f ms\n",
           gpusum * 1e3 / snaps);
    printf("DEVBENCH_JSON {\"ingest_Bps\":%.0f,\"h2d_Bps\":%.0f,\"wall_s\":%.6f,\"snapshots\":%d,\"bytes\":%llu,\"stall_p50_ms\":%.3f,"
           "\"stall_p90_ms\":%.3f,\"publish_ms\":%.3f,\"gpu_ms\":%.3f,\"failed\":%d}\n",
           rate, h2d, tend - t0, snaps, size, lat[snaps / 2] * 1e3, lat[snaps * 9 / 10] * 1e3, pubsum * 1e3 / snaps,
           gpusum * 1e3 / snaps, failed);
    fzp_close(p);
    return failed ? 1 : 0;
}
