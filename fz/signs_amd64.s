#include "textflag.h"

// Kernels of the version-2 code section (tile_encode_v2.go and
// tile_decode_v2.go describe the bytes). Each does exactly what its
// pure-Go reference (the same name ending in Go) does. Operand order is
// Go's: sources first (PEXT/PDEP: mask, source), destination last.

// func packSignsBMI2(nz *[v2Groups]uint16, sign *[planeBytes]byte, out *[signBufWords]uint32)
TEXT ·packSignsBMI2(SB), NOSPLIT, $0-24
	MOVQ nz+0(FP), SI
	MOVQ sign+8(FP), DI
	MOVQ out+16(FP), DX
	XORQ R8, R8 // bits pending in R10 (< 32 between groups)
	XORQ R10, R10 // pending bits
	XORQ R11, R11 // group
pack:
	MOVWLZX (SI)(R11*2), AX // non-zero magnitudes of the group
	MOVWLZX (DI)(R11*2), BX // its sign unit
	PEXTL AX, BX, BX
	MOVQ R8, CX
	SHLQ CX, BX
	ORQ BX, R10
	POPCNTL AX, AX
	ADDQ AX, R8
	MOVL R10, (DX) // the current word; rewritten until it is full
	// A full word: step to the next (R8 < 48, so bit 5 says R8 ≥ 32).
	MOVQ R8, CX
	ANDQ $32, CX
	SHRQ CX, R10
	SHRQ $3, CX
	ADDQ CX, DX
	ANDQ $31, R8
	INCQ R11
	CMPQ R11, $256
	JB pack
	MOVL R10, (DX)
	RET

// func expandSignsBMI2(nz *[v2Groups]uint16, in *[signBufWords + 1]uint32, sign *[planeBytes]byte)
TEXT ·expandSignsBMI2(SB), NOSPLIT, $0-24
	MOVQ nz+0(FP), SI
	MOVQ in+8(FP), DX
	MOVQ sign+16(FP), DI
	XORQ R8, R8
	XORQ R11, R11
expand:
	MOVWLZX (SI)(R11*2), AX
	MOVQ R8, R9
	SHRQ $5, R9
	MOVQ (DX)(R9*4), BX // word R9 ≤ 128 and the next: inside in
	MOVQ R8, CX
	ANDL $31, CX
	SHRQ CX, BX
	PDEPQ AX, BX, BX
	MOVW BX, (DI)(R11*2)
	POPCNTL AX, AX
	ADDQ AX, R8
	INCQ R11
	CMPQ R11, $256
	JB expand
	RET

// func gatherUnitsAsm(pf *[Planes * planeBytes]byte, rates *[v2Groups]uint16, out *byte)
TEXT ·gatherUnitsAsm(SB), NOSPLIT, $0-24
	MOVQ pf+0(FP), SI
	MOVQ rates+8(FP), DI
	MOVQ out+16(FP), DX
	XORQ R11, R11 // group
gather:
	MOVWLZX (DI)(R11*2), AX // rate
	TESTQ AX, AX
	JZ gnext
	LEAQ (SI)(R11*2), BX // unit 0 of the group
gunit:
	MOVW (BX), CX
	MOVW CX, (DX)
	ADDQ $2, DX
	ADDQ $512, BX
	DECQ AX
	JNZ gunit
gnext:
	INCQ R11
	CMPQ R11, $256
	JB gather
	RET

// func scatterUnitsAsm(units *byte, rw *[v2Blocks]uint32, pf *[Planes * planeBytes]byte, nz, esc *[v2Groups]uint16) (nsign, badGroup int)
TEXT ·scatterUnitsAsm(SB), NOSPLIT, $0-56
	MOVQ units+0(FP), SI
	MOVQ rw+8(FP), DI
	MOVQ pf+16(FP), DX
	MOVQ nz+24(FP), R12
	MOVQ esc+32(FP), R13
	MOVQ $0, nsign+40(FP)
	MOVQ $-1, badGroup+48(FP) // first group whose top unit is 0
	XORQ R11, R11 // group
scatter:
	// rate = nibble g%8 of rw[g/8]
	MOVQ R11, R9
	SHRQ $3, R9
	MOVL (DI)(R9*4), AX
	MOVQ R11, CX
	ANDQ $7, CX
	SHLQ $2, CX
	SHRL CX, AX
	ANDL $15, AX
	XORL R8, R8 // OR of the units
	MOVL $0xFFFF, R9 // AND of the units
	XORL R10, R10 // last unit
	MOVQ AX, CX
	TESTQ AX, AX
	JZ sempty
	LEAQ (DX)(R11*2), BX
sunit:
	MOVWLZX (SI), R10
	ADDQ $2, SI
	MOVW R10, (BX)
	ADDQ $512, BX
	ORL R10, R8
	ANDL R10, R9
	DECQ CX
	JNZ sunit
	TESTL R10, R10
	JNZ stop
	CMPQ badGroup+48(FP), $0
	JGE stop
	MOVQ R11, badGroup+48(FP)
stop:
	CMPQ AX, $15
	JEQ sesc
	XORL R9, R9 // escapes only where the rate is 15
sesc:
	MOVW R9, (R13)(R11*2)
	MOVW R8, (R12)(R11*2)
	POPCNTL R8, R8
	ADDQ R8, nsign+40(FP)
	INCQ R11
	CMPQ R11, $256
	JB scatter
	RET
sempty:
	MOVW R8, (R13)(R11*2)
	MOVW R8, (R12)(R11*2)
	INCQ R11
	CMPQ R11, $256
	JB scatter
	RET
