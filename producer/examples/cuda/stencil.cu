// stencil: a 2-D heat-equation mini-app that keeps its field on the GPU and
// hands snapshots to fzsidecar without copying them to the host
// (fzp_publish_device: CUDA IPC; docs/PRODUCERS.md, GPU-resident snapshots).
//
//   stencil [--nx N] [--ny N] [--steps N] [--every N] [--bound B] [--run NAME]
//           [--shm-dir DIR] [--url URL] [--dump DIR]  (also write each published field to DIR/step-<step>.raw)
//
// The simulation runs on a high-priority stream; each output step copies
// the field into a snapshot buffer (device to device) and publishes that,
// so the simulation carries on while the sidecar reads it. The snapshot
// buffer is reused once the previous snapshot's result has arrived: the
// time blocked there is the simulation's stall.
#include <cuda_runtime.h>
#include <math.h>
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

__global__ void init(float *u, int nx, int ny) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    float fx = (float)x / nx, fy = (float)y / ny;
    u[(size_t)y * nx + x] = 300.0f + 50.0f * expf(-40.0f * ((fx - 0.3f) * (fx - 0.3f) + (fy - 0.6f) * (fy - 0.6f))) +
                            10.0f * sinf(6.0f * fx) * cosf(4.0f * fy);
}

__global__ void step(const float *u, float *v, int nx, int ny, float a) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t i = (size_t)y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        v[i] = u[i];
        return;
    }
    v[i] = u[i] + a * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] - 4.0f * u[i]);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int nx = 4096, ny = 4096, steps = 200, every = 20;
    double bound = 1e-3;
    const char *run = "stencil", *dump = NULL, *shm = NULL, *url = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--nx")) nx = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ny")) ny = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--every")) every = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bound")) bound = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--run")) run = argv[i + 1];
        else if (!strcmp(argv[i], "--dump")) dump = argv[i + 1];
        else if (!strcmp(argv[i], "--shm-dir")) shm = argv[i + 1];
        else if (!strcmp(argv[i], "--url")) url = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int lo, hi;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t st;
    CK(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, hi)); // the simulation goes first
    size_t n = (size_t)nx * ny, bytes = n * sizeof(float);
    float *u, *v, *snap;
    CK(cudaMalloc(&u, bytes));
    CK(cudaMalloc(&v, bytes));
    CK(cudaMalloc(&snap, bytes));
    dim3 b(32, 8), g((nx + 31) / 32, (ny + 7) / 8);
    init<<<g, b, 0, st>>>(u, nx, ny);
    CK(cudaGetLastError());

    fzp_producer *p = fzp_new();
    if (p && shm) fzp_set(p, "shm_dir", shm);
    if (p && url) fzp_set(p, "url", url);
    if (!p || fzp_connect(p) != FZP_OK) {
        fprintf(stderr, "connect: %s\n", fzp_errmsg(p));
        return 1;
    }
    uint64_t dims[2] = {(uint64_t)ny, (uint64_t)nx};
    fzp_snapshot *pending = NULL;
    double t_pub = 0, stall = 0, lat_sum = 0, t0 = now();
    int published = 0, failed = 0;
    float *host = dump ? (float *)malloc(bytes) : NULL;
    for (int s = 1; s <= steps; s++) {
        step<<<g, b, 0, st>>>(u, v, nx, ny, 0.2f);
        CK(cudaGetLastError());
        float *t = u;
        u = v;
        v = t;
        if (s % every)
            continue;
        if (pending) { // the snapshot buffer is reusable once its result is in
            double w = now();
            fzp_result r;
            int rc = fzp_wait(p, pending, -1, &r);
            stall += now() - w;
            lat_sum += now() - t_pub;
            if (rc != FZP_OK) {
                fprintf(stderr, "step %s: %s\n", r.msg_id, fzp_errmsg(p));
                failed++;
            } else {
                printf("stored step %llu key %s ratio %.1f max_err %.3g (bound %.3g)\n", (unsigned long long)r.step, r.key, r.ratio,
                       r.max_abs_err, r.abs_eb);
            }
            fzp_snapshot_free(p, pending);
            pending = NULL;
        }
        CK(cudaMemcpyAsync(snap, u, bytes, cudaMemcpyDeviceToDevice, st));
        t_pub = now();
        if (fzp_publish_device(p, run, "temperature", (uint64_t)s, FZP_F32, 2, dims, FZP_REL, bound, NULL, snap, bytes, st,
                               &pending) != FZP_OK) {
            fprintf(stderr, "publish step %d: %s (%s)\n", s, fzp_errmsg(p), fzp_errcode(p));
            failed++;
            pending = NULL;
            continue;
        }
        published++;
        if (host) {
            char path[4096];
            CK(cudaMemcpyAsync(host, snap, bytes, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            snprintf(path, sizeof path, "%s/step-%d.raw", dump, s);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(host, 1, bytes, f) != bytes) {
                fprintf(stderr, "write %s failed\n", path);
                return 1;
            }
            fclose(f);
        }
    }
    if (pending) {
        double w = now();
        fzp_result r;
        int rc = fzp_wait(p, pending, -1, &r);
        stall += now() - w;
        lat_sum += now() - t_pub;
        if (rc != FZP_OK) {
            fprintf(stderr, "last: %s\n", fzp_errmsg(p));
            failed++;
        } else {
            printf("stored step %llu key %s ratio %.1f max_err %.3g (bound %.3g)\n", (unsigned long long)r.step, r.key, r.ratio,
                       r.max_abs_err, r.abs_eb);
        }
        fzp_snapshot_free(p, pending);
    }
    CK(cudaStreamSynchronize(st));
    double wall = now() - t0;
    printf("stencil %dx%d: %d steps in %.3f s, %d snapshots of %.1f MB published, %d failed; stall %.3f ms/snapshot, "
           "publish-to-result %.3f ms\n",
           nx, ny, steps, wall, published, bytes / 1e6, failed, published ? stall * 1e3 / published : 0,
           published ? lat_sum * 1e3 / published : 0);
    fzp_close(p);
    return failed ? 1 : 0;
}
