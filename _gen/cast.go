//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The casts' AVX2 kernel (gokern/cast, cast_amd64.go registers it; the
// generic Go bf16ToF32 is its oracle).

// castAVX2 emits gokern/cast/cast_avx2_amd64.s.
var castAVX2 = kernels(bf16WidenAVX2, bf16NarrowF16C, f32NarrowF16C)

// bf16WidenAVX2 widens 32 bfloat16 values per iteration: VPMOVZXWD zero
// extends 8 of them to dwords, VPSLLD 16 moves the bits to the top half.
func bf16WidenAVX2(c *build.Context) {
	declareNoescape(c, "bf16WidenAVX2", "func(dst []float32, src []uint16)",
		"bf16WidenAVX2 writes the float32 values of the first len(src)/32*32 bfloat16",
		"bits of src into dst (len(dst) >= that): each value's bits shifted up 16.",
	)
	args := loadArgs(c, "dst.base", "src.base", "src.len")
	d, s, n := args[0], args[1], args[2]
	c.SHRQ(operand.Imm(5), n)
	whileAtLeast(c, "loop", "done", n, 1, func() {
		for k := 0; k < 4; k++ {
			r := c.YMM()
			c.VPMOVZXWD(mem(s, 16*k), r)
			c.VPSLLD(operand.Imm(16), r, r)
			c.VMOVDQU(r, mem(d, 32*k))
		}
		c.ADDQ(operand.Imm(64), s)
		c.ADDQ(operand.Imm(128), d)
	})
	c.Label("done")
	vzeroRet(c)
}

// bf16NarrowF16C rounds 32 bfloat16 values per iteration to float16, as
// numpy does: VPMOVZXWD and VPSLLD widen 8 of them to float32, VCVTPS2PH
// (imm 0: nearest, ties to even) narrows them to float16, exact for every
// non-NaN value. VCVTPS2PH quiets a NaN (sets the half's top mantissa bit)
// where numpy keeps the mantissa's top bits as they are, so the NaN lanes
// (|bits| > 0x7f80 as 16-bit words) are blended with numpy's half:
// sign | 0x7c00 | (bits&0x7f)<<3 (never 0x7c00: a NaN's bfloat16 mantissa
// is not 0). Runs without a NaN skip the fix-up after one VPTEST.
func bf16NarrowF16C(c *build.Context) {
	declareNoescape(c, "bf16NarrowF16C", "func(dst []uint16, src []uint16)",
		"bf16NarrowF16C writes the float16 bits (numpy's rounding) of the first",
		"len(src)/32*32 bfloat16 bits of src into dst (len(dst) >= that). Needs F16C.",
	)
	args := loadArgs(c, "dst.base", "src.base", "src.len")
	d, s, n := args[0], args[1], args[2]
	abs, inf := bcst32(c, 0x7fff7fff), bcst32(c, 0x7f807f80)
	c.SHRQ(operand.Imm(5), n)
	var h, m [2]reg.VecVirtual
	whileAtLeast(c, "loop", "done", n, 1, func() {
		for k := range 2 {
			lo, hi := c.YMM(), c.YMM()
			c.VPMOVZXWD(mem(s, 32*k), lo)
			c.VPMOVZXWD(mem(s, 32*k+16), hi)
			c.VPSLLD(operand.Imm(16), lo, lo)
			c.VPSLLD(operand.Imm(16), hi, hi)
			xl, xh := c.XMM(), c.XMM()
			c.VCVTPS2PH(operand.Imm(0), lo, xl)
			c.VCVTPS2PH(operand.Imm(0), hi, xh)
			h[k] = c.YMM()
			c.VINSERTI128(operand.Imm(1), xh, xl.AsY(), h[k])
			m[k] = c.YMM()
			c.VPAND(mem(s, 32*k), abs, m[k])
			c.VPCMPGTW(inf, m[k], m[k]) // NaN: |bits| > 0x7f80
		}
		nan := c.YMM()
		c.VPOR(m[0], m[1], nan)
		c.VPTEST(nan, nan)
		c.JZ(operand.LabelRef("store"))
		low, sign, qnan := bcst32(c, 0x007f007f), bcst32(c, 0x80008000), bcst32(c, 0x7c007c00)
		for k := range 2 {
			f, g := c.YMM(), c.YMM()
			c.VPAND(mem(s, 32*k), low, f)
			c.VPSLLW(operand.Imm(3), f, f)
			c.VPAND(mem(s, 32*k), sign, g)
			c.VPOR(g, f, f)
			c.VPOR(qnan, f, f)
			c.VPBLENDVB(m[k], f, h[k], h[k])
		}
		c.Label("store")
		c.VMOVDQU(h[0], mem(d, 0))
		c.VMOVDQU(h[1], mem(d, 32))
		c.ADDQ(operand.Imm(64), s)
		c.ADDQ(operand.Imm(64), d)
	})
	c.Label("done")
	vzeroRet(c)
}

// f32NarrowF16C rounds 32 float32 values per iteration to float16, as numpy
// does: VCVTPS2PH (imm 0: nearest, ties to even) on 8 at a time, exact for
// every non-NaN value. Where a run holds a NaN (VCMPPS unordered), its
// lanes are blended with numpy's half, computed on the dwords: sign |
// 0x7c00 | max(bits>>13 & 0x3ff, 1), packed to words (VPACKUSDW, the mask
// by VPACKSSDW) and put back in order (VPERMQ 0xd8: the packs interleave
// the two sources per 128-bit lane).
func f32NarrowF16C(c *build.Context) {
	declareNoescape(c, "f32NarrowF16C", "func(dst []uint16, src []float32)",
		"f32NarrowF16C writes the float16 bits (numpy's rounding) of the first",
		"len(src)/32*32 float32 values of src into dst (len(dst) >= that). Needs F16C.",
	)
	args := loadArgs(c, "dst.base", "src.base", "src.len")
	d, s, n := args[0], args[1], args[2]
	c.SHRQ(operand.Imm(5), n)
	var x [4]reg.VecVirtual
	var h [2]reg.VecVirtual
	whileAtLeast(c, "loop", "done", n, 1, func() {
		for k := range 2 {
			lo, hi := c.XMM(), c.XMM()
			x[2*k], x[2*k+1] = c.YMM(), c.YMM()
			c.VMOVUPS(mem(s, 64*k), x[2*k])
			c.VMOVUPS(mem(s, 64*k+32), x[2*k+1])
			c.VCVTPS2PH(operand.Imm(0), x[2*k], lo)
			c.VCVTPS2PH(operand.Imm(0), x[2*k+1], hi)
			h[k] = c.YMM()
			c.VINSERTI128(operand.Imm(1), hi, lo.AsY(), h[k])
		}
		nan := c.YMM()
		c.VCMPPS(operand.Imm(3), x[0], x[0], nan)
		for _, v := range x[1:] {
			u := c.YMM()
			c.VCMPPS(operand.Imm(3), v, v, u)
			c.VPOR(u, nan, nan)
		}
		c.VPTEST(nan, nan)
		c.JZ(operand.LabelRef("store"))
		man, one, sign, inf := bcst32(c, 0x3ff), bcst32(c, 1), bcst32(c, 0x8000), bcst32(c, 0x7c00)
		half := func(v reg.VecVirtual) (reg.VecVirtual, reg.VecVirtual) {
			f, g, m := c.YMM(), c.YMM(), c.YMM()
			c.VPSRLD(operand.Imm(13), v, f)
			c.VPAND(man, f, f)
			c.VPMAXUD(one, f, f)
			c.VPSRLD(operand.Imm(16), v, g)
			c.VPAND(sign, g, g)
			c.VPOR(g, f, f)
			c.VPOR(inf, f, f)
			c.VCMPPS(operand.Imm(3), v, v, m)
			return f, m
		}
		for k := range 2 {
			fa, ma := half(x[2*k])
			fb, mb := half(x[2*k+1])
			c.VPACKUSDW(fb, fa, fa)
			c.VPERMQ(operand.Imm(0xd8), fa, fa)
			c.VPACKSSDW(mb, ma, ma)
			c.VPERMQ(operand.Imm(0xd8), ma, ma)
			c.VPBLENDVB(ma, fa, h[k], h[k])
		}
		c.Label("store")
		c.VMOVDQU(h[0], mem(d, 0))
		c.VMOVDQU(h[1], mem(d, 32))
		c.ADDQ(operand.Imm(128), s)
		c.ADDQ(operand.Imm(64), d)
	})
	c.Label("done")
	vzeroRet(c)
}
