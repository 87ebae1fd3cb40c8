#include "textflag.h"

// AVX2 kernels of the CPU codec. Each one does exactly the arithmetic of
// its pure-Go twin (same IEEE-754 operations in the same order, no FMA), so
// the bytes written do not depend on which path ran. Operand order is Go's:
// sources first, destination last.

// VPERMD index rotating dwords up by one: [7,0,1,2,3,4,5,6].
DATA rot1<>+0(SB)/4, $7
DATA rot1<>+4(SB)/4, $0
DATA rot1<>+8(SB)/4, $1
DATA rot1<>+12(SB)/4, $2
DATA rot1<>+16(SB)/4, $3
DATA rot1<>+20(SB)/4, $4
DATA rot1<>+24(SB)/4, $5
DATA rot1<>+28(SB)/4, $6
GLOBL rot1<>(SB), RODATA|NOPTR, $32

// VPSHUFB mask gathering, per 128-bit lane, byte 0 of each dword into
// dword 0 and byte 1 of each dword into dword 1 (the low and high code bytes).
DATA splitlh<>+0(SB)/8, $0x0d0905010c080400
DATA splitlh<>+8(SB)/8, $0x8080808080808080
DATA splitlh<>+16(SB)/8, $0x0d0905010c080400
DATA splitlh<>+24(SB)/8, $0x8080808080808080
GLOBL splitlh<>(SB), RODATA|NOPTR, $32

// VPERMD index putting dwords [0,4,1,5] first: the 8 low bytes, then the 8
// high bytes.
DATA packlh<>+0(SB)/4, $0
DATA packlh<>+4(SB)/4, $4
DATA packlh<>+8(SB)/4, $1
DATA packlh<>+12(SB)/4, $5
DATA packlh<>+16(SB)/4, $2
DATA packlh<>+20(SB)/4, $6
DATA packlh<>+24(SB)/4, $3
DATA packlh<>+28(SB)/4, $7
GLOBL packlh<>(SB), RODATA|NOPTR, $32

// VPSHUFB mask spreading a broadcast dword: byte j takes byte j/8.
DATA spread<>+0(SB)/8, $0x0000000000000000
DATA spread<>+8(SB)/8, $0x0101010101010101
DATA spread<>+16(SB)/8, $0x0202020202020202
DATA spread<>+24(SB)/8, $0x0303030303030303
GLOBL spread<>(SB), RODATA|NOPTR, $32

// Byte j holds 1 << (j % 8).
DATA bitsel<>+0(SB)/8, $0x8040201008040201
DATA bitsel<>+8(SB)/8, $0x8040201008040201
DATA bitsel<>+16(SB)/8, $0x8040201008040201
DATA bitsel<>+24(SB)/8, $0x8040201008040201
GLOBL bitsel<>(SB), RODATA|NOPTR, $32

// Constants of quantization: 2^28 (qLimit) and 1.5·2^52 (rintMagic).
#define QLIMIT $0x41B0000000000000
#define RMAGIC $0x4338000000000000

// Lorenzo inverse of one tile, fused with dequantization. q holds the
// residuals (q[0] = origin) of an lz×ly×lx tile, lx a multiple of 8. Per
// row: A = prefix sum of d along x; B = A + B(y−1) kept in brow; Q = B +
// Q(z−1) written back to q; then dst = T(f64(Q)·step). Int32 adds wrap like
// the Go code. zero is an all-zero row standing for the rows before the tile.
#define LDQ_SETUP(SHIFT) \
	MOVQ q+0(FP), R14 \
	MOVQ brow+8(FP), R15 \
	MOVQ lx+40(FP), R9 \
	MOVQ ly+32(FP), R11 \
	IMULQ R9, R11 \
	SHLQ $2, R11 \
	MOVQ dst+48(FP), BX \
	MOVQ BX, R10 \
	MOVQ rowStride+56(FP), R13 \
	SHLQ SHIFT, R13 \
	MOVQ planeStride+64(FP), SI \
	SHLQ SHIFT, SI \
	VBROADCASTSD step+72(FP), Y14 \
	MOVL $7, AX \
	MOVL AX, X13 \
	VPBROADCASTD X13, Y13 \
	XORQ R8, R8 \
	XORQ CX, CX

// Per row: Y9 (carry along x) = 0; R12 = B(y−1) (brow, or zero at y = 0);
// AX = Q(z−1) (the row one plane back, or zero at z = 0); DI = this row of
// the next tile in dst (pf bytes on), prefetched: the
// stores of a 3D tile land on 128 scattered rows, like the encoder's loads.
#define LDQ_ROW \
	VPXOR Y9, Y9, Y9 \
	MOVQ zero+16(FP), R12 \
	TESTQ CX, CX \
	CMOVQNE R15, R12 \
	MOVQ R14, AX \
	SUBQ R11, AX \
	TESTQ R8, R8 \
	CMOVQEQ zero+16(FP), AX \
	MOVQ R10, DI \
	ADDQ pf+80(FP), DI \
	XORQ DX, DX

#define LDQ_SCAN \
	VMOVDQU (R14)(DX*4), Y0 \
	VPSLLDQ $4, Y0, Y1 \
	VPADDD Y1, Y0, Y0 \
	VPSLLDQ $8, Y0, Y1 \
	VPADDD Y1, Y0, Y0 \
	VPSHUFD $0xFF, Y0, Y1 \
	VPERM2I128 $0x08, Y1, Y1, Y1 \
	VPADDD Y1, Y0, Y0 \
	VPADDD Y9, Y0, Y0 \
	VPERMD Y0, Y13, Y9 \
	VPADDD (R12)(DX*4), Y0, Y0 \
	VMOVDQU Y0, (R15)(DX*4) \
	VPADDD (AX)(DX*4), Y0, Y0 \
	VMOVDQU Y0, (R14)(DX*4)

// Loads the quantizer constants from k (in AX):
// Y15 inv, Y14 step, Y13 eb, Y10 |·| mask, Y9 qLimit, Y8 rintMagic;
// Y6 (max error) starts at zero. R13 = fill on.
#define QUANT_SETUP \
	VBROADCASTSD 0(AX), Y15 \
	VBROADCASTSD 8(AX), Y14 \
	VBROADCASTSD 16(AX), Y13 \
	MOVQ 32(AX), R13 \
	VPCMPEQQ Y10, Y10, Y10 \
	VPSRLQ $1, Y10, Y10 \
	MOVQ QLIMIT, R14 \
	MOVQ R14, X9 \
	VPBROADCASTQ X9, Y9 \
	MOVQ RMAGIC, R14 \
	MOVQ R14, X8 \
	VPBROADCASTQ X8, Y8 \
	VPXOR Y6, Y6, Y6

// Writes the horizontal max of Y6 to maxErr.
#define QUANT_RESULTS \
	VEXTRACTF128 $1, Y6, X0 \
	VMAXPD X0, X6, X6 \
	VPERMILPD $1, X6, X0 \
	VMAXPD X0, X6, X6 \
	VMOVSD X6, maxErr+88(FP) \
	VZEROUPPER

// Rows of the tile: after each row, step src by a row, q by lx and the
// element index by lx; after ly rows, move src to the next plane.
#define QUANT_NEXTROW(L) \
	ADDQ R11, SI \
	LEAQ (DI)(R9*4), DI \
	ADDQ R9, R12 \
	DECQ R8 \
	JNZ L \
	MOVQ src+0(FP), SI \
	ADDQ planeStride+16(FP), SI \
	MOVQ SI, src+0(FP) \
	MOVQ ly+32(FP), R8 \
	DECQ lz+24(FP) \
	JNZ L

// Sets bits e..e+W−1 of exc (BX), e = R12 + DX (may straddle two words).
#define QUANT_REJECT(MASK, LIMIT, NEXT) \
	LEAQ (R12)(DX*1), CX \
	MOVQ CX, AX \
	SHRQ $6, AX \
	ANDQ $63, CX \
	MOVQ MASK, R14 \
	SHLQ CX, R14 \
	ORQ R14, (BX)(AX*8) \
	CMPQ CX, LIMIT \
	JLE NEXT \
	MOVQ MASK, R14 \
	NEGQ CX \
	ADDQ $64, CX \
	SHRQ CX, R14 \
	ORQ R14, 8(BX)(AX*8) \
	JMP NEXT

// func quantF32AVX2(src *float32, rowStride, planeStride, lz, ly, lx, nv int, exc *[excWords]uint64, q *[TileElems]int32, k *quantK, pf int) (maxErr float64)
//
// Quantizes and re-checks the first nv values (a positive multiple of 8)
// of every row of an lz×ly×lx tile: row (z, y) starts at src + z·planeStride
// + y·rowStride and element e = (z·ly + y)·lx. A group of 8 where every
// value is quantizable, passes the check and is not fill is finished here
// (q stored, error counted in maxErr); any other group is left whole to the
// caller's scalar code by setting its 8 bits in exc. Σq is left to the
// caller, which needs it only for tiles with holes.
TEXT ·quantF32AVX2(SB), NOSPLIT, $0-96
	MOVQ src+0(FP), SI
	MOVQ rowStride+8(FP), R11
	SHLQ $2, R11
	SHLQ $2, planeStride+16(FP)
	MOVQ ly+32(FP), R8
	MOVQ lx+40(FP), R9
	MOVQ nv+48(FP), R10
	MOVQ exc+56(FP), BX
	MOVQ q+64(FP), DI
	XORQ R12, R12
	MOVQ k+72(FP), AX
	VPBROADCASTD 24(AX), Y12
	QUANT_SETUP

f32row:
	XORQ DX, DX
	// R15: the same row of the next tile (pf bytes on), which the next
	// call reads. Prefetching it hides the memory latency the out-of-order
	// window cannot: a 3D tile reads 128 short rows spread over 8 planes,
	// too scattered for the hardware prefetchers. Prefetches never fault,
	// wherever pf points.
	MOVQ SI, R15
	ADDQ pf+80(FP), R15

f32grp:
	PREFETCHT0 (R15)(DX*4)
	VMOVUPS (SI)(DX*4), Y0
	TESTQ R13, R13
	JZ f32nofill
	VPCMPEQD Y12, Y0, Y11
	VPTEST Y11, Y11
	JNZ f32reject

f32nofill:
	VCVTPS2PD X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2

	// Values 0..3: s = x·inv; ok = |s| < 2^28; qf = (s + M) − M.
	VMULPD Y15, Y1, Y3
	VANDPD Y10, Y3, Y4
	VCMPPD $0x11, Y9, Y4, Y4
	VADDPD Y8, Y3, Y3
	VSUBPD Y8, Y3, Y3
	VCVTTPD2DQY Y3, X5
	// x' = f32(qf·step); e = |x − f64(x')|; ok &= e ≤ eb.
	VMULPD Y14, Y3, Y3
	VCVTPD2PSY Y3, X3
	VCVTPS2PD X3, Y3
	VSUBPD Y3, Y1, Y3
	VANDPD Y10, Y3, Y3
	VCMPPD $0x12, Y13, Y3, Y1
	VANDPD Y1, Y4, Y4

	// Values 4..7, likewise.
	VMULPD Y15, Y2, Y0
	VANDPD Y10, Y0, Y11
	VCMPPD $0x11, Y9, Y11, Y11
	VADDPD Y8, Y0, Y0
	VSUBPD Y8, Y0, Y0
	VCVTTPD2DQY Y0, X1
	VMULPD Y14, Y0, Y0
	VCVTPD2PSY Y0, X0
	VCVTPS2PD X0, Y0
	VSUBPD Y0, Y2, Y0
	VANDPD Y10, Y0, Y0
	VCMPPD $0x12, Y13, Y0, Y2
	VANDPD Y2, Y11, Y11

	VANDPD Y4, Y11, Y11
	VMOVMSKPD Y11, AX
	CMPL AX, $0xF
	JNE f32reject

	VMAXPD Y3, Y0, Y3
	VMAXPD Y3, Y6, Y6
	VINSERTI128 $1, X1, Y5, Y2
	VMOVDQU Y2, (DI)(DX*4)

f32next:
	ADDQ $8, DX
	CMPQ DX, R10
	JLT f32grp
	QUANT_NEXTROW(f32row)
	QUANT_RESULTS
	RET

f32reject:
	QUANT_REJECT($0xFF, $56, f32next)

// func quantF64AVX2(src *float64, rowStride, planeStride, lz, ly, lx, nv int, exc *[excWords]uint64, q *[TileElems]int32, k *quantK, pf int) (maxErr float64)
//
// As quantF32AVX2 for float64 values, in groups of 4 (nv a positive
// multiple of 4); x' = qf·step needs no rounding to the element type.
TEXT ·quantF64AVX2(SB), NOSPLIT, $0-96
	MOVQ src+0(FP), SI
	MOVQ rowStride+8(FP), R11
	SHLQ $3, R11
	SHLQ $3, planeStride+16(FP)
	MOVQ ly+32(FP), R8
	MOVQ lx+40(FP), R9
	MOVQ nv+48(FP), R10
	MOVQ exc+56(FP), BX
	MOVQ q+64(FP), DI
	XORQ R12, R12
	MOVQ k+72(FP), AX
	VPBROADCASTQ 24(AX), Y12
	QUANT_SETUP

f64row:
	XORQ DX, DX
	MOVQ SI, R15 // as in quantF32AVX2
	ADDQ pf+80(FP), R15

f64grp:
	PREFETCHT0 (R15)(DX*8)
	VMOVUPD (SI)(DX*8), Y1
	TESTQ R13, R13
	JZ f64nofill
	VPCMPEQQ Y12, Y1, Y11
	VPTEST Y11, Y11
	JNZ f64reject

f64nofill:
	VMULPD Y15, Y1, Y3
	VANDPD Y10, Y3, Y4
	VCMPPD $0x11, Y9, Y4, Y4
	VADDPD Y8, Y3, Y3
	VSUBPD Y8, Y3, Y3
	VCVTTPD2DQY Y3, X5
	VMULPD Y14, Y3, Y3
	VSUBPD Y3, Y1, Y3
	VANDPD Y10, Y3, Y3
	VCMPPD $0x12, Y13, Y3, Y0
	VANDPD Y0, Y4, Y4
	VMOVMSKPD Y4, AX
	CMPL AX, $0xF
	JNE f64reject

	VMAXPD Y3, Y6, Y6
	VMOVDQU X5, (DI)(DX*4)

f64next:
	ADDQ $4, DX
	CMPQ DX, R10
	JLT f64grp
	QUANT_NEXTROW(f64row)
	QUANT_RESULTS
	RET

f64reject:
	QUANT_REJECT($0xF, $60, f64next)

// func codesAVX2(q *int32, lz, ly, lx, n8 int, smap *[TileElems]uint16, lo, hi *[TileElems]byte, zero *[TileElems]int32) (or, esc uint32)
//
// Lorenzo residuals d = col(x) − col(x−1), col = q − q(y−1) − q(z−1) +
// q(y−1,z−1) (zero outside the tile), for x < n8 of every row (n8 a
// multiple of 8), turned into sign-magnitude codes written as low and high
// bytes at 8 consecutive slots starting at smap[e] (the caller checked that
// every such group maps to a run of 8 slots below TileElems). Element 0
// gets code 0 (its residual is the origin). or is the OR of all codes; esc
// is non-zero if some |d| > 32767, and then the caller redoes the tile.
TEXT ·codesAVX2(SB), NOSPLIT, $0-80
	MOVQ q+0(FP), R14
	MOVQ lx+24(FP), R9
	SHLQ $2, R9                 // row bytes
	MOVQ ly+16(FP), R11
	IMULQ R9, R11               // plane bytes
	MOVQ n8+32(FP), R13
	MOVQ smap+40(FP), BX
	MOVQ lo+48(FP), DI
	MOVQ hi+56(FP), R12
	VMOVDQU rot1<>(SB), Y15
	VMOVDQU splitlh<>(SB), Y14
	VMOVDQU packlh<>(SB), Y13
	MOVL $0x8000, AX
	MOVL AX, X12
	VPBROADCASTD X12, Y12
	VPXOR Y11, Y11, Y11         // OR of codes
	VPXOR Y10, Y10, Y10         // OR of m >> 15 (escapes)
	XORQ R8, R8                 // z
	XORQ R10, R10               // y

crow:
	// Neighbour rows: nb = (y−1), up = (z−1), un = (z−1, y−1), or zeros.
	MOVQ zero+64(FP), R15
	MOVQ R15, AX
	MOVQ R15, CX
	VPXOR Y9, Y9, Y9            // previous group's col rotated (lane 0 used)
	TESTQ R10, R10
	JZ cnoy
	MOVQ R14, R15
	SUBQ R9, R15

cnoy:
	TESTQ R8, R8
	JZ cnoz
	MOVQ R14, AX
	SUBQ R11, AX
	TESTQ R10, R10
	JZ cnoz
	MOVQ AX, CX
	SUBQ R9, CX

cnoz:
	// In the tile's first row col(−1) is taken as q[0], so d(0) = 0.
	MOVQ R8, SI
	ORQ R10, SI
	JNZ cnotfirst
	VPBROADCASTD (R14), Y9

cnotfirst:
	XORQ DX, DX

cgrp:
	VMOVDQU (R14)(DX*4), Y0
	VPSUBD (R15)(DX*4), Y0, Y0
	VPSUBD (AX)(DX*4), Y0, Y0
	VPADDD (CX)(DX*4), Y0, Y0   // col
	VPERMD Y0, Y15, Y1          // col rotated up one lane
	VPBLENDD $1, Y9, Y1, Y2     // lane 0 from the previous group: col(x−1)
	VMOVDQA Y1, Y9              // keep rotated: its lane 0 is col(x+7)
	VPSUBD Y2, Y0, Y0           // d
	VPABSD Y0, Y1               // m (2^31 stays 2^31, caught below)
	VPSRAD $31, Y0, Y2
	VPAND Y12, Y2, Y2           // sign << 15
	VPSRLD $15, Y1, Y3
	VPOR Y3, Y10, Y10
	VPOR Y2, Y1, Y1             // code
	VPOR Y1, Y11, Y11
	VPSHUFB Y14, Y1, Y1
	VPERMD Y1, Y13, Y1          // 8 low bytes, then 8 high bytes
	MOVWLZX (BX)(DX*2), SI
	VMOVQ X1, (DI)(SI*1)
	VPEXTRQ $1, X1, (R12)(SI*1)
	ADDQ $8, DX
	CMPQ DX, R13
	JLT cgrp

	ADDQ R9, R14
	MOVQ R9, SI
	SHRQ $1, SI
	ADDQ SI, BX
	INCQ R10
	CMPQ R10, ly+16(FP)
	JLT crow
	XORQ R10, R10
	INCQ R8
	CMPQ R8, lz+8(FP)
	JLT crow

	VEXTRACTI128 $1, Y11, X0
	VPOR X0, X11, X11
	VPSHUFD $0x4E, X11, X0
	VPOR X0, X11, X11
	VPSHUFD $0xB1, X11, X0
	VPOR X0, X11, X11
	VMOVD X11, AX
	MOVL AX, or+72(FP)
	VEXTRACTI128 $1, Y10, X0
	VPOR X0, X10, X10
	VPSHUFD $0x4E, X10, X0
	VPOR X0, X10, X10
	VPSHUFD $0xB1, X10, X0
	VPOR X0, X10, X10
	VMOVD X10, AX
	MOVL AX, esc+76(FP)
	VZEROUPPER
	RET

// func shuffleAVX2(b *[TileElems]byte, planes *[8][planeBytes]byte)
//
// Bit k of the 32 bytes b[32w ...] becomes the little-endian u32 word w of
// plane k: VPMOVMSKB takes bit 7 of every byte; adding the vector to itself
// moves the next lower bit up.
TEXT ·shuffleAVX2(SB), NOSPLIT, $0-16
	MOVQ b+0(FP), SI
	MOVQ planes+8(FP), DI
	XORQ DX, DX

shloop:
	VMOVDQU (SI)(DX*8), Y0
	VPMOVMSKB Y0, AX
	MOVL AX, 3584(DI)(DX*1)
	VPADDB Y0, Y0, Y0
	VPMOVMSKB Y0, AX
	MOVL AX, 3072(DI)(DX*1)
	VPADDB Y0, Y0, Y0
	VPMOVMSKB Y0, AX
	MOVL AX, 2560(DI)(DX*1)
	VPADDB Y0, Y0, Y0
	VPMOVMSKB Y0, AX
	MOVL AX, 2048(DI)(DX*1)
	VPADDB Y0, Y0, Y0
	VPMOVMSKB Y0, AX
	MOVL AX, 1536(DI)(DX*1)
	VPADDB Y0, Y0, Y0
	VPMOVMSKB Y0, AX
	MOVL AX, 1024(DI)(DX*1)
	VPADDB Y0, Y0, Y0
	VPMOVMSKB Y0, AX
	MOVL AX, 512(DI)(DX*1)
	VPADDB Y0, Y0, Y0
	VPMOVMSKB Y0, AX
	MOVL AX, (DI)(DX*1)
	ADDQ $4, DX
	CMPQ DX, $512
	JLT shloop
	VZEROUPPER
	RET

// func shuffleTopAVX2(b *[TileElems]byte, plane *[planeBytes]byte)
//
// Only bit 7 of every byte: the usual high code byte, sign plane only.
TEXT ·shuffleTopAVX2(SB), NOSPLIT, $0-16
	MOVQ b+0(FP), SI
	MOVQ plane+8(FP), DI
	XORQ DX, DX

sttloop:
	VMOVDQU (SI)(DX*8), Y0
	VPMOVMSKB Y0, AX
	MOVL AX, (DI)(DX*1)
	VMOVDQU 32(SI)(DX*8), Y1
	VPMOVMSKB Y1, AX
	MOVL AX, 4(DI)(DX*1)
	ADDQ $8, DX
	CMPQ DX, $512
	JLT sttloop
	VZEROUPPER
	RET

// Byte j of Y1 = 0xFF·(bit j%8 of byte j/8 of the plane word at MEM), masked
// to the plane's bit (Yk), ORed into Y0.
#define UNSH(MEM, YK) \
	VPBROADCASTD MEM, Y1 \
	VPSHUFB Y15, Y1, Y1 \
	VPAND Y14, Y1, Y1 \
	VPCMPEQB Y14, Y1, Y1 \
	VPAND YK, Y1, Y1 \
	VPOR Y1, Y0, Y0

#define BYTECONST(v, Y) \
	MOVL v, AX \
	MOVL AX, X0 \
	VPBROADCASTB X0, Y

// func unshuffleAVX2(planes *[8][planeBytes]byte, b *[TileElems]byte)
//
// Inverse of shuffleAVX2: for each 32-code word, spread each plane's u32 so
// that byte j sees byte j/8, test bit j%8, and OR 1<<k where it is set.
TEXT ·unshuffleAVX2(SB), NOSPLIT, $0-16
	MOVQ planes+0(FP), SI
	MOVQ b+8(FP), DI
	VMOVDQU spread<>(SB), Y15
	VMOVDQU bitsel<>(SB), Y14
	BYTECONST($0x01, Y6)
	BYTECONST($0x02, Y7)
	BYTECONST($0x04, Y8)
	BYTECONST($0x08, Y9)
	BYTECONST($0x10, Y10)
	BYTECONST($0x20, Y11)
	BYTECONST($0x40, Y12)
	BYTECONST($0x80, Y13)
	XORQ DX, DX

unloop:
	VPXOR Y0, Y0, Y0
	UNSH((SI)(DX*1), Y6)
	UNSH(512(SI)(DX*1), Y7)
	UNSH(1024(SI)(DX*1), Y8)
	UNSH(1536(SI)(DX*1), Y9)
	UNSH(2048(SI)(DX*1), Y10)
	UNSH(2560(SI)(DX*1), Y11)
	UNSH(3072(SI)(DX*1), Y12)
	UNSH(3584(SI)(DX*1), Y13)
	VMOVDQU Y0, (DI)(DX*8)
	ADDQ $4, DX
	CMPQ DX, $512
	JLT unloop
	VZEROUPPER
	RET

// func unshuffleTopAVX2(plane *[planeBytes]byte, b *[TileElems]byte)
//
// Inverse of shuffleTopAVX2: 0x80 where the bit is set, 0 elsewhere.
TEXT ·unshuffleTopAVX2(SB), NOSPLIT, $0-16
	MOVQ plane+0(FP), SI
	MOVQ b+8(FP), DI
	VMOVDQU spread<>(SB), Y15
	VMOVDQU bitsel<>(SB), Y14
	BYTECONST($0x80, Y13)
	XORQ DX, DX

utloop:
	VPXOR Y0, Y0, Y0
	UNSH((SI)(DX*1), Y13)
	VMOVDQU Y0, (DI)(DX*8)
	ADDQ $4, DX
	CMPQ DX, $512
	JLT utloop
	VZEROUPPER
	RET

// func gatherAVX2(lo, hi *[TileElems]byte, smap *[TileElems]uint16, rows, lx, n8 int, q *int32) (esc uint32)
//
// Decoder: for x < n8 of each row (n8 a multiple of 8) read the codes of
// the 8 consecutive slots starting at smap[e] (checked by the caller) and
// write d = ±magnitude to q[e ...]. esc is non-zero if some code is 0x8000
// (an escape), and then the caller redoes the tile.
TEXT ·gatherAVX2(SB), NOSPLIT, $0-60
	MOVQ lo+0(FP), R8
	MOVQ hi+8(FP), R9
	MOVQ smap+16(FP), BX
	MOVQ rows+24(FP), CX
	MOVQ lx+32(FP), R11
	MOVQ n8+40(FP), R10
	MOVQ q+48(FP), DI
	MOVL $0x8000, AX
	MOVL AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x7FFF, AX
	MOVL AX, X14
	VPBROADCASTD X14, Y14
	VPXOR Y10, Y10, Y10
	TESTQ CX, CX
	JZ gdone

grow:
	XORQ DX, DX

ggrp:
	MOVWLZX (BX)(DX*2), SI
	VPMOVZXBD (R8)(SI*1), Y0
	VPMOVZXBD (R9)(SI*1), Y1
	VPSLLD $8, Y1, Y1
	VPOR Y0, Y1, Y1             // code
	VPCMPEQD Y15, Y1, Y2
	VPOR Y2, Y10, Y10
	VPAND Y14, Y1, Y0           // magnitude
	VPSLLD $16, Y1, Y1
	VPSRAD $31, Y1, Y1          // −1 where negative
	VPXOR Y1, Y0, Y0
	VPSUBD Y1, Y0, Y0
	VMOVDQU Y0, (DI)(DX*4)
	ADDQ $8, DX
	CMPQ DX, R10
	JLT ggrp
	LEAQ (BX)(R11*2), BX
	LEAQ (DI)(R11*4), DI
	DECQ CX
	JNZ grow

gdone:
	VPMOVMSKB Y10, AX
	MOVL AX, esc+56(FP)
	VZEROUPPER
	RET

// func lorenzoDeqF32AVX2(q *[TileElems]int32, brow, zero *[TileElems]int32, lz, ly, lx int, dst *float32, rowStride, planeStride int, step float64, pf int)
TEXT ·lorenzoDeqF32AVX2(SB), NOSPLIT, $0-88
	LDQ_SETUP($2)

l32row:
	LDQ_ROW

l32grp:
	PREFETCHT0 (DI)(DX*4)
	LDQ_SCAN
	VCVTDQ2PD X0, Y1
	VMULPD Y14, Y1, Y1
	VCVTPD2PSY Y1, X1
	VEXTRACTI128 $1, Y0, X2
	VCVTDQ2PD X2, Y2
	VMULPD Y14, Y2, Y2
	VCVTPD2PSY Y2, X2
	VINSERTF128 $1, X2, Y1, Y1
	VMOVUPS Y1, (R10)(DX*4)
	ADDQ $8, DX
	CMPQ DX, R9
	JLT l32grp
	LEAQ (R14)(R9*4), R14
	ADDQ R13, R10
	INCQ CX
	CMPQ CX, ly+32(FP)
	JLT l32row
	XORQ CX, CX
	ADDQ SI, BX
	MOVQ BX, R10
	INCQ R8
	CMPQ R8, lz+24(FP)
	JLT l32row
	VZEROUPPER
	RET

// func lorenzoDeqF64AVX2(q *[TileElems]int32, brow, zero *[TileElems]int32, lz, ly, lx int, dst *float64, rowStride, planeStride int, step float64, pf int)
TEXT ·lorenzoDeqF64AVX2(SB), NOSPLIT, $0-88
	LDQ_SETUP($3)

l64row:
	LDQ_ROW

l64grp:
	PREFETCHT0 (DI)(DX*8)
	LDQ_SCAN
	VCVTDQ2PD X0, Y1
	VMULPD Y14, Y1, Y1
	VMOVUPD Y1, (R10)(DX*8)
	VEXTRACTI128 $1, Y0, X2
	VCVTDQ2PD X2, Y2
	VMULPD Y14, Y2, Y2
	VMOVUPD Y2, 32(R10)(DX*8)
	ADDQ $8, DX
	CMPQ DX, R9
	JLT l64grp
	LEAQ (R14)(R9*4), R14
	ADDQ R13, R10
	INCQ CX
	CMPQ CX, ly+32(FP)
	JLT l64row
	XORQ CX, CX
	ADDQ SI, BX
	MOVQ BX, R10
	INCQ R8
	CMPQ R8, lz+24(FP)
	JLT l64row
	VZEROUPPER
	RET

// func rangeF32AVX2(src *float32, n int, fill uint64, hasFill bool) (lo, hi float32)
//
// Min and max over the first n values (n a positive multiple of 8) that
// are finite (x − x == 0) and, with hasFill, not bitwise the fill; +Inf and
// −Inf when there are none. Only the sign of a zero result may differ from
// the scalar loop, and the caller normalises zeros.
TEXT ·rangeF32AVX2(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VPBROADCASTD fill+16(FP), Y12
	MOVBLZX hasFill+24(FP), R8
	MOVL $0x7F800000, AX
	MOVL AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0xFF800000, AX
	MOVL AX, X11
	VPBROADCASTD X11, Y11
	VMOVAPS Y13, Y10
	VMOVAPS Y11, Y9
	VXORPS Y15, Y15, Y15
	XORQ DX, DX

r32loop:
	VMOVUPS (SI)(DX*4), Y0
	VSUBPS Y0, Y0, Y1
	VCMPPS $0, Y15, Y1, Y1
	TESTQ R8, R8
	JZ r32nofill
	VPCMPEQD Y12, Y0, Y2
	VPANDN Y1, Y2, Y1

r32nofill:
	VBLENDVPS Y1, Y0, Y13, Y2
	VMINPS Y2, Y10, Y10
	VBLENDVPS Y1, Y0, Y11, Y3
	VMAXPS Y3, Y9, Y9
	ADDQ $8, DX
	CMPQ DX, CX
	JLT r32loop

	VEXTRACTF128 $1, Y10, X0
	VMINPS X0, X10, X10
	VPERMILPS $0x4E, X10, X0
	VMINPS X0, X10, X10
	VPERMILPS $0xB1, X10, X0
	VMINPS X0, X10, X10
	VMOVSS X10, lo+32(FP)
	VEXTRACTF128 $1, Y9, X0
	VMAXPS X0, X9, X9
	VPERMILPS $0x4E, X9, X0
	VMAXPS X0, X9, X9
	VPERMILPS $0xB1, X9, X0
	VMAXPS X0, X9, X9
	VMOVSS X9, hi+36(FP)
	VZEROUPPER
	RET

// func rangeF64AVX2(src *float64, n int, fill uint64, hasFill bool) (lo, hi float64)
//
// As rangeF32AVX2 for float64, n a positive multiple of 4.
TEXT ·rangeF64AVX2(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VPBROADCASTQ fill+16(FP), Y12
	MOVBLZX hasFill+24(FP), R8
	MOVQ $0x7FF0000000000000, AX
	MOVQ AX, X13
	VPBROADCASTQ X13, Y13
	MOVQ $0xFFF0000000000000, AX
	MOVQ AX, X11
	VPBROADCASTQ X11, Y11
	VMOVAPD Y13, Y10
	VMOVAPD Y11, Y9
	VXORPD Y15, Y15, Y15
	XORQ DX, DX

r64loop:
	VMOVUPD (SI)(DX*8), Y0
	VSUBPD Y0, Y0, Y1
	VCMPPD $0, Y15, Y1, Y1
	TESTQ R8, R8
	JZ r64nofill
	VPCMPEQQ Y12, Y0, Y2
	VPANDN Y1, Y2, Y1

r64nofill:
	VBLENDVPD Y1, Y0, Y13, Y2
	VMINPD Y2, Y10, Y10
	VBLENDVPD Y1, Y0, Y11, Y3
	VMAXPD Y3, Y9, Y9
	ADDQ $4, DX
	CMPQ DX, CX
	JLT r64loop

	VEXTRACTF128 $1, Y10, X0
	VMINPD X0, X10, X10
	VPERMILPD $1, X10, X0
	VMINPD X0, X10, X10
	VMOVSD X10, lo+32(FP)
	VEXTRACTF128 $1, Y9, X0
	VMAXPD X0, X9, X9
	VPERMILPD $1, X9, X0
	VMAXPD X0, X9, X9
	VMOVSD X9, hi+40(FP)
	VZEROUPPER
	RET
