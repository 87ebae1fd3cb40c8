// What hostprobe.cu and loadprobe.cu share: a CUDA error check that exits,
// a wall clock, a median, a file-backed read-only mapping.
#pragma once
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// A file of n bytes in dir, written through a writable mapping by fill(w),
// then mapped read-only (as a simulation's snapshot is). The file is
// unlinked at once: the mapping keeps the pages.
template <typename Fill>
static char *mapped_file(const char *dir, const char *name, int i, size_t n, Fill fill) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%d", dir, name, i);
    unlink(path);
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, n)) perror(path), exit(1);
    char *w = (char *)mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    fill(w);
    munmap(w, n);
    char *m = (char *)mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    unlink(path);
    return m;
}
