//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The TQ quantizer's AVX2 kernels (gokern/ternary, tq_amd64.go wraps them;
// the generic Go tqCodesGeneric + packTQ2 / packTQ1 is their oracle).

// tqAVX2 emits gokern/ternary/tq_avx2_amd64.s.
var tqAVX2 = kernels(tq2BlocksAVX2, tq1BlocksAVX2)

// TQ1_0's stored byte of a base-3 number v (0..242) is (v*256+242)/243,
// which for these v is ((v*256+242)*tq1Magic) >> 24 (tq1Magic =
// ceil(2^24/243); checked for every v by gokern/ternary's tests through the
// oracle). The kernels hold v as a signed digit sum a = v - 121 (five digits
// d = code-1; four digits and a zero for qh: v = 3a + 120), so the byte is
// (a*tq1Mul + tq1Add5) >> 24 (or (a*3*tq1Mul + tq1Add4) >> 24), unsigned
// 32-bit arithmetic, no overflow out of [0, 2^32).
const (
	tq1Magic = 69043
	tq1Mul   = 256 * tq1Magic
	tq1Add5  = 121*tq1Mul + 242*tq1Magic
	tq1Add4  = 120*tq1Mul + 242*tq1Magic
)

// tqArgs declares a TQ block kernel, func name(x []float32, dst []byte, ts
// []float32), and loads x.base (p), dst.base (out), ts.base (tp) and
// len(ts) (nb).
func tqArgs(c *build.Context, name string, doc ...string) (p, out, tp, nb reg.Register) {
	declareNoescape(c, name, "func(x []float32, dst []byte, ts []float32)", doc...)
	return loadArg(c, "x.base"), loadArg(c, "dst.base"), loadArg(c, "ts.base"), loadArg(c, "ts.len")
}

// tqBlockLoop emits the block loop of a TQ block kernel: for each of the nb
// thresholds, t and -t broadcast into YMM registers, body(t, nt), then p
// advanced one block (1024 bytes), out payload bytes and tp 4.
func tqBlockLoop(c *build.Context, p, out, tp, nb reg.Register, payload int, body func(t, nt reg.VecVirtual)) {
	whileAtLeast(c, "block", "done", nb, 1, func() {
		t, nt := c.YMM(), c.YMM()
		c.VBROADCASTSS(mem(tp, 0), t)
		c.VXORPS(nt, nt, nt)
		c.VSUBPS(t, nt, nt) // -t
		body(t, nt)
		c.ADDQ(operand.U32(4*256), p)
		c.ADDQ(operand.Imm(uint64(payload)), out)
		c.ADDQ(operand.Imm(4), tp)
	})
	c.Label("done")
	vzeroRet(c)
}

// tqDigit returns a new register holding, per 32-bit lane of the vector r
// (YMM or XMM) of x, the digit +1 where x >= t, -1 where x <= -t, else 0
// (compares only; NaN gives 0). t and nt are broadcasts of t and -t of r's
// width.
func tqDigit(c *build.Context, r, t, nt reg.Register) reg.VecVirtual {
	ge, le := c.YMM(), c.YMM()
	if r.Size() == 16 {
		ge, le = c.XMM(), c.XMM()
	}
	c.VCMPPS(operand.Imm(cmpGEOQ), t, r, ge)
	c.VCMPPS(operand.Imm(cmpLEOQ), nt, r, le)
	c.VPSUBD(ge, le, le) // masks are -1
	return le
}

// tq2BlocksAVX2 writes TQ2_0 payloads: per block, its two 128-value halves,
// value i of a half (lane i/32) in byte i%32 at shift 2*(i/32), code
// 1 + digit in every 2-bit field. It is groupCodes with I2_S's lane order
// reversed and the comparisons on x and the block's threshold.
func tq2BlocksAVX2(c *build.Context) {
	p, out, tp, nb := tqArgs(c, "tq2BlocksAVX2",
		"tq2BlocksAVX2 writes the TQ2_0 payloads (64 bytes each, into dst) of the",
		"len(ts) 256-value blocks of x, block b with threshold ts[b] > 0: code 2 where",
		"x >= t, 0 where x <= -t, else 1; value i of a 128-value half in byte i%32",
		"at shift 2*(i/32). len(x) >= 256*len(ts), len(dst) >= 64*len(ts).",
	)
	c55 := bcst32(c, 0x55)
	perm := dwordIndex(c, permIdx)
	tqBlockLoop(c, p, out, tp, nb, 64, func(t, nt reg.VecVirtual) {
		for h := 0; h < 2; h++ {
			var bytes [4]reg.VecVirtual // bytes[s]: bytes 8s..8s+7 of the half, as dwords
			for s := 0; s < 4; s++ {
				var acc reg.VecVirtual
				for lane := 0; lane < 4; lane++ {
					r := c.YMM()
					c.VMOVUPS(mem(p, 4*(128*h+32*lane+8*s)), r)
					d := tqDigit(c, r, t, nt)
					if sh := 2 * lane; sh > 0 {
						c.VPSLLD(operand.Imm(uint64(sh)), d, d)
					}
					if lane == 0 {
						acc = d
					} else {
						c.VPADDD(d, acc, acc)
					}
				}
				c.VPADDD(c55, acc, acc) // code = 1 + digit in every 2-bit field
				bytes[s] = acc
				if s&1 == 1 {
					c.VPACKUSDW(bytes[s], bytes[s-1], bytes[s-1])
				}
			}
			c.VPACKUSWB(bytes[2], bytes[0], bytes[0])
			c.VPERMD(bytes[0], perm, bytes[0])
			c.VMOVDQU(bytes[0], mem(out, 32*h))
		}
	})
}

// tq1BlocksAVX2 writes TQ1_0 payloads: the base-3 digit sums of tq.go's
// layout by Horner's rule on the digits (code-1) of each value, most
// significant first, then the stored bytes through tq1Mul.
func tq1BlocksAVX2(c *build.Context) {
	p, out, tp, nb := tqArgs(c, "tq1BlocksAVX2",
		"tq1BlocksAVX2 writes the TQ1_0 payloads (52 bytes each, into dst) of the",
		"len(ts) 256-value blocks of x, block b with threshold ts[b] > 0 (codes as",
		"tq2BlocksAVX2's), base 3 as tq.go lays them out. len(x) >= 256*len(ts),",
		"len(dst) >= 52*len(ts).",
	)
	mul := bcst32(c, tq1Mul)
	add5 := bcst32(c, tq1Add5)
	mul3 := bcst32(c, 3*tq1Mul)
	add4 := bcst32(c, tq1Add4)
	perm := dwordIndex(c, permIdx)
	// horner returns the digit sum of the digits of the vectors at the
	// value offsets offs (most significant first), width YMM or XMM.
	horner := func(t, nt reg.Register, xmm bool, offs ...int) reg.VecVirtual {
		var acc reg.VecVirtual
		for k, off := range offs {
			var r reg.VecVirtual
			if xmm {
				r = c.XMM()
				c.VMOVUPS(mem(p, 4*off), r)
			} else {
				r = c.YMM()
				c.VMOVUPS(mem(p, 4*off), r)
			}
			d := tqDigit(c, r, t, nt)
			if k == 0 {
				acc = d
				continue
			}
			c.VPADDD(acc, d, d)   // d + acc
			c.VPADDD(acc, d, d)   // d + 2acc
			c.VPADDD(acc, d, acc) // acc = d + 3acc
		}
		return acc
	}
	// stored: a -> (a*mul + add) >> 24 in place.
	stored := func(a, mul, add reg.Register) {
		c.VPMULLD(mul, a, a)
		c.VPADDD(add, a, a)
		c.VPSRLD(operand.Imm(24), a, a)
	}
	tqBlockLoop(c, p, out, tp, nb, 52, func(t, nt reg.VecVirtual) {
		// qs bytes 0..31: values j, 32+j, ..., 128+j.
		var q [4]reg.VecVirtual
		for s := 0; s < 4; s++ {
			q[s] = horner(t, nt, false, 8*s, 32+8*s, 64+8*s, 96+8*s, 128+8*s)
			stored(q[s], mul, add5)
			if s&1 == 1 {
				c.VPACKUSDW(q[s], q[s-1], q[s-1])
			}
		}
		c.VPACKUSWB(q[2], q[0], q[0])
		c.VPERMD(q[0], perm, q[0])
		c.VMOVDQU(q[0], mem(out, 0))
		// qs bytes 32..47: values 160+j, 176+j, ..., 224+j (j < 16).
		var r [2]reg.VecVirtual
		for s := 0; s < 2; s++ {
			r[s] = horner(t, nt, false, 160+8*s, 176+8*s, 192+8*s, 208+8*s, 224+8*s)
			stored(r[s], mul, add5)
		}
		c.VPACKUSDW(r[1], r[0], r[0])           // words r0[0:4] r1[0:4] | r0[4:8] r1[4:8]
		c.VPERMQ(operand.Imm(0xd8), r[0], r[0]) // words in order
		hi := c.XMM()
		c.VEXTRACTI128(operand.Imm(1), r[0], hi)
		c.VPACKUSWB(hi, r[0].AsX(), r[0].AsX())
		c.VMOVDQU(r[0].AsX(), mem(out, 32))
		// qh bytes 48..51: values 240+j, 244+j, 248+j, 252+j (j < 4), then a zero digit.
		h := horner(t.AsX(), nt.AsX(), true, 240, 244, 248, 252)
		stored(h, mul3.AsX(), add4.AsX()) // v = 3a + 120
		c.VPACKUSDW(h, h, h)
		c.VPACKUSWB(h, h, h)
		c.VMOVD(h, mem(out, 48))
	})
}
