//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The one-pass I2_S kernels of a per-tensor scale (gokern/ternary:
// quantizeSpec) for the avx512 family (AVX-512 F/BW/VL): the contracts of
// quantSpecAVX2 and its three twins, bit for bit in codes and entries.
//
// What AVX-512 changes is the coding: each compare writes a mask register,
// one bit a value, and a 32-value lane's bits are the bits of its 32 code
// bytes. The group's codes start as 0x55 in every byte (code 1 in all four
// lanes) and two masked byte operations per lane set them: VPSUBB clears
// bit 0 of the lane's field where |x| >= hi, VPADDB sets bit 1 where
// b1 = (|x| >= lo) && !(|x| >= hi && x < 0). No packs, no permute. A lane
// with some lo <= |x| < hi (code 3) is flagged in a mask, and only a group
// with one takes the scalar entry loop (ambEntries, as the AVX2 kernels).
//
// bfloat16 input is compared as it is: for a non-NaN bfloat16 magnitude a
// (bits & 0x7fff) and a float32 t >= 0, float32(a << 16) >= t exactly when
// a >= ceil(bits(t) / 2^16), so the thresholds become 16-bit integers and
// one VPCMPUW codes 32 values. NaN (a > 0x7f80) is masked out of both
// compares (code 1, as the ordered float compares give).
//
// The reduction: the float32 sum path widens each 16-value half of a lane
// (bfloat16: zero-extended and shifted up) and adds its two float64 halves
// into two accumulators; the float32 and bfloat16 kernels run the same
// additions in the same order, so their sums are equal bit for bit. The
// absmax twins take the unsigned maximum of the magnitude bits.

var ternaryAVX512 = kernels(quantSpecAVX512, quantSpecMaxAVX512, quantSpecBF16AVX512, quantSpecMaxBF16AVX512)

// VPCMP predicates.
const (
	cmpLE  = 2
	cmpNLT = 5 // >=
)

func quantSpecAVX512(c *build.Context) {
	declare(c, "quantSpecAVX512", "func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (sum float64, nent int)",
		"quantSpecAVX512 is quantSpecAVX2 with AVX-512 (its own order of the float64 additions).")
	quantSpec512Body(c, false, false)
}

func quantSpecMaxAVX512(c *build.Context) {
	declare(c, "quantSpecMaxAVX512", "func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (maxBits uint32, nent int)",
		"quantSpecMaxAVX512 is quantSpecMaxAVX2 with AVX-512.")
	quantSpec512Body(c, true, false)
}

func quantSpecBF16AVX512(c *build.Context) {
	declare(c, "quantSpecBF16AVX512", "func(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (sum float64, nent int)",
		"quantSpecBF16AVX512 is quantSpecAVX512 on the float32 values of bfloat16 bits x:",
		"the same codes, sum and entries (the float32 bits) as on the widened values.")
	quantSpec512Body(c, false, true)
}

func quantSpecMaxBF16AVX512(c *build.Context) {
	declare(c, "quantSpecMaxBF16AVX512", "func(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (maxBits uint32, nent int)",
		"quantSpecMaxBF16AVX512 is quantSpecMaxAVX512 on the float32 values of bfloat16",
		"bits x, as quantSpecBF16AVX512.")
	quantSpec512Body(c, true, true)
}

// ceilBF16 loads the float32 parameter name (>= 0) and returns a ZMM
// holding, in each 16-bit word, the least bfloat16 magnitude at or above
// it: (bits + 0xffff) >> 16.
func ceilBF16(c *build.Context, name string) reg.VecVirtual {
	r := c.GP32()
	c.MOVL(paramAddr(c, name), r)
	c.ADDL(operand.U32(0xffff), r)
	c.SHRL(operand.Imm(16), r)
	z := c.ZMM()
	c.VPBROADCASTW(r, z)
	return z
}

// quantSpec512Body emits the body of one of the four kernels above.
func quantSpec512Body(c *build.Context, reduceMax, bf16 bool) {
	esz, p, out, g, entp, entCap, off, ne := specArgs(c, bf16)
	ambM := c.AllocLocal(32)

	var lo, hi, absM, nanB reg.VecVirtual
	if bf16 {
		lo, hi = ceilBF16(c, "lo"), ceilBF16(c, "hi")
		absM, nanB = c.ZMM(), c.ZMM()
		r := c.GP32()
		c.MOVL(operand.U32(0x7fff), r)
		c.VPBROADCASTW(r, absM)
		c.MOVL(operand.U32(0x7f80), r)
		c.VPBROADCASTW(r, nanB)
	} else {
		lo, hi = c.ZMM(), c.ZMM()
		c.VBROADCASTSS(paramAddr(c, "lo"), lo)
		c.VBROADCASTSS(paramAddr(c, "hi"), hi)
		absM = bcstZ32(c, absMask32)
	}
	signM := bcstZ32(c, 0x80000000) // float32: the sign, by VPTESTMD
	bytes55, bit0, bit1 := codeBits(c)
	acc := zeroZ(c, 2)
	if reduceMax {
		acc = acc[:1]
	}
	// sum adds the float64 values of the 16 float32 magnitudes in f.
	sum := func(f reg.VecVirtual) {
		h := c.YMM()
		c.VEXTRACTF64X4(operand.Imm(1), f, h)
		d0, d1 := c.ZMM(), c.ZMM()
		c.VCVTPS2PD(f.AsY(), d0)
		c.VCVTPS2PD(h, d1)
		c.VADDPD(d0, acc[0], acc[0])
		c.VADDPD(d1, acc[1], acc[1])
	}

	whileAtLeast(c, "loop", "done", g, 1, func() {
		prefetch(c, p, prefetchDist*esz/4, 128*esz)
		res := c.YMM()
		c.VMOVDQU(bytes55, res)
		amb := c.K()
		for lane := 0; lane < 4; lane++ {
			ge, big, neg := c.K(), c.K(), c.K()
			if bf16 {
				v, a := c.ZMM(), c.ZMM()
				c.VMOVDQU32(mem(p, 2*32*lane), v)
				c.VPANDD(absM, v, a)
				ok := c.K()
				c.VPCMPUW(operand.Imm(cmpLE), nanB, a, ok) // not NaN
				c.VPCMPUW(operand.Imm(cmpNLT), lo, a, ok, ge)
				c.VPCMPUW(operand.Imm(cmpNLT), hi, a, ok, big)
				c.VPMOVW2M(v, neg)
				if reduceMax {
					c.VPMAXUW(a, acc[0], acc[0])
				} else {
					hw := c.YMM()
					c.VEXTRACTI64X4(operand.Imm(1), a, hw)
					for _, half := range []reg.Register{a.AsY(), hw} {
						f := c.ZMM()
						c.VPMOVZXWD(half, f)
						c.VPSLLD(operand.Imm(16), f, f)
						sum(f)
					}
				}
			} else {
				var a [2]reg.VecVirtual
				var kg, kb, kn [2]reg.Register
				for h := range a {
					x := c.ZMM()
					a[h] = c.ZMM()
					c.VMOVUPS(mem(p, 4*(32*lane+16*h)), x)
					c.VPANDD(absM, x, a[h])
					kg[h], kb[h], kn[h] = c.K(), c.K(), c.K()
					c.VCMPPS(operand.Imm(cmpGEOQ), lo, a[h], kg[h])
					c.VCMPPS(operand.Imm(cmpGEOQ), hi, a[h], kb[h])
					c.VPTESTMD(signM, x, kn[h])
				}
				c.KUNPCKWD(kg[0], kg[1], ge) // value 16h+i at bit 16h+i
				c.KUNPCKWD(kb[0], kb[1], big)
				c.KUNPCKWD(kn[0], kn[1], neg)
				for h := range a {
					if reduceMax {
						c.VPMAXUD(a[h], acc[0], acc[0])
					} else {
						sum(a[h])
					}
				}
			}
			// b1 = ge && !(big && x < 0); b0 = !big; code 3: ge && !big.
			t, b1 := c.K(), c.K()
			c.KANDD(big, neg, t)
			c.KANDND(ge, t, b1)
			c.VPSUBB(bit0[lane], res, big, res)
			c.VPADDB(bit1[lane], res, b1, res)
			if lane == 0 {
				c.KANDND(ge, big, amb)
			} else {
				a3 := c.K()
				c.KANDND(ge, big, a3)
				c.KORD(a3, amb, amb)
			}
		}
		c.VMOVDQU(res, mem(out, 0))
		c.KORTESTD(amb, amb)
		c.JZ(operand.LabelRef("next"))
		groupEntries(c, res, bytes55, ambM, false, p, out, esz, off, ne, entp, entCap)
	})

	c.Label("full")
	c.MOVQ(operand.I32(-1), ne)
	c.Label("done")
	if reduceMax {
		y := c.YMM()
		c.VEXTRACTI64X4(operand.Imm(1), acc[0], y)
		if bf16 { // 32 words: to 8 dwords of float32 bits
			c.VPMAXUW(acc[0].AsY(), y, y)
			z := c.ZMM()
			c.VPMOVZXWD(y, z)
			c.VEXTRACTI64X4(operand.Imm(1), z, y)
			c.VPMAXUD(z.AsY(), y, y)
			c.VPSLLD(operand.Imm(16), y, y)
		} else {
			c.VPMAXUD(acc[0].AsY(), y, y)
		}
		_, m := hmaxU32(c, y)
		c.VZEROUPPER()
		c.Store(m, c.Return("maxBits"))
	} else {
		c.VADDPD(acc[1], acc[0], acc[0])
		y := c.YMM()
		c.VEXTRACTF64X4(operand.Imm(1), acc[0], y)
		c.VADDPD(acc[0].AsY(), y, y)
		l := hsumF64(c, y)
		c.VZEROUPPER()
		c.Store(l, c.Return("sum"))
	}
	c.Store(ne, c.Return("nent"))
	c.RET()
}
