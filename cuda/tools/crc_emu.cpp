// crc_emu: cuda/crc32c.cuh run on the host, so the device's chunk checksums
// (gather.cuh) are checked on machines without a GPU (cuda/crc_emu_test.go
// builds and drives it). Each input is checksummed as gather_kernel does
// (cut into 256 parts, each from 0, shifted by the bytes after it, XORed,
// finished) and also cut into 1, 3 and 1000 parts, so the test sees the
// combination for every part count. Built with AddressSanitizer: a part
// that reads outside the chunk aborts.
//
// Input: records {u64 bytes (a multiple of 4), the bytes}.
// Output: per record 4 u32: the CRCs for 256, 1, 3 and 1000 parts.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define FZ_HD
#include "../crc32c.cuh"

int main() {
    unsigned t[4][256], x8[64];
    for (unsigned b = 0; b < 256; b++) t[0][b] = crc32c_byte(b);
    for (int k = 1; k < 4; k++)
        for (unsigned b = 0; b < 256; b++) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
    crc32c_x8_table(x8);
    uint64_t n;
    while (fread(&n, 8, 1, stdin) == 1) {
        if (n % 4) {
            fprintf(stderr, "crc_emu: %llu bytes is not a multiple of 4\n", (unsigned long long)n);
            return 2;
        }
        std::vector<unsigned> w(n / 4);  // exactly the chunk: ASan sees any read past it
        if (n && fread(w.data(), 1, n, stdin) != n) {
            fprintf(stderr, "crc_emu: short input\n");
            return 2;
        }
        uint32_t out[4];
        const unsigned parts[4] = {256, 1, 3, 1000};
        for (int i = 0; i < 4; i++) {
            unsigned x = 0;
            for (unsigned p = 0; p < parts[i]; p++) x ^= crc32c_part(w.data(), w.size(), parts[i], p, t, x8);
            out[i] = crc32c_finish(x, n, x8);
        }
        fwrite(out, 4, 4, stdout);
    }
    return 0;
}
