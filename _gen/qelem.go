//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The element-wise quantized ops' AVX2 kernels (gokern/ops/qelem). Their
// contracts are in gokern/ops/qelem/kernels.go (the generic Go oracle);
// gokern/ops/qelem/kernels_avx2_amd64.go wraps them (tails).

// qelemAVX2 emits gokern/ops/qelem/qelem_avx2_amd64.s.
var qelemAVX2 = kernels(qAddAVX2(false), qAddAVX2(true), qAddConstAVX2(false), qAddConstAVX2(true),
	qReluAVX2(false), qReluAVX2(true))

// typeName is "I8" or "U8".
func typeName(signed bool) string {
	if signed {
		return "I8"
	}
	return "U8"
}

// deqCodes emits the dequantization of the 8 codes at src: widened to
// dwords (sign- or zero-extended), converted, fma(s, q, p).
func deqCodes(c *build.Context, signed bool, src operand.Mem, s, p reg.VecVirtual) reg.VecVirtual {
	v := c.YMM()
	if signed {
		c.VPMOVSXBD(src, v)
	} else {
		c.VPMOVZXBD(src, v)
	}
	c.VCVTDQ2PS(v, v)
	c.VFMADD213PS(p, s, v) // v = s*v + p, one rounding
	return v
}

// addOut holds the output constants of an add kernel.
type addOut struct{ inv, lo, hi, zo reg.VecVirtual }

// codeOf turns the float32 sums in v into dword codes, in place:
// min(v*inv, hi) (NaN: hi), max(., lo), converted rounding to nearest
// even (VCVTPS2DQ under the default MXCSR, whose rounding every float
// operation here follows, as torch's _mm256_cvtps_epi32 does), + zo.
func codeOf(c *build.Context, k addOut, v reg.VecVirtual) reg.VecVirtual {
	c.VMULPS(k.inv, v, v)
	c.VMINPS(k.hi, v, v) // (v < hi) ? v : hi
	c.VMAXPS(k.lo, v, v) // (v > lo) ? v : lo
	c.VCVTPS2DQ(v, v)
	c.VPADDD(k.zo, v, v)
	return v
}

// qAddAVX2 returns the emitter of add{U8,I8}AVX2: 32 codes of a and of b an
// iteration.
func qAddAVX2(signed bool) func(*build.Context) {
	return func(c *build.Context) {
		name := "add" + typeName(signed) + "AVX2"
		declareNoescape(c, name, "func(a, b, out []byte, sa, pa, sb, pb, inv, lo, hi float32, zo int32)",
			name+" writes the len(a)/32*32 first codes of the generic Add"+typeName(signed)+" kernel",
			"(b and out at least as long).")
		cnt, r := blockArgs(c, "a", 5, "a.base", "b.base", "out.base")
		pa, pb, po := r[0], r[1], r[2]
		v := bcstParams(c, "sa", "pa", "sb", "pb", "inv", "lo", "hi", "zo")
		k := addOut{inv: v[4], lo: v[5], hi: v[6], zo: v[7]}
		perm := dwordIndex(c, permIdx)
		blockLoop(c, cnt, func() {
			packCodesAs(c, signed, func(j int) reg.VecVirtual {
				x := deqCodes(c, signed, mem(pa, 8*j), v[0], v[1])
				y := deqCodes(c, signed, mem(pb, 8*j), v[2], v[3])
				c.VADDPS(y, x, x)
				return codeOf(c, k, x)
			}, perm, mem(po, 0))
			c.ADDQ(operand.Imm(32), pa)
			c.ADDQ(operand.Imm(32), pb)
			c.ADDQ(operand.Imm(32), po)
		})
		vzeroRet(c)
	}
}

// qAddConstAVX2 returns the emitter of addConst{U8,I8}AVX2: a's codes plus
// the dequantized constant d.
func qAddConstAVX2(signed bool) func(*build.Context) {
	return func(c *build.Context) {
		name := "addConst" + typeName(signed) + "AVX2"
		declareNoescape(c, name, "func(a, out []byte, sa, pa, d, inv, lo, hi float32, zo int32)",
			name+" writes the len(a)/32*32 first codes of the generic AddConst"+typeName(signed)+" kernel",
			"(out at least as long).")
		cnt, r := blockArgs(c, "a", 5, "a.base", "out.base")
		pa, po := r[0], r[1]
		v := bcstParams(c, "sa", "pa", "d", "inv", "lo", "hi", "zo")
		k := addOut{inv: v[3], lo: v[4], hi: v[5], zo: v[6]}
		perm := dwordIndex(c, permIdx)
		blockLoop(c, cnt, func() {
			packCodesAs(c, signed, func(j int) reg.VecVirtual {
				x := deqCodes(c, signed, mem(pa, 8*j), v[0], v[1])
				c.VADDPS(v[2], x, x)
				return codeOf(c, k, x)
			}, perm, mem(po, 0))
			c.ADDQ(operand.Imm(32), pa)
			c.ADDQ(operand.Imm(32), po)
		})
		vzeroRet(c)
	}
}

// qReluAVX2 returns the emitter of relu{U8,I8}AVX2: 128 bytes an iteration,
// max with the zero point broadcast to every byte.
func qReluAVX2(signed bool) func(*build.Context) {
	return func(c *build.Context) {
		name := "relu" + typeName(signed) + "AVX2"
		declareNoescape(c, name, "func(x, out []byte, zp byte)",
			name+" writes the len(x)/128*128 first codes of the generic Relu"+typeName(signed)+" kernel",
			"(out at least as long).")
		cnt, r := blockArgs(c, "x", 7, "x.base", "out.base")
		px, po := r[0], r[1]
		z := c.YMM()
		c.VPBROADCASTB(paramAddr(c, "zp"), z) // the code of the zero point
		maxb := c.VPMAXUB
		if signed {
			maxb = c.VPMAXSB
		}
		blockLoop(c, cnt, func() {
			for j := 0; j < 4; j++ {
				v := c.YMM()
				maxb(mem(px, 32*j), z, v)
				c.VMOVDQU(v, mem(po, 32*j))
			}
			c.ADDQ(operand.Imm(128), px)
			c.ADDQ(operand.Imm(128), po)
		})
		vzeroRet(c)
	}
}
