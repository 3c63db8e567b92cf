//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The general quantizer's AVX2 kernels (gokern/quant). Their contracts are in
// gokern/quant/kernels_avx2_amd64.go, which wraps them (tails, the first
// bad index and the sign of zero are Go's); the generic Go versions in
// gokern/quant/kernels.go are the oracle they are tested against.

// quantAVX2 emits gokern/quant/quant_avx2_amd64.s.
var quantAVX2 = kernels(qMinMaxAVX2, qMinMaxRowAVX2, qQuantRunAVX2, qQuantRowAVX2,
	qDequantAVX2(false, true), qDequantAVX2(false, false), qDequantAVX2(true, true), qDequantAVX2(true, false),
	qPack4AVX2, qUnpack4AVX2, qHistCountAVX2)

const (
	cmpUNORDQ  = 0x03
	f32PosInf  = 0x7f800000
	f32NegInf  = 0xff800000
	roundMagic = 0x4b400000 // 1.5 * 2^23
)

// blockArgs returns a new register holding len(slice) >> sh (the count of
// whole 2^sh-element blocks) and the parameters args, loaded (loadArgs).
func blockArgs(c *build.Context, slice string, sh int, args ...string) (reg.Register, []reg.Register) {
	n := loadArg(c, slice+".len")
	c.SHRQ(operand.Imm(uint64(sh)), n)
	return n, loadArgs(c, args...)
}

// storeNonZero returns, as the kernel's bool result, whether any bit of the
// YMM acc is set (VZEROUPPER first).
func storeNonZero(c *build.Context, acc reg.VecVirtual) {
	r := c.GP8()
	c.VPTEST(acc, acc)
	c.SETNE(r)
	c.VZEROUPPER()
	c.Store(r, c.ReturnIndex(0))
	c.RET()
}

// qMinMaxAVX2: four min and four max accumulators (lane-wise first
// minimum: (x < m) ? x : m, so NaN never enters and an equal value never
// replaces), a NaN flag from VCMPPS unordered.
func qMinMaxAVX2(c *build.Context) {
	declareNoescape(c, "minMaxAVX2", "func(x []float32, acc *[64]float32) bool",
		"minMaxAVX2 folds the len(x)/32 whole 32-value blocks of x into acc[0:32]",
		"(minima: acc[j] = x[i] if x[i] < acc[j], i = j mod 32) and acc[32:64]",
		"(maxima), starting from +Inf and -Inf; it reports whether they hold a",
		"NaN (skipped by the comparisons).")
	cnt, a := blockArgs(c, "x", 5, "x.base", "acc")
	p, out := a[0], a[1]
	mn, mx := make([]reg.VecVirtual, 4), make([]reg.VecVirtual, 4)
	pinf, ninf := bcst32(c, f32PosInf), bcst32(c, f32NegInf)
	for k := range mn {
		mn[k], mx[k] = c.YMM(), c.YMM()
		c.VMOVAPS(pinf, mn[k])
		c.VMOVAPS(ninf, mx[k])
	}
	nan := zeroY(c, 1)[0]
	blockLoop(c, cnt, func() {
		for k := 0; k < 4; k++ {
			x, u := c.YMM(), c.YMM()
			c.VMOVUPS(mem(p, 32*k), x)
			c.VMINPS(mn[k], x, mn[k]) // (x < mn) ? x : mn
			c.VMAXPS(mx[k], x, mx[k]) // (x > mx) ? x : mx
			c.VCMPPS(operand.Imm(cmpUNORDQ), x, x, u)
			c.VORPS(u, nan, nan)
		}
		c.ADDQ(operand.Imm(128), p)
	})
	for k := 0; k < 4; k++ {
		c.VMOVUPS(mn[k], mem(out, 32*k))
		c.VMOVUPS(mx[k], mem(out, 128+32*k))
	}
	storeNonZero(c, nan)
}

// qMinMaxRowAVX2: the element-wise fold, NaN in x copied into both.
func qMinMaxRowAVX2(c *build.Context) {
	declareNoescape(c, "minMaxRowAVX2", "func(x, mn, mx []float32) bool",
		"minMaxRowAVX2 folds the first len(x)/8*8 values of x into mn and mx element",
		"by element (mn[i] = x[i] < mn[i] ? x[i] : mn[i]; x[i] NaN: both x[i]) and",
		"reports whether those values hold a NaN or ±Inf.")
	cnt, r := blockArgs(c, "x", 3, "x.base", "mn.base", "mx.base")
	p, a, b := r[0], r[1], r[2]
	bad := zeroY(c, 1)[0]
	blockLoop(c, cnt, func() {
		x, u, m, t := c.YMM(), c.YMM(), c.YMM(), c.YMM()
		c.VMOVUPS(mem(p, 0), x)
		c.VCMPPS(operand.Imm(cmpUNORDQ), x, x, u)
		c.VMOVUPS(mem(a, 0), m)
		c.VMINPS(m, x, m)
		c.VBLENDVPS(u, x, m, m)
		c.VMOVUPS(m, mem(a, 0))
		c.VMOVUPS(mem(b, 0), m)
		c.VMAXPS(m, x, m)
		c.VBLENDVPS(u, x, m, m)
		c.VMOVUPS(m, mem(b, 0))
		c.VSUBPS(x, x, t) // NaN for NaN and ±Inf, else +0
		c.VORPS(t, bad, bad)
		c.ADDQ(operand.Imm(32), p)
		c.ADDQ(operand.Imm(32), a)
		c.ADDQ(operand.Imm(32), b)
	})
	storeNonZero(c, bad)
}

// quantVec emits the codes (as dwords) of the 8 values at src: t = x*inv,
// clamped to [lo, hi] as the generic code clamps ((t > lo) ? t : lo, then
// (t < hi) ? t : hi: NaN becomes lo), rounded with the magic constant,
// truncated to int32, plus zp; NaN products get nanc. The result is masked
// to its low byte. x - x is OR-ed into bad.
type quantConsts struct{ magic, nanc, low, bad reg.VecVirtual }

func quantVec(c *build.Context, k quantConsts, src operand.Mem, inv, lo, hi, zp operand.Op) reg.VecVirtual {
	x, t, u := c.YMM(), c.YMM(), c.YMM()
	c.VMOVUPS(src, x)
	c.VMULPS(inv, x, t)
	c.VSUBPS(x, x, x)
	c.VORPS(x, k.bad, k.bad)
	c.VCMPPS(operand.Imm(cmpUNORDQ), t, t, u)
	c.VMAXPS(lo, t, t) // (t > lo) ? t : lo
	c.VMINPS(hi, t, t) // (t < hi) ? t : hi
	c.VADDPS(k.magic, t, t)
	c.VSUBPS(k.magic, t, t)
	c.VCVTTPS2DQ(t, t)
	c.VPADDD(zp, t, t)
	c.VBLENDVPS(u, k.nanc, t, t)
	c.VPAND(k.low, t, t)
	return t
}

// packCodes packs the four dword-code vectors made by code(j) (each lane
// < 256) into the 32 bytes at out, in order; pairs are packed as soon as
// they are made (fewer live registers).
func packCodes(c *build.Context, code func(j int) reg.VecVirtual, perm reg.VecVirtual, out operand.Mem) {
	packCodesAs(c, false, code, perm, out)
}

// packCodesAs is packCodes with saturating packs: unsigned (lanes in
// [0, 255] come out as they are) or signed (lanes in [-128, 127] come out
// as their two's complement bytes).
func packCodesAs(c *build.Context, signed bool, code func(j int) reg.VecVirtual, perm reg.VecVirtual, out operand.Mem) {
	packDW, packWB := c.VPACKUSDW, c.VPACKUSWB
	if signed {
		packDW, packWB = c.VPACKSSDW, c.VPACKSSWB
	}
	var v [4]reg.VecVirtual
	for j := range v {
		v[j] = code(j)
		if j&1 == 1 {
			packDW(v[j], v[j-1], v[j-1])
		}
	}
	packWB(v[2], v[0], v[0])
	c.VPERMD(v[0], perm, v[0])
	c.VMOVDQU(v[0], out)
}

func qQuantRunAVX2(c *build.Context) {
	declareNoescape(c, "quantRunAVX2", "func(x []float32, inv, lo, hi float32, zp, nanc int32, dst []byte) bool",
		"quantRunAVX2 writes the codes of the len(x)/32*32 first values of x into dst:",
		"clamp(x*inv, lo, hi) rounded half to even, + zp, low byte (NaN product: nanc);",
		"it reports whether those values hold a NaN or ±Inf.")
	cnt, a := blockArgs(c, "x", 5, "x.base", "dst.base")
	p, d := a[0], a[1]
	b := bcstParams(c, "inv", "lo", "hi", "zp", "nanc")
	inv, lo, hi, zp, nanc := b[0], b[1], b[2], b[3], b[4]
	k := quantConsts{magic: bcst32(c, roundMagic), nanc: nanc, low: bcst32(c, 0xff), bad: zeroY(c, 1)[0]}
	perm := dwordIndex(c, permIdx)
	blockLoop(c, cnt, func() {
		packCodes(c, func(j int) reg.VecVirtual {
			return quantVec(c, k, mem(p, 32*j), inv, lo, hi, zp)
		}, perm, mem(d, 0))
		c.ADDQ(operand.Imm(128), p)
		c.ADDQ(operand.Imm(32), d)
	})
	storeNonZero(c, k.bad)
}

func qQuantRowAVX2(c *build.Context) {
	declareNoescape(c, "quantRowAVX2", "func(x, inv []float32, zp []int32, qmin, qmax, nanc int32, dst []byte) bool",
		"quantRowAVX2 is quantRunAVX2 with inv[i] and zp[i] per value (lo = qmin-zp[i],",
		"hi = qmax-zp[i] as float32).")
	cnt, a := blockArgs(c, "x", 5, "x.base", "inv.base", "zp.base", "dst.base")
	p, iv, z, d := a[0], a[1], a[2], a[3]
	b := bcstParams(c, "qmin", "qmax", "nanc")
	qmin, qmax, nanc := b[0], b[1], b[2]
	k := quantConsts{magic: bcst32(c, roundMagic), nanc: nanc, low: bcst32(c, 0xff), bad: zeroY(c, 1)[0]}
	perm := dwordIndex(c, permIdx)
	blockLoop(c, cnt, func() {
		packCodes(c, func(j int) reg.VecVirtual {
			zv, lo, hi := c.YMM(), c.YMM(), c.YMM()
			c.VMOVDQU(mem(z, 32*j), zv)
			c.VPSUBD(zv, qmin, lo)
			c.VCVTDQ2PS(lo, lo)
			c.VPSUBD(zv, qmax, hi)
			c.VCVTDQ2PS(hi, hi)
			return quantVec(c, k, mem(p, 32*j), mem(iv, 32*j), lo, hi, zv)
		}, perm, mem(d, 0))
		c.ADDQ(operand.Imm(128), p)
		c.ADDQ(operand.Imm(128), iv)
		c.ADDQ(operand.Imm(128), z)
		c.ADDQ(operand.Imm(32), d)
	})
	storeNonZero(c, k.bad)
}

// qDequantAVX2 returns the emitter of dequant{Run,Row}{I8,U8}AVX2: 32 codes
// an iteration, widened to dwords, minus zp, converted, times the scale.
func qDequantAVX2(row, signed bool) func(*build.Context) {
	return func(c *build.Context) {
		name, typ := "dequantRun", "I8"
		sig := "func(q []byte, scale float32, zp int32, out []float32)"
		if row {
			name = "dequantRow"
			sig = "func(q []byte, scale []float32, zp []int32, out []float32)"
		}
		if !signed {
			typ = "U8"
		}
		name += typ + "AVX2"
		declareNoescape(c, name, sig,
			name+" writes the len(q)/32*32 first values of the "+typ+" generic kernel.")
		cnt, a := blockArgs(c, "q", 5, "q.base", "out.base")
		q, o := a[0], a[1]
		var sp, zpp reg.Register
		var sc, zp reg.VecVirtual
		if row {
			sp, zpp = loadArg(c, "scale.base"), loadArg(c, "zp.base")
		} else {
			b := bcstParams(c, "scale", "zp") // zp: the int32 bits
			sc, zp = b[0], b[1]
		}
		blockLoop(c, cnt, func() {
			for j := 0; j < 4; j++ {
				v := c.YMM()
				if signed {
					c.VPMOVSXBD(mem(q, 8*j), v)
				} else {
					c.VPMOVZXBD(mem(q, 8*j), v)
				}
				if row {
					c.VPSUBD(mem(zpp, 32*j), v, v)
					c.VCVTDQ2PS(v, v)
					c.VMULPS(mem(sp, 32*j), v, v)
				} else {
					c.VPSUBD(zp, v, v)
					c.VCVTDQ2PS(v, v)
					c.VMULPS(sc, v, v)
				}
				c.VMOVUPS(v, mem(o, 32*j))
			}
			c.ADDQ(operand.Imm(32), q)
			c.ADDQ(operand.Imm(128), o)
			if row {
				c.ADDQ(operand.Imm(128), sp)
				c.ADDQ(operand.Imm(128), zpp)
			}
		})
		vzeroRet(c)
	}
}

// qPack4AVX2: 64 codes (32 words c0 | c1<<8) an iteration: c0&15 |
// (c1&15)<<4 per word, packed to bytes.
func qPack4AVX2(c *build.Context) {
	declareNoescape(c, "pack4AVX2", "func(codes, dst []byte)",
		"pack4AVX2 packs the len(codes)/64*64 first codes two per byte into dst.")
	cnt, a := blockArgs(c, "codes", 6, "codes.base", "dst.base")
	p, d := a[0], a[1]
	lo, hi := bcst32(c, 0x000f000f), bcst32(c, 0x00f000f0)
	blockLoop(c, cnt, func() {
		var w [2]reg.VecVirtual
		for j := range w {
			a, b := c.YMM(), c.YMM()
			c.VMOVDQU(mem(p, 32*j), a)
			c.VPSRLW(operand.Imm(4), a, b)
			c.VPAND(hi, b, b)
			c.VPAND(lo, a, a)
			c.VPOR(b, a, a)
			w[j] = a
		}
		c.VPACKUSWB(w[1], w[0], w[0])
		c.VPERMQ(operand.Imm(0xd8), w[0], w[0])
		c.VMOVDQU(w[0], mem(d, 0))
		c.ADDQ(operand.Imm(64), p)
		c.ADDQ(operand.Imm(32), d)
	})
	vzeroRet(c)
}

// qUnpack4AVX2: 32 source bytes (64 nibbles) an iteration.
func qUnpack4AVX2(c *build.Context) {
	declareNoescape(c, "unpack4AVX2", "func(src []byte, signed bool, dst []byte)",
		"unpack4AVX2 writes the len(dst)/64*64 first nibbles of src into dst, as",
		"unpack4Generic does.")
	cnt, a := blockArgs(c, "dst", 6, "src.base", "dst.base")
	s, d := a[0], a[1]
	// Sign extension: (v ^ 8) - 8 in every byte when signed, else (v ^ 0) - 0.
	e8 := bcstBool(c, "signed", func(e reg.GPVirtual) { c.IMUL3L(operand.U32(0x08080808), e, e) })
	m15 := bcst32(c, 0x0f0f0f0f)
	blockLoop(c, cnt, func() {
		a, b := c.YMM(), c.YMM()
		c.VPERMQ(operand.Imm(0xd8), mem(s, 0), a) // qwords 0 2 1 3: the unpacks' lane order
		c.VPSRLW(operand.Imm(4), a, b)
		c.VPAND(m15, b, b)
		c.VPAND(m15, a, a)
		for _, v := range []reg.VecVirtual{a, b} {
			c.VPXOR(e8, v, v)
			c.VPSUBB(e8, v, v)
		}
		l, h := c.YMM(), c.YMM()
		c.VPUNPCKLBW(b, a, l)
		c.VPUNPCKHBW(b, a, h)
		c.VMOVDQU(l, mem(d, 0))
		c.VMOVDQU(h, mem(d, 32))
		c.ADDQ(operand.Imm(32), s)
		c.ADDQ(operand.Imm(64), d)
	})
	vzeroRet(c)
}

// blockLoop runs body cnt times (whileAtLeast, labels loop and done), then
// goes on at done.
func blockLoop(c *build.Context, cnt reg.Register, body func()) {
	whileAtLeast(c, "loop", "done", cnt, 1, body)
	c.Label("done")
}

// bcstBool returns a YMM register holding in each 32-bit lane the value
// that f makes, in place, of the bool parameter name (0 or 1 in a GP32).
func bcstBool(c *build.Context, name string, f func(e reg.GPVirtual)) reg.VecVirtual {
	sg, e := c.GP8(), c.GP32()
	c.Load(c.Param(name), sg)
	c.MOVBLZX(sg, e)
	f(e)
	ex := c.XMM()
	c.VMOVD(e, ex)
	return ymmFrom(c, ex, c.VPBROADCASTD)
}

// qHistCountAVX2: the bin of each value with the generic code's float32
// operations in its order (no FMA): ((v - lo) * fnb) / width, at most nb-1
// (as a float, before the truncation: a product that overflowed to +Inf
// is nb-1 too), truncated; nb for values outside [lo, hi] (NaN included).
// The 8 bins of a vector go through a stack slot into 8 increments of four
// interleaved uint32 sub-histograms (lane j: sub-histogram j mod 4), so
// that runs of one bin do not wait on their own increments.
func qHistCountAVX2(c *build.Context) {
	declareNoescape(c, "histCountAVX2", "func(x []float32, lo, hi, fnb, width float32, nb int32, absolute bool, sub []uint32) bool",
		"histCountAVX2 adds the bins of the len(x)/8*8 first values v of x (|x| with absolute),",
		"min(int32(float32(float32(v-lo)*fnb)/width), nb-1) in [lo, hi], else nb, into sub:",
		"4 sub-histograms of nb+1 uint32 (value i of a block of 8: sub[(i%4)*(nb+1)+bin]), no",
		"count past 2^32-1; it reports whether those values hold a NaN or ±Inf.")
	cnt, a := blockArgs(c, "x", 3, "x.base", "sub.base", "nb")
	p, h0, stride := a[0], a[1], a[2]
	b := bcstParams(c, "lo", "hi", "fnb", "width", "nb")
	lo, hi, fnb, width, nb := b[0], b[1], b[2], b[3], b[4]
	fnbm1, ones := c.YMM(), c.YMM()
	c.VPCMPEQD(ones, ones, ones)
	c.VPADDD(ones, nb, fnbm1)
	c.VCVTDQ2PS(fnbm1, fnbm1) // nb-1 < 2^24: exact
	// The |.| mask: all ones (no-op) or 0x7fffffff.
	am := bcstBool(c, "absolute", func(e reg.GPVirtual) {
		c.SHLL(operand.Imm(31), e)
		c.NOTL(e)
	})
	// The sub-histograms: h[k] = sub + k*(nb+1)*4 bytes.
	c.LEAQ(operand.Mem{Base: stride, Disp: 1}, stride) // nb came sign-extended
	c.SHLQ(operand.Imm(2), stride)
	h := [4]reg.Register{h0}
	for k := 1; k < 4; k++ {
		h[k] = c.GP64()
		c.LEAQ(operand.Mem{Base: h[k-1], Index: stride, Scale: 1}, h[k])
	}
	buf := c.AllocLocal(32)
	bad := zeroY(c, 1)[0]
	blockLoop(c, cnt, func() {
		v, t, in, g := c.YMM(), c.YMM(), c.YMM(), c.YMM()
		c.VANDPS(mem(p, 0), am, v)
		c.VSUBPS(v, v, t)
		c.VORPS(t, bad, bad)
		c.VCMPPS(operand.Imm(cmpGEOQ), lo, v, in)
		c.VCMPPS(operand.Imm(cmpLEOQ), hi, v, g)
		c.VANDPS(g, in, in)
		c.VSUBPS(lo, v, t)
		c.VMULPS(fnb, t, t)
		c.VDIVPS(width, t, t)
		c.VMINPS(fnbm1, t, t) // (t < nb-1) ? t : nb-1
		c.VCVTTPS2DQ(t, t)
		c.VBLENDVPS(in, t, nb, t)
		c.VMOVDQU(t, buf)
		for j := 0; j < 8; j++ {
			i := c.GP64()
			c.MOVL(buf.Offset(4*j), i.As32())
			c.INCL(operand.Mem{Base: h[j%4], Index: i, Scale: 4})
		}
		c.ADDQ(operand.Imm(32), p)
	})
	storeNonZero(c, bad)
}
