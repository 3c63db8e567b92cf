//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The AVX2 lookup-table (LUT) kernels for TL1 pairs (gokern/gemm). Their
// contracts and the table layout are in gokern/gemm/lut16.go; the generic
// Go versions there are the oracle they are tested against.
//
// Tables are int16, laid out by entry across 16 columns: for pair i of a B
// micro-panel of 16 columns, entry e = 3*w0 + w1 + 4 (0..8) is the YMM of
// the 16 columns' w0*b[2i][j] + w1*b[2i+1][j] at tab + 288*i + 32*e. A row's
// TL1 index selects one YMM per pair, added with VPADDW.

func init() {
	register(target{
		name:     "lut",
		dir:      "gokern/gemm",
		pkg:      "gemm",
		base:     "lut_avx2",
		avx2Only: true,
		gen: func(c *build.Context) {
			lutBuild16AVX2(c)
			lutDot16AVX2(c)
		},
	})
}

// lutBuild16AVX2 writes the nine entries of np >= 1 pairs: both rows of
// each pair (32 bytes of b) widened to int16 (VPMOVSXBW), then
// s = x0+x1, d = x0-x1 and the negations (|.| <= 256: exact in int16).
func lutBuild16AVX2(c *build.Context) {
	c.Function("lutBuild16AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(np int, b *int8, tab *int16)")
	c.Doc("lutBuild16AVX2 fills the int16 tables of np >= 1 pairs of a 16-column B micro-panel (288 bytes a pair).")
	n := c.Load(c.Param("np"), c.GP64())
	pb := c.Load(c.Param("b"), c.GP64())
	pt := c.Load(c.Param("tab"), c.GP64())
	z := zeroY(c, 1)[0]
	c.Label("build")
	x0, x1 := c.YMM(), c.YMM()
	c.VPMOVSXBW(mem(pb, 0), x0)
	c.VPMOVSXBW(mem(pb, 16), x1)
	s, d := c.YMM(), c.YMM()
	c.VPADDW(x1, x0, s)
	c.VPSUBW(x1, x0, d)
	neg := func(x reg.VecVirtual) reg.VecVirtual {
		y := c.YMM()
		c.VPSUBW(x, z, y)
		return y
	}
	entries := [9]reg.VecVirtual{neg(s), neg(x0), neg(d), neg(x1), z, x1, d, x0, s}
	for e, v := range entries {
		c.VMOVDQU(v, mem(pt, 32*e))
	}
	c.ADDQ(operand.Imm(32), pb)
	c.ADDQ(operand.U32(288), pt)
	c.DECQ(n)
	c.JNZ(operand.LabelRef("build"))
	c.VZEROUPPER()
	c.RET()
}

// lutDot16AVX2: for rows >= 1 rows r, out[r*ldo+j] += sum over the 2*nb
// pairs i of entry idx(r,i) of pair i, column j (j < 16), where the indices
// of row r are the nibbles of idx[r*ldi : r*ldi+nb], low first.
//
// Two int16 accumulators (low and high nibbles) wrap modulo 2^16 (VPADDW);
// their sum is the true sum modulo 2^16, and the caller bounds the true sum
// (|.| <= 256 per pair, 2*nb <= 126 pairs: |.| <= 32256) so it is exact,
// then widened to int32 (VPMOVSXWD) and added to out.
func lutDot16AVX2(c *build.Context) {
	c.Function("lutDot16AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, tab *int16, idx *byte, ldi int, rows int, out *int32, ldo int)")
	c.Doc("lutDot16AVX2 adds to rows >= 1 rows of 16 int32 the table sums of nb >= 1 index bytes a row (ldi, ldo in elements).")
	pi := c.Load(c.Param("idx"), c.GP64())
	ldi := c.Load(c.Param("ldi"), c.GP64())
	rows := c.Load(c.Param("rows"), c.GP64())
	po := c.Load(c.Param("out"), c.GP64())
	ldo := c.Load(c.Param("ldo"), c.GP64())
	c.SHLQ(operand.Imm(2), ldo)

	c.Label("row")
	n := c.Load(c.Param("nb"), c.GP64())
	pt := c.Load(c.Param("tab"), c.GP64())
	p := c.GP64()
	c.MOVQ(pi, p)
	acc := zeroY(c, 4)

	// step adds the two pairs of byte u (from p) of table block u (576
	// bytes from pt) into acc[2*(u%2)] and acc[2*(u%2)+1].
	step := func(u int) {
		lo, hi := c.GP64(), c.GP64()
		c.MOVBQZX(mem(p, u), lo)
		c.MOVQ(lo, hi)
		c.ANDQ(operand.Imm(15), lo)
		c.SHRQ(operand.Imm(4), hi)
		c.SHLQ(operand.Imm(5), lo)
		c.SHLQ(operand.Imm(5), hi)
		a0, a1 := acc[2*(u%2)], acc[2*(u%2)+1]
		c.VPADDW(operand.Mem{Base: pt, Index: lo, Scale: 1, Disp: 576 * u}, a0, a0)
		c.VPADDW(operand.Mem{Base: pt, Index: hi, Scale: 1, Disp: 576*u + 288}, a1, a1)
	}

	c.Comment("Two index bytes (four pairs) per iteration.")
	c.Label("pairs2")
	c.CMPQ(n, operand.Imm(2))
	c.JB(operand.LabelRef("pairs1"))
	step(0)
	step(1)
	c.ADDQ(operand.Imm(2), p)
	c.ADDQ(operand.U32(2*576), pt)
	c.SUBQ(operand.Imm(2), n)
	c.JMP(operand.LabelRef("pairs2"))

	c.Label("pairs1")
	c.TESTQ(n, n)
	c.JZ(operand.LabelRef("flush"))
	step(0)

	c.Label("flush")
	c.VPADDW(acc[1], acc[0], acc[0])
	c.VPADDW(acc[3], acc[2], acc[2])
	c.VPADDW(acc[2], acc[0], acc[0])
	w0, w1 := c.YMM(), c.YMM()
	c.VPMOVSXWD(acc[0].AsX(), w0)
	h := c.XMM()
	c.VEXTRACTI128(operand.Imm(1), acc[0], h)
	c.VPMOVSXWD(h, w1)
	c.VPADDD(mem(po, 0), w0, w0)
	c.VPADDD(mem(po, 32), w1, w1)
	c.VMOVDQU(w0, mem(po, 0))
	c.VMOVDQU(w1, mem(po, 32))
	c.ADDQ(ldi, pi)
	c.ADDQ(ldo, po)
	c.DECQ(rows)
	c.JNZ(operand.LabelRef("row"))
	c.VZEROUPPER()
	c.RET()
}
