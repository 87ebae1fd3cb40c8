// CRC32C (Castagnoli; docs/FORMAT.md §2: header, index and chunk checksums)
// for chunks checksummed on the device (gather.cuh). Host-and-device code:
// tools/crc_emu.cpp runs these functions on the host, and
// cuda/crc_emu_test.go checks them against Go's hash/crc32.
//
// Representation: reflected, as the format's CRC is computed (bit 31 of a
// word is the coefficient of x^0, bit 0 that of x^31). update(s, D) below is
// the register after feeding bytes D to a register holding s, with no
// inversion; the format's CRC of D is ~update(~0, D). The register is
// linear in s and D, so for D = A || B:
//     update(0, A || B) = shift(update(0, A), |B|) ^ update(0, B)
//     update(s, D)      = shift(s, |D|) ^ update(0, D)
// where shift(c, n) = c · x^(8n) mod P. So a chunk cut into segments, each
// checksummed from 0 by its own thread, has
//     CRC = ~(shift(~0, |chunk|) ^ XOR over segments of shift(crc_seg, bytes after it)).
#ifndef FZ_CRC32C_CUH
#define FZ_CRC32C_CUH

#ifndef FZ_HD
#define FZ_HD __host__ __device__
#endif

#define CRC32C_POLY 0x82F63B78u  // x^32 + ... reflected, without the x^32 term

// a · b mod P (reflected): b takes one power of x per bit of a, from x^0 up.
FZ_HD inline unsigned crc32c_mulmod(unsigned a, unsigned b) {
    unsigned p = 0;
    for (int i = 31; i >= 0; i--) {
        p ^= b & (0u - ((a >> i) & 1u));
        b = (b >> 1) ^ (CRC32C_POLY & (0u - (b & 1u)));
    }
    return p;
}

// x8[k] = x^(8·2^k) mod P for k = 0..63: shift by n bytes multiplies by
// x8[k] for every bit k of n.
FZ_HD inline void crc32c_x8_table(unsigned x8[64]) {
    x8[0] = 1u << (31 - 8);  // x^8
    for (int k = 1; k < 64; k++) x8[k] = crc32c_mulmod(x8[k - 1], x8[k - 1]);
}

FZ_HD inline unsigned crc32c_shift(unsigned c, unsigned long long n, const unsigned x8[64]) {
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1) c = crc32c_mulmod(c, x8[k]);
    return c;
}

// The byte table t[0] and its slice-by-4 extensions: t[k][b] is the register
// after b followed by k zero bytes.
FZ_HD inline unsigned crc32c_byte(unsigned b) {
    for (int k = 0; k < 8; k++) b = (b >> 1) ^ (CRC32C_POLY & (0u - (b & 1u)));
    return b;
}

// Feeds one little-endian 32-bit word (4 bytes of the stream in order).
FZ_HD inline unsigned crc32c_word(unsigned c, unsigned w, const unsigned (*t)[256]) {
    c ^= w;
    return t[3][c & 0xFF] ^ t[2][(c >> 8) & 0xFF] ^ t[1][(c >> 16) & 0xFF] ^ t[0][c >> 24];
}

// One thread's part of a chunk of `words` 32-bit words cut into `parts`
// segments of ceil(words / parts) words: the register of segment `part`
// from 0, shifted by the bytes after it. XOR over all parts, then
// crc32c_finish, gives the chunk's CRC (the formula above).
FZ_HD inline unsigned crc32c_part(const unsigned *chunk, unsigned long long words, unsigned parts, unsigned part,
                                  const unsigned (*t)[256], const unsigned x8[64]) {
    const unsigned long long per = (words + parts - 1) / parts;
    const unsigned long long w0 = per * part < words ? per * part : words;
    const unsigned long long w1 = w0 + per < words ? w0 + per : words;
    unsigned c = 0;
    for (unsigned long long w = w0; w < w1; w++) c = crc32c_word(c, chunk[w], t);
    return crc32c_shift(c, 4 * (words - w1), x8);
}

FZ_HD inline unsigned crc32c_finish(unsigned parts_xor, unsigned long long bytes, const unsigned x8[64]) {
    return ~(crc32c_shift(0xFFFFFFFFu, bytes, x8) ^ parts_xor);
}

#endif
