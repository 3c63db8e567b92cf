//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The float32 direct-convolution tiles of the op "conv_directf"
// (gokern/gemm/direct_f32.go, wrapped in direct_f32_amd64.go): mr output
// channels by nv vectors of consecutive output positions, accumulators in
// registers for the whole sum. Per k: nv unaligned loads of the padded
// input at x + offs[k] (one offset per (channel, tap)), mr broadcasts of the
// expanded weights, mr*nv VFMADD231PS. AVX-512: 8 channels x up to 3 ZMM
// (24 accumulators, 48 positions); AVX2: 4 channels x up to 3 YMM (12
// accumulators, 24 positions, every YMM register in use).

// convfAVX512 emits gokern/gemm/directf_avx512_amd64.s.
var convfAVX512 = forEach([]int{1, 2, 3}, func(c *build.Context, nv int) { convfTile(c, "Z", 8, nv, 64, c.ZMM) })

// convfAVX2 emits gokern/gemm/directf_avx2_amd64.s.
var convfAVX2 = forEach([]int{1, 2, 3}, func(c *build.Context, nv int) { convfTile(c, "Y", 4, nv, 32, c.YMM) })

// convfTile emits directF32<reg><mr>x<nv>: t[r*ldt+j] = bias[r] + sum_i
// w[i*mr+r]*x[offs[i]+j] for r < mr, j < nv*vb/4 (k >= 1; ldt in elements).
func convfTile(c *build.Context, rk string, mr, nv, vb int, vec func() reg.VecVirtual) {
	name := fmt.Sprintf("directF32%s%dx%d", rk, mr, nv)
	declareNoescape(c, name, "func(k int, w *float32, x *float32, offs *int, bias *float32, t *float32, ldt int)",
		fmt.Sprintf("%s is the %d x %d-vector float32 direct-convolution tile (k >= 1; offs in elements; ldt in elements).", name, mr, nv))
	n, pw, px, po, pbias := loadArg(c, "k"), loadArg(c, "w"), loadArg(c, "x"), loadArg(c, "offs"), loadArg(c, "bias")
	acc := make([]reg.VecVirtual, mr*nv)
	for r := range mr {
		for j := range nv {
			acc[r*nv+j] = vec()
			c.VBROADCASTSS(mem(pbias, 4*r), acc[r*nv+j])
		}
	}
	loop := "convfloop"
	c.Label(loop)
	off := c.GP64()
	c.MOVQ(mem(po, 0), off)
	xv := make([]reg.VecVirtual, nv)
	for j := range xv {
		xv[j] = vec()
		c.VMOVUPS(operand.Mem{Base: px, Index: off, Scale: 4, Disp: vb * j}, xv[j])
	}
	for r := range mr {
		b := vec()
		c.VBROADCASTSS(mem(pw, 4*r), b)
		for j := range xv {
			c.VFMADD231PS(xv[j], b, acc[r*nv+j])
		}
	}
	c.ADDQ(operand.Imm(8), po)
	c.ADDQ(operand.Imm(uint64(4*mr)), pw)
	c.DECQ(n)
	c.JNZ(operand.LabelRef(loop))

	pt, ldt := loadArg(c, "t"), loadArg(c, "ldt")
	c.SHLQ(operand.Imm(2), ldt)
	for r := range mr {
		for j := range nv {
			c.VMOVUPS(acc[r*nv+j], mem(pt, vb*j))
		}
		if r < mr-1 {
			c.ADDQ(ldt, pt)
		}
	}
	vzeroRet(c)
}

// convfBlockedAVX512 emits gokern/gemm/directfb_avx512_amd64.s: the
// channels-in-lanes tiles directF32B2x<r>, 32 output channels (two ZMM).
var convfBlockedAVX512 = func(c *build.Context) {
	forEach([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		func(c *build.Context, r int) { convfBlocked(c, "B", r, 64, c.ZMM) })(c)
	winoIn(c, "Z", 64, c.ZMM)
	winoOut(c, "Z", 64, c.ZMM)
	transposeBlock(c, "transposeBlockZ", 16, c.ZMM, transpose16Z)
}

// convfBlockedAVX2 emits gokern/gemm/directfb_avx2_amd64.s: directF32Y2x<r>,
// 16 output channels (two YMM), up to 6 positions (15 registers).
var convfBlockedAVX2 = func(c *build.Context) {
	forEach([]int{1, 2, 3, 4, 5, 6}, func(c *build.Context, r int) { convfBlocked(c, "Y", r, 32, c.YMM) })(c)
	winoIn(c, "Y", 32, c.YMM)
	winoOut(c, "Y", 32, c.YMM)
	transposeBlock(c, "transposeBlockY", 8, c.YMM, transpose8Y)
}

// convfBlocked emits directF32<rk>2x<r>: oc = 2*vb/4 output channels (two
// vectors of vb bytes) by r output positions 16 floats apart in a
// channel-blocked input (16 channels per position). t[p*oc+o] = bias[o] +
// sum over the n offsets i and the 16 channels c of w[(i*16+c)*oc+o] *
// x[offs[i]+p*16+c].
func convfBlocked(c *build.Context, rk string, r, vb int, vec func() reg.VecVirtual) {
	name := fmt.Sprintf("directF32%s2x%d", rk, r)
	oc := 2 * vb / 4
	declareNoescape(c, name, "func(n int, w *float32, x *float32, offs *int, bias *float32, t *float32)",
		fmt.Sprintf("%s is the %d-channel x %d-position float32 direct-convolution tile over 16-channel blocks (n >= 1; offs in elements).", name, oc, r))
	n, pw, px, po, pbias := loadArg(c, "n"), loadArg(c, "w"), loadArg(c, "x"), loadArg(c, "offs"), loadArg(c, "bias")
	acc := make([]reg.VecVirtual, 2*r)
	for p := range r {
		for j := range 2 {
			acc[2*p+j] = vec()
			c.VMOVUPS(mem(pbias, vb*j), acc[2*p+j])
		}
	}
	c.Label("blkloop")
	off := c.GP64()
	c.MOVQ(mem(po, 0), off)
	pb := c.GP64()
	c.LEAQ(operand.Mem{Base: px, Index: off, Scale: 4}, pb)
	for ch := range 16 {
		w0, w1 := vec(), vec()
		c.VMOVUPS(mem(pw, 2*vb*ch), w0)
		c.VMOVUPS(mem(pw, 2*vb*ch+vb), w1)
		for p := range r {
			b := vec()
			c.VBROADCASTSS(mem(pb, 64*p+4*ch), b)
			c.VFMADD231PS(w0, b, acc[2*p])
			c.VFMADD231PS(w1, b, acc[2*p+1])
		}
	}
	c.ADDQ(operand.Imm(8), po)
	c.ADDQ(operand.U32(uint64(16*2*vb)), pw)
	c.DECQ(n)
	c.JNZ(operand.LabelRef("blkloop"))
	pt := loadArg(c, "t")
	for p := range r {
		for j := range 2 {
			c.VMOVUPS(acc[2*p+j], mem(pt, 2*vb*p+vb*j))
		}
	}
	vzeroRet(c)
}

// winoIn emits winoIn<rk>, the Winograd F(2x2, 3x3) input transform of
// gemm.DirectF32Kernels.WinoIn over 16-channel blocks (64/vb vectors a
// pixel): per tile t < nt, the 4x4 pixels d[i][j] at x + i*ld + (2t+j)*16
// floats give v[4i+j] = (B^T d B)[i][j] at v + (4i+j)*ldv + t*16, each
// output column j as u_i = (d B)[i][j] for the four rows, then the rows
// combined; the same operations in the same order as winoInGeneric.
func winoIn(c *build.Context, rk string, vb int, vec func() reg.VecVirtual) {
	name := "winoIn" + rk
	declareNoescape(c, name, "func(nt int, x *float32, ld int, v *float32, ldv int)",
		fmt.Sprintf("%s is the Winograd F(2x2, 3x3) input transform of nt tiles of 16-channel pixels (nt >= 1; ld, ldv in elements).", name))
	n, px, ld, pv, ldv := loadArg(c, "nt"), loadArg(c, "x"), loadArg(c, "ld"), loadArg(c, "v"), loadArg(c, "ldv")
	c.SHLQ(operand.Imm(2), ld)
	c.SHLQ(operand.Imm(2), ldv)
	rows := [4]reg.Register{px, c.GP64(), c.GP64(), c.GP64()}
	for i := 1; i < 4; i++ {
		c.LEAQ(operand.Mem{Base: rows[i-1], Index: ld, Scale: 1}, rows[i])
	}
	plane, outs := sixteenPlanes(c, pv, ldv)
	// column j of d B: d[a] op d[b]
	type col struct {
		a, b int
		add  bool
	}
	cols := [4]col{{0, 2, false}, {1, 2, true}, {2, 1, false}, {1, 3, false}}
	c.Label("winoinloop")
	for h := 0; h < 64; h += vb {
		for j, cj := range cols {
			var u [4]reg.VecVirtual
			for i := range 4 {
				u[i] = vec()
				c.VMOVUPS(mem(rows[i], 64*cj.a+h), u[i])
				if cj.add {
					c.VADDPS(mem(rows[i], 64*cj.b+h), u[i], u[i])
				} else {
					c.VSUBPS(mem(rows[i], 64*cj.b+h), u[i], u[i])
				}
			}
			for i, ci := range cols {
				v := vec()
				if ci.add {
					c.VADDPS(u[ci.b], u[ci.a], v)
				} else {
					c.VSUBPS(u[ci.b], u[ci.a], v)
				}
				c.VMOVUPS(v, plane(i, j, h))
			}
		}
	}
	for i := range 4 {
		c.ADDQ(operand.U32(128), rows[i])
		c.ADDQ(operand.Imm(64), outs[i])
	}
	c.DECQ(n)
	c.JNZ(operand.LabelRef("winoinloop"))
	vzeroRet(c)
}

// winoOut emits winoOut<rk>, the Winograd F(2x2, 3x3) output transform of
// gemm.DirectF32Kernels.WinoOut for oc = 2*vb/4 channels (the family's
// BOC): per tile t < nt, the 4x4 products m[4i+j] at m + (4i+j)*ldm +
// t*oc give y[i][j] = (A^T m A)[i][j] at y + i*ldy + (2t+j)*oc (i, j < 2),
// as r0 = (m0 + m1) + m2 and r1 = (m1 - m2) - m3 over the rows, then the
// same over r's columns; the same operations in the same order as
// winoOutGeneric.
func winoOut(c *build.Context, rk string, vb int, vec func() reg.VecVirtual) {
	name := "winoOut" + rk
	oc := 2 * vb / 4
	declareNoescape(c, name, "func(nt int, m *float32, ldm int, y *float32, ldy int)",
		fmt.Sprintf("%s is the Winograd F(2x2, 3x3) output transform of nt tiles of %d channels (nt >= 1; ldm, ldy in elements).", name, oc))
	n, pm, ldm, py, ldy := loadArg(c, "nt"), loadArg(c, "m"), loadArg(c, "ldm"), loadArg(c, "y"), loadArg(c, "ldy")
	c.SHLQ(operand.Imm(2), ldm)
	c.SHLQ(operand.Imm(2), ldy)
	at, ins := sixteenPlanes(c, pm, ldm)
	c.Label("winooutloop")
	for h := 0; h < 2*vb; h += vb {
		var r0, r1 [4]reg.VecVirtual
		for j := range 4 {
			r0[j], r1[j] = vec(), vec()
			c.VMOVUPS(at(0, j, h), r0[j])
			c.VADDPS(at(1, j, h), r0[j], r0[j])
			c.VADDPS(at(2, j, h), r0[j], r0[j])
			c.VMOVUPS(at(1, j, h), r1[j])
			c.VSUBPS(at(2, j, h), r1[j], r1[j])
			c.VSUBPS(at(3, j, h), r1[j], r1[j])
		}
		for i, r := range [2][4]reg.VecVirtual{r0, r1} {
			y0, y1 := vec(), vec()
			c.VADDPS(r[1], r[0], y0)
			c.VADDPS(r[2], y0, y0)
			c.VSUBPS(r[2], r[1], y1)
			c.VSUBPS(r[3], y1, y1)
			if i == 0 {
				c.VMOVUPS(y0, mem(py, h))
				c.VMOVUPS(y1, mem(py, 4*oc+h))
			} else {
				c.VMOVUPS(y0, operand.Mem{Base: py, Index: ldy, Scale: 1, Disp: h})
				c.VMOVUPS(y1, operand.Mem{Base: py, Index: ldy, Scale: 1, Disp: 4*oc + h})
			}
		}
	}
	for i := range 4 {
		c.ADDQ(operand.U32(uint64(4*oc)), ins[i])
	}
	c.ADDQ(operand.U32(uint64(8*oc)), py)
	c.DECQ(n)
	c.JNZ(operand.LabelRef("winooutloop"))
	vzeroRet(c)
}

// sixteenPlanes returns the operand of plane 4i+j (i, j < 4) at base +
// (4i+j)*ld + disp (ld in bytes), the Winograd transforms' 16 planes:
// four row pointers, base + 4i*ld, and j*ld as an index (3*ld in a
// register of its own); and the row pointers, which the loops advance.
func sixteenPlanes(c *build.Context, base, ld reg.Register) (func(i, j, disp int) operand.Mem, [4]reg.Register) {
	rows := [4]reg.Register{base, c.GP64(), c.GP64(), c.GP64()}
	ld3 := c.GP64()
	c.LEAQ(operand.Mem{Base: ld, Index: ld, Scale: 2}, ld3)
	for i := 1; i < 4; i++ {
		c.LEAQ(operand.Mem{Base: rows[i-1], Index: ld, Scale: 4}, rows[i])
	}
	return func(i, j, disp int) operand.Mem {
		switch j {
		case 0:
			return mem(rows[i], disp)
		case 1, 2:
			return operand.Mem{Base: rows[i], Index: ld, Scale: uint8(j), Disp: disp}
		}
		return operand.Mem{Base: rows[i], Index: ld3, Scale: 1, Disp: disp}
	}, rows
}

// transposeBlock emits name (func(m *float32, ldm int, t *float32, ldt
// int)): the b x b float32 block at m transposed into t, t[j*ldt+i] =
// m[i*ldm+j], with the depthwise kernels' register transpose tr.
func transposeBlock(c *build.Context, name string, b int, vec func() reg.VecVirtual,
	tr func(*build.Context, []reg.VecVirtual) []reg.VecVirtual) {
	declareNoescape(c, name, "func(m *float32, ldm int, t *float32, ldt int)",
		fmt.Sprintf("%s transposes a %d x %d float32 block: t[j*ldt+i] = m[i*ldm+j] (ldm, ldt in elements).", name, b, b))
	pm, ldm, pt, ldt := loadArg(c, "m"), loadArg(c, "ldm"), loadArg(c, "t"), loadArg(c, "ldt")
	c.SHLQ(operand.Imm(2), ldm)
	c.SHLQ(operand.Imm(2), ldt)
	r := make([]reg.VecVirtual, b)
	for i := range r {
		r[i] = vec()
		c.VMOVUPS(mem(pm, 0), r[i])
		if i < b-1 {
			c.ADDQ(ldm, pm)
		}
	}
	for j, v := range tr(c, r) {
		c.VMOVUPS(v, mem(pt, 0))
		if j < b-1 {
			c.ADDQ(ldt, pt)
		}
	}
	vzeroRet(c)
}
