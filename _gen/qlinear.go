//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The dot-product micro-kernels of gokern/ops/qlinear (wrapped in its
// kernels_amd64.go): uint8 activations times int8 weights, both row-major,
// kb blocks of 64 k values, exact int32 sums with no int16 saturation.
//
//   - avx512vnni: VPDPBUSD on ZMM (64 u8 x s8 products into 16 dwords per
//     instruction); a 4x4 tile (16 accumulators) and a 1x8 strip.
//   - avx2: both operands widened to int16 (VPMOVZXBW, VPMOVSXBW) and
//     multiplied in pairs by VPMADDWD into dwords (|255*-128*2| < 2^31); a
//     4x2 tile and a 1x4 strip, 16 k per step.
//
// Each accumulator is reduced to one dword at the end and stored to c
// (row-major, rows x cols).

// qlinearAVX512 emits gokern/ops/qlinear/dot_avx512_amd64.s.
var qlinearAVX512 = kernels(
	func(c *build.Context) { dotVNNI(c, 4, 4) },
	func(c *build.Context) { dotVNNI(c, 1, 8) },
)

// qlinearAVX2 emits gokern/ops/qlinear/dot_avx2_amd64.s.
var qlinearAVX2 = kernels(
	func(c *build.Context) { dotAVX2(c, 4, 2) },
	func(c *build.Context) { dotAVX2(c, 1, 4) },
)

// rowPtrs returns n pointers base, base+ld, ..., base+(n-1)*ld.
func rowPtrs(c *build.Context, base, ld reg.Register, n int) []reg.Register {
	out := []reg.Register{base}
	for i := 1; i < n; i++ {
		p := c.GP64()
		c.LEAQ(operand.Mem{Base: out[i-1], Index: ld, Scale: 1}, p)
		out = append(out, p)
	}
	return out
}

// hsumStore adds the dwords of y (YMM) and stores the sum at m.
func hsumStoreY(c *build.Context, y reg.Register, m operand.Mem, evex bool) {
	x := y.(reg.VecVirtual).AsX()
	t := c.XMM()
	if evex { // registers 16-31 have no VEX encoding
		c.VEXTRACTI32X4(operand.Imm(1), y, t)
	} else {
		c.VEXTRACTI128(operand.Imm(1), y, t)
	}
	c.VPADDD(t, x, x)
	c.VPSHUFD(operand.Imm(0x4E), x, t)
	c.VPADDD(t, x, x)
	c.VPSHUFD(operand.Imm(0xB1), x, t)
	c.VPADDD(t, x, x)
	c.VMOVD(x, m)
}

func dotVNNI(c *build.Context, rows, cols int) {
	name := fmt.Sprintf("dot%dx%dVNNI", rows, cols)
	declareNoescape(c, name, "func(kb int, a *byte, lda int, w *int8, ldw int, c *int32)",
		fmt.Sprintf("%s sets c[i*%d+j] = sum_{k<64*kb} a[i*lda+k]*w[j*ldw+k] for i < %d, j < %d (kb >= 1).", name, cols, rows, cols))
	kb, a, lda, w, ldw, out := loadArg(c, "kb"), loadArg(c, "a"), loadArg(c, "lda"), loadArg(c, "w"), loadArg(c, "ldw"), loadArg(c, "c")
	ap := rowPtrs(c, a, lda, rows)
	wp := rowPtrs(c, w, ldw, cols)
	acc := zeroZ(c, rows*cols)
	repeat(c, name+"_loop", kb, func() {
		if rows == 1 {
			av := c.ZMM()
			c.VMOVDQU32(mem(ap[0], 0), av)
			for j := 0; j < cols; j++ {
				c.VPDPBUSD(mem(wp[j], 0), av, acc[j])
			}
		} else {
			wv := make([]reg.VecVirtual, cols)
			for j := range wv {
				wv[j] = c.ZMM()
				c.VMOVDQU32(mem(wp[j], 0), wv[j])
			}
			for i := 0; i < rows; i++ {
				av := c.ZMM()
				c.VMOVDQU32(mem(ap[i], 0), av)
				for j := 0; j < cols; j++ {
					c.VPDPBUSD(wv[j], av, acc[i*cols+j])
				}
			}
		}
		for _, p := range ap {
			c.ADDQ(operand.Imm(64), p)
		}
		for _, p := range wp {
			c.ADDQ(operand.Imm(64), p)
		}
	})
	for i, z := range acc {
		y := z.AsY()
		hi := c.YMM()
		c.VEXTRACTI64X4(operand.Imm(1), z, hi)
		c.VPADDD(hi, y, y)
		hsumStoreY(c, y, mem(out, 4*i), true)
	}
	vzeroRet(c)
}

func dotAVX2(c *build.Context, rows, cols int) {
	name := fmt.Sprintf("dot%dx%dAVX2", rows, cols)
	declareNoescape(c, name, "func(kb int, a *byte, lda int, w *int8, ldw int, c *int32)",
		fmt.Sprintf("%s sets c[i*%d+j] = sum_{k<64*kb} a[i*lda+k]*w[j*ldw+k] for i < %d, j < %d (kb >= 1).", name, cols, rows, cols))
	kb, a, lda, w, ldw, out := loadArg(c, "kb"), loadArg(c, "a"), loadArg(c, "lda"), loadArg(c, "w"), loadArg(c, "ldw"), loadArg(c, "c")
	ap := rowPtrs(c, a, lda, rows)
	wp := rowPtrs(c, w, ldw, cols)
	acc := zeroY(c, rows*cols)
	repeat(c, name+"_loop", kb, func() {
		for s := 0; s < 64; s += 16 {
			if rows == 1 {
				av := c.YMM()
				c.VPMOVZXBW(mem(ap[0], s), av)
				for j := 0; j < cols; j++ {
					wv, t := c.YMM(), c.YMM()
					c.VPMOVSXBW(mem(wp[j], s), wv)
					c.VPMADDWD(wv, av, t)
					c.VPADDD(t, acc[j], acc[j])
				}
				continue
			}
			wv := make([]reg.VecVirtual, cols)
			for j := range wv {
				wv[j] = c.YMM()
				c.VPMOVSXBW(mem(wp[j], s), wv[j])
			}
			for i := 0; i < rows; i++ {
				av := c.YMM()
				c.VPMOVZXBW(mem(ap[i], s), av)
				for j := 0; j < cols; j++ {
					t := c.YMM()
					c.VPMADDWD(wv[j], av, t)
					c.VPADDD(t, acc[i*cols+j], acc[i*cols+j])
				}
			}
		}
		for _, p := range ap {
			c.ADDQ(operand.Imm(64), p)
		}
		for _, p := range wp {
			c.ADDQ(operand.Imm(64), p)
		}
	})
	for i, y := range acc {
		hsumStoreY(c, y, mem(out, 4*i), false)
	}
	vzeroRet(c)
}
