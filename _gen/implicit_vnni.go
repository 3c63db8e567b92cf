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
func implicitI8VNNI(c *build.Context) { implicitVNNI(c, 1) }

// implicitI8VNNIPair is implicitI8VNNI over two blocks of 16 channels at
// once (w and w+blen, sums into t0 and t1): each pixel's broadcast quad
// feeds two VPDPBUSD, so a quad takes 8 loads for 12 VPDPBUSD instead of
// 14 (and 14 broadcasts' worth of uops fewer a pair of quads), and the 12
// chains are the two blocks' sums, with no second set to add.
func implicitI8VNNIPair(c *build.Context) { implicitVNNI(c, 2) }

// implicitVNNI emits implicitI8VNNI (blocks 1) or implicitI8VNNIPair
// (blocks 2).
func implicitVNNI(c *build.Context, blocks int) {
	const pix = 6
	if blocks == 1 {
		declareNoescape(c, "implicitI8VNNI", "func(w *int8, x *byte, px *int, ntile int, segs *int32, nseg int, t *int32)",
			"implicitI8VNNI computes ntile >= 1 tiles of 16 channels x 6 pixels (pixel offsets px) over nseg >= 1 segments (off, quads, flush).")
	} else {
		declareNoescape(c, "implicitI8VNNIPair", "func(w *int8, blen int, x *byte, px *int, ntile int, segs *int32, nseg int, t0, t1 *int32)",
			"implicitI8VNNIPair is implicitI8VNNI for the blocks at w and w+blen at once, their tiles into t0 and t1.")
	}
	pt := []reg.Register{loadArg(c, map[int]string{1: "t", 2: "t0"}[blocks])}
	var blen reg.Register
	if blocks == 2 {
		pt = append(pt, loadArg(c, "t1"))
		blen = loadArg(c, "blen")
	}
	repeat(c, "ivtile", paramAddr(c, "ntile"), func() {
		acc, odd := zeroZ(c, pix), zeroZ(c, pix) // blocks 2: odd holds the second block's sums
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
			// quad adds quad q (0 or 1) past off and pw into sums (blocks 1)
			// or into acc and odd (blocks 2: the weights at pw and pw+blen).
			quad := func(q int, sums []reg.VecVirtual) {
				wv := c.ZMM()
				c.VMOVDQU64(mem(pw, 64*q), wv)
				var wv1 reg.VecVirtual
				if blocks == 2 {
					wv1 = c.ZMM()
					c.VMOVDQU64(operand.Mem{Base: pw, Index: blen, Scale: 1, Disp: 64 * q}, wv1)
				}
				for j := range pix {
					b := c.ZMM()
					c.VPBROADCASTD(operand.Mem{Base: pp[j], Index: off, Scale: 1, Disp: 4 * q}, b)
					c.VPDPBUSD(wv, b, sums[j])
					if blocks == 2 {
						c.VPDPBUSD(wv1, b, odd[j])
					}
				}
			}
			second := odd
			if blocks == 2 {
				second = acc
			}
			whileAtLeast(c, "ivpair", "ivpairx", n, 2, func() {
				quad(0, acc)
				quad(1, second)
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
			if blocks == 1 {
				c.VPADDD(odd[j], acc[j], acc[j])
			} else {
				c.VMOVDQU64(odd[j], mem(pt[1], 64*j))
			}
			c.VMOVDQU64(acc[j], mem(pt[0], 64*j))
		}
		for _, p := range pt {
			c.ADDQ(operand.U32(64*pix), p)
		}
	})
	vzeroRet(c)
}

// quantU8x8AVX512 is quantU8x8's ZMM form (_gen/implicit_avx2.go), 16
// pixels a block.
func quantU8x8AVX512(c *build.Context) { quantU8x8(c, true) }

// quantU8x16AVX512 quantizes 16 channels x 16 pixels per block into the
// implicit layout (QuantU8x16 in gokern/gemm/implicit.go): the 16 rows as
// quantU8x8AVX512 quantizes its 8 (quantU8.quantRows8, twice), each quad
// of channels packed to a dword per pixel (quantU8.quad), a 4x4 dword
// transpose within each 128-bit lane (VPUNPCKL/HDQ, then VPUNPCKL/HQDQ)
// leaving register m's lane j with pixel 4j+m's 16 bytes, and one 16-byte
// store per pixel, cp bytes apart (lane 0 by VMOVDQU, the others by
// VEXTRACTI32X4 to memory): per value a quarter of quantU8x8AVX512's
// stores and fewer shuffles.
func quantU8x16AVX512(c *build.Context) {
	declareNoescape(c, "quantU8x16AVX512", "func(dst *byte, src *float32, hw int, nblk int, cp int, a float32, pf int)",
		"quantU8x16AVX512 sets dst[x*cp+i] = byte(Quant8(src[i*hw+x], a)) ^ 0x80 for i < 16, x < 16*nblk (nblk >= 1), prefetching the rows pf bytes ahead.")
	pd, ps, ld, n, cp, pf := loadArg(c, "dst"), loadArg(c, "src"), loadArg(c, "hw"), loadArg(c, "nblk"), loadArg(c, "cp"), loadArg(c, "pf")
	c.SHLQ(operand.Imm(2), ld)
	ld3, cp3 := times3(c, ld), times3(c, cp)
	ps4, ps8 := c.GP64(), c.GP64()
	q := newQuantU8(c, true)
	repeat(c, "qu16blk", n, func() {
		lo := q.quantRows8(ps, pf, ld, ld3, ps4)
		q.quad(lo[:4]) // channels 0-3 in lo[0]
		q.quad(lo[4:]) // 4-7 in lo[4]
		c.LEAQ(operand.Mem{Base: ps, Index: ld, Scale: 8}, ps8)
		hi := q.quantRows8(ps8, pf, ld, ld3, ps4)
		q.quad(hi[:4]) // 8-11
		q.quad(hi[4:]) // 12-15
		t := [4]reg.VecVirtual{c.ZMM(), c.ZMM(), c.ZMM(), c.ZMM()}
		c.VPUNPCKLDQ(lo[4], lo[0], t[0]) // per lane j: pixels 4j, 4j+1, channels 0-7
		c.VPUNPCKHDQ(lo[4], lo[0], t[1]) // pixels 4j+2, 4j+3
		c.VPUNPCKLDQ(hi[4], hi[0], t[2]) // pixels 4j, 4j+1, channels 8-15
		c.VPUNPCKHDQ(hi[4], hi[0], t[3])
		r := [4]reg.VecVirtual{c.ZMM(), c.ZMM(), c.ZMM(), c.ZMM()}
		c.VPUNPCKLQDQ(t[2], t[0], r[0]) // pixel 4j
		c.VPUNPCKHQDQ(t[2], t[0], r[1]) // 4j+1
		c.VPUNPCKLQDQ(t[3], t[1], r[2]) // 4j+2
		c.VPUNPCKHQDQ(t[3], t[1], r[3]) // 4j+3
		for j := range 4 {
			at := [4]operand.Mem{mem(pd, 0), {Base: pd, Index: cp, Scale: 1}, {Base: pd, Index: cp, Scale: 2}, {Base: pd, Index: cp3, Scale: 1}}
			for m, v := range r {
				if j == 0 {
					c.VMOVDQU(v.AsX(), at[m])
				} else {
					c.VEXTRACTI32X4(operand.Imm(uint64(j)), v, at[m])
				}
			}
			c.LEAQ(operand.Mem{Base: pd, Index: cp, Scale: 4}, pd)
		}
		c.ADDQ(operand.Imm(64), ps)
	})
	vzeroRet(c)
}
