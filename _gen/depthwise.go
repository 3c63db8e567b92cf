//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The depthwise convolution's taps kernels (op conv_dw, gokern/gemm; the
// generic Go loops of depthwise.go are their oracle): for each run of
// dwUnroll vectors of output positions (then single vectors), the sums are
// loaded once, every tap x[offs[t]+i] added into them in order (float32:
// VFMADD231PS by the broadcast weight; int8: sign-extended, added for the
// first npos taps and subtracted for the rest), and stored once. The Go
// wrappers (depthwise_amd64.go) run the last n % lanes positions.

// dwAVX2 emits gokern/gemm/depthwise_avx2_amd64.s.
var dwAVX2 = kernels(
	func(c *build.Context) { dwTapsF32(c, "dwTapsF32Y", 8, c.YMM) },
	func(c *build.Context) { dwTapsI8(c, "dwTapsI8Y", 8, c.YMM) },
)

// dwAVX512 emits gokern/gemm/depthwise_avx512_amd64.s.
var dwAVX512 = kernels(
	func(c *build.Context) { dwTapsF32(c, "dwTapsF32Z", 16, c.ZMM) },
	func(c *build.Context) { dwTapsI8(c, "dwTapsI8Z", 16, c.ZMM) },
)

// dwUnroll is the vectors of sums the main loops keep in registers.
const dwUnroll = 4

// dwRuns emits the main loop over runs of dwUnroll vectors and the loop over
// single vectors: body(label, nv) emits the work of nv vectors at d and x
// (a label prefix for its own loops), then d and x advance by nv vectors of
// dBytes and xBytes each and n by nv*lanes.
func dwRuns(c *build.Context, name string, lanes, dBytes, xBytes int, d, x, n reg.Register, body func(label string, nv int)) {
	for _, nv := range []int{dwUnroll, 1} {
		top := fmt.Sprintf("%s_v%d", name, nv)
		whileAtLeast(c, top, top+"_end", n, nv*lanes, func() {
			body(top, nv)
			c.ADDQ(operand.U32(nv*dBytes), d)
			c.ADDQ(operand.U32(nv*xBytes), x)
		})
		c.Label(top + "_end")
	}
	vzeroRet(c)
}

// dwTapsF32 emits name(dst, x *float32, offs *int, w *float32, taps, n int):
// dst[i] += w[t]*x[offs[t]+i] for t < taps in order (fused), i < n (a
// multiple of lanes), taps >= 1.
func dwTapsF32(c *build.Context, name string, lanes int, vec func() reg.VecVirtual) {
	declareNoescape(c, name, "func(dst, x *float32, offs *int, w *float32, taps, n int)",
		fmt.Sprintf("%s sets dst[i] += w[t]*x[offs[t]+i] (fused, in order of t < taps) for i < n,", name),
		fmt.Sprintf("n a multiple of %d, taps >= 1.", lanes))
	args := loadArgs(c, "dst", "x", "offs", "w", "taps", "n")
	d, x, offs, w, taps, n := args[0], args[1], args[2], args[3], args[4], args[5]
	vb := lanes * 4
	dwRuns(c, name, lanes, vb, vb, d, x, n, func(label string, nv int) {
		acc := make([]reg.VecVirtual, nv)
		for j := range acc {
			acc[j] = vec()
			c.VMOVUPS(mem(d, j*vb), acc[j])
		}
		po, pw, t, off := c.GP64(), c.GP64(), c.GP64(), c.GP64()
		c.MOVQ(offs, po)
		c.MOVQ(w, pw)
		c.MOVQ(taps, t)
		wv := vec()
		repeat(c, label+"_tap", t, func() {
			c.MOVQ(operand.Mem{Base: po}, off)
			c.VBROADCASTSS(operand.Mem{Base: pw}, wv)
			for j := range acc {
				c.VFMADD231PS(operand.Mem{Base: x, Index: off, Scale: 4, Disp: j * vb}, wv, acc[j])
			}
			c.ADDQ(operand.Imm(8), po)
			c.ADDQ(operand.Imm(4), pw)
		})
		for j := range acc {
			c.VMOVUPS(acc[j], mem(d, j*vb))
		}
	})
}

// dwTapsI8 emits name(dst *int32, x *int8, offs *int, npos, taps, n int):
// dst[i] += int32(x[offs[t]+i]) for t < npos, -= for npos <= t < taps,
// i < n (a multiple of lanes).
func dwTapsI8(c *build.Context, name string, lanes int, vec func() reg.VecVirtual) {
	declareNoescape(c, name, "func(dst *int32, x *int8, offs *int, npos, taps, n int)",
		fmt.Sprintf("%s sets dst[i] += int32(x[offs[t]+i]) for t < npos and -= for npos <= t < taps,", name),
		fmt.Sprintf("i < n, n a multiple of %d.", lanes))
	args := loadArgs(c, "dst", "x", "offs", "npos", "taps", "n")
	d, x, offs, npos, taps, n := args[0], args[1], args[2], args[3], args[4], args[5]
	c.SUBQ(npos, taps) // taps: the subtracted ones
	vb := lanes * 4
	move := func(a, b operand.Op) { c.VMOVDQU32(a, b) }
	if lanes == 8 {
		move = func(a, b operand.Op) { c.VMOVDQU(a, b) }
	}
	dwRuns(c, name, lanes, vb, lanes, d, x, n, func(label string, nv int) {
		acc := make([]reg.VecVirtual, nv)
		for j := range acc {
			acc[j] = vec()
			move(mem(d, j*vb), acc[j])
		}
		po, t, off := c.GP64(), c.GP64(), c.GP64()
		c.MOVQ(offs, po)
		v := vec()
		for _, part := range []struct {
			count reg.Register
			op    func(...operand.Op)
			tag   string
		}{{npos, c.VPADDD, "_add"}, {taps, c.VPSUBD, "_sub"}} {
			c.MOVQ(part.count, t)
			whileAtLeast(c, label+part.tag, label+part.tag+"_end", t, 1, func() {
				c.MOVQ(operand.Mem{Base: po}, off)
				for j := range acc {
					c.VPMOVSXBD(operand.Mem{Base: x, Index: off, Scale: 1, Disp: j * lanes}, v)
					part.op(v, acc[j], acc[j])
				}
				c.ADDQ(operand.Imm(8), po)
			})
			c.Label(label + part.tag + "_end")
		}
		for j := range acc {
			move(acc[j], mem(d, j*vb))
		}
	})
}
