// cp_async_emu.h: cp.async on the host, for the emulations of kernels
// that stage global memory in shared memory by cp.async (walk_emu.h's
// staged walks, transcode_emu.cpp's version-2 transcode). The runner sets
// the arena: the warp's part of the kernel's shared array, the only memory
// __cvta_generic_to_shared and cp.async accept. Each lane's copies are
// queued per commit group and land either at issue ("early") or only when
// cp_async_wait<N> retires their group ("late": a read of the buffer
// before the wait then sees stale bytes); a copy must be aligned to its
// size and lie inside the arena. Needs warp_emu.h's my_lane.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// The shared arena: the warp's part of the kernel's shared array (for the
// staged walks its row of stage_buf()'s; the runner sets it).
static unsigned char *arena;
static size_t arena_bytes;
static inline size_t __cvta_generic_to_shared(const void *p) {
    const unsigned char *c = (const unsigned char *)p;
    if (c < arena || c >= arena + arena_bytes) {
        fprintf(stderr, "lane %d: __cvta_generic_to_shared of a pointer outside the warp's staging buffer\n", my_lane);
        abort();
    }
    return (size_t)(c - arena);
}

// cp.async: per lane, the copies of the open group and the committed groups
// not yet retired, oldest first.
struct Copy {
    unsigned sdst;
    const void *src;
    unsigned n;
};
static bool late_landing;  // copies land at cp_async_wait (else at issue)
thread_local std::vector<Copy> open_group;
thread_local std::vector<std::vector<Copy>> groups;
static void land(const Copy &c) { memcpy(arena + c.sdst, c.src, c.n); }
static void cp_async(unsigned sdst, const void *gsrc, unsigned n) {
    if (sdst % n || (uintptr_t)gsrc % n || sdst + n > arena_bytes) {
        fprintf(stderr, "lane %d: cp.async of %u bytes to shared %u from %p: misaligned or outside the buffer\n", my_lane, n,
                sdst, gsrc);
        abort();
    }
    const Copy c{sdst, gsrc, n};
    if (!late_landing) land(c);
    open_group.push_back(c);
}
static void cp_async16(unsigned sdst, const void *gsrc) { cp_async(sdst, gsrc, 16); }
static void cp_async4(unsigned sdst, const void *gsrc) { cp_async(sdst, gsrc, 4); }
static void cp_async_commit() {
    groups.push_back(std::move(open_group));
    open_group.clear();
}
template <int N> void cp_async_wait() {
    while (groups.size() > (size_t)N) {
        if (late_landing)
            for (const Copy &c : groups.front()) land(c);
        groups.erase(groups.begin());
    }
}
// Copies a lane left queued (0 unless the walk returned with some
// pending: they would land in a buffer the next tile uses); clears them.
static int pending_copies() {
    const int n = (int)(groups.size() + open_group.size());
    groups.clear();
    open_group.clear();
    return n;
}
