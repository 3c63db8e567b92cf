//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// implicitI8VNNI is the int8 implicit-GEMM kernel of the avx512vnni family
// (gokern/gemm/implicit.go holds its contract and the generic oracle; op
// "conv_i8"): tiles of 16 output channels x 6 pixels, one ZMM of int32 sums
// per pixel (lane o: channel o). Per quad, the 64 weight bytes (16 channels
// x 4, signed) are one ZMM load and each pixel's channel quad (4 unsigned
// bytes) one VPBROADCASTD straight from the input; VPDPBUSD adds the four
// products of every lane into its int32 sum exactly, so the segments' flush
// flags (the AVX2 kernel's int16 widening) are not needed. The sums go to t,
// 16 per pixel, as implicitI8AVX2's do. Per quad: 7 loads, 6 VPDPBUSD.
// Quads go two at a time into two sets of sums (even and odd quads), added
// at the tile's end: 12 independent VPDPBUSD chains, enough for two
// VPDPBUSD a cycle through their 5-cycle latency. Six chains held an
// Emerald Rapids core (which runs two a cycle) to 143-173 GMAC/s, 12 ran
// 163-263 (BenchmarkImplicit). int32 sums wrap alike in either order.
func implicitI8VNNI(c *build.Context) {
	const pix = 6
	declareNoescape(c, "implicitI8VNNI", "func(w *int8, x *byte, px *int, ntile int, segs *int32, nseg int, t *int32)",
		"implicitI8VNNI computes ntile >= 1 tiles of 16 channels x 6 pixels (pixel offsets px) over nseg >= 1 segments (off, quads, flush).")
	pt := loadArg(c, "t")
	repeat(c, "ivtile", paramAddr(c, "ntile"), func() {
		acc, odd := zeroZ(c, pix), zeroZ(c, pix)
		pp := make([]reg.Register, pix)
		{
			ppx := loadArg(c, "px")
			for j := range pp {
				pp[j] = c.Load(c.Param("x"), c.GP64())
				c.ADDQ(mem(ppx, 8*j), pp[j])
			}
			c.ADDQ(operand.Imm(8*pix), ppx)
			c.Store(ppx, c.Param("px"))
		}
		pw, ps, ns := loadArg(c, "w"), loadArg(c, "segs"), loadArg(c, "nseg")
		repeat(c, "ivseg", ns, func() {
			off, n := c.GP64(), c.GP64()
			c.MOVLQSX(mem(ps, 0), off)
			c.MOVLQSX(mem(ps, 4), n)
			// quad adds quad q (0 or 1) past off and pw into sums.
			quad := func(q int, sums []reg.VecVirtual) {
				wv := c.ZMM()
				c.VMOVDQU64(mem(pw, 64*q), wv)
				for j := range pix {
					b := c.ZMM()
					c.VPBROADCASTD(operand.Mem{Base: pp[j], Index: off, Scale: 1, Disp: 4 * q}, b)
					c.VPDPBUSD(wv, b, sums[j])
				}
			}
			whileAtLeast(c, "ivpair", "ivpairx", n, 2, func() {
				quad(0, acc)
				quad(1, odd)
				c.ADDQ(operand.Imm(8), off)
				c.ADDQ(operand.Imm(128), pw)
			})
			c.Label("ivpairx")
			whileAtLeast(c, "ivone", "ivonex", n, 1, func() {
				quad(0, acc)
				c.ADDQ(operand.Imm(4), off)
				c.ADDQ(operand.Imm(64), pw)
			})
			c.Label("ivonex")
			c.ADDQ(operand.Imm(12), ps)
		})
		for j := range acc {
			c.VPADDD(odd[j], acc[j], acc[j])
			c.VMOVDQU64(acc[j], mem(pt, 64*j))
		}
		c.ADDQ(operand.U32(64*pix), pt)
	})
	vzeroRet(c)
}

// quantU8x8AVX512 is quantU8x8AVX2 (_gen/implicit_avx2.go) on ZMM, 16
// pixels a block: per channel one load of 16 pixels, quantized in four
// operations where the AVX2 kernel takes six (quantU8.quant), then
// quantU8.quad per four channels, VPUNPCKL/HDQ joining the two quads into a
// qword per pixel, and 16 qword stores cp bytes apart. Its results are
// quantU8x8AVX2's, bit for bit (TestQuantU8MatchesGeneric).
func quantU8x8AVX512(c *build.Context) {
	declareNoescape(c, "quantU8x8AVX512", "func(dst *byte, src *float32, hw int, nblk int, cp int, a float32, pf int)",
		"quantU8x8AVX512 sets dst[x*cp+i] = byte(Quant8(src[i*hw+x], a)) ^ 0x80 for i < 8, x < 16*nblk (nblk >= 1), prefetching the rows pf bytes ahead.")
	pd, ps, ld, n, cp, pf := loadArg(c, "dst"), loadArg(c, "src"), loadArg(c, "hw"), loadArg(c, "nblk"), loadArg(c, "cp"), loadArg(c, "pf")
	c.SHLQ(operand.Imm(2), ld)
	ld3, cp3 := times3(c, ld), times3(c, cp)
	ps4, pd4 := c.GP64(), c.GP64()
	q := newQuantU8(c, true)
	repeat(c, "qu8blk512", n, func() {
		v := q.quantRows8(ps, pf, ld, ld3, ps4)
		q.quad(v[:4])
		q.quad(v[4:])
		l, u := c.ZMM(), c.ZMM()
		c.VPUNPCKLDQ(v[4], v[0], l) // per 128-bit lane j: pixels 4j, 4j+1
		c.VPUNPCKHDQ(v[4], v[0], u) // pixels 4j+2, 4j+3
		for j := range 4 {
			lx, ux := l.AsX(), u.AsX()
			if j > 0 {
				lx, ux = c.XMM(), c.XMM()
				c.VEXTRACTI32X4(operand.Imm(uint64(j)), l, lx)
				c.VEXTRACTI32X4(operand.Imm(uint64(j)), u, ux)
			}
			c.LEAQ(operand.Mem{Base: pd, Index: cp, Scale: 2}, pd4) // pixel 4j+2
			c.VMOVQ(lx, mem(pd, 0))
			c.VPEXTRQ(operand.Imm(1), lx, operand.Mem{Base: pd, Index: cp, Scale: 1})
			c.VMOVQ(ux, mem(pd4, 0))
			c.VPEXTRQ(operand.Imm(1), ux, operand.Mem{Base: pd, Index: cp3, Scale: 1})
			c.LEAQ(operand.Mem{Base: pd, Index: cp, Scale: 4}, pd)
		}
		c.ADDQ(operand.Imm(64), ps)
	})
	vzeroRet(c)
}
