//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The I2_S quantizer's AVX2 kernels (gokern/ternary). Their contracts are in
// gokern/ternary/kernels_amd64.go, which wraps them; the generic Go versions in
// quantize.go are the oracle they are tested against.

func init() {
	register(target{
		name:     "ternary",
		dir:      "gokern/ternary",
		pkg:      "ternary",
		base:     "quant_avx2",
		avx2Only: true,
		gen: func(c *build.Context) {
			absSumAVX2(c)
			absMaxBitsAVX2(c)
			quantGroupsAVX2(c)
			quantGroupsSpecAVX2(c)
		},
	})
}

// Predicates of VCMPPS (ordered, quiet: false for NaN).
const (
	cmpLTOQ = 0x11
	cmpLEOQ = 0x12
	cmpGEOQ = 0x1D
	cmpGTOQ = 0x1E
)

const (
	absMask32 = 0x7fffffff
	absMask64 = 0x7fffffffffffffff
	f32Half   = 0x3f000000 // 0.5
	f32NHalf  = 0xbf000000 // -0.5
)

// absSumAVX2: the float64 sum of |x[i]| (any order; NaN and Inf propagate,
// the caller rescans when the sum is not finite).
func absSumAVX2(c *build.Context) {
	c.Function("absSumAVX2")
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr("func(x []float32) float64")
	c.Doc("absSumAVX2 returns the float64 sum of |x[i]|, in no particular order.")
	p := c.Load(c.Param("x").Base(), c.GP64())
	n := c.Load(c.Param("x").Len(), c.GP64())
	mask := bcst64(c, absMask64)
	acc := zeroY(c, 8)

	c.Comment("32 values per iteration, 8 float64 accumulators.")
	c.Label("loop32")
	c.CMPQ(n, operand.Imm(32))
	c.JB(operand.LabelRef("loop4"))
	for k := 0; k < 8; k++ {
		t := c.YMM()
		c.VCVTPS2PD(mem(p, 16*k), t)
		c.VANDPD(mask, t, t)
		c.VADDPD(t, acc[k], acc[k])
	}
	c.ADDQ(operand.Imm(128), p)
	c.SUBQ(operand.Imm(32), n)
	c.JMP(operand.LabelRef("loop32"))

	c.Label("loop4")
	c.CMPQ(n, operand.Imm(4))
	c.JB(operand.LabelRef("reduce"))
	t := c.YMM()
	c.VCVTPS2PD(mem(p, 0), t)
	c.VANDPD(mask, t, t)
	c.VADDPD(t, acc[0], acc[0])
	c.ADDQ(operand.Imm(16), p)
	c.SUBQ(operand.Imm(4), n)
	c.JMP(operand.LabelRef("loop4"))

	c.Label("reduce")
	for w := 4; w >= 1; w /= 2 {
		for k := 0; k < w; k++ {
			c.VADDPD(acc[k+w], acc[k], acc[k])
		}
	}
	lo, hi := acc[0].AsX(), c.XMM()
	c.VEXTRACTF128(operand.Imm(1), acc[0], hi)
	c.VADDPD(hi, lo, lo)
	c.VUNPCKHPD(lo, lo, hi)
	c.VADDSD(hi, lo, lo)

	c.Comment("The last 0..3 values.")
	c.Label("tail")
	c.TESTQ(n, n)
	c.JZ(operand.LabelRef("done"))
	s := c.XMM()
	c.VMOVSS(mem(p, 0), s)
	c.VCVTSS2SD(s, s, s)
	c.VANDPD(mask.AsX(), s, s)
	c.VADDSD(s, lo, lo)
	c.ADDQ(operand.Imm(4), p)
	c.DECQ(n)
	c.JMP(operand.LabelRef("tail"))

	c.Label("done")
	c.VZEROUPPER()
	c.Store(lo, c.ReturnIndex(0))
	c.RET()
}

// absMaxBitsAVX2: the unsigned maximum of the bit patterns of |x[i]| (sign
// cleared). For finite input that is the bit pattern of max|x|; a result of
// 0x7f800000 or more means an Inf or NaN is present.
func absMaxBitsAVX2(c *build.Context) {
	c.Function("absMaxBitsAVX2")
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr("func(x []float32) uint32")
	c.Doc("absMaxBitsAVX2 returns the unsigned maximum of the bits of |x[i]| (0 for empty x).")
	p := c.Load(c.Param("x").Base(), c.GP64())
	n := c.Load(c.Param("x").Len(), c.GP64())
	mask := bcst32(c, absMask32)
	acc := zeroY(c, 4)

	c.Label("loop32")
	c.CMPQ(n, operand.Imm(32))
	c.JB(operand.LabelRef("loop8"))
	for k := 0; k < 4; k++ {
		t := c.YMM()
		c.VPAND(mem(p, 32*k), mask, t)
		c.VPMAXUD(t, acc[k], acc[k])
	}
	c.ADDQ(operand.Imm(128), p)
	c.SUBQ(operand.Imm(32), n)
	c.JMP(operand.LabelRef("loop32"))

	c.Label("loop8")
	c.CMPQ(n, operand.Imm(8))
	c.JB(operand.LabelRef("reduce"))
	t := c.YMM()
	c.VPAND(mem(p, 0), mask, t)
	c.VPMAXUD(t, acc[0], acc[0])
	c.ADDQ(operand.Imm(32), p)
	c.SUBQ(operand.Imm(8), n)
	c.JMP(operand.LabelRef("loop8"))

	c.Label("reduce")
	c.VPMAXUD(acc[1], acc[0], acc[0])
	c.VPMAXUD(acc[3], acc[2], acc[2])
	c.VPMAXUD(acc[2], acc[0], acc[0])
	lo, hi := acc[0].AsX(), c.XMM()
	c.VEXTRACTI128(operand.Imm(1), acc[0], hi)
	c.VPMAXUD(hi, lo, lo)
	c.VPSHUFD(operand.Imm(0x4e), lo, hi)
	c.VPMAXUD(hi, lo, lo)
	c.VPSHUFD(operand.Imm(0xb1), lo, hi)
	c.VPMAXUD(hi, lo, lo)
	m := c.GP32()
	c.VMOVD(lo, m)

	c.Comment("The last 0..7 values.")
	v := c.GP32()
	c.Label("tail")
	c.TESTQ(n, n)
	c.JZ(operand.LabelRef("done"))
	c.MOVL(mem(p, 0), v)
	c.ANDL(operand.U32(absMask32), v)
	c.CMPL(v, m)
	c.CMOVLHI(v, m)
	c.ADDQ(operand.Imm(4), p)
	c.DECQ(n)
	c.JMP(operand.LabelRef("tail"))

	c.Label("done")
	c.VZEROUPPER()
	c.Store(m, c.ReturnIndex(0))
	c.RET()
}

// groupConsts are the registers every group-quantizing kernel needs.
type groupConsts struct {
	half, nhalf, c55, perm reg.VecVirtual
}

func loadGroupConsts(c *build.Context) groupConsts {
	return groupConsts{
		half:  bcst32(c, f32Half),
		nhalf: bcst32(c, f32NHalf),
		c55:   bcst32(c, 0x55),
		perm:  dwordIndex(c, permIdx),
	}
}

// permIdx undoes the lane interleaving of VPACKUSDW then VPACKUSWB, which
// leave the 4-byte runs of the byte vectors a, b, c, d as a0 b0 c0 d0 a1 b1
// c1 d1.
var permIdx = [8]byte{0, 4, 1, 5, 2, 6, 3, 7}

// groupCodes emits the quantization of one 128-value group at p into the 32
// bytes at out: value j (lane j/32) in byte j%32 at shift 6-2*(j/32), code 2
// for x/scale > 0.5, 0 for x/scale < -0.5, else 1, the division in float32
// (VDIVPS, as the generic code). visit, when not nil, sees each quotient
// vector (for the speculative kernel's extra work).
func groupCodes(c *build.Context, k groupConsts, p, out reg.Register, scale reg.VecVirtual, visit func(lane, sub int, r reg.VecVirtual)) {
	var bytes [4]reg.VecVirtual // bytes[s]: bytes 8s..8s+7 of the group, as dwords
	for s := 0; s < 4; s++ {
		var acc reg.VecVirtual
		for lane := 0; lane < 4; lane++ {
			r, gt, lt := c.YMM(), c.YMM(), c.YMM()
			c.VMOVUPS(mem(p, 4*(32*lane+8*s)), r)
			c.VDIVPS(scale, r, r)
			if visit != nil {
				visit(lane, s, r)
			}
			c.VCMPPS(operand.Imm(cmpGTOQ), k.half, r, gt)
			c.VCMPPS(operand.Imm(cmpLTOQ), k.nhalf, r, lt)
			// lt - gt: +1 where r > 0.5, -1 where r < -0.5 (masks are -1).
			c.VPSUBD(gt, lt, lt)
			if sh := 6 - 2*lane; sh > 0 {
				c.VPSLLD(operand.Imm(uint64(sh)), lt, lt)
			}
			if lane == 0 {
				acc = lt
			} else {
				c.VPADDD(lt, acc, acc)
			}
		}
		c.VPADDD(k.c55, acc, acc) // code = 1 + (lt - gt) in every 2-bit field
		bytes[s] = acc
		if s&1 == 1 { // pack pairs early: fewer live registers
			c.VPACKUSDW(bytes[s], bytes[s-1], bytes[s-1])
		}
	}
	c.VPACKUSWB(bytes[2], bytes[0], bytes[0])
	perm := k.perm
	if perm == nil {
		perm = dwordIndex(c, permIdx)
	}
	c.VPERMD(bytes[0], perm, bytes[0])
	c.VMOVDQU(bytes[0], mem(out, 0))
}

// quantGroupsAVX2 quantizes len(dst)/32 whole groups.
func quantGroupsAVX2(c *build.Context) {
	c.Function("quantGroupsAVX2")
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr("func(x []float32, dst []byte, scale float32)")
	c.Doc(
		"quantGroupsAVX2 writes the I2_S codes of len(dst)/32 whole 128-value groups",
		"of x (len(x) >= 128*(len(dst)/32)) with one scale into dst.",
	)
	p := c.Load(c.Param("x").Base(), c.GP64())
	out := c.Load(c.Param("dst").Base(), c.GP64())
	g := c.Load(c.Param("dst").Len(), c.GP64())
	c.SHRQ(operand.Imm(5), g)
	scale := c.YMM()
	c.VBROADCASTSS(paramAddr(c, "scale"), scale)
	k := loadGroupConsts(c)

	c.Label("loop")
	c.TESTQ(g, g)
	c.JZ(operand.LabelRef("done"))
	groupCodes(c, k, p, out, scale, nil)
	c.ADDQ(operand.U32(512), p)
	c.ADDQ(operand.Imm(32), out)
	c.DECQ(g)
	c.JMP(operand.LabelRef("loop"))

	c.Label("done")
	c.VZEROUPPER()
	c.RET()
}

// quantGroupsSpecAVX2 is quantGroupsAVX2 with a guessed scale plus, in the
// same pass, the float64 sum of |x| and the list of groups holding a value
// whose quotient magnitude lies in [lo, hi] (ambiguous: its code may differ
// under the true scale). It stops early and returns namb = -1 when amb is
// full.
func quantGroupsSpecAVX2(c *build.Context) {
	c.Function("quantGroupsSpecAVX2")
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr("func(x []float32, dst []byte, scale, lo, hi float32, amb []uint32) (sum float64, namb int)")
	c.Doc(
		"quantGroupsSpecAVX2 writes the I2_S codes of len(dst)/32 whole groups of x with",
		"scale, returns the float64 sum of |x| over them, and appends to amb the index",
		"(from 0) of each group with some |x[i]/scale| in [lo, hi]; namb is the count,",
		"or -1 if amb filled up (the codes and sum are then incomplete).",
	)
	p := c.Load(c.Param("x").Base(), c.GP64())
	out := c.Load(c.Param("dst").Base(), c.GP64())
	g := c.Load(c.Param("dst").Len(), c.GP64())
	c.SHRQ(operand.Imm(5), g)
	ambp := c.Load(c.Param("amb").Base(), c.GP64())
	ambCap := c.Load(c.Param("amb").Len(), c.GP64())
	na := c.GP64()
	c.XORQ(na, na)
	gi := c.GP64()
	c.XORQ(gi, gi)
	scale, lo, hi := c.YMM(), c.YMM(), c.YMM()
	c.VBROADCASTSS(paramAddr(c, "scale"), scale)
	c.VBROADCASTSS(paramAddr(c, "lo"), lo)
	c.VBROADCASTSS(paramAddr(c, "hi"), hi)
	k := loadGroupConsts(c)
	k.perm = nil // built per group: this kernel is short of registers
	acc := zeroY(c, 2)
	flag := c.YMM()

	c.Label("loop")
	c.CMPQ(gi, g)
	c.JAE(operand.LabelRef("done"))
	c.VPXOR(flag, flag, flag)
	groupCodes(c, k, p, out, scale, func(lane, sub int, r reg.VecVirtual) {
		// |r| in [lo, hi]: r with its sign cleared by a shift pair is
		// cheaper than a mask register here.
		a, t := c.YMM(), c.YMM()
		c.VPSLLD(operand.Imm(1), r, a)
		c.VPSRLD(operand.Imm(1), a, a)
		c.VCMPPS(operand.Imm(cmpGEOQ), lo, a, t)
		c.VCMPPS(operand.Imm(cmpLEOQ), hi, a, a)
		c.VPAND(t, a, a)
		c.VPOR(a, flag, flag)
		// Sum |x| in float64: two 4-value halves of this vector.
		off := 4 * (32*lane + 8*sub)
		for h := 0; h < 2; h++ {
			d := c.YMM()
			c.VCVTPS2PD(mem(p, off+16*h), d)
			c.VPSLLQ(operand.Imm(1), d, d)
			c.VPSRLQ(operand.Imm(1), d, d)
			c.VADDPD(d, acc[h], acc[h])
		}
	})
	c.VPTEST(flag, flag)
	c.JZ(operand.LabelRef("next"))
	c.CMPQ(na, ambCap)
	c.JAE(operand.LabelRef("full"))
	c.MOVL(gi.As32(), operand.Mem{Base: ambp, Index: na, Scale: 4})
	c.INCQ(na)
	c.Label("next")
	c.ADDQ(operand.U32(512), p)
	c.ADDQ(operand.Imm(32), out)
	c.INCQ(gi)
	c.JMP(operand.LabelRef("loop"))

	c.Label("full")
	c.MOVQ(operand.I32(-1), na)
	c.Label("done")
	c.VADDPD(acc[1], acc[0], acc[0])
	l, h := acc[0].AsX(), c.XMM()
	c.VEXTRACTF128(operand.Imm(1), acc[0], h)
	c.VADDPD(h, l, l)
	c.VUNPCKHPD(l, l, h)
	c.VADDSD(h, l, l)
	c.VZEROUPPER()
	c.Store(l, c.Return("sum"))
	c.Store(na, c.Return("namb"))
	c.RET()
}
