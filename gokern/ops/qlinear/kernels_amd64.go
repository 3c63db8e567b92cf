//go:build !noasm && amd64

package qlinear

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// The assembly families (_gen/qlinear.go): avx2 (VPMADDWD on widened
// operands) and avx512vnni (VPDPBUSD), each with the generic kernels as
// oracle (qlinear_test.go).

var _ = KernelOp.Register(cpu.AVX2, &Kernels{Family: cpu.AVX2,
	Dot4x4: func(kb int, a []byte, lda int, w []int8, ldw int, c *[16]int32) {
		_ = a[3*lda+kb*KB-1]
		_ = w[3*ldw+kb*KB-1]
		var t [8]int32
		for h := 0; h < 2; h++ {
			dot4x2AVX2(kb, &a[0], lda, &w[2*h*ldw], ldw, &t[0], 4*ldw)
			for i := 0; i < 4; i++ {
				c[i*4+2*h], c[i*4+2*h+1] = t[i*2], t[i*2+1]
			}
		}
	},
	Dot1x8: func(kb int, a []byte, w []int8, ldw int, c *[8]int32) {
		_ = a[kb*KB-1]
		_ = w[7*ldw+kb*KB-1]
		dot1x4AVX2(kb, &a[0], 0, &w[0], ldw, &c[0], 8*ldw)
		dot1x4AVX2(kb, &a[0], 0, &w[4*ldw], ldw, (*int32)(unsafe.Pointer(&c[4])), 8*ldw)
	},
	// four column quarters x two row halves of 4x8
	Tile: func(kq int, a []byte, w []int8, c []int32, ldc int, add bool) {
		_ = a[kq*MR*8-1]
		_ = w[kq*NR*4-1]
		_ = c[(MR-1)*ldc+NR-1]
		for h := 0; h < 2; h++ {
			for j := 0; j < 4; j++ {
				tile4x8AVX2(kq, &a[h*32], &w[j*32], &c[h*4*ldc+j*8], ldc, b2i(add))
			}
		}
	},
	WideA:   true,
	Quant:   quantAVX2,
	QuadRow: quadRowAsm,
	QuadRun: quadRunAsm(true),
	Cols16: func(src []int32, lds int, out []byte, ldo int) {
		_ = src[15*lds+15]
		_ = out[15*ldo+15]
		cols8AVX2(&src[0], lds, &out[0], ldo)
		cols8AVX2(&src[8], lds, &out[8*ldo], ldo)
	},
})

var _ = KernelOp.Register(cpu.AVX512VNNI, &Kernels{Family: cpu.AVX512VNNI,
	Dot4x4: func(kb int, a []byte, lda int, w []int8, ldw int, c *[16]int32) {
		_ = a[3*lda+kb*KB-1]
		_ = w[3*ldw+kb*KB-1]
		dot4x4VNNI(kb, &a[0], lda, &w[0], ldw, &c[0], 4*ldw)
	},
	Dot1x8: func(kb int, a []byte, w []int8, ldw int, c *[8]int32) {
		_ = a[kb*KB-1]
		_ = w[7*ldw+kb*KB-1]
		dot1x8VNNI(kb, &a[0], 0, &w[0], ldw, &c[0], 8*ldw)
	},
	Tile: func(kq int, a []byte, w []int8, c []int32, ldc int, add bool) {
		_ = a[kq*MR*4-1]
		_ = w[kq*NR*4-1]
		_ = c[(MR-1)*ldc+NR-1]
		tile8x32VNNI(kq, &a[0], &w[0], &c[0], ldc, b2i(add))
	},
	Quant:   quantAVX512,
	QuadRow: quadRowAsm,
	Cols16: func(src []int32, lds int, out []byte, ldo int) {
		_ = src[15*lds+15]
		_ = out[15*ldo+15]
		cols16VNNI(&src[0], lds, &out[0], ldo)
	},
	QuadRun: quadRunAsm(false),
})

// quadRunAsm returns the QuadRun of quadRunWideAVX2 (wide: the int16 tiles
// of a WideA family) or quadRunAVX2, its operands' bounds checked (empty
// lists: the generic kernel, widened where wide).
func quadRunAsm(wide bool) func(src []uint32, offs []int32, maxOff int, dst []byte, sum []int32, doffs []int32, maxDoff int, rs []int32) {
	step := 32
	if wide {
		step = 64
	}
	return func(src []uint32, offs []int32, maxOff int, dst []byte, sum []int32, doffs []int32, maxDoff int, rs []int32) {
		if len(offs) == 0 || len(doffs) == 0 {
			quadRunGeneric(src, offs, maxOff, dst, sum, doffs, maxDoff, rs)
			if wide {
				widenInPlace(dst, 32*len(offs))
			}
			return
		}
		_, _, _, _ = src[maxOff+7], dst[step*len(offs)-1], sum[maxDoff+7], rs[7]
		if wide {
			quadRunWideAVX2(len(offs), &src[0], &offs[0], &dst[0], len(doffs), &sum[0], &doffs[0], &rs[0])
		} else {
			quadRunAVX2(len(offs), &src[0], &offs[0], &dst[0], len(doffs), &sum[0], &doffs[0], &rs[0])
		}
	}
}

// quantAVX2 runs requantAVX2 on the channels in blocks of 8, the rest in Go.
func quantAVX2(acc []int32, ld int, rowsums []int32, n0, nc int, r *Requant) {
	if n := quantAsm(false, acc, ld, rowsums, n0, nc, r); n < nc {
		quantGeneric(acc[n:], ld, rowsums, n0+n, nc-n, r)
	}
}

// quantAVX512 runs requantAVX512 on the channels in blocks of 16, the rest
// as quantAVX2 does.
func quantAVX512(acc []int32, ld int, rowsums []int32, n0, nc int, r *Requant) {
	if n := quantAsm(true, acc, ld, rowsums, n0, nc, r); n < nc {
		quantAVX2(acc[n:], ld, rowsums, n0+n, nc-n, r)
	}
}

// quantAsm runs requantAVX512 (wide) or requantAVX2 on the whole blocks of
// 16 or 8 of the nc channels, their bounds checked here, and returns how
// many channels it did.
func quantAsm(wide bool, acc []int32, ld int, rowsums []int32, n0, nc int, r *Requant) int {
	lanes := 8
	if wide {
		lanes = 16
	}
	n, rows := nc/lanes*lanes, len(rowsums)
	if n == 0 || rows == 0 {
		return 0
	}
	_ = acc[(rows-1)*ld+n-1]
	_, _, _, _ = r.ColTerm[n0+n-1], r.ZW[n0+n-1], r.BiasQ[n0+n-1], r.Mult[n0+n-1]
	p := [3]int32{r.ZO, r.Lo, r.Hi}
	zwz := b2i(r.ZWZero)
	if wide {
		requantAVX512(rows, n, &acc[0], ld, &rowsums[0], &r.ColTerm[n0], &r.ZW[n0], zwz, &r.BiasQ[n0], &r.Mult[n0], &p)
	} else {
		requantAVX2(rows, n, &acc[0], ld, &rowsums[0], &r.ColTerm[n0], &r.ZW[n0], zwz, &r.BiasQ[n0], &r.Mult[n0], &p)
	}
	return n
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// quadRowAsm checks the bounds of quadRowAVX2's operands and runs it.
func quadRowAsm(x []byte, hw, n16, c4 int, out []uint32, plane int, flip uint32, sums []int32) {
	if n16 <= 0 || c4 <= 0 {
		quadRowGeneric(x, hw, n16, c4, out, plane, flip, sums)
		return
	}
	_, _, _ = x[(4*c4-1)*hw+16*n16-1], out[(c4-1)*plane+16*n16-1], sums[16*n16-1]
	quadRowAVX2(&x[0], hw, n16, c4, &out[0], plane, int(flip), &sums[0])
}
