//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The depthwise convolution's row kernels (op conv_dw, gokern/gemm; the
// generic Go loops of depthwise.go are their oracle): dst += w*x over float32
// and dst ± sign-extended int8 into int32, on whole vectors; the Go wrappers
// (depthwise_amd64.go) run the last n % lanes elements.

// dwAVX2 emits gokern/gemm/depthwise_avx2_amd64.s.
var dwAVX2 = kernels(
	func(c *build.Context) { dwAxpy(c, "dwAxpyF32Y", 8, c.YMM) },
	func(c *build.Context) { dwAddI8(c, "dwAddI8Y", 8, false, c.YMM) },
	func(c *build.Context) { dwAddI8(c, "dwSubI8Y", 8, true, c.YMM) },
)

// dwAVX512 emits gokern/gemm/depthwise_avx512_amd64.s.
var dwAVX512 = kernels(
	func(c *build.Context) { dwAxpy(c, "dwAxpyF32Z", 16, c.ZMM) },
	func(c *build.Context) { dwAddI8(c, "dwAddI8Z", 16, false, c.ZMM) },
	func(c *build.Context) { dwAddI8(c, "dwSubI8Z", 16, true, c.ZMM) },
)

// dwUnroll is the vectors per iteration of the main loops.
const dwUnroll = 4

// dwCounts loads n and splits it into blocks of dwUnroll vectors (in n) and
// the single vectors left (in rem).
func dwCounts(c *build.Context, lanes int) (n, rem reg.Register) {
	n = loadArg(c, "n")
	rem = c.GP64()
	shift := 0
	for 1<<shift < lanes {
		shift++
	}
	c.MOVQ(n, rem)
	c.SHRQ(operand.Imm(uint64(shift)), rem)
	c.ANDQ(operand.Imm(dwUnroll-1), rem)
	c.SHRQ(operand.Imm(uint64(shift+2)), n)
	return n, rem
}

// dwAxpy emits name(dst, x *float32, n int, w float32): dst[i] += w*x[i]
// (fused) for i < n/lanes*lanes.
func dwAxpy(c *build.Context, name string, lanes int, vec func() reg.VecVirtual) {
	declareNoescape(c, name, "func(dst, x *float32, n int, w float32)",
		fmt.Sprintf("%s sets dst[i] += w*x[i] (fused multiply-add) for i < n/%d*%d.", name, lanes, lanes))
	args := loadArgs(c, "dst", "x")
	d, x := args[0], args[1]
	n, rem := dwCounts(c, lanes)
	w := vec()
	c.VBROADCASTSS(paramAddr(c, "w"), w)
	vb := lanes * 4
	step := func(k int) {
		a := vec()
		c.VMOVUPS(mem(d, k*vb), a)
		c.VFMADD231PS(mem(x, k*vb), w, a)
		c.VMOVUPS(a, mem(d, k*vb))
	}
	whileAtLeast(c, name+"_blocks", name+"_single", n, 1, func() {
		for k := range dwUnroll {
			step(k)
		}
		c.ADDQ(operand.U32(dwUnroll*vb), d)
		c.ADDQ(operand.U32(dwUnroll*vb), x)
	})
	c.Label(name + "_single")
	whileAtLeast(c, name+"_one", name+"_done", rem, 1, func() {
		step(0)
		c.ADDQ(operand.U32(vb), d)
		c.ADDQ(operand.U32(vb), x)
	})
	c.Label(name + "_done")
	vzeroRet(c)
}

// dwAddI8 emits name(dst *int32, x *int8, n int): dst[i] += int32(x[i]) (or
// -= for sub) for i < n/lanes*lanes.
func dwAddI8(c *build.Context, name string, lanes int, sub bool, vec func() reg.VecVirtual) {
	op, verb := c.VPADDD, "+="
	if sub {
		op, verb = c.VPSUBD, "-="
	}
	declareNoescape(c, name, "func(dst *int32, x *int8, n int)",
		fmt.Sprintf("%s sets dst[i] %s int32(x[i]) for i < n/%d*%d.", name, verb, lanes, lanes))
	args := loadArgs(c, "dst", "x")
	d, x := args[0], args[1]
	n, rem := dwCounts(c, lanes)
	vb := lanes * 4
	step := func(k int) {
		v, a := vec(), vec()
		c.VPMOVSXBD(mem(x, k*lanes), v)
		c.VMOVDQU32(mem(d, k*vb), a)
		op(v, a, a)
		c.VMOVDQU32(a, mem(d, k*vb))
	}
	if lanes == 8 {
		step = func(k int) {
			v, a := vec(), vec()
			c.VPMOVSXBD(mem(x, k*lanes), v)
			c.VMOVDQU(mem(d, k*vb), a)
			op(v, a, a)
			c.VMOVDQU(a, mem(d, k*vb))
		}
	}
	whileAtLeast(c, name+"_blocks", name+"_single", n, 1, func() {
		for k := range dwUnroll {
			step(k)
		}
		c.ADDQ(operand.U32(dwUnroll*vb), d)
		c.ADDQ(operand.U32(dwUnroll*lanes), x)
	})
	c.Label(name + "_single")
	whileAtLeast(c, name+"_one", name+"_done", rem, 1, func() {
		step(0)
		c.ADDQ(operand.U32(vb), d)
		c.ADDQ(operand.U32(lanes), x)
	})
	c.Label(name + "_done")
	vzeroRet(c)
}
