//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The element-wise quantized ops' AVX2 kernels (gokern/ops/qelem). Their
// contracts are in gokern/ops/qelem/kernels.go (the generic Go oracle);
// gokern/ops/qelem/kernels_avx2_amd64.go wraps them (tails).

// The add kernels' output side (storeCodes): the product t = sum*inv is
// clipped at hi in float32 (NaN and overflow give hi), converted (ties to
// even under the default MXCSR, as torch's _mm256_cvtps_epi32; below -2^31
// gives INT32_MIN), packed to words with signed saturation, the zero point
// added with word saturation (VPADDSW), packed to bytes with the dtype's
// saturation and raised to the floor code byte(Lo+ZO) (VPMAXUB/VPMAXSB).
// For Lo+ZO and Hi+ZO in the dtype's range (every AddParams) that is the
// generic clamp(roundEven(t), Lo, Hi) + ZO: the lower clamp commutes with
// the rounding (Lo is an integer) and with the saturations (monotonic),
// and no float VMAXPS or dword VPADDD is needed.
//
// The clip at hi is there for products of 2^31 and more and NaN, which
// VCVTPS2DQ turns into INT32_MIN: below 2^31 the saturating packs take
// every code at or above Hi+ZO (the dtype's largest code) there anyway. So
// each add kernel has a twin without it (name suffix Bounded, one vector
// operation fewer per 16 codes), which the wrappers run when
// AddParams.Bounded says no product can reach 2^31.

// qelemAVX2 emits gokern/ops/qelem/qelem_avx2_amd64.s.
var qelemAVX2 = kernels(append(addKernels(false),
	qRelu(false, false), qRelu(false, true), qRequant(false, false, false), qRequant(false, false, true),
	qRequant(false, true, false), qRequant(false, true, true))...)

// addKernels returns the emitters of the add and add-constant kernels of
// one width: uint8 and int8, each with the clip at hi and without it.
func addKernels(wide bool) []func(*build.Context) {
	var out []func(*build.Context)
	for _, clip := range []bool{true, false} {
		out = append(out, qAdd(wide, false, clip), qAdd(wide, true, clip), qAddConst(wide, false, clip), qAddConst(wide, true, clip))
	}
	return out
}

// typeName is "I8" or "U8".
func typeName(signed bool) string {
	if signed {
		return "I8"
	}
	return "U8"
}

// The AVX-512 kernels (avx512 family: F, BW): 64 codes an iteration in ZMM
// registers, the AVX2 kernels' sequence twice as wide: every emitter takes
// wide (ZMM) and gets its register width from width.

// qelemAVX512 emits gokern/ops/qelem/qelem_avx512_amd64.s.
var qelemAVX512 = kernels(append(addKernels(true),
	qRelu(true, false), qRelu(true, true), qRequant(true, false, false), qRequant(true, false, true),
	qRequant(true, true, false), qRequant(true, true, true))...)

// permIdx512 undoes the 128-bit-lane interleaving of VPACKSSDW then
// VPACKUSWB on four ZMM registers: output dword 4j+k is dword 4k+j.
var permIdx512 = [16]byte{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}

// dwordIndex512 returns a ZMM register holding the sixteen 32-bit values
// idx (each < 256), for VPERMD.
func dwordIndex512(c *build.Context, idx [16]byte) reg.VecVirtual {
	var lo, hi uint64
	for i := range 8 {
		lo |= uint64(idx[i]) << (8 * i)
		hi |= uint64(idx[8+i]) << (8 * i)
	}
	x := xmmImm(c, 8, lo)
	c.VPINSRQ(operand.Imm(1), gpImm(c, 8, hi), x, x)
	z := c.ZMM()
	c.VPMOVZXBD(x, z)
	return z
}

// outConsts holds the output constants of an add kernel (YMM or ZMM
// registers): inv and hi (with clip) in each float32 lane, the zero point
// in each 16-bit lane, the floor code in each byte, the VPERMD index that
// puts the packed codes in order.
type outConsts struct {
	wide, clip               bool // ZMM; clip at hi
	inv, hi, zo, floor, perm reg.VecVirtual
}

// newOutConsts loads the output constants from the parameters inv, hi
// (with clip), zo (int16) and floor (a byte), into ZMM registers if wide.
func newOutConsts(c *build.Context, wide, clip bool) outConsts {
	vec := c.YMM
	if wide {
		vec = c.ZMM
	}
	k := outConsts{wide: wide, clip: clip, inv: vec(), zo: vec(), floor: vec()}
	c.VBROADCASTSS(paramAddr(c, "inv"), k.inv)
	if clip {
		k.hi = vec()
		c.VBROADCASTSS(paramAddr(c, "hi"), k.hi)
	}
	c.VPBROADCASTW(paramAddr(c, "zo"), k.zo)
	c.VPBROADCASTB(paramAddr(c, "floor"), k.floor)
	if wide {
		k.perm = dwordIndex512(c, permIdx512)
	} else {
		k.perm = dwordIndex(c, permIdx)
	}
	return k
}

// storeCodes writes the codes of the four registers of float32 sums v (32
// or 64 values, in order) to out (see the comment above qelemAVX2): per
// value VMULPS, VMINPS (with k.clip), VCVTPS2DQ; per four registers two VPACKSSDW, two
// VPADDSW, one VPACKUSWB (VPACKSSWB), one VPMAXUB (VPMAXSB), one VPERMD.
func storeCodes(c *build.Context, signed bool, k outConsts, v [4]reg.VecVirtual, out operand.Mem) {
	for _, x := range v {
		c.VMULPS(k.inv, x, x)
		if k.clip {
			c.VMINPS(k.hi, x, x) // (x < hi) ? x : hi
		}
		c.VCVTPS2DQ(x, x)
	}
	c.VPACKSSDW(v[1], v[0], v[0])
	c.VPACKSSDW(v[3], v[2], v[2])
	c.VPADDSW(k.zo, v[0], v[0])
	c.VPADDSW(k.zo, v[2], v[2])
	if signed {
		c.VPACKSSWB(v[2], v[0], v[0])
		c.VPMAXSB(k.floor, v[0], v[0])
	} else {
		c.VPACKUSWB(v[2], v[0], v[0])
		c.VPMAXUB(k.floor, v[0], v[0])
	}
	c.VPERMD(v[0], k.perm, v[0])
	if k.wide {
		c.VMOVDQU64(v[0], out)
	} else {
		c.VMOVDQU(v[0], out)
	}
}

// width is the register width of a kernel: 8 codes a YMM register
// (AVX2), 16 a ZMM register (wide: AVX-512).
type width struct {
	fam string // "AVX2" or "AVX512"
	n   int    // codes (dwords) a register
	vec func() reg.VecVirtual
}

func widthOf(c *build.Context, wide bool) width {
	if wide {
		return width{"AVX512", 16, c.ZMM}
	}
	return width{"AVX2", 8, c.YMM}
}

// bcst broadcasts the float32 parameters names into registers of w.
func (w width) bcst(c *build.Context, names ...string) []reg.VecVirtual {
	out := make([]reg.VecVirtual, len(names))
	for i, name := range names {
		out[i] = w.vec()
		c.VBROADCASTSS(paramAddr(c, name), out[i])
	}
	return out
}

// step advances the pointers ps by bytes, an immediate.
func step(c *build.Context, bytes int, ps ...reg.Register) {
	for _, p := range ps {
		c.ADDQ(operand.U32(uint32(bytes)), p)
	}
}

// deqCodes emits the dequantization of the w.n codes at src: widened to
// dwords (sign- or zero-extended), converted, fma(s, q, p).
func (w width) deqCodes(c *build.Context, signed bool, src operand.Mem, s, p reg.VecVirtual) reg.VecVirtual {
	v := w.vec()
	if signed {
		c.VPMOVSXBD(src, v)
	} else {
		c.VPMOVZXBD(src, v)
	}
	c.VCVTDQ2PS(v, v)
	c.VFMADD213PS(p, s, v) // v = s*v + p, one rounding
	return v
}

// boundedName is the name suffix and doc of the kernels without the clip
// at hi.
func boundedName(clip bool) (suffix, doc string) {
	if clip {
		return "", ""
	}
	return "Bounded", " for AddParams.Bounded (hi unused)"
}

// qAdd returns the emitter of add{U8,I8}{AVX2,AVX512}[Bounded]: 32 (64 if
// wide) codes of a and of b an iteration.
func qAdd(wide, signed, clip bool) func(*build.Context) {
	return func(c *build.Context) {
		w := widthOf(c, wide)
		suffix, doc := boundedName(clip)
		name := "add" + typeName(signed) + w.fam + suffix
		declareNoescape(c, name, "func(a, b, out []byte, sa, pa, sb, pb, inv, hi float32, zo int16, floor byte)",
			fmt.Sprintf("%s writes the len(a)/%d*%d first codes of the generic Add%s kernel%s", name, 4*w.n, 4*w.n, typeName(signed), doc),
			"(b and out at least as long; floor = byte(Lo+ZO)).")
		cnt, r := blockArgs(c, "a", bits(4*w.n), "a.base", "b.base", "out.base")
		pa, pb, po := r[0], r[1], r[2]
		v := w.bcst(c, "sa", "pa", "sb", "pb")
		k := newOutConsts(c, wide, clip)
		blockLoop(c, cnt, func() {
			var s [4]reg.VecVirtual
			for j := range s {
				x := w.deqCodes(c, signed, mem(pa, w.n*j), v[0], v[1])
				y := w.deqCodes(c, signed, mem(pb, w.n*j), v[2], v[3])
				c.VADDPS(y, x, x)
				s[j] = x
			}
			storeCodes(c, signed, k, s, mem(po, 0))
			step(c, 4*w.n, pa, pb, po)
		})
		vzeroRet(c)
	}
}

// qAddConst returns the emitter of addConst{U8,I8}{AVX2,AVX512}[Bounded]:
// a's codes plus the dequantized constant d, 32 (64 if wide) an iteration.
func qAddConst(wide, signed, clip bool) func(*build.Context) {
	return func(c *build.Context) {
		w := widthOf(c, wide)
		suffix, doc := boundedName(clip)
		name := "addConst" + typeName(signed) + w.fam + suffix
		declareNoescape(c, name, "func(a, out []byte, sa, pa, d, inv, hi float32, zo int16, floor byte)",
			fmt.Sprintf("%s writes the len(a)/%d*%d first codes of the generic AddConst%s kernel%s", name, 4*w.n, 4*w.n, typeName(signed), doc),
			"(out at least as long; floor = byte(Lo+ZO)).")
		cnt, r := blockArgs(c, "a", bits(4*w.n), "a.base", "out.base")
		pa, po := r[0], r[1]
		v := w.bcst(c, "sa", "pa", "d")
		k := newOutConsts(c, wide, clip)
		blockLoop(c, cnt, func() {
			var s [4]reg.VecVirtual
			for j := range s {
				x := w.deqCodes(c, signed, mem(pa, w.n*j), v[0], v[1])
				c.VADDPS(v[2], x, x)
				s[j] = x
			}
			storeCodes(c, signed, k, s, mem(po, 0))
			step(c, 4*w.n, pa, po)
		})
		vzeroRet(c)
	}
}

// qRelu returns the emitter of relu{U8,I8}{AVX2,AVX512}: four registers of
// bytes (128 or 256) an iteration, max with the zero point broadcast to
// every byte.
func qRelu(wide, signed bool) func(*build.Context) {
	return func(c *build.Context) {
		w := widthOf(c, wide)
		bs := 4 * w.n // bytes a register
		name := "relu" + typeName(signed) + w.fam
		declareNoescape(c, name, "func(x, out []byte, zp byte)",
			fmt.Sprintf("%s writes the len(x)/%d*%d first codes of the generic Relu%s kernel", name, 4*bs, 4*bs, typeName(signed)),
			"(out at least as long).")
		cnt, r := blockArgs(c, "x", bits(4*bs), "x.base", "out.base")
		px, po := r[0], r[1]
		z := w.vec()
		c.VPBROADCASTB(paramAddr(c, "zp"), z) // the code of the zero point
		maxb := c.VPMAXUB
		if signed {
			maxb = c.VPMAXSB
		}
		blockLoop(c, cnt, func() {
			for j := 0; j < 4; j++ {
				v := w.vec()
				maxb(mem(px, bs*j), z, v)
				if wide {
					c.VMOVDQU64(v, mem(po, bs*j))
				} else {
					c.VMOVDQU(v, mem(po, bs*j))
				}
			}
			step(c, 4*bs, px, po)
		})
		vzeroRet(c)
	}
}

// bits is log2 of n, a power of two.
func bits(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

// qRequant returns the emitter of requant{U8,I8}{U8,I8}{AVX2,AVX512}
// (input, output dtype): 32 (AVX2) or 64 (wide: AVX-512) codes an
// iteration, each widened, minus zi (VPSUBD), converted, times s, then
// storeCodes.
func qRequant(wide, inSigned, outSigned bool) func(*build.Context) {
	return func(c *build.Context) {
		w := widthOf(c, wide)
		n, vec := w.n, w.vec
		name := "requant" + typeName(inSigned) + typeName(outSigned) + w.fam
		declareNoescape(c, name, "func(x, out []byte, s float32, zi int32, inv, hi float32, zo int16, floor byte)",
			fmt.Sprintf("%s writes the len(x)/%d*%d first codes of the generic Requant[%d][%d] kernel",
				name, 4*n, 4*n, b2i(inSigned), b2i(outSigned)),
			"(out at least as long; floor = byte(Lo+ZO)).")
		cnt, r := blockArgs(c, "x", bits(4*n), "x.base", "out.base")
		px, po := r[0], r[1]
		sc, zi := vec(), vec()
		c.VBROADCASTSS(paramAddr(c, "s"), sc)
		c.VBROADCASTSS(paramAddr(c, "zi"), zi) // the bits of an int32
		k := newOutConsts(c, wide, true)
		blockLoop(c, cnt, func() {
			var v [4]reg.VecVirtual
			for j := range v {
				x := vec()
				if inSigned {
					c.VPMOVSXBD(mem(px, n*j), x)
				} else {
					c.VPMOVZXBD(mem(px, n*j), x)
				}
				c.VPSUBD(zi, x, x)
				c.VCVTDQ2PS(x, x) // exact: |x - zi| < 2^9
				c.VMULPS(sc, x, x)
				v[j] = x
			}
			storeCodes(c, outSigned, k, v, mem(po, 0))
			step(c, 4*n, px, po)
		})
		vzeroRet(c)
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
