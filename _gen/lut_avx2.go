//go:build generate

package main

import (
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

// lutAVX2 emits gokern/gemm/lut_avx2_amd64.s.
var lutAVX2 = kernels(lutBuild16AVX2, lutDot16AVX2, lutBuild16TL2AVX2, lutDot16TL2AVX2)

// lutBuild16AVX2 writes the nine entries of np >= 1 pairs: both rows of
// each pair (32 bytes of b) widened to int16 (VPMOVSXBW), then
// s = x0+x1, d = x0-x1 and the negations (|.| <= 256: exact in int16).
func lutBuild16AVX2(c *build.Context) {
	declareNoescape(c, "lutBuild16AVX2", "func(np int, b *int8, tab *int16)",
		"lutBuild16AVX2 fills the int16 tables of np >= 1 pairs of a 16-column B micro-panel (288 bytes a pair).")
	lutBuild(c, "np", "build", 32, 288, func(pb, pt reg.Register, z reg.VecVirtual) {
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
	})
}

// lutBuild emits the body of a table-building kernel, func(count int, b
// *int8, tab *int16), and its return: z, a zeroed YMM, then count >= 1
// times (loop label top) entries(pb, pt, z), which writes the tables at pt
// of one unit of B at pb, and pb and pt advanced bBytes and tabBytes.
func lutBuild(c *build.Context, count, top string, bBytes, tabBytes int, entries func(pb, pt reg.Register, z reg.VecVirtual)) {
	n, pb, pt := loadArg(c, count), loadArg(c, "b"), loadArg(c, "tab")
	z := zeroY(c, 1)[0]
	repeat(c, top, n, func() {
		entries(pb, pt, z)
		c.ADDQ(operand.Imm(uint64(bBytes)), pb)
		c.ADDQ(operand.U32(uint64(tabBytes)), pt)
	})
	vzeroRet(c)
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
	declareNoescape(c, "lutDot16AVX2", "func(nb int, tab *int16, idx *byte, ldi int, rows int, out *int32, ldo int)",
		"lutDot16AVX2 adds to rows >= 1 rows of 16 int32 the table sums of nb >= 1 index bytes a row (ldi, ldo in elements).")
	lutRows(c, "row", "nb", []string{"idx"}, func(n, pt reg.Register, idx []reg.Register) reg.VecVirtual {
		p := idx[0]
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
		whileAtLeast(c, "pairs2", "pairs1", n, 2, func() {
			step(0)
			step(1)
			c.ADDQ(operand.Imm(2), p)
			c.ADDQ(operand.U32(2*576), pt)
		})

		c.Label("pairs1")
		c.TESTQ(n, n)
		c.JZ(operand.LabelRef("flush"))
		step(0)

		c.Label("flush")
		c.VPADDW(acc[1], acc[0], acc[0])
		c.VPADDW(acc[3], acc[2], acc[2])
		c.VPADDW(acc[2], acc[0], acc[0])
		return acc[0]
	})
}

// lutRows emits the row loop of a LUT dot kernel, whose parameters include
// count, tab, the index pointers named by ptrs, ldi, rows, out and ldo, and
// its return: rows >= 1 times (loop label top) sum := row(count, tab, copies
// of the row's index pointers), sum's 16 int16 lanes widened to int32 and
// added to the row of out, the index pointers advanced ldi bytes and out
// ldo int32.
func lutRows(c *build.Context, top, count string, ptrs []string, row func(n, pt reg.Register, idx []reg.Register) reg.VecVirtual) {
	a := loadArgs(c, append(append([]string{}, ptrs...), "ldi", "rows", "out", "ldo")...)
	idx0, ldi, rows, po, ldo := a[:len(ptrs)], a[len(ptrs)], a[len(ptrs)+1], a[len(ptrs)+2], a[len(ptrs)+3]
	c.SHLQ(operand.Imm(2), ldo)
	repeat(c, top, rows, func() {
		n, pt := loadArg(c, count), loadArg(c, "tab")
		idx := make([]reg.Register, len(idx0))
		for i := range idx {
			idx[i] = c.GP64()
		}
		for i, p := range idx0 {
			c.MOVQ(p, idx[i])
		}
		sum := row(n, pt, idx)
		w0, w1 := c.YMM(), c.YMM()
		c.VPMOVSXWD(sum.AsX(), w0)
		h := c.XMM()
		c.VEXTRACTI128(operand.Imm(1), sum, h)
		c.VPMOVSXWD(h, w1)
		c.VPADDD(mem(po, 0), w0, w0)
		c.VPADDD(mem(po, 32), w1, w1)
		c.VMOVDQU(w0, mem(po, 0))
		c.VMOVDQU(w1, mem(po, 32))
		for _, p := range idx0 {
			c.ADDQ(ldi, p)
		}
		c.ADDQ(ldo, po)
	})
	vzeroRet(c)
}

// tl2Digits returns the balanced-ternary digits (w0, w1, w2) of m = 0..13,
// m = 9*w0 + 3*w1 + w2.
func tl2Digits(m int) [3]int {
	var d [3]int
	for i := 2; i >= 0; i-- {
		r := ((m % 3) + 3) % 3
		if r == 2 {
			r = -1
		}
		d[i] = r
		m = (m - r) / 3
	}
	return d
}

// lutBuild16TL2AVX2 writes the 32 entries (1 KiB) of nt >= 1 triples: the
// three rows (48 bytes of b) widened to int16, entry m = 0..13 the digit
// combination of m, entry 16+m its negation, entries 14, 15, 30, 31 zero
// (|.| <= 384: exact in int16).
func lutBuild16TL2AVX2(c *build.Context) {
	declareNoescape(c, "lutBuild16TL2AVX2", "func(nt int, b *int8, tab *int16)",
		"lutBuild16TL2AVX2 fills the int16 tables of nt >= 1 triples of a 16-column B micro-panel (1 KiB a triple).")
	lutBuild(c, "nt", "build3", 48, 1024, func(pb, pt reg.Register, z reg.VecVirtual) {
		var x [3]reg.VecVirtual
		for r := range x {
			x[r] = c.YMM()
			c.VPMOVSXBW(mem(pb, 16*r), x[r])
		}
		for m := 0; m < 16; m++ {
			if m == 0 || m >= 14 {
				c.VMOVDQU(z, mem(pt, 32*m))
				c.VMOVDQU(z, mem(pt, 32*(16+m)))
				continue
			}
			d := tl2Digits(m)
			v := c.YMM()
			first := true
			for r, w := range d {
				switch {
				case w == 0:
				case first && w == 1:
					c.VMOVDQA(x[r], v)
					first = false
				case first:
					c.VPSUBW(x[r], z, v)
					first = false
				case w == 1:
					c.VPADDW(x[r], v, v)
				default:
					c.VPSUBW(x[r], v, v)
				}
			}
			c.VMOVDQU(v, mem(pt, 32*m))
			ng := c.YMM()
			c.VPSUBW(v, z, ng)
			c.VMOVDQU(ng, mem(pt, 32*(16+m)))
		}
	})
}

// lutDot16TL2AVX2: for rows >= 1 rows r, out[r*ldo+j] += sum over nt >= 1
// triples i of entry (mag nibble i | sign bit i << 4) of triple i, column j,
// with the magnitudes of row r at mag + r*ldi (two a byte, low nibble
// first) and its signs at sign + r*ldi (bit i%8 of byte i/8). For odd nt
// the high nibble of the last magnitude byte selects from triple nt, which
// the caller zeroes. Eight triples (one sign byte, four magnitude bytes)
// per iteration, then the rest a magnitude byte at a time. The int16
// accumulators wrap as in lutDot16AVX2; the caller bounds the true sum
// (|.| <= 384 per triple, nt <= 85).
func lutDot16TL2AVX2(c *build.Context) {
	declareNoescape(c, "lutDot16TL2AVX2", "func(nt int, tab *int16, mag *byte, sign *byte, ldi int, rows int, out *int32, ldo int)",
		"lutDot16TL2AVX2 adds to rows >= 1 rows of 16 int32 the table sums of nt >= 1 TL2 triples a row (ldi, ldo in elements).")
	lutRows(c, "row3", "nt", []string{"mag", "sign"}, func(n, pt reg.Register, idx []reg.Register) reg.VecVirtual {
		pm, ps := idx[0], idx[1]
		acc := zeroY(c, 2)

		// add adds the entry at byte offset e<<5 of triple u (1 KiB each from
		// pt) into acc[u%2].
		add := func(e reg.GPVirtual, u int) {
			c.SHLQ(operand.Imm(5), e)
			c.VPADDW(operand.Mem{Base: pt, Index: e, Scale: 1, Disp: 1024 * u}, acc[u%2], acc[u%2])
		}
		// signBit puts bit u of s, moved to bit 4, into a new register.
		signBit := func(s reg.GPVirtual, u int) reg.GPVirtual {
			t := c.GP64()
			c.MOVQ(s, t)
			switch {
			case u < 4:
				c.SHLQ(operand.Imm(uint64(4-u)), t)
			case u > 4:
				c.SHRQ(operand.Imm(uint64(u-4)), t)
			}
			c.ANDQ(operand.Imm(16), t)
			return t
		}

		c.Comment("Eight triples per iteration.")
		whileAtLeast(c, "triples8", "tail3", n, 8, func() {
			s := c.GP64()
			c.MOVBQZX(mem(ps, 0), s)
			m := c.GP64()
			c.MOVLQZX(mem(pm, 0), m)
			for u := 0; u < 8; u++ {
				e := c.GP64()
				c.MOVQ(m, e)
				if u > 0 {
					c.SHRQ(operand.Imm(uint64(4*u)), e)
				}
				c.ANDQ(operand.Imm(15), e)
				c.ORQ(signBit(s, u), e)
				add(e, u)
			}
			c.ADDQ(operand.Imm(4), pm)
			c.INCQ(ps)
			c.ADDQ(operand.U32(8*1024), pt)
		})

		c.Label("tail3")
		c.TESTQ(n, n)
		c.JZ(operand.LabelRef("flush3"))
		st := c.GP64()
		c.MOVBQZX(mem(ps, 0), st)
		c.Label("tail3loop")
		mb := c.GP64()
		c.MOVBQZX(mem(pm, 0), mb)
		e0 := c.GP64()
		c.MOVQ(mb, e0)
		c.ANDQ(operand.Imm(15), e0)
		c.ORQ(signBit(st, 0), e0)
		add(e0, 0)
		c.SHRQ(operand.Imm(4), mb)
		c.ORQ(signBit(st, 1), mb)
		add(mb, 1)
		c.SHRQ(operand.Imm(2), st)
		c.INCQ(pm)
		c.ADDQ(operand.U32(2*1024), pt)
		c.SUBQ(operand.Imm(2), n)
		c.JG(operand.LabelRef("tail3loop"))

		c.Label("flush3")
		c.VPADDW(acc[1], acc[0], acc[0])
		return acc[0]
	})
}
