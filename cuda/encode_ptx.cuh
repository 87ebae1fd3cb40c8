// The inline-PTX primitives of the staged f32 walks (encode_rank3.cuh,
// encode_rank2.cuh): cp.async copies into shared memory and their commit
// groups, the one-shuffle left difference (sub_left) and prmt with sign
// replication. Included by encode_warp.cuh just before encode_rank3.cuh
// (moved out of it verbatim, so nvcc sees the same tokens: tools/pp_hash.sh):
// the host emulations of the walks (tools/walk_emu.h) define these
// instead and include encode_rank3.cuh itself.

__device__ __forceinline__ void cp_async16(unsigned sdst, const void *gsrc) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sdst), "l"(gsrc));
}
__device__ __forceinline__ void cp_async4(unsigned sdst, const void *gsrc) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sdst), "l"(gsrc));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// b - b(lane - 1); lane 0 keeps b. The shuffle's own in-range predicate
// guards the subtraction: one instruction less than a select on the lane.
__device__ __forceinline__ int sub_left(int b) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
        "shfl.sync.up.b32 t|p, %0, 1, 0, 0xffffffff;\n\t"
        "@p sub.s32 %0, %0, t;\n\t}"
        : "+r"(b));
    return b;
}

// Bytes of a and b by a prmt selector whose nibbles may ask for sign
// replication (bit 3), which __byte_perm does not promise.
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
    unsigned r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}
