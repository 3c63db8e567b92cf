//go:build generate

package main

import (
	"fmt"
	"slices"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The conv GEMM's AVX2 micro-kernels (gokern/gemm). Their contracts are in
// gokern/gemm/kernels_amd64.go, which wraps them; the generic Go kernels in
// gemm.go are the oracle they are tested against. Both compute one 4 x 16
// tile (MR = 4 rows of an A panel, NR = 16 columns of a B micro-panel) and
// read the shared 2-bit A panel (byte k = the four rows' codes of k).

// gemmAVX2 emits gokern/gemm/micro_avx2_amd64.s.
var gemmAVX2 = kernels(microF32AVX2, prepI8AVX2, microI8AVX2, quantI8AVX2,
	forEach(gemvColsF32, gemvF32AVX2), gemvI8AVX2Kernels,
	packPanelAVX2, foldI32AVX2, foldF32AVX2, foldI32ScalesAVX2, foldF32ScalesAVX2, implicitI8AVX2, foldTilesAVX2, tileRowsAVX2, quantU8x8AVX2,
	quantU8x4AVX2, sfenceAVX2)

// rowAddrs returns the memory operands of rows 0..3 of a tile at p with a
// row stride of ld bytes (ld3 = 3*ld), plus disp.
func rowAddrs(p, ld, ld3 reg.Register, disp int) [4]operand.Mem {
	return [4]operand.Mem{
		{Base: p, Disp: disp},
		{Base: p, Index: ld, Scale: 1, Disp: disp},
		{Base: p, Index: ld, Scale: 2, Disp: disp},
		{Base: p, Index: ld3, Scale: 1, Disp: disp},
	}
}

// microF32AVX2: t[r*ldt+j] (+)= sum_k w(r,k) * b[k*16+j] for r < 4, j < 16.
// The weights of byte a[k] are the four float32 of lut[a[k]] (16 bytes),
// broadcast one row at a time; 8 accumulators (two YMM per row), one
// VFMADD231PS per row and half-row per k. Each sum runs over k in order
// with exact products (w is -1, 0 or +1), so the result is bit-for-bit the
// generic kernel's.
func microF32AVX2(c *build.Context) {
	microF32(c, "microF32AVX2", "4x16", 2, 32, 4, c.YMM, zeroY, loadY(c))
}

// microF32 emits a 4 x (per*vb/4) float32 micro-kernel of the F32Micro
// contract: per vectors of vb bytes per row (new ones from vec), unroll k
// per iteration of the main loop, then one k at a time.
func microF32(c *build.Context, name, tile string, per, vb, unroll int, vec func() reg.VecVirtual,
	zero func(*build.Context, int) []reg.VecVirtual, ld func(operand.Mem) reg.VecVirtual) {
	declareNoescape(c, name, "func(kc int, a *byte, b *float32, t *float32, ldt int, lut *float32, add bool)",
		fmt.Sprintf("%s is the %s float32 micro-kernel (kc >= 1; ldt in elements; lut = &lutF32[0][0]).", name, tile))
	n, pa, pb, pl := loadArg(c, "kc"), loadArg(c, "a"), loadArg(c, "b"), loadArg(c, "lut")
	acc := zero(c, 4*per)
	row := per * vb // bytes of B per k

	step := func(u int) {
		idx := c.GP64()
		c.MOVBQZX(mem(pa, u), idx)
		c.SHLQ(operand.Imm(4), idx)
		b := make([]reg.VecVirtual, per)
		for h := range b {
			b[h] = vec()
			c.VMOVUPS(mem(pb, row*u+vb*h), b[h])
		}
		for r := 0; r < 4; r++ {
			w := vec()
			c.VBROADCASTSS(operand.Mem{Base: pl, Index: idx, Scale: 1, Disp: 4 * r}, w)
			for h := range b {
				c.VFMADD231PS(b[h], w, acc[per*r+h])
			}
		}
	}

	loop := fmt.Sprintf("f32loop%d", unroll)
	c.Comment(fmt.Sprintf("%d k per iteration.", unroll))
	c.Label(loop)
	c.CMPQ(n, operand.Imm(uint64(unroll)))
	c.JB(operand.LabelRef("f32tail"))
	for u := 0; u < unroll; u++ {
		step(u)
	}
	c.ADDQ(operand.Imm(uint64(unroll)), pa)
	c.ADDQ(operand.U32(uint64(unroll*row)), pb)
	c.SUBQ(operand.Imm(uint64(unroll)), n)
	c.JMP(operand.LabelRef(loop))

	c.Label("f32tail")
	c.TESTQ(n, n)
	c.JZ(operand.LabelRef("f32store"))
	step(0)
	c.INCQ(pa)
	c.ADDQ(operand.U32(uint64(row)), pb)
	c.DECQ(n)
	c.JMP(operand.LabelRef("f32tail"))

	c.Label("f32store")
	storeTile(c, acc, per, vb, ld, func(s, d reg.VecVirtual) { c.VADDPS(s, d, d) }, func(s reg.VecVirtual, m operand.Mem) { c.VMOVUPS(s, m) })
}

// storeTile stores (or, when the add parameter is true, adds) the
// accumulators of a 4-row tile at t: acc[per*r+h] holds row r, bytes
// vb*h .. vb*h+vb-1 of the row (per vectors of vb bytes per row). ld loads
// a vector of the tile into a new register.
func storeTile(c *build.Context, acc []reg.VecVirtual, per, vb int, ld func(m operand.Mem) reg.VecVirtual,
	addOp func(m, d reg.VecVirtual), st func(s reg.VecVirtual, m operand.Mem)) {
	pt, ldt := loadArg(c, "t"), loadArg(c, "ldt")
	c.SHLQ(operand.Imm(2), ldt)
	ld3 := times3(c, ldt)
	add := c.Load(c.Param("add"), c.GP8())
	rows := make([][4]operand.Mem, per)
	for h := range rows {
		rows[h] = rowAddrs(pt, ldt, ld3, vb*h)
	}
	c.TESTB(add, add)
	c.JZ(operand.LabelRef("store"))
	for r := 0; r < 4; r++ {
		for h := 0; h < per; h++ {
			addOp(ld(rows[h][r]), acc[per*r+h])
		}
	}
	c.Label("store")
	for r := 0; r < 4; r++ {
		for h := 0; h < per; h++ {
			st(acc[per*r+h], rows[h][r])
		}
	}
	vzeroRet(c)
}

// loadY loads 32 bytes into a new YMM register.
func loadY(c *build.Context) func(m operand.Mem) reg.VecVirtual {
	return func(m operand.Mem) reg.VecVirtual {
		y := c.YMM()
		c.VMOVDQU(m, y)
		return y
	}
}

// declarePrepI8 declares the prepI8 kernel name, func(dst *int8, src *int8,
// kq int, tail *int8), for micro-panels of cols columns and the micro-kernel
// micro, and loads dst (pd), src (ps) and kq (n).
func declarePrepI8(c *build.Context, name string, cols int, micro string) (pd, ps, n reg.Register) {
	declareNoescape(c, name, "func(dst *int8, src *int8, kq int, tail *int8)",
		fmt.Sprintf("%s transposes kq >= 0 quads of a %d-column int8 B micro-panel (and the quad at tail, if not nil) for %s, column sums after them.", name, cols, micro))
	return loadArg(c, "dst"), loadArg(c, "src"), loadArg(c, "kq")
}

// declareMicroI8 declares the int8 micro-kernel name, func(kq int, a *byte,
// b *int8, t *int32, ldt int, add bool, csum *int32), of tile rows x cols,
// and loads kq (n), a (pa) and b (pb).
func declareMicroI8(c *build.Context, name, tile string) (n, pa, pb reg.Register) {
	declareNoescape(c, name, "func(kq int, a *byte, b *int8, t *int32, ldt int, add bool, csum *int32)",
		name+" is the "+tile+" int8 micro-kernel over kq >= 1 prepared quads of k (ldt in elements).")
	return loadArg(c, "kq"), loadArg(c, "a"), loadArg(c, "b")
}

// prepQuads emits the body of a prepI8 kernel: quad(src) on each of n
// quads from ps (step bytes apart), then on the quad at the tail parameter
// when it is not nil, then sums() (which stores the column sums).
func prepQuads(c *build.Context, ps, n reg.Register, step int, quad func(src reg.Register), sums func()) {
	c.TESTQ(n, n)
	c.JZ(operand.LabelRef("prepTail"))
	repeat(c, "prepLoop", n, func() {
		quad(ps)
		c.ADDQ(operand.U32(uint64(step)), ps)
	})

	c.Label("prepTail")
	pt := loadArg(c, "tail")
	c.TESTQ(pt, pt)
	c.JZ(operand.LabelRef("prepSums"))
	quad(pt)

	c.Label("prepSums")
	sums()
	vzeroRet(c)
}

// prepI8AVX2 rewrites a k-major int8 B micro-panel of 16 columns (kq quads
// of k, then the quad at tail when tail is not nil) into the layout
// microI8AVX2 reads, and appends the column sums.
//
// Per quad, the 64 bytes of B (four k rows of 16 columns) are transposed
// into two YMM of eight columns each, a column's four k in one dword
// (VPUNPCKLBW/HBW, VPERMQ, VPSHUFB), and stored as 64 bytes (columns 0-7,
// then 8-15). After the last quad come the 16 int32 column sums of the
// panel (VPMADDUBSW by ones, VPMADDWD by ones). The driver calls it once per
// packed micro-panel; every A panel of the tile then runs over the result.
func prepI8AVX2(c *build.Context) {
	pd, ps, n := declarePrepI8(c, "prepI8AVX2", 16, "microI8AVX2")

	// byte index of k_p of column t (0..3) in a lane holding, after the
	// unpack and VPERMQ, (k0,k2) pairs of columns 0..3 then (k1,k3) pairs.
	var shuf [8]uint32
	for l := 0; l < 2; l++ {
		for t := 0; t < 4; t++ {
			b := [4]uint32{uint32(2 * t), uint32(8 + 2*t), uint32(2*t + 1), uint32(9 + 2*t)}
			shuf[4*l+t] = b[0] | b[1]<<8 | b[2]<<16 | b[3]<<24
		}
	}
	shufM := vconst(c, "i8quadShuf", shuf)
	ones16 := vconst(c, "i8ones16", [8]uint32{0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001})
	ones8 := bcst32(c, 0x01010101)
	csum := zeroY(c, 2)

	quad := func(src reg.Register) {
		y0, y1 := c.YMM(), c.YMM()
		c.VMOVDQU(mem(src, 0), y0)  // k0 | k1
		c.VMOVDQU(mem(src, 32), y1) // k2 | k3
		lo, hi := c.YMM(), c.YMM()
		c.VPUNPCKLBW(y1, y0, lo) // (k0,k2) cols 0-7 | (k1,k3) cols 0-7
		c.VPUNPCKHBW(y1, y0, hi) // same, cols 8-15
		for h, s := range []reg.VecVirtual{lo, hi} {
			v, t := c.YMM(), c.YMM()
			c.VPERMQ(operand.Imm(0xD8), s, v)
			c.VPSHUFB(shufM, v, v)
			c.VMOVDQU(v, mem(pd, 32*h))
			c.VPMADDUBSW(v, ones8, t)
			c.VPMADDWD(ones16, t, t)
			c.VPADDD(t, csum[h], csum[h])
		}
		c.ADDQ(operand.Imm(64), pd)
	}

	prepQuads(c, ps, n, 64, quad, func() {
		c.VMOVDQU(csum[0], mem(pd, 0))
		c.VMOVDQU(csum[1], mem(pd, 32))
	})
}

// microI8AVX2: t[r*ldt+j] (+)= sum_k w(r,k) * x(k,j) for r < 4, j < 16 over
// kq >= 1 quads of k, exact int32, from a B micro-panel prepared by
// prepI8AVX2 (a column's four k in one dword) and csum, the 16 column sums
// to subtract (prepI8AVX2's, or zeros).
//
// The A panel's four bytes of the quad are broadcast to every dword and
// each row's 2-bit codes c = w+1 (0..2) extracted per byte (VPSRLW, VPAND).
// VPMADDUBSW multiplies the unsigned codes by the signed activations and
// adds pairs (|c0*x0+c1*x1| <= 512: no saturation), VPMADDWD by ones adds
// the two pairs of a dword into int32, and VPADDD accumulates. The sums are
// of c*x = (w+1)*x, hence the column sums subtracted at the end. Every step
// is exact modulo 2^32, hence so is the result.
func microI8AVX2(c *build.Context) {
	n, pa, pb := declareMicroI8(c, "microI8AVX2", "4x16")
	mask3 := vconst(c, "i8mask03", [8]uint32{0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x03030303})
	ones16 := vconst(c, "i8ones16", [8]uint32{0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00010001})

	acc := zeroY(c, 8)

	repeat(c, "i8loop", n, func() {
		v := [2]reg.VecVirtual{c.YMM(), c.YMM()}
		c.VMOVDQU(mem(pb, 0), v[0])
		c.VMOVDQU(mem(pb, 32), v[1])
		w := c.YMM()
		c.VPBROADCASTD(mem(pa, 0), w)
		for r := 0; r < 4; r++ {
			cr := c.YMM()
			maskedShift(c, cr, w, mask3, 2*r, c.VPAND)
			for h := 0; h < 2; h++ {
				t := c.YMM()
				c.VPMADDUBSW(v[h], cr, t)
				c.VPMADDWD(ones16, t, t)
				c.VPADDD(t, acc[2*r+h], acc[2*r+h])
			}
		}
		c.ADDQ(operand.Imm(4), pa)
		c.ADDQ(operand.Imm(64), pb)
	})

	pc := loadArg(c, "csum")
	for r := 0; r < 4; r++ {
		for h := 0; h < 2; h++ {
			c.VPSUBD(mem(pc, 32*h), acc[2*r+h], acc[2*r+h])
		}
	}
	storeTile(c, acc, 2, 32, loadY(c), func(s, d reg.VecVirtual) { c.VPADDD(s, d, d) }, func(s reg.VecVirtual, m operand.Mem) { c.VMOVDQU(s, m) })
}

// quantI8AVX2: dst[i] = clamp(round_half_even(src[i]*a), -128, 127), NaN -> 0,
// for n (a multiple of 32) values. Per 8 floats: VMULPS by a (the product
// rounded to float32, as the generic v*a), a NaN cleared to 0 (VCMPPS ORD
// mask, VANDPS), the clamp (VMAXPS, VMINPS: no NaN left), VCVTPS2DQ (round
// to nearest even, the default MXCSR mode, which Go never changes); four
// such YMM packed to 32 bytes with VPACKSSDW, VPACKSSWB (values already in
// range: no saturation) and VPERMD back into order.
func quantI8AVX2(c *build.Context) {
	declareNoescape(c, "quantI8AVX2", "func(dst *int8, src *float32, n int, a float32)",
		"quantI8AVX2 quantizes n (a positive multiple of 32) float32 to int8 with scale a.")
	pd, ps, n := loadArg(c, "dst"), loadArg(c, "src"), loadArg(c, "n")
	va := c.YMM()
	c.VBROADCASTSS(paramAddr(c, "a"), va)
	lo := bcst32(c, 0xc3000000) // -128.0
	hi := bcst32(c, 0x42fe0000) // 127.0
	perm := dwordIndex(c, [8]byte{0, 4, 1, 5, 2, 6, 3, 7})
	c.Label("q8loop")
	var v [4]reg.VecVirtual
	for i := range v {
		v[i] = c.YMM()
		m := c.YMM()
		c.VMULPS(mem(ps, 32*i), va, v[i])
		c.VCMPPS(operand.Imm(7), v[i], v[i], m) // ordered: not NaN
		c.VANDPS(m, v[i], v[i])
		c.VMAXPS(lo, v[i], v[i])
		c.VMINPS(hi, v[i], v[i])
		c.VCVTPS2DQ(v[i], v[i])
	}
	c.VPACKSSDW(v[1], v[0], v[0]) // per lane: 0..3 of v0, of v1 (then 4..7)
	c.VPACKSSDW(v[3], v[2], v[2])
	c.VPACKSSWB(v[2], v[0], v[0]) // per lane: dwords v0 v1 v2 v3
	c.VPERMD(v[0], perm, v[0])
	c.VMOVDQU(v[0], mem(pd, 0))
	c.ADDQ(operand.Imm(128), ps)
	c.ADDQ(operand.Imm(32), pd)
	c.SUBQ(operand.Imm(32), n)
	c.JNZ(operand.LabelRef("q8loop"))
	vzeroRet(c)
}

// groupValues is the number of values of one I2_S group (32 bytes).
const groupValues = 128

// gemvColsF32 and gemvColsI8 are the column counts the GEMV kernels are
// generated for; the Go wrappers split wider calls into these.
var (
	gemvColsF32 = []int{1, 2, 4, 8}
	gemvColsI8  = []int{1, 2, 4}
)

// gemvArgs loads the GEMV kernels' arguments (w *byte, x *T, ldx int, ng int,
// out *A) and returns the memory operand of column j's x at byte disp.
// Columns 0..3 are addressed from x, columns 4..7 from x + 4*ldx.
func gemvArgs(c *build.Context, ncol, esize int) (pw, n, pout reg.Register, colMem func(j, disp int) operand.Mem, advance func(bytes int)) {
	pw = loadArg(c, "w")
	px, ld := loadArg(c, "x"), loadArg(c, "ldx")
	n, pout = loadArg(c, "ng"), loadArg(c, "out")
	if esize == 4 {
		c.SHLQ(operand.Imm(2), ld)
	}
	ld3 := times3(c, ld)
	bases := []reg.Register{px}
	if ncol > 4 {
		px4 := c.GP64()
		c.LEAQ(operand.Mem{Base: px, Index: ld, Scale: 4}, px4)
		bases = append(bases, px4)
	}
	colMem = func(j, disp int) operand.Mem {
		return rowAddrs(bases[j/4], ld, ld3, disp)[j%4]
	}
	advance = func(bytes int) {
		for _, b := range bases {
			c.ADDQ(operand.U32(uint64(bytes)), b)
		}
	}
	return pw, n, pout, colMem, advance
}

// orThree ORs v & (v>>1) (32 bytes of I2_S codes) into three: its bits 0,
// 2, 4 and 6 (masked with 0x55 by threeFlag) mark code 3 pairs; word shifts
// leak no bit into a kept position.
func orThree(c *build.Context, v, three reg.VecVirtual) {
	t := c.YMM()
	c.VPSRLW(operand.Imm(1), v, t)
	c.VPAND(v, t, t)
	c.VPOR(t, three, three)
}

// threeFlag reduces three (orThree) to a 32-bit value, nonzero where a code 3
// occurred, and stores it as the function's result.
func threeFlag(c *build.Context, three reg.VecVirtual) {
	c.VPAND(bcst32(c, 0x55555555), three, three)
	hi := c.XMM()
	c.VEXTRACTI128(operand.Imm(1), three, hi)
	lo := three.AsX()
	c.VPOR(hi, lo, lo)
	t := c.XMM()
	c.VPSRLDQ(operand.Imm(8), lo, t)
	c.VPOR(t, lo, lo)
	c.VPSRLDQ(operand.Imm(4), lo, t)
	c.VPOR(t, lo, lo)
	r := c.GP32()
	c.VMOVD(lo, r)
	c.Store(r, c.ReturnIndex(0))
}

// hsumF32 adds the eight lanes of y and stores the sum at m.
func hsumF32(c *build.Context, y reg.VecVirtual, m operand.Mem) {
	hi := c.XMM()
	c.VEXTRACTF128(operand.Imm(1), y, hi)
	lo := y.AsX()
	c.VADDPS(hi, lo, lo)
	c.VHADDPS(lo, lo, lo)
	c.VHADDPS(lo, lo, lo)
	c.VMOVSS(lo, m)
}

// gemvF32AVX2: out[j] = sum_i w(i)*x[j*ldx+i] for j < ncol, over ng whole
// I2_S groups (32 bytes each; value 32q+b of a group in byte b at shift
// 6-2q, code = w+1), x in gemv order (gemm.GemvOrder): the eight floats at
// 32q+8m of a group are the values 32q+4l+m, l < 8, whose codes sit in
// byte m of dword l. So per (q, m) one VPSRLD of the group's 32 bytes by
// 8m+6-2q brings the codes to bits 0-1 of each dword, and one VPERMILPS of
// the table (-1, 0, +1, 0) in each lane decodes eight weights, which every
// column uses in one VFMADD231PS. Eight accumulators in all (8/ncol per
// column, taken in turn), so FMA latency is hidden at any ncol. The weight
// bytes are checked for code 3 on the way.
func gemvF32AVX2(c *build.Context, ncol int) {
	name := fmt.Sprintf("gemvF32AVX2x%d", ncol)
	declareNoescape(c, name, "func(w *byte, x *float32, ldx int, ng int, out *float32) uint32",
		fmt.Sprintf("%s sets out[j] = sum w(i)*x[j*ldx+i] (x in gemv order) for j < %d over ng >= 1 I2_S groups; nonzero return: a code 3.", name, ncol))
	pw, n, pout, colMem, advance := gemvArgs(c, ncol, 4)
	tab := c.YMM()
	c.VMOVDQU(vconst(c, "gemvTabF32", [8]uint32{0xBF800000, 0, 0x3F800000, 0, 0xBF800000, 0, 0x3F800000, 0}), tab)
	ah := 8 / ncol
	acc := make([][]reg.VecVirtual, ncol)
	for j := range acc {
		acc[j] = zeroY(c, ah)
	}
	group := func(wb reg.VecVirtual) {
		s := 0
		for q := 0; q < 4; q++ {
			for m := 0; m < 4; m++ {
				idx := wb
				if sh := 8*m + 6 - 2*q; sh > 0 {
					idx = c.YMM()
					c.VPSRLD(operand.Imm(uint64(sh)), wb, idx)
				}
				wv := c.YMM()
				c.VPERMILPS(idx, tab, wv)
				for j := 0; j < ncol; j++ {
					c.VFMADD231PS(colMem(j, 4*(32*q+8*m)), wv, acc[j][s%ah])
				}
				s++
			}
		}
	}
	gemvGroups(c, name, pw, n, advance, 4*groupValues, group, func() {
		for j := range acc {
			for s := 1; s < ah; s *= 2 {
				for a := 0; a+s < ah; a += 2 * s {
					c.VADDPS(acc[j][a+s], acc[j][a], acc[j][a])
				}
			}
			hsumF32(c, acc[j][0], mem(pout, 4*j))
		}
	})
}

// gemvGroups emits the group loop of a GEMV kernel over gemvArgs' pw, n and
// advance, then its end: three, a zeroed YMM; n >= 1 times (loop label
// name+"loop") wv = the group's 32 bytes of codes at pw, ORed into three
// (orThree), group(wv), pw advanced 32 bytes and the columns xBytes; then
// done() and the code-3 flag as the result (threeFlag).
func gemvGroups(c *build.Context, name string, pw, n reg.Register, advance func(bytes int), xBytes int,
	group func(wv reg.VecVirtual), done func()) {
	three := zeroY(c, 1)[0]
	repeat(c, name+"loop", n, func() {
		wv := c.YMM()
		c.VMOVDQU(mem(pw, 0), wv)
		orThree(c, wv, three)
		group(wv)
		c.ADDQ(operand.Imm(32), pw)
		advance(xBytes)
	})
	done()
	threeFlag(c, three)
	vzeroRet(c)
}

// gemvI8AVX2Kernels emits the int8 GEMV kernels of the AVX2 family:
// gemvI8AVX2x<ncol> (one row, ncol columns) and gemvI8AVX2r4 (four rows,
// one column), each with the code-3 check and without it (name suffix v,
// for codes known valid).
func gemvI8AVX2Kernels(c *build.Context) {
	for _, check := range []bool{true, false} {
		for _, ncol := range gemvColsI8 {
			gemvI8AVX2(c, ncol, check)
		}
		gemvI8AVX2Rows4(c, check)
	}
	for _, ncol := range []int{4, 1} {
		gemvI8AVX2Blocks(c, ncol)
	}
}

// gemvI8Block is how many groups the int8 AVX2 GEMV kernels add in int16
// lanes before widening them: per group and lane the four VPMADDUBSW pairs
// of codes 0..2 times int8 activations add up to [-2048, 2032], so 16
// groups stay in [-32768, 32512].
const gemvI8Block = 16

// gemvI8Loop emits the group loop of the int8 AVX2 GEMV kernels over n >= 1
// groups (int16Blocks of gemvI8Block groups): group() once a group (adding
// into acc16), then each acc16 widened into its int32 accumulator acc32 by
// one VPMADDWD by ones16 and one VPADDD. Against one VPMADDWD and VPADDD
// per group and column, 4096 x 4096, one column: 1.3x faster.
func gemvI8Loop(c *build.Context, name string, n reg.Register, acc16, acc32 []reg.VecVirtual, ones16 reg.VecVirtual, group func()) {
	int16Blocks(c, name, n, gemvI8Block, acc16, group, func() {
		for i, a := range acc16 {
			c.VPMADDWD(ones16, a, a)
			c.VPADDD(a, acc32[i], acc32[i])
		}
	})
}

// int16Blocks emits a loop over n >= 1 groups in blocks of at most block
// groups (loop labels name+"block", name+"loop"): per block the int16
// accumulators acc16 zeroed, group() once a group, then widen() (which
// takes acc16 into wider sums before they can overflow).
func int16Blocks(c *build.Context, name string, n reg.Register, block int, acc16 []reg.VecVirtual, group, widen func()) {
	m := c.GP64()
	c.Label(name + "block")
	c.MOVQ(operand.U64(uint64(block)), m)
	c.CMPQ(n, m)
	c.CMOVQLT(n, m) // m = min(n, block)
	c.SUBQ(m, n)
	for _, a := range acc16 {
		c.VPXOR(a, a, a)
	}
	repeat(c, name+"loop", m, group)
	widen()
	c.TESTQ(n, n)
	c.JNZ(operand.LabelRef(name + "block"))
}

// dotCodes adds one group's products of code(q) (unsigned) and the 32 bytes
// x(q) (signed), q < 4, to the int16 lanes of acc (VPMADDUBSW, VPADDW).
func dotCodes(c *build.Context, code func(q int) reg.VecVirtual, x func(q int) operand.Mem, acc reg.VecVirtual) {
	for q := range 4 {
		p := c.YMM()
		c.VPMADDUBSW(x(q), code(q), p)
		c.VPADDW(p, acc, acc)
	}
}

// gemvI8Name is name, with the suffix v and the contract's last words for a
// kernel without the code-3 check.
func gemvI8Name(name string, check bool) (string, string) {
	if check {
		return name, "nonzero return: a code 3."
	}
	return name + "v", "the codes must be valid (no code 3: not checked); returns 0."
}

// gemvI8AVX2: out[j] = sum_i (w(i)+1)*x[j*ldx+i] for j < ncol (the sums of
// codes times activations: the caller subtracts each column's sum of x),
// over ng whole I2_S groups. Per group the 32 bytes give four vectors of
// codes (VPSRLW, VPAND), each decoded once for every column: per column
// and q a VPMADDUBSW (codes 0..2 unsigned x activations signed: |pair| <=
// 512) added into the column's int16 lanes (gemvI8Loop). With check the
// codes are checked for 3 on the way.
func gemvI8AVX2(c *build.Context, ncol int, check bool) {
	name, ret := gemvI8Name(fmt.Sprintf("gemvI8AVX2x%d", ncol), check)
	declareNoescape(c, name, "func(w *byte, pf int, x *int8, ldx int, ng int, out *int32) uint32",
		fmt.Sprintf("%s sets out[j] = sum (w(i)+1)*x[j*ldx+i] for j < %d over ng >= 1 I2_S groups, prefetching the codes pf bytes on (the next row's); %s", name, ncol, ret))
	pw, n, pout, colMem, advance := gemvArgs(c, ncol, 1)
	pf := loadArg(c, "pf")
	mask := bcst32(c, 0x03030303)
	ones16 := bcst32(c, 0x00010001)
	acc32, acc16 := zeroY(c, ncol), make([]reg.VecVirtual, ncol)
	for j := range acc16 {
		acc16[j] = c.YMM()
	}
	var three reg.VecVirtual
	if check {
		three = zeroY(c, 1)[0]
	}
	gemvI8Loop(c, name, n, acc16, acc32, ones16, func() {
		gemvI8Group(c, pw, pf, mask, three, colMem, acc16, advance)
	})
	for j, a := range acc32 {
		hsumStoreY(c, a, mem(pout, 4*j), false)
	}
	gemvI8Return(c, check, three)
}

// gemvI8Group emits one group of gemvI8AVX2's loop: the 32 bytes of codes
// at pw (prefetching pf bytes on; checked for 3 into three where three is
// not nil), four vectors of codes, per column and q a VPMADDUBSW into the
// column's int16 lanes acc16[j]; then the pointers advanced.
func gemvI8Group(c *build.Context, pw, pf reg.Register, mask, three reg.VecVirtual, colMem func(j, disp int) operand.Mem,
	acc16 []reg.VecVirtual, advance func(bytes int)) {
	c.PREFETCHT0(operand.Mem{Base: pw, Index: pf, Scale: 1})
	wv := c.YMM()
	c.VMOVDQU(mem(pw, 0), wv)
	if three != nil {
		orThree(c, wv, three)
	}
	for q := range 4 {
		code := unpackCodes(c, wv, mask, q)
		for j := range acc16 {
			p := c.YMM()
			c.VPMADDUBSW(colMem(j, 32*q), code, p)
			c.VPADDW(p, acc16[j], acc16[j])
		}
	}
	c.ADDQ(operand.Imm(32), pw)
	advance(groupValues)
}

// gemvI8AVX2Blocks emits gemvI8AVX2b<ncol>v (ncol 4 or 1; codes known
// valid): gemvI8AVX2's sums over nb blocks of ng groups of one row, each
// block's stored apart, out[b*ldb+j*ldc] = the sum over block b's values of
// (w(i)+1)*x[j*ldx+i] for j < ncol (the caller subtracts the columns'
// sums): one call a row and block of columns for every block of a weight
// with a scale per block, where one call a block spent about as long
// starting and ending as in its loop.
func gemvI8AVX2Blocks(c *build.Context, ncol int) {
	name := fmt.Sprintf("gemvI8AVX2b%dv", ncol)
	declareNoescape(c, name, "func(w *byte, pf int, x *int8, ldx int, ng int, nb int, out *int32, ldc int, ldb int)",
		fmt.Sprintf("%s sets out[b*ldb+j*ldc] = sum over block b (groups b*ng .. b*ng+ng-1, ng >= 1) of (w(i)+1)*x[j*ldx+i] for b < nb (>= 1), j < %d, prefetching the codes pf bytes on (the next row's); the codes must be valid (no code 3: not checked).", name, ncol))
	pw, n, pout, colMem, advance := gemvArgs(c, ncol, 1)
	pf, nb := loadArg(c, "pf"), loadArg(c, "nb")
	ldc := loadArg(c, "ldc")
	c.SHLQ(operand.Imm(2), ldc)
	ldc3 := times3(c, ldc)
	mask := bcst32(c, 0x03030303)
	ones16 := bcst32(c, 0x00010001)
	acc16 := make([]reg.VecVirtual, ncol)
	for j := range acc16 {
		acc16[j] = c.YMM()
	}
	c.Label(name + "blk")
	acc32 := zeroY(c, ncol)
	gemvI8Loop(c, name, n, acc16, acc32, ones16, func() {
		gemvI8Group(c, pw, pf, mask, nil, colMem, acc16, advance)
	})
	for j, a := range acc32 {
		hsumStoreY(c, a, rowAddrs(pout, ldc, ldc3, 0)[j], false)
	}
	step := loadArg(c, "ldb")
	c.SHLQ(operand.Imm(2), step)
	c.ADDQ(step, pout)
	c.Load(c.Param("ng"), n)
	c.DECQ(nb)
	c.JNZ(operand.LabelRef(name + "blk"))
	vzeroRet(c)
}

// gemvI8Return returns the code-3 flag (threeFlag) with check, else 0.
func gemvI8Return(c *build.Context, check bool, three reg.VecVirtual) {
	if check {
		threeFlag(c, three)
		vzeroRet(c)
		return
	}
	r := c.GP32()
	c.XORL(r, r)
	vzeroReturn(c, r)
}

// unpackCodes returns the codes 0..2 of values 32q..32q+31 of an I2_S
// group wv (bits 6-2q of each byte; VPSRLW leaks no bit into a kept pair).
func unpackCodes(c *build.Context, wv, mask reg.VecVirtual, q int) reg.VecVirtual {
	code := c.YMM()
	maskedShift(c, code, wv, mask, 6-2*q, c.VPAND)
	return code
}

// gemvI8AVX2Rows4 is gemvI8AVX2 for one column and four rows of codes ldw
// bytes apart (GEMV proper: a linear layer on one vector). The column is
// read once per group for the four rows (VPMADDUBSW from memory), and the
// four sums end in one VPHADDD tree and one 16-byte store: a row costs
// no call, horizontal sum or code-3 reduction of its own. Each group and
// row prefetches the same group of the next four rows (11008 x 4096 from
// memory, one thread: 19 -> 27 GB/s).
//
// One shift a group and row instead of three: the codes of quarters 3 and
// 2 (bits 0-1 and 2-3) are the bytes ANDed with 0x03 and 0x0C as they lie,
// those of quarters 1 and 0 the same masks on the bytes shifted right by 4
// (VPSRLW: the bits it brings in from the high byte land above the masks).
// Quarters 2 and 0 so carry 4 times their codes: their products add into
// int16 lanes of their own (acc4), the others into acc1. Per group and
// lane acc4 gains at most 2 * 2 * 8*128 = 4096 in size (codes 0..2), so
// gemvI8R4Block = 8 groups stay in [-32768, 32512]; each block ends with
// 4*acc1 + acc4 (two VPMADDWD) added into the row's int32 sums, kept on the
// stack with the two VPMADDWD factors (registers: 8 accumulators, 2 masks,
// the temporaries and the code-3 bits fill the 16), and the sums are 4
// times the result: one
// VPSRAD by 2 at the end, exact.
func gemvI8AVX2Rows4(c *build.Context, check bool) {
	name, ret := gemvI8Name("gemvI8AVX2r4", check)
	declareNoescape(c, name, "func(w *byte, ldw int, x *int8, ng int, out *int32) uint32",
		name+" sets out[r] = sum (w_r(i)+1)*x[i] for the rows r < 4 at w + r*ldw over ng >= 1 I2_S groups; "+ret)
	pw, ld, px, n, pout := loadArg(c, "w"), loadArg(c, "ldw"), loadArg(c, "x"), loadArg(c, "ng"), loadArg(c, "out")
	ld3 := times3(c, ld)
	sums := c.AllocLocal(4 * 32) // the rows' int32 sums, 4 times the result
	{
		z := zeroY(c, 1)[0]
		for r := range 4 {
			c.VMOVDQU(z, sums.Offset(32*r))
		}
	}
	// the VPMADDWD factors of the block ends, in memory: no register is left for them
	fours, ones := c.AllocLocal(32), c.AllocLocal(32)
	c.VMOVDQU(bcst32(c, 0x00040004), fours)
	c.VMOVDQU(bcst32(c, 0x00010001), ones)
	m3, m12 := bcst32(c, 0x03030303), bcst32(c, 0x0c0c0c0c)
	acc1, acc4 := make([]reg.VecVirtual, 4), make([]reg.VecVirtual, 4)
	for r := range 4 {
		acc1[r], acc4[r] = c.YMM(), c.YMM()
	}
	var three reg.VecVirtual
	if check {
		three = zeroY(c, 1)[0]
	}
	pn := c.GP64() // the next four rows
	c.LEAQ(operand.Mem{Base: pw, Index: ld, Scale: 4}, pn)
	int16Blocks(c, name, n, gemvI8R4Block, slices.Concat(acc1, acc4), func() {
		rows, next := rowAddrs(pw, ld, ld3, 0), rowAddrs(pn, ld, ld3, 0)
		for r := range 4 {
			c.PREFETCHT0(next[r])
			wv, hi := c.YMM(), c.YMM()
			c.VMOVDQU(rows[r], wv)
			if check {
				orThree(c, wv, three)
			}
			c.VPSRLW(operand.Imm(4), wv, hi)
			for _, t := range []struct {
				src, mask reg.VecVirtual
				q         int
				acc       reg.VecVirtual
			}{{wv, m3, 3, acc1[r]}, {wv, m12, 2, acc4[r]}, {hi, m3, 1, acc1[r]}, {hi, m12, 0, acc4[r]}} {
				code, p := c.YMM(), c.YMM()
				c.VPAND(t.mask, t.src, code)
				c.VPMADDUBSW(mem(px, 32*t.q), code, p)
				c.VPADDW(p, t.acc, t.acc)
			}
		}
		c.ADDQ(operand.Imm(32), pw)
		c.ADDQ(operand.Imm(32), pn)
		c.ADDQ(operand.Imm(groupValues), px)
	}, func() {
		for r := range 4 {
			c.VPMADDWD(fours, acc1[r], acc1[r])
			c.VPMADDWD(ones, acc4[r], acc4[r])
			c.VPADDD(acc4[r], acc1[r], acc1[r])
			c.VPADDD(sums.Offset(32*r), acc1[r], acc1[r])
			c.VMOVDQU(acc1[r], sums.Offset(32*r))
		}
	})
	var s [4]reg.VecVirtual
	for r := range s {
		s[r] = c.YMM()
		c.VMOVDQU(sums.Offset(32*r), s[r])
		c.VPSRAD(operand.Imm(2), s[r], s[r])
	}
	t0, t1 := c.YMM(), c.YMM()
	c.VPHADDD(s[1], s[0], t0) // per lane: pairs of rows 0, 1
	c.VPHADDD(s[3], s[2], t1)
	c.VPHADDD(t1, t0, t0) // per lane: rows 0..3
	hi := c.XMM()
	c.VEXTRACTI128(operand.Imm(1), t0, hi)
	c.VPADDD(hi, t0.AsX(), hi)
	c.VMOVDQU(hi, mem(pout, 0))
	gemvI8Return(c, check, three)
}

// gemvI8R4Block is how many groups gemvI8AVX2Rows4 adds in int16 lanes
// before widening them (see there).
const gemvI8R4Block = 8

// packPanelAVX2 writes ng*128 bytes of an A panel from four rows of I2_S
// groups (32 bytes each, value 32q+j of a group in byte j at shift 6-2q):
// panel byte 32q+j of a group = the OR over rows r of row r's code at shift
// 6-2q moved to bit 2r (one VPSRLW or VPSLLW and a VPAND per row; word
// shifts leak no bits into the kept pair). It returns, OR-ed over all
// input bytes, x & (x>>1) & 0x55 (nonzero: a code 3 occurs).
func packPanelAVX2(c *build.Context) {
	declareNoescape(c, "packPanelAVX2", "func(panel *byte, r0, r1, r2, r3 *byte, ng int) uint32",
		"packPanelAVX2 packs ng >= 1 I2_S groups of four rows into an A panel; nonzero return: a code 3.")
	pp := loadArg(c, "panel")
	var pr [4]reg.Register
	for r := range pr {
		pr[r] = c.Load(c.Param(fmt.Sprintf("r%d", r)), c.GP64())
	}
	n := loadArg(c, "ng")
	var masks [4]reg.VecVirtual
	for r := range masks {
		masks[r] = bcst32(c, 0x03030303<<(2*r))
	}
	three := zeroY(c, 1)[0]
	repeat(c, "pploop", n, func() {
		var x [4]reg.VecVirtual
		for r := range x {
			x[r] = c.YMM()
			c.VMOVDQU(mem(pr[r], 0), x[r])
			orThree(c, x[r], three)
		}
		for q := 0; q < 4; q++ {
			out := c.YMM()
			for r := 0; r < 4; r++ {
				t := c.YMM()
				maskedShift(c, t, x[r], masks[r], 6-2*q-2*r, c.VPAND)
				if r == 0 {
					out = t
				} else {
					c.VPOR(t, out, out)
				}
			}
			c.VMOVDQU(out, mem(pp, 32*q))
		}
		for r := range pr {
			c.ADDQ(operand.Imm(32), pr[r])
		}
		c.ADDQ(operand.U32(128), pp)
	})
	threeFlag(c, three)
	vzeroRet(c)
}

// foldI32AVX2: for n (a positive multiple of 8) elements, eight at a time,
// t = (float32(src[i]) / a) * sc (VCVTDQ2PS, VDIVPS, VMULPS: each rounded to
// float32 as the generic code's operations are), then t = dst[i] + t when
// mode&1, t = t + bias when mode&2, dst[i] = t. IEEE operations in the same
// order: bit for bit the generic result. mode&4 stores with VMOVNTPS (dst
// 32-byte aligned; the caller fences).
func foldI32AVX2(c *build.Context) {
	fold(c, "foldI32AVX2", true, false)
}

// sfenceAVX2 is SFENCE: the non-temporal stores before it are visible
// before any store after it.
func sfenceAVX2(c *build.Context) {
	declare(c, "sfenceAVX2", "func()", "sfenceAVX2 orders the non-temporal stores before it before the stores after it.")
	c.SFENCE()
	c.RET()
}

// foldF32AVX2 is foldI32AVX2 for float32 sums: t = src[i] * sc (VMULPS),
// then the same adds.
func foldF32AVX2(c *build.Context) {
	fold(c, "foldF32AVX2", false, false)
}

// foldI32ScalesAVX2 is foldI32AVX2 with a scale per element and no bias:
// t = (float32(src[i]) / a) * sc[i], then t = dst[i] + t when mode is 1;
// the per-channel scales of one scale block (FoldI32Scales).
func foldI32ScalesAVX2(c *build.Context) {
	fold(c, "foldI32ScalesAVX2", true, true)
}

// foldF32ScalesAVX2 is foldI32ScalesAVX2 for float32 sums: t = src[i] *
// sc[i], then the same add.
func foldF32ScalesAVX2(c *build.Context) {
	fold(c, "foldF32ScalesAVX2", false, true)
}

// fold emits foldI32AVX2 (ints) or foldF32AVX2, or with scales their
// Scales forms (a scale per element read from sc, no bias): one loop per
// mode.
func fold(c *build.Context, name string, ints, scales bool) {
	kind, args := "float32", "sc, bias float32"
	if ints {
		kind, args = "int32", "a, sc, bias float32"
	}
	if scales {
		args = "sc *float32, n int"
		if ints {
			args += ", a float32"
		}
		declareNoescape(c, name, "func(dst *float32, src *"+kind+", "+args+", mode int)",
			name+" folds n (a positive multiple of 8) "+kind+" sums into dst with a scale each (mode: 1 add to dst).")
	} else {
		declareNoescape(c, name, "func(dst *float32, src *"+kind+", n int, "+args+", mode int)",
			name+" folds n (a positive multiple of 8) "+kind+" sums into dst (mode: 1 add to dst, 2 add bias).")
	}
	pd, ps, n, mode := loadArg(c, "dst"), loadArg(c, "src"), loadArg(c, "n"), loadArg(c, "mode")
	va, vs, vb := c.YMM(), c.YMM(), c.YMM()
	if ints {
		c.VBROADCASTSS(paramAddr(c, "a"), va)
	}
	var psc reg.Register
	modes := 4
	if scales {
		psc, modes = loadArg(c, "sc"), 2
	} else {
		c.VBROADCASTSS(paramAddr(c, "sc"), vs)
		c.VBROADCASTSS(paramAddr(c, "bias"), vb)
		if ints {
			modes = 8 // 4..7: the same with non-temporal stores
		}
	}
	done := name + "done"
	for m := range modes {
		c.CMPQ(mode, operand.Imm(uint64(m)))
		c.JE(operand.LabelRef(fmt.Sprintf("%s%d", name, m)))
	}
	c.JMP(operand.LabelRef(done))
	for m := range modes {
		l := fmt.Sprintf("%s%d", name, m)
		c.Label(l)
		t := c.YMM()
		switch {
		case ints:
			c.VCVTDQ2PS(mem(ps, 0), t)
			c.VDIVPS(va, t, t)
			if scales {
				c.VMULPS(mem(psc, 0), t, t)
			} else {
				c.VMULPS(vs, t, t)
			}
		case scales:
			c.VMOVUPS(mem(ps, 0), t)
			c.VMULPS(mem(psc, 0), t, t)
		default:
			c.VMULPS(mem(ps, 0), vs, t)
		}
		if m&1 != 0 {
			c.VADDPS(mem(pd, 0), t, t)
		}
		if m&2 != 0 {
			c.VADDPS(vb, t, t)
		}
		if m&4 != 0 {
			c.VMOVNTPS(t, mem(pd, 0))
		} else {
			c.VMOVUPS(t, mem(pd, 0))
		}
		c.ADDQ(operand.Imm(32), ps)
		c.ADDQ(operand.Imm(32), pd)
		if scales {
			c.ADDQ(operand.Imm(32), psc)
		}
		c.SUBQ(operand.Imm(8), n)
		c.JNZ(operand.LabelRef(l))
		c.JMP(operand.LabelRef(done))
	}
	c.Label(done)
	vzeroRet(c)
}
