//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// implicitI8AVX2 is the int8 implicit-GEMM kernel (gokern/gemm/implicit.go
// holds its contract and the generic oracle): tiles of 16 output channels x
// 6 pixels, activations (u8, NHWC) broadcast a channel quad (one dword) at a
// time straight from the input, weights (s8 -1/0/+1, 64 bytes per quad: 16
// channels x 4) loaded once per quad into two registers. Each product pair
// is at most 2*255 in magnitude, so int16 lanes (VPADDW) hold up to 64 quads
// exactly; a segment marked flush widens them (VPMADDWD by ones) into the
// tile's int32 sums in t and clears them. Registers: 12 int16 accumulators,
// 2 weights, 1 broadcast, 1 product (renaming lets one architectural
// register serve every pixel). Per quad: 8 loads, 12 VPMADDUBSW, 12 VPADDW.
func implicitI8AVX2(c *build.Context) {
	const pix = 6
	declareNoescape(c, "implicitI8AVX2", "func(w *int8, x *byte, px *int, ntile int, segs *int32, nseg int, t *int32)",
		"implicitI8AVX2 computes ntile >= 1 tiles of 16 channels x 6 pixels (pixel offsets px) over nseg >= 1 segments (off, quads, flush).")
	ones16 := vconst(c, "imones16", splat(0x00010001))
	// ntile and px live in the argument frame (advanced there per tile):
	// the quad loop needs 12 general registers, and R15 is off limits (a
	// global access clobbers it in the c-shared build).
	pt := loadArg(c, "t")
	acc := make([]reg.VecVirtual, 2*pix)
	for i := range acc {
		acc[i] = c.YMM()
	}

	repeat(c, "imtile", paramAddr(c, "ntile"), func() {
		for i := range acc {
			c.VPXOR(acc[i], acc[i], acc[i])
		}
		for i := range acc {
			c.VMOVDQU(acc[0], mem(pt, 32*i)) // the int32 sums start at 0
		}
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

		repeat(c, "imseg", ns, func() {
			off, n := c.GP64(), c.GP64()
			c.MOVLQSX(mem(ps, 0), off)
			c.MOVLQSX(mem(ps, 4), n)

			repeat(c, "imquad", n, func() {
				w0, w1 := c.YMM(), c.YMM()
				c.VMOVDQU(mem(pw, 0), w0)
				c.VMOVDQU(mem(pw, 32), w1)
				for j := range pix {
					b := c.YMM()
					c.VPBROADCASTD(operand.Mem{Base: pp[j], Index: off, Scale: 1}, b)
					for h, wv := range []reg.VecVirtual{w0, w1} {
						p := c.YMM()
						c.VPMADDUBSW(wv, b, p)
						c.VPADDW(p, acc[2*j+h], acc[2*j+h])
					}
				}
				c.ADDQ(operand.Imm(4), off)
				c.ADDQ(operand.Imm(64), pw)
			})

			c.CMPL(mem(ps, 8), operand.Imm(0))
			c.JE(operand.LabelRef("imnext"))
			for i := range acc {
				c.VPMADDWD(ones16, acc[i], acc[i])
				c.VPADDD(mem(pt, 32*i), acc[i], acc[i])
				c.VMOVDQU(acc[i], mem(pt, 32*i))
				c.VPXOR(acc[i], acc[i], acc[i])
			}
			c.Label("imnext")
			c.ADDQ(operand.Imm(12), ps)
		})

		c.ADDQ(operand.U32(4*16*pix), pt)
	})
	vzeroRet(c)
}

// foldTilesAVX2 folds the implicit kernel's tiles (pixel-major: 16 sums per
// pixel) into float32 rows of output channels (gemm.FoldTiles): for each
// half of the 16 channels and each block of 8 pixels (foldTileBlock), 8
// YMM loads (one pixel each), then per pixel the int8 fold's operations in the generic
// code's order (the correction subtracted, VCVTDQ2PS, VDIVPS by a, VMULPS
// by the channels' scales, VADDPS of their biases with mode 1), an 8x8
// transpose (transpose8Y) and 8 stores of 8 pixels each into dst rows ldd
// apart. One loop per mode.
func foldTilesAVX2(c *build.Context) {
	declareNoescape(c, "foldTilesAVX2",
		"func(dst *float32, ldd int, t *int32, nblk int, corr *int32, a float32, sc *float32, bias *float32, mode int)",
		"foldTilesAVX2 sets dst[o*ldd+i] = float32(float32(float32(t[i*16+o]-corr[o])/a)*sc[o]) (+ bias[o] with mode 1)",
		"for o < 16, i < 8*nblk (nblk >= 1).")
	pd, ld, pt, n, pc := loadArg(c, "dst"), loadArg(c, "ldd"), loadArg(c, "t"), loadArg(c, "nblk"), loadArg(c, "corr")
	ps, pb, mode := loadArg(c, "sc"), loadArg(c, "bias"), loadArg(c, "mode")
	va := c.YMM()
	c.VBROADCASTSS(paramAddr(c, "a"), va)
	c.SHLQ(operand.Imm(2), ld)
	ld3 := times3(c, ld)
	done := "ftdone"
	for m := range 2 {
		c.CMPQ(mode, operand.Imm(uint64(m)))
		c.JE(operand.LabelRef(fmt.Sprintf("ft%d", m)))
	}
	c.JMP(operand.LabelRef(done))
	for m := range 2 {
		c.Label(fmt.Sprintf("ft%d", m))
		for h := range 2 { // half h's rows, block after block
			tp, dp, cnt := c.GP64(), c.GP64(), c.GP64()
			c.MOVQ(pt, tp)
			c.MOVQ(n, cnt)
			if h == 0 {
				c.MOVQ(pd, dp)
			} else {
				c.LEAQ(operand.Mem{Base: pd, Index: ld, Scale: 8}, dp)
			}
			repeat(c, fmt.Sprintf("ftblk%d%d", m, h), cnt, func() {
				foldTileBlock(c, dp, ld, ld3, tp, pc, ps, pb, va, h, m)
				c.ADDQ(operand.U32(8*64), tp)
				c.ADDQ(operand.Imm(32), dp)
			})
		}
		c.JMP(operand.LabelRef(done))
	}
	c.Label(done)
	vzeroRet(c)
}

// foldTileBlock emits one block of foldTilesAVX2: the 8 pixels at pt, the
// channels of half h (8h .. 8h+7), folded, transposed and stored into the
// half's 8 rows from pd (ld bytes apart, ld3 = 3*ld), in mode m.
func foldTileBlock(c *build.Context, pd, ld, ld3, pt, pc, ps, pb reg.Register, va reg.VecVirtual, h, m int) {
	r := make([]reg.VecVirtual, 8)
	for j := range r {
		r[j] = c.YMM()
		c.VMOVDQU(mem(pt, 64*j+32*h), r[j])
		c.VPSUBD(mem(pc, 32*h), r[j], r[j])
		c.VCVTDQ2PS(r[j], r[j])
		c.VDIVPS(va, r[j], r[j])
		c.VMULPS(mem(ps, 32*h), r[j], r[j])
		if m&1 != 0 {
			c.VADDPS(mem(pb, 32*h), r[j], r[j])
		}
	}
	storeRows(c, transpose8Y(c, r), pd, ld, ld3, 0) // pd: the half's first row
}

// tileRowsAVX2 turns the implicit kernel's tiles (pixel-major: 16 sums per
// pixel) into rows of output channels: for each block of 8 pixels and each
// half of the 16 channels, 8 YMM loads (one pixel each), the corrections
// subtracted, an 8x8 transpose (transpose8Y) and 8 stores of 8 pixels each
// into dst rows ldd apart. gemm.FoldTiles runs it where it folds a row at a
// time (streaming stores, a partial block of channels).
func tileRowsAVX2(c *build.Context) {
	declareNoescape(c, "tileRowsAVX2", "func(dst *int32, ldd int, t *int32, nblk int, corr *int32)",
		"tileRowsAVX2 sets dst[o*ldd+i] = t[i*16+o] - corr[o] for o < 16, i < 8*nblk (nblk >= 1).")
	pd, ld, pt, n, pc := loadArg(c, "dst"), loadArg(c, "ldd"), loadArg(c, "t"), loadArg(c, "nblk"), loadArg(c, "corr")
	c.SHLQ(operand.Imm(2), ld)
	ld3 := times3(c, ld)
	repeat(c, "trblk", n, func() {
		for h := range 2 {
			r := make([]reg.VecVirtual, 8)
			for j := range r {
				r[j] = c.YMM()
				c.VMOVDQU(mem(pt, 64*j+32*h), r[j])
				c.VPSUBD(mem(pc, 32*h), r[j], r[j])
			}
			storeRows(c, transpose8Y(c, r), pd, ld, ld3, h)
		}
		c.ADDQ(operand.U32(8*64), pt)
		c.ADDQ(operand.Imm(32), pd)
	})
	vzeroRet(c)
}

// storeRows stores the 8 columns of a transposed block (channels 8h+o, o <
// 8) into their rows: row 8h+o at p + (8h+o)*ld (ld in bytes, ld3 = 3*ld).
func storeRows(c *build.Context, cols []reg.VecVirtual, p, ld, ld3 reg.Register, h int) {
	b0, b4 := p, c.GP64()
	if h == 1 {
		b0 = c.GP64()
		c.LEAQ(operand.Mem{Base: p, Index: ld, Scale: 8}, b0)
	}
	c.LEAQ(operand.Mem{Base: b0, Index: ld, Scale: 4}, b4)
	for o, v := range cols {
		base := b0
		if o >= 4 {
			base = b4
		}
		c.VMOVDQU(v, rowAddrs(base, ld, ld3, 0)[o%4])
	}
}

// quantU8 holds the constants of the implicit-layout quantizers, in YMM
// registers (the AVX2 kernels) or ZMM (wide: quantU8x8AVX512).
type quantU8 struct {
	c                *build.Context
	wide             bool
	va, lo, hi, flip reg.VecVirtual // lo: AVX2 only
	tr               reg.VecVirtual
}

func newQuantU8(c *build.Context, wide bool) *quantU8 {
	vec, bcst := c.YMM, func(v uint32) reg.VecVirtual { return bcst32(c, v) }
	if wide {
		vec, bcst = c.ZMM, func(v uint32) reg.VecVirtual { return bcstZ32(c, v) }
	}
	q := &quantU8{c: c, wide: wide, va: vec(), tr: vec()}
	c.VBROADCASTSS(paramAddr(c, "a"), q.va)
	if !wide {
		q.lo = bcst(0xc3000000) // -128.0
	}
	q.hi = bcst(0x42fe0000) // 127.0
	q.flip = bcst(0x80808080)
	tr := vconst(c, "qu8tr", [8]uint32{0x0c080400, 0x0d090501, 0x0e0a0602, 0x0f0b0703,
		0x0c080400, 0x0d090501, 0x0e0a0602, 0x0f0b0703})
	if wide {
		c.VBROADCASTI32X4(tr, q.tr)
	} else {
		c.VMOVDQU(tr, q.tr)
	}
	return q
}

// quant returns the floats at m (8, or 16 wide) quantized as quantI8AVX2
// does, as int32: VMULPS, NaN cleared, clamp, VCVTPS2DQ. Wide, in four
// operations for six: VCMPPS marks the lanes not NaN, a zeroing VMINPS at
// 127 clears the others, and the clamp at -128 is left to the signed
// saturation of quad's packs (VCVTPS2DQ gives INT32_MIN below -2^31,
// which saturates to -128 as well; rounding before the clamp gives the
// same code: -128.5 rounds to -128).
func (q *quantU8) quant(m operand.Mem) reg.VecVirtual {
	c := q.c
	if q.wide {
		v, k := c.ZMM(), c.K()
		c.VMULPS(m, q.va, v)
		c.VCMPPS(operand.Imm(7), v, v, k) // ordered: not NaN
		c.VMINPS_Z(q.hi, v, k, v)
		c.VCVTPS2DQ(v, v)
		return v
	}
	v, k := c.YMM(), c.YMM()
	c.VMULPS(m, q.va, v)
	c.VCMPPS(operand.Imm(7), v, v, k) // ordered: not NaN
	c.VANDPS(k, v, v)
	c.VMAXPS(q.lo, v, v)
	c.VMINPS(q.hi, v, v)
	c.VCVTPS2DQ(v, v)
	return v
}

// quantRows8 prefetches the 8 channel rows (channel i at ps + i*ld, ld3 =
// 3*ld) pf bytes ahead, later channels a later call reads (with 8 rows a
// call, and hundreds of rows per output row of the layout, the hardware
// prefetchers do not follow the streams), and returns each row's next
// register of pixels quantized (ps4: a scratch register).
func (q *quantU8) quantRows8(ps, pf, ld, ld3, ps4 reg.Register) [8]reg.VecVirtual {
	c := q.c
	pfb := c.GP64()
	c.LEAQ(operand.Mem{Base: ps, Index: pf, Scale: 1}, pfb)
	for i := range 8 {
		if i == 4 {
			c.LEAQ(operand.Mem{Base: pfb, Index: ld, Scale: 4}, pfb)
		}
		c.PREFETCHT0(rowAddrs(pfb, ld, ld3, 0)[i%4])
	}
	c.LEAQ(operand.Mem{Base: ps, Index: ld, Scale: 4}, ps4)
	var v [8]reg.VecVirtual
	for i := range v {
		base := ps
		if i >= 4 {
			base = ps4
		}
		v[i] = q.quant(rowAddrs(base, ld, ld3, 0)[i%4])
	}
	return v
}

// quad packs four channels' int32 (8 pixels each; 16 wide) into v[0]: per
// 128-bit lane the 4 pixels' dwords of channel bytes (lane j: pixels
// 4j..4j+3), plus 128. VPACKSSDW and VPACKSSWB leave them channel-major, a
// 4x4 byte transpose (VPSHUFB) makes them pixel-major.
func (q *quantU8) quad(v []reg.VecVirtual) {
	c := q.c
	c.VPACKSSDW(v[1], v[0], v[0])
	c.VPACKSSDW(v[3], v[2], v[2])
	c.VPACKSSWB(v[2], v[0], v[0])
	c.VPSHUFB(q.tr, v[0], v[0])
	if q.wide {
		c.VPXORD(q.flip, v[0], v[0])
	} else {
		c.VPXOR(q.flip, v[0], v[0])
	}
}

// quantU8x8AVX2 quantizes 8 channels x 8 pixels per block into the
// implicit layout (QuantU8x8 in gokern/gemm/implicit.go): quantU8x8's
// YMM form.
func quantU8x8AVX2(c *build.Context) { quantU8x8(c, false) }

// quantU8x8 emits quantU8x8AVX2 (YMM, 8 pixels a block) or, wide,
// quantU8x8AVX512 (ZMM, 16; four operations per register of values where
// the YMM form takes six: quantU8.quant): per channel one load of a
// block's pixels (quantU8.quant), each half of the channels packed to a
// dword per pixel (quantU8.quad), VPUNPCKL/HDQ joining the halves into one
// qword per pixel (per 128-bit lane j: pixels 4j, 4j+1 and 4j+2, 4j+3),
// and one qword store per pixel, cp bytes apart, in pixel order. Both
// give the generic kernel's bytes (TestQuantU8MatchesGeneric).
func quantU8x8(c *build.Context, wide bool) {
	name, px, vec, top := "quantU8x8AVX2", 8, c.YMM, "qu8blk"
	if wide {
		name, px, vec, top = "quantU8x8AVX512", 16, c.ZMM, "qu8blk512"
	}
	declareNoescape(c, name, "func(dst *byte, src *float32, hw int, nblk int, cp int, a float32, pf int)",
		fmt.Sprintf("%s sets dst[x*cp+i] = byte(Quant8(src[i*hw+x], a)) ^ 0x80 for i < 8, x < %d*nblk (nblk >= 1), prefetching the rows pf bytes ahead.", name, px))
	pd, ps, ld, n, cp, pf := loadArg(c, "dst"), loadArg(c, "src"), loadArg(c, "hw"), loadArg(c, "nblk"), loadArg(c, "cp"), loadArg(c, "pf")
	c.SHLQ(operand.Imm(2), ld)
	ld3, cp3 := times3(c, ld), times3(c, cp)
	ps4, pd2 := c.GP64(), c.GP64()
	q := newQuantU8(c, wide)
	repeat(c, top, n, func() {
		v := q.quantRows8(ps, pf, ld, ld3, ps4)
		q.quad(v[:4])
		q.quad(v[4:])
		l, u := vec(), vec()
		c.VPUNPCKLDQ(v[4], v[0], l) // per 128-bit lane j: pixels 4j, 4j+1
		c.VPUNPCKHDQ(v[4], v[0], u) // pixels 4j+2, 4j+3
		for j := range px / 4 {
			lx, ux := l.AsX(), u.AsX()
			if j > 0 {
				lx, ux = c.XMM(), c.XMM()
				if wide {
					c.VEXTRACTI32X4(operand.Imm(uint64(j)), l, lx)
					c.VEXTRACTI32X4(operand.Imm(uint64(j)), u, ux)
				} else {
					c.VEXTRACTI128(operand.Imm(1), l, lx)
					c.VEXTRACTI128(operand.Imm(1), u, ux)
				}
			}
			c.LEAQ(operand.Mem{Base: pd, Index: cp, Scale: 2}, pd2) // pixel 4j+2
			c.VMOVQ(lx, mem(pd, 0))
			c.VPEXTRQ(operand.Imm(1), lx, operand.Mem{Base: pd, Index: cp, Scale: 1})
			c.VMOVQ(ux, mem(pd2, 0))
			c.VPEXTRQ(operand.Imm(1), ux, operand.Mem{Base: pd, Index: cp3, Scale: 1})
			c.LEAQ(operand.Mem{Base: pd, Index: cp, Scale: 4}, pd)
		}
		c.ADDQ(operand.Imm(uint64(4*px)), ps)
	})
	vzeroRet(c)
}

// quantU8x4AVX2 is quantU8x8AVX2 for 4 channels at byte offsets offs[0..3]
// from src (QuantU8x4: the caller repeats the last channel's offset for
// fewer), with a dword store per pixel.
func quantU8x4AVX2(c *build.Context) {
	declareNoescape(c, "quantU8x4AVX2", "func(dst *byte, src *float32, offs *int, nblk int, cp int, a float32)",
		"quantU8x4AVX2 sets dst[x*cp+i] = byte(Quant8(src[offs[i]/4+x], a)) ^ 0x80 for i < 4, x < 8*nblk (nblk >= 1).")
	pd, ps, po, n, cp := loadArg(c, "dst"), loadArg(c, "src"), loadArg(c, "offs"), loadArg(c, "nblk"), loadArg(c, "cp")
	var off [3]reg.GPVirtual
	for i := range off {
		off[i] = c.GP64()
		c.MOVQ(mem(po, 8*(i+1)), off[i])
	}
	c.ADDQ(mem(po, 0), ps)
	c.SUBQ(mem(po, 0), off[0])
	c.SUBQ(mem(po, 0), off[1])
	c.SUBQ(mem(po, 0), off[2])
	cp3 := times3(c, cp)
	pd4 := c.GP64()
	q := newQuantU8(c, false)
	repeat(c, "qu4blk", n, func() {
		c.LEAQ(operand.Mem{Base: pd, Index: cp, Scale: 4}, pd4)
		var v [4]reg.VecVirtual
		v[0] = q.quant(mem(ps, 0))
		for i := 1; i < 4; i++ {
			v[i] = q.quant(operand.Mem{Base: ps, Index: off[i-1], Scale: 1})
		}
		q.quad(v[:])
		h := c.XMM()
		c.VEXTRACTI128(operand.Imm(1), v[0], h)
		for k, x := range []reg.Register{v[0].AsX(), h} { // pixels 4k..4k+3
			base := pd
			if k == 1 {
				base = pd4
			}
			c.VMOVD(x, rowAddrs(base, cp, cp3, 0)[0])
			for j := 1; j < 4; j++ {
				c.VPEXTRD(operand.Imm(uint64(j)), x, rowAddrs(base, cp, cp3, 0)[j])
			}
		}
		c.ADDQ(operand.Imm(32), ps)
		c.LEAQ(operand.Mem{Base: pd4, Index: cp, Scale: 4}, pd)
	})
	vzeroRet(c)
}
