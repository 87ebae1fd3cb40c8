// The inline-PTX primitives of the staged f32 walks (encode_rank3.cuh,
// encode_rank2.cuh): cp.async copies into shared memory and their commit
// groups, the one-shuffle left difference (sub_left) and prmt with sign
// replication. Included by encode_warp.cuh just before encode_rank3.cuh
// (moved out of it verbatim, so nvcc sees the same tokens: tools/pp_hash.sh):
// the host emulations of the walks (tools/walk_emu.h) define these
// instead and include encode_rank3.cuh itself. Also the warp kernel's own
// PTX (the ticket's atom.inc, the parked tiles' L2 policy and stores), so
// that tools/encode_warp_emu.cpp, which defines EMU_HOST_PTX and host
// versions, can include encode_warp.cuh.
#ifndef EMU_HOST_PTX

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

// The next ticket: atom.global.inc (not atomicAdd: ptxas turns atomicAdd
// into a warp-aggregated atomic with a shuffle right after it, which waits
// there; encode_warp.cuh's take_async).
__device__ __forceinline__ unsigned ticket_inc(unsigned *ticket) {
    unsigned r;
    asm volatile("atom.global.inc.u32 %0, [%1], 0x7fffffff;" : "=r"(r) : "l"(ticket) : "memory");
    return r;
}
// An L2 eviction policy: evict_last (keep) or evict_normal (encode_write.cuh's TileStore).
__device__ __forceinline__ unsigned long long l2_policy(bool keep) {
    unsigned long long pol;
    if (keep)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}
// A 32-bit store with an L2 policy.
__device__ __forceinline__ void st_hint(unsigned *p, unsigned v, unsigned long long pol) {
    asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;" ::"l"(p), "r"(v), "l"(pol) : "memory");
}
// A store of v to p where c holds, as one predicated instruction: written as
// `if (c) *p = v` in the padded decoder's walk, nvcc put each store and its
// address arithmetic in a branch of its own (19 % of that walk's
// instructions, v43 call 5). No memory clobber: the decoders never read what
// they store.
__device__ __forceinline__ void st_if(unsigned *p, unsigned v, bool c) {
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q st.global.b32 [%0], %1;\n\t}" ::"l"(p), "r"(v),
                 "r"((unsigned)c));
}
#endif
