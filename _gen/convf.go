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

// convfBlockedAVX512 emits gokern/gemm/directfb_avx512_amd64.s: the
// channels-in-lanes tiles directF32B2x<r>, 32 output channels (two ZMM).
var convfBlockedAVX512 = forEach([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
	func(c *build.Context, r int) { convfBlocked(c, "B", r, 64, c.ZMM) })

// convfBlockedAVX2 emits gokern/gemm/directfb_avx2_amd64.s: directF32Y2x<r>,
// 16 output channels (two YMM), up to 6 positions (15 registers).
var convfBlockedAVX2 = forEach([]int{1, 2, 3, 4, 5, 6},
	func(c *build.Context, r int) { convfBlocked(c, "Y", r, 32, c.YMM) })

// convfBlocked emits directF32<rk>2x<r>: oc = 2*vb/4 output channels (two
// vectors of vb bytes) by r output positions 16 floats apart in a
// channel-blocked input (16 channels per position). t[p*oc+o] = bias[o] +
// sum over the n offsets i and the 16 channels c of w[(i*16+c)*oc+o] *
// x[offs[i]+p*16+c].
func convfBlocked(c *build.Context, rk string, r, vb int, vec func() reg.VecVirtual) {
	name := fmt.Sprintf("directF32%s2x%d", rk, r)
	oc := 2 * vb / 4
	declareNoescape(c, name, "func(n int, w *float32, x *float32, offs *int, bias *float32, t *float32)",
		fmt.Sprintf("%s is the %d-channel x %d-position float32 direct-convolution tile over 16-channel blocks (n >= 1; offs in elements).", name, oc, r))
	n, pw, px, po, pbias := loadArg(c, "n"), loadArg(c, "w"), loadArg(c, "x"), loadArg(c, "offs"), loadArg(c, "bias")
	acc := make([]reg.VecVirtual, 2*r)
	for p := range r {
		for j := range 2 {
			acc[2*p+j] = vec()
			c.VMOVUPS(mem(pbias, vb*j), acc[2*p+j])
		}
	}
	c.Label("blkloop")
	off := c.GP64()
	c.MOVQ(mem(po, 0), off)
	pb := c.GP64()
	c.LEAQ(operand.Mem{Base: px, Index: off, Scale: 4}, pb)
	for ch := range 16 {
		w0, w1 := vec(), vec()
		c.VMOVUPS(mem(pw, 2*vb*ch), w0)
		c.VMOVUPS(mem(pw, 2*vb*ch+vb), w1)
		for p := range r {
			b := vec()
			c.VBROADCASTSS(mem(pb, 64*p+4*ch), b)
			c.VFMADD231PS(w0, b, acc[2*p])
			c.VFMADD231PS(w1, b, acc[2*p+1])
		}
	}
	c.ADDQ(operand.Imm(8), po)
	c.ADDQ(operand.U32(uint64(16*2*vb)), pw)
	c.DECQ(n)
	c.JNZ(operand.LabelRef("blkloop"))
	pt := loadArg(c, "t")
	for p := range r {
		for j := range 2 {
			c.VMOVUPS(acc[2*p+j], mem(pt, 2*vb*p+vb*j))
		}
	}
	vzeroRet(c)
}
