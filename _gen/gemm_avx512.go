//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The conv GEMM's AVX-512 micro-kernels (gokern/gemm, wrapped in
// kernels_avx512_amd64.go): a 4 x 64 float32 tile of VFMADD231PS on ZMM
// (families avx512 and avx512vnni) and a 4 x 64 int8 tile of VPDPBUSD on ZMM
// (family avx512vnni only: the Go assembler encodes VPDPBUSD as EVEX, which
// AVX-VNNI-only CPUs lack). Both read the shared 2-bit A panel (byte k = the
// four rows' codes of k); the float32 kernel reads a k-major B micro-panel
// of 64 columns like the AVX2 kernels, the int8 kernel one that prepI8VNNI
// has transposed once per micro-panel. Both give the generic kernels'
// results bit for bit.

const nr512 = 64 // columns of both AVX-512 micro-panels: four ZMM per row

// gemmAVX512 emits gokern/gemm/micro_avx512_amd64.s.
var gemmAVX512 = kernels(microF32AVX512, prepI8VNNI, microI8VNNI)

// bcstZ32 returns a ZMM register holding v in each 32-bit lane.
func bcstZ32(c *build.Context, v uint32) reg.VecVirtual {
	r := gpImm(c, 4, uint64(v))
	z := c.ZMM()
	c.VPBROADCASTD(r, z)
	return z
}

// microF32AVX512: t[r*ldt+j] (+)= sum_k w(r,k) * b[k*64+j] for r < 4,
// j < 64. The four weights of byte a[k] are broadcast from lut (as in
// microF32AVX2); 16 accumulators (four ZMM per row), 16 VFMADD231PS per k
// against 4 loads of B and 4 broadcasts. Sums run over k in order with
// exact products: bit-for-bit the generic kernel.
func microF32AVX512(c *build.Context) {
	microF32(c, "microF32AVX512", "4x64", 4, 64, 2, c.ZMM, zeroZ, loadZ(c))
}

// loadZ loads 64 bytes into a new ZMM register.
func loadZ(c *build.Context) func(m operand.Mem) reg.VecVirtual {
	return func(m operand.Mem) reg.VecVirtual {
		z := c.ZMM()
		c.VMOVDQU32(m, z)
		return z
	}
}

// prepI8VNNI rewrites a k-major int8 B micro-panel of 64 columns (kq quads
// of k, then the quad at tail when tail is not nil) into the layout
// microI8VNNI reads, and appends the column sums.
//
// Per quad, the four k rows of 64 bytes are transposed so that a column's
// four k share a dword: VPUNPCKLBW/HBW of rows (k0,k1) and (k2,k3), then
// VPUNPCKLWD/HWD of those. In 128-bit lane L the results hold columns
// 16L+0..3 (z0), 16L+4..7 (z1), 16L+8..11 (z2), 16L+12..15 (z3), stored as
// 256 bytes z0 z1 z2 z3. After the last quad come the column sums of the
// panel (VPDPBUSD of the bytes by ones: 64 int32 in the same permuted
// order). The driver calls it once per packed micro-panel; every A panel of
// the tile then runs over the result, so the transposition and the sums are
// not redone per four output channels.
func prepI8VNNI(c *build.Context) {
	pd, ps, n := declarePrepI8(c, "prepI8VNNI", nr512, "microI8VNNI")
	ones8 := bcstZ32(c, 0x01010101)
	csum := zeroZ(c, 4)

	quad := func(src reg.Register) {
		var k [4]reg.VecVirtual
		for p := range k {
			k[p] = c.ZMM()
			c.VMOVDQU8(mem(src, 64*p), k[p])
		}
		u01l, u01h, u23l, u23h := c.ZMM(), c.ZMM(), c.ZMM(), c.ZMM()
		c.VPUNPCKLBW(k[1], k[0], u01l)
		c.VPUNPCKHBW(k[1], k[0], u01h)
		c.VPUNPCKLBW(k[3], k[2], u23l)
		c.VPUNPCKHBW(k[3], k[2], u23h)
		var z [4]reg.VecVirtual
		for i := range z {
			z[i] = c.ZMM()
		}
		c.VPUNPCKLWD(u23l, u01l, z[0])
		c.VPUNPCKHWD(u23l, u01l, z[1])
		c.VPUNPCKLWD(u23h, u01h, z[2])
		c.VPUNPCKHWD(u23h, u01h, z[3])
		for i := range z {
			c.VPDPBUSD(z[i], ones8, csum[i])
			c.VMOVDQU8(z[i], mem(pd, 64*i))
		}
		c.ADDQ(operand.U32(4*nr512), pd)
	}

	prepQuads(c, ps, n, 4*nr512, quad, func() {
		for i := range csum {
			c.VMOVDQU32(csum[i], mem(pd, 64*i))
		}
	})
}

// microI8VNNI: t[r*ldt+j] (+)= sum_k w(r,k) * x(k,j) for r < 4, j < 64 over
// kq >= 1 quads of k, exact int32, from a B micro-panel prepared by
// prepI8VNNI (quads transposed, columns permuted) and csum, the 64 column
// sums to subtract (prepI8VNNI's, or zeros).
//
// The quad's four A bytes are broadcast to every dword and each row's
// codes c = w+1 (0..2) extracted per byte (VPSRLW, VPANDD); VPDPBUSD
// multiplies them (unsigned) by the activations (signed) and adds the four
// products of a dword into int32: 16 per quad against 4 loads of B. The
// sums are of (w+1)*x, hence the column sums subtracted at the end; then a
// 4x4 transpose of 128-bit lanes (VSHUFI32X4) per row undoes the column
// permutation. Every step is exact modulo 2^32.
func microI8VNNI(c *build.Context) {
	n, pa, pb := declareMicroI8(c, "microI8VNNI", "4x64")
	mask3 := bcstZ32(c, 0x03030303)

	acc := zeroZ(c, 16) // acc[4r+i]: row r, permuted columns of z_i

	repeat(c, "i8loop", n, func() {
		var z [4]reg.VecVirtual
		for i := range z {
			z[i] = c.ZMM()
			c.VMOVDQU8(mem(pb, 64*i), z[i])
		}
		w := c.ZMM()
		c.VPBROADCASTD(mem(pa, 0), w)
		for r := 0; r < 4; r++ {
			cr := c.ZMM()
			maskedShift(c, cr, w, mask3, 2*r, func(m, x, d operand.Op) { c.VPANDD(m, x, d) })
			for i := range z {
				c.VPDPBUSD(z[i], cr, acc[4*r+i])
			}
		}
		c.ADDQ(operand.Imm(4), pa)
		c.ADDQ(operand.U32(4*nr512), pb)
	})

	// Subtract the column sums, then undo the column permutation per row:
	// lanes (z0 z1 z2 z3)[L] become the 16 columns 16L .. 16L+15.
	pc := loadArg(c, "csum")
	var cs [4]reg.VecVirtual
	for i := range cs {
		cs[i] = c.ZMM()
		c.VMOVDQU32(mem(pc, 64*i), cs[i])
	}
	for r := 0; r < 4; r++ {
		q := acc[4*r : 4*r+4]
		for i := range q {
			c.VPSUBD(cs[i], q[i], q[i])
		}
		lo01, hi01, lo23, hi23 := c.ZMM(), c.ZMM(), c.ZMM(), c.ZMM()
		c.VSHUFI32X4(operand.Imm(0x44), q[1], q[0], lo01) // z0[0] z0[1] z1[0] z1[1]
		c.VSHUFI32X4(operand.Imm(0xEE), q[1], q[0], hi01) // z0[2] z0[3] z1[2] z1[3]
		c.VSHUFI32X4(operand.Imm(0x44), q[3], q[2], lo23)
		c.VSHUFI32X4(operand.Imm(0xEE), q[3], q[2], hi23)
		c.VSHUFI32X4(operand.Imm(0x88), lo23, lo01, q[0]) // z0[0] z1[0] z2[0] z3[0]
		c.VSHUFI32X4(operand.Imm(0xDD), lo23, lo01, q[1]) // lane 1 of each
		c.VSHUFI32X4(operand.Imm(0x88), hi23, hi01, q[2])
		c.VSHUFI32X4(operand.Imm(0xDD), hi23, hi01, q[3])
	}
	storeTile(c, acc, 4, 64, loadZ(c), func(s, d reg.VecVirtual) { c.VPADDD(s, d, d) }, func(s reg.VecVirtual, m operand.Mem) { c.VMOVDQU32(s, m) })
}
