//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The float32 direct-convolution tiles of the op "conv_directf"
// (gokern/gemm/direct_f32.go, wrapped in direct_f32_amd64.go): mr output
// channels by nv vectors of consecutive output positions, accumulators in
// registers for the whole sum. Per k: nv unaligned loads of the padded
// input at x + offs[k] (one offset per (channel, tap)), mr broadcasts of the
// expanded weights, mr*nv VFMADD231PS. AVX-512: 8 channels x up to 3 ZMM
// (24 accumulators, 48 positions); AVX2: 4 channels x up to 3 YMM (12
// accumulators, 24 positions, every YMM register in use).

// convfAVX512 emits gokern/gemm/directf_avx512_amd64.s.
var convfAVX512 = forEach([]int{1, 2, 3}, func(c *build.Context, nv int) { convfTile(c, "Z", 8, nv, 64, c.ZMM) })

// convfAVX2 emits gokern/gemm/directf_avx2_amd64.s.
var convfAVX2 = forEach([]int{1, 2, 3}, func(c *build.Context, nv int) { convfTile(c, "Y", 4, nv, 32, c.YMM) })

// convfTile emits directF32<reg><mr>x<nv>: t[r*ldt+j] = bias[r] + sum_i
// w[i*mr+r]*x[offs[i]+j] for r < mr, j < nv*vb/4 (k >= 1; ldt in elements).
func convfTile(c *build.Context, rk string, mr, nv, vb int, vec func() reg.VecVirtual) {
	name := fmt.Sprintf("directF32%s%dx%d", rk, mr, nv)
	declareNoescape(c, name, "func(k int, w *float32, x *float32, offs *int, bias *float32, t *float32, ldt int)",
		fmt.Sprintf("%s is the %d x %d-vector float32 direct-convolution tile (k >= 1; offs in elements; ldt in elements).", name, mr, nv))
	n, pw, px, po, pbias := loadArg(c, "k"), loadArg(c, "w"), loadArg(c, "x"), loadArg(c, "offs"), loadArg(c, "bias")
	acc := make([]reg.VecVirtual, mr*nv)
	for r := range mr {
		for j := range nv {
			acc[r*nv+j] = vec()
			c.VBROADCASTSS(mem(pbias, 4*r), acc[r*nv+j])
		}
	}
	loop := "convfloop"
	c.Label(loop)
	off := c.GP64()
	c.MOVQ(mem(po, 0), off)
	xv := make([]reg.VecVirtual, nv)
	for j := range xv {
		xv[j] = vec()
		c.VMOVUPS(operand.Mem{Base: px, Index: off, Scale: 4, Disp: vb * j}, xv[j])
	}
	for r := range mr {
		b := vec()
		c.VBROADCASTSS(mem(pw, 4*r), b)
		for j := range xv {
			c.VFMADD231PS(xv[j], b, acc[r*nv+j])
		}
	}
	c.ADDQ(operand.Imm(8), po)
	c.ADDQ(operand.Imm(uint64(4*mr)), pw)
	c.DECQ(n)
	c.JNZ(operand.LabelRef(loop))

	pt, ldt := loadArg(c, "t"), loadArg(c, "ldt")
	c.SHLQ(operand.Imm(2), ldt)
	for r := range mr {
		for j := range nv {
			c.VMOVUPS(acc[r*nv+j], mem(pt, vb*j))
		}
		if r < mr-1 {
			c.ADDQ(ldt, pt)
		}
	}
	vzeroRet(c)
}
