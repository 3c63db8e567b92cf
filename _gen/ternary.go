//go:build generate

package main

import (
	"fmt"
	"math"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The I2_S quantizer's AVX2 kernels (gokern/ternary). Their contracts are in
// gokern/ternary/kernels_amd64.go, which wraps them; the generic Go versions in
// quantize.go are the oracle they are tested against.

// ternaryAVX2 emits gokern/ternary/quant_avx2_amd64.s.
var ternaryAVX2 = kernels(absSumAVX2, absMaxBitsAVX2, quantGroupsAVX2, quantSpecAVX2, quantSpecMaxAVX2,
	quantSpecBF16AVX2, quantSpecMaxBF16AVX2,
	blockSumScalesAVX2, blockMaxScalesAVX2, forEach(smallBlocks, quantBlocksSmallAVX2), quantBlocksBigAVX2,
	fixCodesAVX2)

// prefetchDist is how far ahead (bytes) the group kernels prefetch: with
// this much arithmetic per byte the out-of-order window alone does not keep
// enough cache misses in flight on one core (measured on the Zen 3 dev
// machine, one thread, 16M values: quantSpecAVX2 +40%; the light reduction
// loops gained nothing or lost, so they have none).
const prefetchDist = 2048

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
	declare(c, "absSumAVX2", "func(x []float32) float64",
		"absSumAVX2 returns the float64 sum of |x[i]|, in no particular order.")
	add := func(mask reg.VecVirtual, src operand.Mem, a reg.VecVirtual) { // 4 values, as float64
		t := c.YMM()
		c.VCVTPS2PD(src, t)
		c.VANDPD(mask, t, t)
		c.VADDPD(t, a, a)
	}
	reduce := func(acc []reg.VecVirtual) reg.Register {
		for w := 4; w >= 1; w /= 2 {
			for k := 0; k < w; k++ {
				c.VADDPD(acc[k+w], acc[k], acc[k])
			}
		}
		return hsumF64(c, acc[0])
	}
	addOne := func(mask reg.VecVirtual, src operand.Mem, sum reg.Register) {
		s := c.XMM()
		c.VMOVSS(src, s)
		c.VCVTSS2SD(s, s, s)
		c.VANDPD(mask.AsX(), s, s)
		c.VADDSD(s, sum, sum)
	}
	absScan(c, 64, 8, "32 values per iteration, 8 float64 accumulators.", add, reduce, addOne)
}

// absScan emits the body of a reduction kernel over |x[i]| of its parameter
// x []float32: mask, the |.| mask of lanes of maskBits (32 or 64) bits; nacc
// zeroed YMM accumulators; scanVectors with add (note, when not "", comments
// it); reduce(acc) to the result register r; the last values one at a time
// (addOne of the float32's address and r); the return of r.
func absScan(c *build.Context, maskBits, nacc int, note string, add func(mask reg.VecVirtual, src operand.Mem, a reg.VecVirtual),
	reduce func(acc []reg.VecVirtual) reg.Register, addOne func(mask reg.VecVirtual, src operand.Mem, r reg.Register)) {
	p, n := loadArg(c, "x.base"), loadArg(c, "x.len")
	var mask reg.VecVirtual
	if maskBits == 32 {
		mask = bcst32(c, absMask32)
	} else {
		mask = bcst64(c, absMask64)
	}
	acc := zeroY(c, nacc)
	if note != "" {
		c.Comment(note)
	}
	scanVectors(c, p, n, acc, func(disp int, a reg.VecVirtual) { add(mask, mem(p, disp), a) })
	r := reduce(acc)
	c.Comment(fmt.Sprintf("The last 0..%d values.", 128/nacc/4-1))
	whileAtLeast(c, "tail", "done", n, 1, func() {
		addOne(mask, mem(p, 0), r)
		c.ADDQ(operand.Imm(4), p)
	})
	c.Label("done")
	vzeroReturn(c, r)
}

// scanVectors emits the vector loops of a reduction over the n float32 at p
// into acc: 32 values an iteration, op(disp, acc[k]) taking the vb =
// 128/len(acc) bytes at p+disp (disp = k*vb) into acc[k]; then vb/4 values
// an iteration into acc[0]; then label "reduce" with n < vb/4 values left,
// for the caller to reduce acc and finish.
func scanVectors(c *build.Context, p, n reg.Register, acc []reg.VecVirtual, op func(disp int, a reg.VecVirtual)) {
	vb := 128 / len(acc)
	one := fmt.Sprintf("loop%d", vb/4)
	whileAtLeast(c, "loop32", one, n, 32, func() {
		for k := range acc {
			op(vb*k, acc[k])
		}
		c.ADDQ(operand.Imm(128), p)
	})
	whileAtLeast(c, one, "reduce", n, vb/4, func() {
		op(0, acc[0])
		c.ADDQ(operand.Imm(uint64(vb)), p)
	})
	c.Label("reduce")
}

// hsumF64 adds the four float64 lanes of y into the low lane of y.AsX(),
// which it returns (the upper half of y is lost).
func hsumF64(c *build.Context, y reg.VecVirtual) reg.Register {
	lo, hi := y.AsX(), c.XMM()
	c.VEXTRACTF128(operand.Imm(1), y, hi)
	c.VADDPD(hi, lo, lo)
	c.VUNPCKHPD(lo, lo, hi)
	c.VADDSD(hi, lo, lo)
	return lo
}

// hmaxU32 reduces the eight uint32 lanes of y to their maximum, in every
// lane of lo = y.AsX() and in the new general register m.
func hmaxU32(c *build.Context, y reg.VecVirtual) (lo reg.Register, m reg.GPVirtual) {
	lo, hi := y.AsX(), c.XMM()
	c.VEXTRACTI128(operand.Imm(1), y, hi)
	c.VPMAXUD(hi, lo, lo)
	c.VPSHUFD(operand.Imm(0x4e), lo, hi)
	c.VPMAXUD(hi, lo, lo)
	c.VPSHUFD(operand.Imm(0xb1), lo, hi)
	c.VPMAXUD(hi, lo, lo)
	m = c.GP32()
	c.VMOVD(lo, m)
	return lo, m
}

// absMaxBitsAVX2: the unsigned maximum of the bit patterns of |x[i]| (sign
// cleared). For finite input that is the bit pattern of max|x|; a result of
// 0x7f800000 or more means an Inf or NaN is present.
func absMaxBitsAVX2(c *build.Context) {
	declare(c, "absMaxBitsAVX2", "func(x []float32) uint32",
		"absMaxBitsAVX2 returns the unsigned maximum of the bits of |x[i]| (0 for empty x).")
	maxInto := func(mask reg.VecVirtual, src operand.Mem, a reg.VecVirtual) { // 8 values
		t := c.YMM()
		c.VPAND(src, mask, t)
		c.VPMAXUD(t, a, a)
	}
	reduce := func(acc []reg.VecVirtual) reg.Register {
		c.VPMAXUD(acc[1], acc[0], acc[0])
		c.VPMAXUD(acc[3], acc[2], acc[2])
		c.VPMAXUD(acc[2], acc[0], acc[0])
		_, m := hmaxU32(c, acc[0])
		return m
	}
	maxOne := func(_ reg.VecVirtual, src operand.Mem, m reg.Register) {
		v := c.GP32()
		c.MOVL(src, v)
		c.ANDL(operand.U32(absMask32), v)
		c.CMPL(v, m)
		c.CMOVLHI(v, m)
	}
	absScan(c, 32, 4, "", maxInto, reduce, maxOne)
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
// (VDIVPS, as the generic code).
//
// scaleFor gives the divisor of the 8 values at 32*lane+8*s.
func groupCodes(c *build.Context, k groupConsts, p, out reg.Register, scaleFor func(lane, s int) reg.VecVirtual) {
	var bytes [4]reg.VecVirtual // bytes[s]: bytes 8s..8s+7 of the group, as dwords
	for s := 0; s < 4; s++ {
		var acc reg.VecVirtual
		for lane := 0; lane < 4; lane++ {
			r, gt, lt := c.YMM(), c.YMM(), c.YMM()
			c.VMOVUPS(mem(p, 4*(32*lane+8*s)), r)
			c.VDIVPS(scaleFor(lane, s), r, r)
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
	c.VPERMD(bytes[0], k.perm, bytes[0])
	c.VMOVDQU(bytes[0], mem(out, 0))
}

// quantGroupsAVX2 quantizes len(dst)/32 whole groups.
func quantGroupsAVX2(c *build.Context) {
	declare(c, "quantGroupsAVX2", "func(x []float32, dst []byte, scale float32)",
		"quantGroupsAVX2 writes the I2_S codes of len(dst)/32 whole 128-value groups",
		"of x (len(x) >= 128*(len(dst)/32)) with one scale into dst.",
	)
	p, out, g := groupArgs(c)
	scale := c.YMM()
	c.VBROADCASTSS(paramAddr(c, "scale"), scale)
	k := loadGroupConsts(c)
	codeGroups(c, k, p, out, g, prefetchDist, nil, func(int, int) reg.VecVirtual { return scale }, nil)
}

// groupArgs loads the group kernels' x.base (p), dst.base (out) and the
// number of whole groups len(dst)/32 (g).
func groupArgs(c *build.Context) (p, out, g reg.Register) {
	p, out, g = loadArg(c, "x.base"), loadArg(c, "dst.base"), loadArg(c, "dst.len")
	c.SHRQ(operand.Imm(5), g)
	return p, out, g
}

// codeGroups emits the loop of a group-coding kernel, then its return: while
// g > 0: before (if not nil), a prefetch dist bytes ahead of p, groupCodes of
// the group at p into out with scaleFor, p and out advanced one group, after
// (if not nil), g--.
func codeGroups(c *build.Context, k groupConsts, p, out, g reg.Register, dist int,
	before func(), scaleFor func(lane, s int) reg.VecVirtual, after func()) {
	whileAtLeast(c, "loop", "done", g, 1, func() {
		if before != nil {
			before()
		}
		prefetch(c, p, dist, 512)
		groupCodes(c, k, p, out, scaleFor)
		c.ADDQ(operand.U32(512), p)
		c.ADDQ(operand.Imm(32), out)
		if after != nil {
			after()
		}
	})
	c.Label("done")
	vzeroRet(c)
}

// quantSpecAVX2 is the one-pass kernel of a per-tensor scale that is not
// known yet (gokern/ternary: quantizeSpec). The caller has bounded the scale
// and turned the bounds into thresholds lo <= hi on |x| such that, for every
// scale in the bounds, |x| < lo means code 1 and |x| >= hi means code 0 or 2
// by sign. In one read of x it writes those codes, code 3 ("ambiguous", fixed
// up once the scale is known) for lo <= |x| < hi, code 1 for NaN, sums |x| in
// float64, and notes each code-3 element with its value, so that the fix-up
// never reads x again.
//
// Per 8 values: 2 compares on |x| (an AND) give -1/0 masks; the sum takes 2
// conversions to float64, an extract and 2 adds. The masks and x itself
// (for its sign) of a 32-value lane are packed to bytes (3 packs each) and
// combined into the 2-bit codes at byte level, 32 values per instruction.
func quantSpecAVX2(c *build.Context) {
	declare(c, "quantSpecAVX2", "func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (sum float64, nent int)",
		"quantSpecAVX2 writes provisional I2_S codes of len(dst)/32 whole groups of x",
		"(0 < lo <= hi, or lo = 0 < hi): 2 for x >= hi, 0 for x <= -hi, 3 for other",
		"|x| >= lo, else 1 (NaN: 1). It",
		"returns the float64 sum of |x| over those groups and stores in ent, in",
		"order of group, byte and lane, one entry per code 3: the element's float32",
		"bits << 32 | (off + its index in x) mod 2^32. nent is their count, or -1 if",
		"ent filled up (the codes and sum are then incomplete).",
	)
	quantSpecBody(c, false, false)
}

// quantSpecMaxAVX2 is quantSpecAVX2 for absmax: the reduction is the
// unsigned maximum of the bits of |x| (as absMaxBitsAVX2) instead of the sum.
func quantSpecMaxAVX2(c *build.Context) {
	declare(c, "quantSpecMaxAVX2", "func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (maxBits uint32, nent int)",
		"quantSpecMaxAVX2 is quantSpecAVX2 returning, instead of the sum, the unsigned",
		"maximum of the bits of |x| over the groups (0x7f800000 or more: Inf or NaN).",
	)
	quantSpecBody(c, true, false)
}

// quantSpecBF16AVX2 and quantSpecMaxBF16AVX2 are quantSpecAVX2 and
// quantSpecMaxAVX2 on bfloat16 bits, each value widened as it is loaded
// (the bits shifted up: exact): the same codes, entries and reduction as on
// the widened float32 values, in the same order.
func quantSpecBF16AVX2(c *build.Context) {
	declare(c, "quantSpecBF16AVX2", "func(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (sum float64, nent int)",
		"quantSpecBF16AVX2 is quantSpecAVX2 on the float32 values of bfloat16 bits x:",
		"the same codes, sum and entries (the float32 bits) as on the widened values.",
	)
	quantSpecBody(c, false, true)
}

func quantSpecMaxBF16AVX2(c *build.Context) {
	declare(c, "quantSpecMaxBF16AVX2", "func(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (maxBits uint32, nent int)",
		"quantSpecMaxBF16AVX2 is quantSpecMaxAVX2 on the float32 values of bfloat16",
		"bits x, as quantSpecBF16AVX2.",
	)
	quantSpecBody(c, true, true)
}

// quantSpecBody emits the body of quantSpecAVX2 (reduceMax false) or
// quantSpecMaxAVX2; with bf16, of their bfloat16 versions (x holds 2 bytes
// a value, widened on load).
func quantSpecBody(c *build.Context, reduceMax, bf16 bool) {
	esz, p, out, g, entp, entCap, off, ne := specArgs(c, bf16)

	// The thresholds, broadcast once into the stack: memory operands leave
	// the registers to the masks.
	loc := c.AllocLocal(96)
	loM, hiM, ambM := loc, loc.Offset(32), loc.Offset(64)
	{
		t := c.YMM()
		c.VBROADCASTSS(paramAddr(c, "lo"), t)
		c.VMOVDQU(t, loM)
		c.VBROADCASTSS(paramAddr(c, "hi"), t)
		c.VMOVDQU(t, hiM)
	}
	absM := vconst(c, "absMask32", splat(absMask32))
	perm := vconst(c, "permIdx", permWords())
	bytes55, bit0, bit1 := codeBits(c)
	acc := zeroY(c, 2)
	if reduceMax {
		acc = acc[:1]
	}

	whileAtLeast(c, "loop", "done", g, 1, func() {
		prefetch(c, p, prefetchDist*esz/4, 128*esz)
		res := c.YMM()
		for lane := 0; lane < 4; lane++ {
			// Of the lane's 4 vectors: masks ge (|x| >= lo) and big
			// (|x| >= hi), and x itself, whose sign survives the signed
			// saturation of the packs; packed to words by pairs as they come.
			var words [2][3]reg.VecVirtual
			for s := 0; s < 4; s++ {
				xv, ax, ge, big := c.YMM(), c.YMM(), c.YMM(), c.YMM()
				if bf16 {
					c.VPMOVZXWD(mem(p, esz*(32*lane+8*s)), xv)
					c.VPSLLD(operand.Imm(16), xv, xv)
				} else {
					c.VMOVUPS(mem(p, esz*(32*lane+8*s)), xv)
				}
				c.VANDPS(absM, xv, ax)
				c.VCMPPS(operand.Imm(cmpGEOQ), loM, ax, ge)
				c.VCMPPS(operand.Imm(cmpGEOQ), hiM, ax, big)
				if reduceMax {
					c.VPMAXUD(ax, acc[0], acc[0])
				} else {
					d0, d1 := c.YMM(), c.YMM()
					c.VCVTPS2PD(ax.AsX(), d0)
					c.VEXTRACTF128(operand.Imm(1), ax, d1.AsX())
					c.VCVTPS2PD(d1.AsX(), d1)
					c.VADDPD(d0, acc[0], acc[0])
					c.VADDPD(d1, acc[1], acc[1])
				}
				m := [3]reg.VecVirtual{ge, big, xv}
				if s&1 == 0 {
					words[s/2] = m
				} else {
					for k := range m {
						c.VPACKSSDW(m[k], words[s/2][k], words[s/2][k])
					}
				}
			}
			for k := 0; k < 3; k++ {
				c.VPACKSSWB(words[1][k], words[0][k], words[0][k])
			}
			ge, big, sgn := words[0][0], words[0][1], words[0][2]
			// b1 = ge && !(big && x < 0); b0 = !big. (With hi > 0, big
			// implies x != ±0, so the sign bit is the sign.)
			t := c.YMM()
			c.VPANDN(ge, big, t)        // ge && !big
			c.VPBLENDVB(sgn, t, ge, ge) // x < 0 ? ge && !big : ge
			c.VPAND(bit1[lane], ge, ge)
			c.VPANDN(bit0[lane], big, big)
			if lane == 0 {
				c.VPOR(big, ge, res)
			} else {
				c.VPOR(big, ge, ge)
				c.VPOR(ge, res, res)
			}
		}
		// The packs interleave 4-byte runs across the 128-bit halves.
		idx := c.YMM()
		c.VMOVDQU(perm, idx)
		c.VPERMD(res, idx, res)
		c.VMOVDQU(res, mem(out, 0))
		groupEntries(c, res, bytes55, ambM, true, p, out, esz, off, ne, entp, entCap)
	})

	c.Label("full")
	c.MOVQ(operand.I32(-1), ne)
	c.Label("done")
	if reduceMax {
		_, m := hmaxU32(c, acc[0])
		c.VZEROUPPER()
		c.Store(m, c.Return("maxBits"))
	} else {
		c.VADDPD(acc[1], acc[0], acc[0])
		l := hsumF64(c, acc[0])
		c.VZEROUPPER()
		c.Store(l, c.Return("sum"))
	}
	c.Store(ne, c.Return("nent"))
	c.RET()
}

// specArgs loads a one-pass kernel's arguments (bf16: x holds 2 bytes a
// value, else 4, esz): x.base (p), dst.base (out), the whole groups (g),
// ent's base and length, off zero-extended, and ne, the entries so far, 0.
func specArgs(c *build.Context, bf16 bool) (esz int, p, out, g, entp, entCap reg.Register, off reg.GPVirtual, ne reg.Register) {
	esz = 4
	if bf16 {
		esz = 2
	}
	p, out, g = groupArgs(c)
	entp, entCap = loadArg(c, "ent.base"), loadArg(c, "ent.len")
	off = c.GP64()
	c.MOVLQZX(paramAddr(c, "off"), off)
	ne = c.GP64()
	c.XORQ(ne, ne)
	return esz, p, out, g, entp, entCap, off, ne
}

// codeBits returns the constants of the one-pass kernels' codes: 0x55 in
// every byte (code 1 in all four lanes) and, per lane L, bits 0 and 1 of
// its 2-bit field (at shift 6-2L) in every byte.
func codeBits(c *build.Context) (bytes55 operand.Mem, bit0, bit1 [4]operand.Mem) {
	bytes55 = vconst(c, "bytes55", splat(0x55555555))
	for lane := 0; lane < 4; lane++ {
		sh := 6 - 2*lane
		bit0[lane] = vconst(c, fmt.Sprintf("codeBit0Lane%d", lane), splat(0x01010101<<sh))
		bit1[lane] = vconst(c, fmt.Sprintf("codeBit1Lane%d", lane), splat(0x02020202<<sh))
	}
	return bytes55, bit0, bit1
}

// groupEntries ends a one-pass kernel's group: the code-3 bitmap of its
// codes res (VPTEST and a jump to "next" when test: none), its entries
// (ambEntries, through the 32 bytes at ambM), then at label "next" p, out
// and off advanced one group (esz bytes a value).
func groupEntries(c *build.Context, res reg.VecVirtual, bytes55, ambM operand.Mem, test bool, p, out reg.Register, esz int,
	off reg.GPVirtual, ne, entp, entCap reg.Register) {
	c.Comment("Code 3 in the group: both bits of some 2-bit field set.")
	t := c.YMM()
	c.VPSRLW(operand.Imm(1), res, t)
	c.VPAND(res, t, t)
	c.VPAND(bytes55, t, t)
	if test {
		c.VPTEST(t, t)
		c.JZ(operand.LabelRef("next"))
	}
	c.VMOVDQU(t, ambM)
	ambEntries(c, ambM, p, esz, off, ne, entp, entCap)
	c.Label("next")
	c.ADDQ(operand.U32(uint64(128*esz)), p)
	c.ADDQ(operand.Imm(32), out)
	c.ADDL(operand.U32(128), off.As32())
}

// ambEntries emits the code-3 entries of the group at p (esz bytes a value)
// from the 32-byte bitmap at ambM (bit 2b of byte j set: the value of byte
// j, lane 3-b, has code 3), in order of byte and lane: the value's float32
// bits << 32 | (off + its index in the group), stored at entp[ne], ne++.
// It jumps to "full" when ne reaches entCap and falls through (at label
// "word4") when done.
func ambEntries(c *build.Context, ambM operand.Mem, p reg.Register, esz int, off reg.GPVirtual, ne, entp, entCap reg.Register) {
	m, b, j, v := c.GP64(), c.GP64(), c.GP64(), c.GP64()
	for w := 0; w < 4; w++ {
		// Bit b of word w is byte 8w+b/8 at shift b%8: lane 3-(b%8)/2.
		c.Label(fmt.Sprintf("word%d", w))
		c.MOVQ(ambM.Offset(8*w), m)
		c.Label(fmt.Sprintf("bits%d", w))
		c.TESTQ(m, m)
		c.JZ(operand.LabelRef(fmt.Sprintf("word%d", w+1)))
		c.CMPQ(ne, entCap)
		c.JAE(operand.LabelRef("full"))
		c.BSFQ(m, b)
		c.MOVQ(b, j)
		c.SHRQ(operand.Imm(3), j)
		c.ANDQ(operand.Imm(7), b)
		c.SHRQ(operand.Imm(1), b)
		c.NOTQ(b)
		c.ANDQ(operand.Imm(3), b) // lane = 3 - (b%8)/2
		c.SHLQ(operand.Imm(5), b)
		c.LEAQ(operand.Mem{Base: j, Index: b, Scale: 1, Disp: 8 * w}, j) // index in the group
		if esz == 2 {                                                    // bfloat16
			c.MOVWQZX(operand.Mem{Base: p, Index: j, Scale: 2}, v)
			c.SHLQ(operand.Imm(48), v) // the float32 bits, << 32
		} else {
			c.MOVL(operand.Mem{Base: p, Index: j, Scale: 4}, v.As32())
			c.SHLQ(operand.Imm(32), v)
		}
		c.ADDL(off.As32(), j.As32())
		c.ORQ(j, v)
		c.MOVQ(v, operand.Mem{Base: entp, Index: ne, Scale: 8})
		c.INCQ(ne)
		c.LEAQ(mem(m, -1), b)
		c.ANDQ(b, m)
		c.JMP(operand.LabelRef(fmt.Sprintf("bits%d", w)))
	}
	c.Label("word4")
}

// splat returns w in all eight 32-bit words.
func splat(w uint32) [8]uint32 {
	return [8]uint32{w, w, w, w, w, w, w, w}
}

func permWords() [8]uint32 {
	var w [8]uint32
	for i, b := range permIdx {
		w[i] = uint32(b)
	}
	return w
}

// Blocked scales. The fused path (gokern/ternary: quantBlocksAVX2) computes a
// batch of block scales with one call, then the codes of the batch's groups
// with another, the batch still in cache.

// blockSumScalesAVX2: absmean scales of whole blocks.
func blockSumScalesAVX2(c *build.Context) {
	p, bs, sp, nb := declareBlockScales(c, "blockSumScalesAVX2",
		"blockSumScalesAVX2 sets scales[b] = max(float32(sum|x| / bs), 1e-5) over the",
		"block x[b*bs:(b+1)*bs] (bs a positive multiple of 8; the float64 sum in no",
		"particular order), for b from 0 up, and returns how many it set: fewer than",
		"len(scales) when block [result] has a NaN or Inf (its scale is left alone).",
	)
	cnt := c.XMM()
	c.CVTSQ2SD(bs, cnt)
	c.SHRQ(operand.Imm(3), bs) // vectors per block
	mask := bcst64(c, absMask64)
	maxF64 := xmmImm(c, 8, math.Float64bits(math.MaxFloat64))
	eps := xmmImm(c, 4, uint64(math.Float32bits(1e-5)))
	vec := func(acc []reg.VecVirtual) {
		for h := 0; h < 2; h++ {
			d := c.YMM()
			c.VCVTPS2PD(mem(p, 16*h), d)
			c.VANDPD(mask, d, d)
			c.VADDPD(d, acc[h], acc[h])
		}
	}
	blockScales(c, p, bs, sp, nb, 2, vec, func(acc []reg.VecVirtual) reg.Register {
		c.VADDPD(acc[1], acc[0], acc[0])
		l := hsumF64(c, acc[0])
		c.Comment("Not finite (NaN compares unordered): leave it to the caller.")
		c.VUCOMISD(maxF64, l)
		c.JHI(operand.LabelRef("done"))
		c.JPS(operand.LabelRef("done"))
		c.VDIVSD(cnt, l, l)
		c.VCVTSD2SS(l, l, l)
		c.VMAXSS(eps, l, l)
		return l
	})
}

// declareBlockScales declares a block-scale kernel, func name(x []float32,
// bs int, scales []float32) int, and loads x.base (p), bs, scales.base (sp)
// and len(scales) (nb).
func declareBlockScales(c *build.Context, name string, doc ...string) (p, bs, sp, nb reg.Register) {
	declare(c, name, "func(x []float32, bs int, scales []float32) int", doc...)
	return loadArg(c, "x.base"), loadArg(c, "bs"), loadArg(c, "scales.base"), loadArg(c, "scales.len")
}

// blockScales emits the block loop of a block-scale kernel, then its return
// (the number of scales set): for i from 0 while i < nb, with nacc new
// zeroed YMM accumulators, vecs >= 1 times vec(acc) with p advancing 32
// bytes after each, then scale(acc), which returns the register whose low
// float32 is block i's scale, stored at sp[i], or jumps to label "done" to
// leave the block to the caller.
func blockScales(c *build.Context, p, vecs, sp, nb reg.Register, nacc int,
	vec func(acc []reg.VecVirtual), scale func(acc []reg.VecVirtual) reg.Register) {
	i := c.GP64()
	c.XORQ(i, i)
	c.Label("block")
	c.CMPQ(i, nb)
	c.JAE(operand.LabelRef("done"))
	acc := zeroY(c, nacc)
	v := c.GP64()
	c.MOVQ(vecs, v)
	repeat(c, "vec", v, func() {
		vec(acc)
		c.ADDQ(operand.Imm(32), p)
	})
	c.VMOVSS(scale(acc), operand.Mem{Base: sp, Index: i, Scale: 4})
	c.INCQ(i)
	c.JMP(operand.LabelRef("block"))
	c.Label("done")
	vzeroReturn(c, i)
}

// blockMaxScalesAVX2: absmax scales of whole blocks.
func blockMaxScalesAVX2(c *build.Context) {
	p, bs, sp, nb := declareBlockScales(c, "blockMaxScalesAVX2", "blockMaxScalesAVX2 sets scales[b] = max(max|x|, 1e-8) over the block",
		"x[b*bs:(b+1)*bs] (bs a positive multiple of 8), for b from 0 up, and returns",
		"how many it set: fewer than len(scales) when block [result] has a NaN or Inf",
		"(its scale is left alone).",
	)
	c.SHRQ(operand.Imm(3), bs)
	mask := bcst32(c, absMask32)
	eps := xmmImm(c, 4, uint64(math.Float32bits(1e-8)))
	vec := func(acc []reg.VecVirtual) {
		t := c.YMM()
		c.VPAND(mem(p, 0), mask, t)
		c.VPMAXUD(t, acc[0], acc[0])
	}
	blockScales(c, p, bs, sp, nb, 1, vec, func(acc []reg.VecVirtual) reg.Register {
		lo, m := hmaxU32(c, acc[0])
		c.Comment("Inf or NaN: leave it to the caller.")
		c.CMPL(m, operand.U32(0x7f800000))
		c.JAE(operand.LabelRef("done"))
		c.VMAXSS(eps, lo, lo)
		return lo
	})
}

// blockBatchBytes is how far ahead the block-code kernels prefetch: one
// batch of gokern/ternary's fused path (fusedBatch, 1<<14 float32). The
// batch being coded is in cache already (its scales were just computed), so
// this streams the next batch in while the divisions run, and the next
// scale pass reads it from L2 (one thread, 16M values, bs 256: about 5-10%
// faster than prefetching 2 KB ahead; the measurement was noisy).
const blockBatchBytes = 4 << 14

// smallBlocks are the block sizes below 128 that divide a group into whole
// vectors, each with a kernel of its own (the scale of each vector is at a
// fixed offset).
var smallBlocks = []int{8, 16, 32, 64}

// quantBlocksSmallAVX2: codes of whole groups, blocks of bs < 128 values.
func quantBlocksSmallAVX2(c *build.Context, bs int) {
	name := fmt.Sprintf("quantBlocks%dAVX2", bs)
	declare(c, name, "func(x []float32, dst []byte, scales []float32)",
		fmt.Sprintf("%s writes the I2_S codes of len(dst)/32 whole groups of x,", name),
		fmt.Sprintf("value i divided by scales[i/%d].", bs),
	)
	p, out, g := groupArgs(c)
	sp := loadArg(c, "scales.base")
	k := loadGroupConsts(c)
	scaleFor := func(lane, s int) reg.VecVirtual {
		t := c.YMM()
		c.VBROADCASTSS(mem(sp, 4*((32*lane+8*s)/bs)), t)
		return t
	}
	codeGroups(c, k, p, out, g, blockBatchBytes, nil, scaleFor, func() {
		c.ADDQ(operand.U32(uint32(4*128/bs)), sp)
	})
}

// quantBlocksBigAVX2: codes of whole groups, blocks of a multiple of 128.
func quantBlocksBigAVX2(c *build.Context) {
	declare(c, "quantBlocksBigAVX2", "func(x []float32, dst []byte, scales []float32, groupsPerBlock int)",
		"quantBlocksBigAVX2 writes the I2_S codes of len(dst)/32 whole groups of x,",
		"group g divided by scales[g/groupsPerBlock].",
	)
	p, out, g := groupArgs(c)
	sp, gpb := loadArg(c, "scales.base"), loadArg(c, "groupsPerBlock")
	k := loadGroupConsts(c)
	left := c.GP64()
	c.XORQ(left, left)
	scale := c.YMM()
	nextScale := func() { // at the first group of a block
		c.TESTQ(left, left)
		c.JNZ(operand.LabelRef("same"))
		c.VBROADCASTSS(mem(sp, 0), scale)
		c.ADDQ(operand.Imm(4), sp)
		c.MOVQ(gpb, left)
		c.Label("same")
	}
	codeGroups(c, k, p, out, g, blockBatchBytes, nextScale, func(int, int) reg.VecVirtual { return scale }, func() {
		c.DECQ(left)
	})
}

// fixDist is how many entries ahead fixCodesAVX2 prefetches: the entries
// land on scattered bytes of a packed tensor larger than the caches, and a
// prefetch, unlike a load, does not hold up retirement.
const fixDist = 32

// fixCodesAVX2 finishes quantSpecAVX2's code-3 elements once the scale is
// known, with the same float32 division and comparisons as the generic code.
func fixCodesAVX2(c *build.Context) {
	declare(c, "fixCodesAVX2", "func(packed []byte, ent []uint64, base int, scale float32)",
		"fixCodesAVX2 writes, for each entry of ent (float32 bits << 32 | offset),",
		"the I2_S code of that value divided by scale at flat position",
		"base + offset of packed (which must hold it).",
	)
	pk, ep, n, base := loadArg(c, "packed.base"), loadArg(c, "ent.base"), loadArg(c, "ent.len"), loadArg(c, "base")
	scale := c.XMM()
	c.VMOVSS(paramAddr(c, "scale"), scale)
	half, nhalf := xmmImm(c, 4, f32Half), xmmImm(c, 4, f32NHalf)
	// codes[4*lane+code] = code << (6-2*lane); then keep[lane] at 16.
	var tab [5]uint32
	for lane := 0; lane < 4; lane++ {
		sh := 6 - 2*lane
		for code := 0; code < 3; code++ {
			tab[lane] |= uint32(code<<sh) << (8 * code)
		}
		tab[4] |= uint32(^(3<<sh)&0xff) << (8 * lane)
	}
	tabM := c.StaticGlobal("fixTab")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i, w := range tab {
		c.AddDatum(4*i, operand.U32(w))
	}
	tr := c.GP64()
	c.LEAQ(tabM, tr)
	end := c.GP64()
	c.LEAQ(operand.Mem{Base: ep, Index: n, Scale: 8}, end)
	pfEnd := c.GP64() // entries before this one prefetch fixDist ahead
	c.LEAQ(operand.Mem{Base: end, Disp: -8 * fixDist}, pfEnd)

	body := func(pf bool) {
		e, pos, bi, lane, t, up, dn := c.GP64(), c.GP64(), c.GP64(), c.GP64(), c.GP64(), c.GP64(), c.GP64()
		if pf {
			c.MOVL(mem(ep, 8*fixDist), t.As32())
			c.ADDQ(base, t)
			c.MOVQ(t, up)
			c.SHRQ(operand.Imm(7), t)
			c.SHLQ(operand.Imm(5), t)
			c.ANDQ(operand.Imm(31), up)
			c.ORQ(up, t)
			c.PREFETCHT0(operand.Mem{Base: pk, Index: t, Scale: 1})
		}
		c.MOVQ(mem(ep, 0), e)
		c.MOVL(e.As32(), pos.As32())
		c.ADDQ(base, pos)
		c.SHRQ(operand.Imm(32), e)
		v := c.XMM()
		c.VMOVD(e.As32(), v)
		c.VDIVSS(scale, v, v)
		c.XORL(up.As32(), up.As32())
		c.XORL(dn.As32(), dn.As32())
		c.VUCOMISS(half, v) // v > 0.5 (false for NaN)
		c.SETHI(up.As8())
		c.VUCOMISS(v, nhalf) // -0.5 > v
		c.SETHI(dn.As8())
		c.LEAL(operand.Mem{Base: up, Disp: 1}, t.As32())
		c.SUBL(dn.As32(), t.As32()) // code = 1 + up - dn
		c.MOVQ(pos, lane)
		c.SHRQ(operand.Imm(5), lane)
		c.ANDQ(operand.Imm(3), lane)
		c.MOVQ(pos, bi)
		c.SHRQ(operand.Imm(7), bi)
		c.SHLQ(operand.Imm(5), bi)
		c.ANDQ(operand.Imm(31), pos)
		c.ORQ(pos, bi)
		c.LEAQ(operand.Mem{Base: t, Index: lane, Scale: 4}, t)
		c.MOVBLZX(operand.Mem{Base: pk, Index: bi, Scale: 1}, up.As32())
		c.ANDB(operand.Mem{Base: tr, Index: lane, Scale: 1, Disp: 16}, up.As8())
		c.ORB(operand.Mem{Base: tr, Index: t, Scale: 1}, up.As8())
		c.MOVB(up.As8(), operand.Mem{Base: pk, Index: bi, Scale: 1})
		c.ADDQ(operand.Imm(8), ep)
	}
	c.Label("prefetching")
	c.CMPQ(ep, pfEnd)
	c.JGE(operand.LabelRef("rest"))
	body(true)
	c.JMP(operand.LabelRef("prefetching"))
	c.Label("rest")
	c.CMPQ(ep, end)
	c.JGE(operand.LabelRef("done"))
	body(false)
	c.JMP(operand.LabelRef("rest"))
	c.Label("done")
	c.RET()
}
