// GPU-resident snapshots: open another process's device memory and events
// over CUDA IPC (fzgpu.h, ABI 6). Built into libfzgpu.so with fzgpu.cu.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "fzgpu.h"

// A failed IPC open leaves its error as the thread's last error, where a
// later launch check would find it: take it back out, return it.
static int ipc_fail(cudaError_t e) {
    (void)cudaGetLastError();
    return FZGPU_E_CUDA + (int)e;
}

#define CKI(x)                                  \
    do {                                        \
        cudaError_t e_ = (x);                   \
        if (e_ != cudaSuccess) return ipc_fail(e_); \
    } while (0)

// cuMemGetAddressRange from the driver, which is loaded anyway (the
// runtime is static and dlopens it): no link-time dependency on libcuda.
typedef int (*addr_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);
static addr_range_fn addr_range;
static pthread_once_t addr_once = PTHREAD_ONCE_INIT;
static void load_addr_range(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h) addr_range = (addr_range_fn)dlsym(h, "cuMemGetAddressRange_v2");
}

extern "C" int fzgpu_device_uuid(int device, uint8_t uuid[16]) {
    if (!uuid) return FZGPU_E_ARG;
    cudaDeviceProp p;
    CKI(cudaGetDeviceProperties(&p, device));
    memcpy(uuid, p.uuid.bytes, 16);
    return 0;
}

extern "C" int fzgpu_stream_create_priority(int device, int lowest, void **stream, int *priority) {
    if (!stream) return FZGPU_E_ARG;
    CKI(cudaSetDevice(device));
    int least = 0, greatest = 0;
    CKI(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    int prio = lowest ? least : greatest;
    CKI(cudaStreamCreateWithPriority((cudaStream_t *)stream, cudaStreamNonBlocking, prio));
    if (priority) *priority = prio;
    return 0;
}

extern "C" int fzgpu_ipc_open_mem(int device, const void *handle, void **base, uint64_t *size) {
    if (!handle || !base || !size) return FZGPU_E_ARG;
    *base = nullptr;
    *size = 0;
    CKI(cudaSetDevice(device));
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    void *p = nullptr;
    CKI(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice || a.device != device) {
        cudaIpcCloseMemHandle(p);
        (void)cudaGetLastError();
        return e != cudaSuccess ? FZGPU_E_CUDA + (int)e : FZGPU_E_WRONGDEVICE;
    }
    pthread_once(&addr_once, load_addr_range);
    unsigned long long b = 0;
    size_t n = 0;
    if (!addr_range || addr_range(&b, &n, (unsigned long long)(uintptr_t)p) != 0 || b != (uintptr_t)p) {
        cudaIpcCloseMemHandle(p);
        (void)cudaGetLastError();
        return FZGPU_E_CUDA + (int)cudaErrorInvalidValue;
    }
    *base = p;
    *size = n;
    return 0;
}

extern "C" int fzgpu_ipc_close_mem(int device, void *base) {
    CKI(cudaSetDevice(device));
    CKI(cudaIpcCloseMemHandle(base));
    return 0;
}

extern "C" int fzgpu_ipc_open_event(int device, const void *handle, void **ev) {
    if (!handle || !ev) return FZGPU_E_ARG;
    *ev = nullptr;
    CKI(cudaSetDevice(device));
    cudaIpcEventHandle_t h;
    memcpy(&h, handle, sizeof h);
    CKI(cudaIpcOpenEventHandle((cudaEvent_t *)ev, h));
    return 0;
}

extern "C" int fzgpu_event_query(int device, void *ev) {
    CKI(cudaSetDevice(device));
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return FZGPU_E_NOTREADY;
    }
    CKI(e);
    return 0;
}

// The producer's side, for tests and programs that link libfzgpu.
extern "C" int fzgpu_ipc_export_mem(int device, void *ptr, void *handle) {
    if (!ptr || !handle) return FZGPU_E_ARG;
    CKI(cudaSetDevice(device));
    cudaIpcMemHandle_t h;
    CKI(cudaIpcGetMemHandle(&h, ptr));
    memcpy(handle, &h, sizeof h);
    return 0;
}

extern "C" int fzgpu_ipc_event_create(int device, void **ev, void *handle) {
    if (!ev || !handle) return FZGPU_E_ARG;
    CKI(cudaSetDevice(device));
    CKI(cudaEventCreateWithFlags((cudaEvent_t *)ev, cudaEventInterprocess | cudaEventDisableTiming));
    cudaIpcEventHandle_t h;
    cudaError_t e = cudaIpcGetEventHandle(&h, (cudaEvent_t)*ev);
    if (e != cudaSuccess) {
        cudaEventDestroy((cudaEvent_t)*ev);
        *ev = nullptr;
        return ipc_fail(e);
    }
    memcpy(handle, &h, sizeof h);
    return 0;
}
