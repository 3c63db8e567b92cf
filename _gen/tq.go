//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The TQ quantizer's AVX2 kernel (gokern/ternary, tq_amd64.go wraps it; the
// generic Go tqCodesGeneric + packTQ2 is its oracle).

// tqAVX2 emits gokern/ternary/tq_avx2_amd64.s.
var tqAVX2 = kernels(tqHalvesAVX2)

// tqHalvesAVX2 writes the TQ2_0 payload of len(dst)/32 whole 128-value
// halves of x with threshold t: value i of a half (lane i/32) in byte i%32
// at shift 2*(i/32), code 2 where x >= t, 0 where x <= -t, else 1 (compares
// only; NaN gives 1). It is groupCodes with I2_S's lane order reversed and
// the comparisons on x and the threshold instead of the quotient.
func tqHalvesAVX2(c *build.Context) {
	declareNoescape(c, "tqHalvesAVX2", "func(x []float32, dst []byte, t float32)",
		"tqHalvesAVX2 writes the TQ2_0 codes of len(dst)/32 whole 128-value halves of x",
		"(len(x) >= 128*(len(dst)/32)) with threshold t > 0 into dst: 2 where x >= t,",
		"0 where x <= -t, else 1; value i of a half in byte i%32 at shift 2*(i/32).",
	)
	p, out, g := groupArgs(c)
	t, nt := c.YMM(), c.YMM()
	c.VBROADCASTSS(paramAddr(c, "t"), t)
	c.VXORPS(nt, nt, nt)
	c.VSUBPS(t, nt, nt) // -t
	c55 := bcst32(c, 0x55)
	perm := dwordIndex(c, permIdx)
	whileAtLeast(c, "loop", "done", g, 1, func() {
		var bytes [4]reg.VecVirtual // bytes[s]: bytes 8s..8s+7 of the half, as dwords
		for s := 0; s < 4; s++ {
			var acc reg.VecVirtual
			for lane := 0; lane < 4; lane++ {
				r, ge, le := c.YMM(), c.YMM(), c.YMM()
				c.VMOVUPS(mem(p, 4*(32*lane+8*s)), r)
				c.VCMPPS(operand.Imm(cmpGEOQ), t, r, ge)
				c.VCMPPS(operand.Imm(cmpLEOQ), nt, r, le)
				// le - ge: +1 where x >= t, -1 where x <= -t (masks are -1).
				c.VPSUBD(ge, le, le)
				if sh := 2 * lane; sh > 0 {
					c.VPSLLD(operand.Imm(uint64(sh)), le, le)
				}
				if lane == 0 {
					acc = le
				} else {
					c.VPADDD(le, acc, acc)
				}
			}
			c.VPADDD(c55, acc, acc) // code = 1 + (le - ge) in every 2-bit field
			bytes[s] = acc
			if s&1 == 1 {
				c.VPACKUSDW(bytes[s], bytes[s-1], bytes[s-1])
			}
		}
		c.VPACKUSWB(bytes[2], bytes[0], bytes[0])
		c.VPERMD(bytes[0], perm, bytes[0])
		c.VMOVDQU(bytes[0], mem(out, 0))
		c.ADDQ(operand.U32(512), p)
		c.ADDQ(operand.Imm(32), out)
	})
	c.Label("done")
	vzeroRet(c)
}
