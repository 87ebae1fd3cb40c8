// The tile tail's layout, shared by the version-1 and version-2 encoders
// (encode_warp.cuh, encode_v2.cuh) and by the host emulation of the v2
// writer (tools/encode_v2_emu.cpp), which supplies TileSum, block_mask,
// block_mask128, SC_MF and SC_MR itself. Include after those.
#pragma once

// The lane's 16 bytes of the tile's slot-order fill mask: at mf4 where the
// kernel keeps the mask out of the scratch (the fill kernel: in the staging
// rows' padding, stage_pad), else in the scratch (SC_MF).
__device__ __forceinline__ uint4 fill_mask4(const unsigned char *sc, const uint4 *mf4, int lane) {
    return mf4 ? *mf4 : ((const uint4 *)(sc + SC_MF))[lane];
}

// Where the tail (escapes, fill mask, raw mask, raw count and values; the
// same in both container versions) starts and ends, for a tile whose code
// section ends at word `at`: fills L's esc_at, fill_at, raw_at, fbm, rbm and
// size (bytes). mf4: as fill_mask4's.
template <typename T, typename Layout>
__device__ __forceinline__ void tail_layout(Layout &L, unsigned at, const unsigned char *sc, const TileSum &ts,
                                            int lane, const uint4 *mf4 = nullptr) {
    L.esc_at = at;
    if (ts.nesc) at += 1 + ts.nesc;
    L.fill_at = at;
    L.fbm = L.rbm = 0;
    if (ts.nfill) {
        L.fbm = block_mask(fill_mask4(sc, mf4, lane));
        at += 1 + 4 * __popc(L.fbm);
    }
    L.raw_at = at;
    if (ts.nraw) {
        L.rbm = block_mask128((const unsigned *)(sc + SC_MR), lane);
        at += 1 + 4 * __popc(L.rbm) + 1 + ts.nraw * (sizeof(T) / 4);
    }
    L.size = at * 4;
}
