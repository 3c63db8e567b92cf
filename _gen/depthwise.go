//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The depthwise convolution's taps kernels (op conv_dw, gokern/gemm; the
// generic Go loops of depthwise.go are their oracle): for each run of
// dwUnroll vectors of output positions (then single vectors), the sums are
// loaded once, every tap x[offs[t]+i] added into them in order (float32:
// VFMADD231PS by the broadcast weight; int8: sign-extended, added for the
// first npos taps and subtracted for the rest), and stored once. The Go
// wrappers (depthwise_amd64.go) run the last n % lanes positions.

// dwAVX2 emits gokern/gemm/depthwise_avx2_amd64.s.
var dwAVX2 = kernels(
	func(c *build.Context) { dwTapsF32(c, "dwTapsF32Y", 8, c.YMM) },
	func(c *build.Context) { dwTapsI8(c, "dwTapsI8Y", 8, c.YMM) },
	func(c *build.Context) { dwLanesF32(c, "dwLanesF32S1Y", 8, 1, c.YMM, zeroY) },
	func(c *build.Context) { dwLanesF32(c, "dwLanesF32S2Y", 8, 2, c.YMM, zeroY) },
	func(c *build.Context) { dwLanesRows(c, "dwLanesRows3Y", 8, 3, c.YMM, zeroY) },
	func(c *build.Context) { dwLanesRows(c, "dwLanesRows5Y", 8, 5, c.YMM, zeroY) },
	func(c *build.Context) { dwInterleave(c, "dwInterleaveY", 8, false, c.YMM, transpose8Y) },
	func(c *build.Context) { dwInterleave(c, "dwInterleaveI8Y", 8, true, c.YMM, transpose8Y) },
	func(c *build.Context) { dwDeinterleave(c, "dwDeinterleaveY", 8, c.YMM, transpose8Y) },
)

// dwAVX512 emits gokern/gemm/depthwise_avx512_amd64.s.
var dwAVX512 = kernels(
	func(c *build.Context) { dwTapsF32(c, "dwTapsF32Z", 16, c.ZMM) },
	func(c *build.Context) { dwTapsI8(c, "dwTapsI8Z", 16, c.ZMM) },
	func(c *build.Context) { dwLanesF32(c, "dwLanesF32S1Z", 16, 1, c.ZMM, zeroZ) },
	func(c *build.Context) { dwLanesF32(c, "dwLanesF32S2Z", 16, 2, c.ZMM, zeroZ) },
	func(c *build.Context) { dwLanesRows(c, "dwLanesRows3Z", 16, 3, c.ZMM, zeroZ) },
	func(c *build.Context) { dwLanesRows(c, "dwLanesRows5Z", 16, 5, c.ZMM, zeroZ) },
	func(c *build.Context) { dwInterleave(c, "dwInterleaveZ", 16, false, c.ZMM, transpose16Z) },
	func(c *build.Context) { dwInterleave(c, "dwInterleaveI8Z", 16, true, c.ZMM, transpose16Z) },
	func(c *build.Context) { dwDeinterleave(c, "dwDeinterleaveZ", 16, c.ZMM, transpose16Z) },
)

// dwUnroll is the vectors of sums the main loops keep in registers.
const dwUnroll = 4

// dwRuns emits the main loop over runs of dwUnroll vectors and the loop over
// single vectors: body(label, nv) emits the work of nv vectors at d and x
// (a label prefix for its own loops), then d and x advance by nv vectors of
// dBytes and xBytes each and n by nv*lanes.
func dwRuns(c *build.Context, name string, lanes, dBytes, xBytes int, d, x, n reg.Register, body func(label string, nv int)) {
	for _, nv := range []int{dwUnroll, 1} {
		top := fmt.Sprintf("%s_v%d", name, nv)
		whileAtLeast(c, top, top+"_end", n, nv*lanes, func() {
			body(top, nv)
			c.ADDQ(operand.U32(nv*dBytes), d)
			c.ADDQ(operand.U32(nv*xBytes), x)
		})
		c.Label(top + "_end")
	}
	vzeroRet(c)
}

// dwTapsF32 emits name(dst, x *float32, offs *int, w *float32, taps, n int):
// dst[i] += w[t]*x[offs[t]+i] for t < taps in order (fused), i < n (a
// multiple of lanes), taps >= 1.
func dwTapsF32(c *build.Context, name string, lanes int, vec func() reg.VecVirtual) {
	declareNoescape(c, name, "func(dst, x *float32, offs *int, w *float32, taps, n int)",
		fmt.Sprintf("%s sets dst[i] += w[t]*x[offs[t]+i] (fused, in order of t < taps) for i < n,", name),
		fmt.Sprintf("n a multiple of %d, taps >= 1.", lanes))
	args := loadArgs(c, "dst", "x", "offs", "w", "taps", "n")
	d, x, offs, w, taps, n := args[0], args[1], args[2], args[3], args[4], args[5]
	vb := lanes * 4
	dwRuns(c, name, lanes, vb, vb, d, x, n, func(label string, nv int) {
		acc := make([]reg.VecVirtual, nv)
		for j := range acc {
			acc[j] = vec()
			c.VMOVUPS(mem(d, j*vb), acc[j])
		}
		po, pw, t, off := c.GP64(), c.GP64(), c.GP64(), c.GP64()
		c.MOVQ(offs, po)
		c.MOVQ(w, pw)
		c.MOVQ(taps, t)
		wv := vec()
		repeat(c, label+"_tap", t, func() {
			c.MOVQ(operand.Mem{Base: po}, off)
			c.VBROADCASTSS(operand.Mem{Base: pw}, wv)
			for j := range acc {
				c.VFMADD231PS(operand.Mem{Base: x, Index: off, Scale: 4, Disp: j * vb}, wv, acc[j])
			}
			c.ADDQ(operand.Imm(8), po)
			c.ADDQ(operand.Imm(4), pw)
		})
		for j := range acc {
			c.VMOVUPS(acc[j], mem(d, j*vb))
		}
	})
}

// dwTapsI8 emits name(dst *int32, x *int8, offs *int, npos, taps, n int):
// dst[i] += int32(x[offs[t]+i]) for t < npos, -= for npos <= t < taps,
// i < n (a multiple of lanes).
func dwTapsI8(c *build.Context, name string, lanes int, vec func() reg.VecVirtual) {
	declareNoescape(c, name, "func(dst *int32, x *int8, offs *int, npos, taps, n int)",
		fmt.Sprintf("%s sets dst[i] += int32(x[offs[t]+i]) for t < npos and -= for npos <= t < taps,", name),
		fmt.Sprintf("i < n, n a multiple of %d.", lanes))
	args := loadArgs(c, "dst", "x", "offs", "npos", "taps", "n")
	d, x, offs, npos, taps, n := args[0], args[1], args[2], args[3], args[4], args[5]
	c.SUBQ(npos, taps) // taps: the subtracted ones
	vb := lanes * 4
	move := func(a, b operand.Op) { c.VMOVDQU32(a, b) }
	if lanes == 8 {
		move = func(a, b operand.Op) { c.VMOVDQU(a, b) }
	}
	dwRuns(c, name, lanes, vb, lanes, d, x, n, func(label string, nv int) {
		acc := make([]reg.VecVirtual, nv)
		for j := range acc {
			acc[j] = vec()
			move(mem(d, j*vb), acc[j])
		}
		po, t, off := c.GP64(), c.GP64(), c.GP64()
		c.MOVQ(offs, po)
		v := vec()
		for _, part := range []struct {
			count reg.Register
			op    func(...operand.Op)
			tag   string
		}{{npos, c.VPADDD, "_add"}, {taps, c.VPSUBD, "_sub"}} {
			c.MOVQ(part.count, t)
			whileAtLeast(c, label+part.tag, label+part.tag+"_end", t, 1, func() {
				c.MOVQ(operand.Mem{Base: po}, off)
				for j := range acc {
					c.VPMOVSXBD(operand.Mem{Base: x, Index: off, Scale: 1, Disp: j * lanes}, v)
					part.op(v, acc[j], acc[j])
				}
				c.ADDQ(operand.Imm(8), po)
			})
			c.Label(label + part.tag + "_end")
		}
		for j := range acc {
			move(acc[j], mem(d, j*vb))
		}
	})
}

// The channels-in-lanes kernels (conv2d's depthwiseLanes; the generic Go
// loops of gemm/depthwise_lanes.go are their oracle): a vector holds one
// position of lanes consecutive channels, laid out position-major
// (x[p*lanes+l]).

// dwLanesUnroll is the positions dwLanesF32's main loop keeps in registers.
const dwLanesUnroll = 4

// dwLanesF32 emits name(dst, x *float32, offs *int, w *float32, taps, n,
// rows, xrow int, sc, bias *float32, mode int): for r < rows, i < n,
// l < lanes, the sum s = w[0*lanes+l]*x[r*xrow+i*stride*lanes+offs[0]+l]
// + w[1*lanes+l]*x[...offs[1]...] + ..., fused, from +0 in the order of the
// taps (taps >= 1, n >= 1, rows >= 1; offs and xrow in floats), then
// dst[(r*n+i)*lanes+l] = s (mode 0), s*sc[l] (mode 1), s*sc[l] + bias[l]
// (mode 3), s/div[l]*sc[l] (mode 5) or s/div[l]*sc[l] + bias[l] (mode 7),
// rounded after each operation (VDIVPS, VMULPS, VADDPS: the folds'
// arithmetic). A row runs in runs of dwLanesUnroll positions; the rest of
// a row of at least dwLanesUnroll positions runs as its last run again
// (rewriting some positions with the same sums: no latency-bound single
// positions at the end of short rows), of shorter rows one by one.
func dwLanesF32(c *build.Context, name string, lanes, stride int, vec func() reg.VecVirtual,
	zero func(*build.Context, int) []reg.VecVirtual) {
	declareNoescape(c, name, "func(dst, x *float32, offs *int, w *float32, taps, n, rows, xrow int, div, sc, bias *float32, mode int)",
		fmt.Sprintf("%s sets dst[(r*n+i)*%d+l] = s, or s (/ div[l] with mode bit 4) * sc[l] (bit 1) (+ bias[l], bit 2), s the sum over t < taps", name, lanes),
		fmt.Sprintf("of w[t*%d+l]*x[r*xrow+i*%d+offs[t]+l] (fused, from +0, in order of t), for r < rows, i < n, l < %d;", lanes, stride*lanes, lanes),
		"taps, n, rows >= 1.")
	args := loadArgs(c, "dst", "x", "offs", "w", "taps", "n", "rows", "xrow", "div", "sc", "bias", "mode")
	d, x, offs, w, taps, n, rows, xrow, divp, scp, biasp, mode := args[0], args[1], args[2], args[3], args[4], args[5], args[6],
		args[7], args[8], args[9], args[10], args[11]
	vb := lanes * 4
	divv, scv, biasv := vec(), vec(), vec()
	c.VMOVUPS(operand.Mem{Base: divp}, divv)
	c.VMOVUPS(operand.Mem{Base: scp}, scv)
	c.VMOVUPS(operand.Mem{Base: biasp}, biasv)
	c.SHLQ(operand.Imm(2), xrow)
	xp, i := c.GP64(), c.GP64()
	c.Label(name + "_row")
	c.MOVQ(x, xp)
	c.MOVQ(n, i)
	for _, nv := range []int{dwLanesUnroll, 1} {
		top := fmt.Sprintf("%s_v%d", name, nv)
		whileAtLeast(c, top, top+"_end", i, nv, func() {
			acc := zero(c, nv)
			po, pw, t, off := c.GP64(), c.GP64(), c.GP64(), c.GP64()
			c.MOVQ(offs, po)
			c.MOVQ(w, pw)
			c.MOVQ(taps, t)
			wv := vec()
			repeat(c, top+"_tap", t, func() {
				c.MOVQ(operand.Mem{Base: po}, off)
				c.VMOVUPS(operand.Mem{Base: pw}, wv)
				for j := range acc {
					c.VFMADD231PS(operand.Mem{Base: xp, Index: off, Scale: 4, Disp: j * stride * vb}, wv, acc[j])
				}
				c.ADDQ(operand.Imm(8), po)
				c.ADDQ(operand.U32(vb), pw)
			})
			lanesFold(c, top, acc, mode, divv, scv, biasv, d, vb)
			c.ADDQ(operand.U32(nv*vb), d)
			c.ADDQ(operand.U32(nv*stride*vb), xp)
		})
		c.Label(top + "_end")
		if nv == dwLanesUnroll {
			// the rest of a row of n >= dwLanesUnroll: its last run again
			// (the same sums), from dwLanesUnroll-i positions back
			c.TESTQ(i, i)
			c.JZ(operand.LabelRef(name + "_next"))
			c.CMPQ(n, operand.Imm(dwLanesUnroll))
			c.JB(operand.LabelRef(top + "_tail"))
			back := c.GP64()
			c.MOVQ(operand.I32(dwLanesUnroll), back)
			c.SUBQ(i, back)
			c.MOVQ(operand.I32(dwLanesUnroll), i)
			bd := c.GP64()
			c.IMUL3Q(operand.I32(vb), back, bd)
			c.SUBQ(bd, d)
			c.IMUL3Q(operand.I32(stride*vb), back, back)
			c.SUBQ(back, xp)
			c.JMP(operand.LabelRef(top))
			c.Label(top + "_tail")
		}
	}
	c.Label(name + "_next")
	c.ADDQ(xrow, x)
	c.DECQ(rows)
	c.JNZ(operand.LabelRef(name + "_row"))
	vzeroRet(c)
}

// dwLanesRows emits name(dst, x, w *float32, kh, khStep, n, rows, xrow
// int, div, sc, bias *float32, mode int): dwLanesF32 for stride 1 and the
// taps of a kh x kw kernel (kw fixed, column dilation 1) at offsets
// r*khStep + c*lanes, in order (row r, then column c), with the columns of
// a run in registers: per kernel row, the run's dwLanesUnroll+kw-1 input
// vectors are loaded once and each is added into the sums of the
// positions that read it, in column order (so every sum gets its taps in
// order), instead of one load per tap and position. n >= dwLanesUnroll
// (the rest of a row runs as its last run again), kh, rows >= 1.
func dwLanesRows(c *build.Context, name string, lanes, kw int, vec func() reg.VecVirtual,
	zero func(*build.Context, int) []reg.VecVirtual) {
	declareNoescape(c, name, "func(dst, x, w *float32, kh, khStep, n, rows, xrow int, div, sc, bias *float32, mode int)",
		fmt.Sprintf("%s is dwLanesF32S1 for the taps r*khStep+c*%d, r < kh, c < %d, in order: input vectors in registers;", name, lanes, kw),
		fmt.Sprintf("n >= %d, kh, rows >= 1.", dwLanesUnroll))
	args := loadArgs(c, "dst", "x", "khStep", "n", "rows", "xrow", "div", "sc", "bias", "mode")
	d, x, khStep, n, rows, xrow, divp, scp, biasp, mode := args[0], args[1], args[2], args[3], args[4], args[5], args[6],
		args[7], args[8], args[9]
	vb := lanes * 4
	const u = dwLanesUnroll
	divv, scv, biasv := vec(), vec(), vec()
	c.VMOVUPS(operand.Mem{Base: divp}, divv)
	c.VMOVUPS(operand.Mem{Base: scp}, scv)
	c.VMOVUPS(operand.Mem{Base: biasp}, biasv)
	c.SHLQ(operand.Imm(2), xrow)
	c.SHLQ(operand.Imm(2), khStep)
	xp, i := c.GP64(), c.GP64()
	c.Label(name + "_row")
	c.MOVQ(x, xp)
	c.MOVQ(n, i)
	top := name + "_run"
	whileAtLeast(c, top, top+"_end", i, u, func() {
		acc := zero(c, u)
		pk, pw, t := c.GP64(), c.GP64(), c.GP64()
		c.MOVQ(xp, pk)
		c.MOVQ(paramAddr(c, "w"), pw)
		c.MOVQ(paramAddr(c, "kh"), t)
		repeat(c, top+"_kh", t, func() {
			wv := make([]reg.VecVirtual, kw)
			for k := range wv {
				wv[k] = vec()
				c.VMOVUPS(mem(pw, k*vb), wv[k])
			}
			xv := vec()
			for col := range u + kw - 1 {
				c.VMOVUPS(mem(pk, col*vb), xv)
				for k := range kw {
					if j := col - k; j >= 0 && j < u {
						c.VFMADD231PS(wv[k], xv, acc[j])
					}
				}
			}
			c.ADDQ(khStep, pk)
			c.ADDQ(operand.U32(kw*vb), pw)
		})
		lanesFold(c, top, acc, mode, divv, scv, biasv, d, vb)
		c.ADDQ(operand.U32(u*vb), d)
		c.ADDQ(operand.U32(u*vb), xp)
	})
	c.Label(top + "_end")
	// the rest of the row: its last run again, u-i positions back
	c.TESTQ(i, i)
	c.JZ(operand.LabelRef(name + "_next"))
	back := c.GP64()
	c.MOVQ(operand.I32(u), back)
	c.SUBQ(i, back)
	c.MOVQ(operand.I32(u), i)
	c.IMUL3Q(operand.I32(vb), back, back)
	c.SUBQ(back, d)
	c.SUBQ(back, xp)
	c.JMP(operand.LabelRef(top))
	c.Label(name + "_next")
	c.ADDQ(xrow, x)
	c.DECQ(rows)
	c.JNZ(operand.LabelRef(name + "_row"))
	vzeroRet(c)
}

// dwInterleave emits name(dst *float32, src *T, ld int, pos *int, n int):
// dst[pos[i]+l] = float32(src[l*ld+i]) for i < n (a multiple of lanes),
// l < lanes: lanes rows of ld values apart to position-major vectors at
// the offsets pos (floats), a lanes x lanes transpose a block. T is float32
// (i8 false) or int8 (i8: VPMOVSXBD, VCVTDQ2PS, exact).
func dwInterleave(c *build.Context, name string, lanes int, i8 bool, vec func() reg.VecVirtual,
	transpose func(*build.Context, []reg.VecVirtual) []reg.VecVirtual) {
	et, eb := "float32", 4
	if i8 {
		et, eb = "int8", 1
	}
	declareNoescape(c, name, fmt.Sprintf("func(dst *float32, src *%s, ld int, pos *int, n int)", et),
		fmt.Sprintf("%s sets dst[pos[i]+l] = float32(src[l*ld+i]) for i < n, l < %d; n a multiple of %d.", name, lanes, lanes))
	args := loadArgs(c, "dst", "src", "ld", "pos", "n")
	d, s, ld, pos, n := args[0], args[1], args[2], args[3], args[4]
	if eb == 4 {
		c.SHLQ(operand.Imm(2), ld)
	}
	q, off := c.GP64(), c.GP64()
	whileAtLeast(c, name+"_blk", name+"_end", n, lanes, func() {
		c.MOVQ(s, q)
		rows := make([]reg.VecVirtual, lanes)
		for l := range rows {
			rows[l] = vec()
			if i8 {
				c.VPMOVSXBD(operand.Mem{Base: q}, rows[l])
				c.VCVTDQ2PS(rows[l], rows[l])
			} else {
				c.VMOVUPS(operand.Mem{Base: q}, rows[l])
			}
			if l < lanes-1 {
				c.ADDQ(ld, q)
			}
		}
		for i, v := range transpose(c, rows) {
			c.MOVQ(mem(pos, i*8), off)
			c.VMOVUPS(v, operand.Mem{Base: d, Index: off, Scale: 4})
		}
		c.ADDQ(operand.U32(lanes*8), pos)
		c.ADDQ(operand.U32(lanes*eb), s)
	})
	c.Label(name + "_end")
	vzeroRet(c)
}

// dwDeinterleave emits name(dst *float32, ld int, src *float32, n int):
// dst[l*ld+i] = src[i*lanes+l] for i < n (a multiple of lanes), l < lanes,
// dwInterleave's inverse.
func dwDeinterleave(c *build.Context, name string, lanes int, vec func() reg.VecVirtual,
	transpose func(*build.Context, []reg.VecVirtual) []reg.VecVirtual) {
	declareNoescape(c, name, "func(dst *float32, ld int, src *float32, n int)",
		fmt.Sprintf("%s sets dst[l*ld+i] = src[i*%d+l] for i < n, l < %d; n a multiple of %d.", name, lanes, lanes, lanes))
	args := loadArgs(c, "dst", "ld", "src", "n")
	d, ld, s, n := args[0], args[1], args[2], args[3]
	vb := lanes * 4
	c.SHLQ(operand.Imm(2), ld)
	q := c.GP64()
	whileAtLeast(c, name+"_blk", name+"_end", n, lanes, func() {
		rows := make([]reg.VecVirtual, lanes)
		for i := range rows {
			rows[i] = vec()
			c.VMOVUPS(mem(s, i*vb), rows[i])
		}
		c.MOVQ(d, q)
		for l, v := range transpose(c, rows) {
			c.VMOVUPS(v, operand.Mem{Base: q})
			if l < lanes-1 {
				c.ADDQ(ld, q)
			}
		}
		c.ADDQ(operand.U32(vb), d)
		c.ADDQ(operand.U32(lanes*vb), s)
	})
	c.Label(name + "_end")
	vzeroRet(c)
}

// laneQuads emits the first two rounds of both transposes, within each
// 128-bit lane of the rows r (a multiple of 4, registers from newReg):
// pairs interleaved (VUNPCKLPS/VUNPCKHPS), then quads (VSHUFPS). In
// lane q, s[4j+m] holds column 4q+m of rows 4j..4j+3.
func laneQuads(c *build.Context, r []reg.VecVirtual, newReg func() reg.VecVirtual) []reg.VecVirtual {
	t := make([]reg.VecVirtual, len(r))
	for k := 0; k < len(r); k += 2 {
		t[k], t[k+1] = newReg(), newReg()
		c.VUNPCKLPS(r[k+1], r[k], t[k])
		c.VUNPCKHPS(r[k+1], r[k], t[k+1])
	}
	s := make([]reg.VecVirtual, len(r))
	for j := 0; j < len(r); j += 4 {
		for h := range 2 {
			a, b := t[j+h], t[j+h+2]
			s[j+2*h], s[j+2*h+1] = newReg(), newReg()
			c.VSHUFPS(operand.Imm(0x44), b, a, s[j+2*h])
			c.VSHUFPS(operand.Imm(0xEE), b, a, s[j+2*h+1])
		}
	}
	return s
}

// transpose8Y returns the columns of the 8x8 float32 matrix whose rows are
// r: pairs interleaved (VUNPCKLPS/VUNPCKHPS), then quads (VSHUFPS), then the
// 128-bit halves (VPERM2F128).
func transpose8Y(c *build.Context, r []reg.VecVirtual) []reg.VecVirtual {
	// s[4j+m] holds column m (low half) and m+4 (high half) of rows 4j..4j+3
	s := laneQuads(c, r, c.YMM)
	out := make([]reg.VecVirtual, 8)
	for m := range 4 {
		out[m], out[m+4] = c.YMM(), c.YMM()
		c.VPERM2F128(operand.Imm(0x20), s[4+m], s[m], out[m])
		c.VPERM2F128(operand.Imm(0x31), s[4+m], s[m], out[m+4])
	}
	return out
}

// transpose16Z returns the columns of the 16x16 float32 matrix whose rows
// are r: pairs (VUNPCKLPS/VUNPCKHPS) and quads (VSHUFPS) within 128-bit
// lanes, then a 4x4 transpose of the 128-bit lanes (two rounds of
// VSHUFF32X4).
func transpose16Z(c *build.Context, r []reg.VecVirtual) []reg.VecVirtual {
	// s[4j+m] holds, in its 128-bit lane q, column 4q+m of rows 4j..4j+3
	s := laneQuads(c, r, c.ZMM)
	out := make([]reg.VecVirtual, 16)
	for m := range 4 {
		u := make([]reg.VecVirtual, 4)
		for k := range u {
			u[k] = c.ZMM()
		}
		c.VSHUFF32X4(operand.Imm(0x44), s[4+m], s[m], u[0])
		c.VSHUFF32X4(operand.Imm(0xEE), s[4+m], s[m], u[1])
		c.VSHUFF32X4(operand.Imm(0x44), s[12+m], s[8+m], u[2])
		c.VSHUFF32X4(operand.Imm(0xEE), s[12+m], s[8+m], u[3])
		for q := range 4 {
			out[4*q+m] = c.ZMM()
		}
		c.VSHUFF32X4(operand.Imm(0x88), u[2], u[0], out[m])
		c.VSHUFF32X4(operand.Imm(0xDD), u[2], u[0], out[4+m])
		c.VSHUFF32X4(operand.Imm(0x88), u[3], u[1], out[8+m])
		c.VSHUFF32X4(operand.Imm(0xDD), u[3], u[1], out[12+m])
	}
	return out
}

// lanesFold emits the lanes kernels' end of a run: with mode != 0 the
// fold of the sums acc (mode&4: divided by divv; then times scv; mode&2:
// plus biasv), then acc stored at d, vb bytes a vector. Labels start with
// top.
func lanesFold(c *build.Context, top string, acc []reg.VecVirtual, mode reg.Register, divv, scv, biasv reg.VecVirtual, d reg.Register, vb int) {
	c.TESTQ(mode, mode)
	c.JZ(operand.LabelRef(top + "_store"))
	c.TESTQ(operand.U32(4), mode)
	c.JZ(operand.LabelRef(top + "_scale"))
	for j := range acc {
		c.VDIVPS(divv, acc[j], acc[j])
	}
	c.Label(top + "_scale")
	for j := range acc {
		c.VMULPS(scv, acc[j], acc[j])
	}
	c.TESTQ(operand.U32(2), mode)
	c.JZ(operand.LabelRef(top + "_store"))
	for j := range acc {
		c.VADDPS(biasv, acc[j], acc[j])
	}
	c.Label(top + "_store")
	for j := range acc {
		c.VMOVUPS(acc[j], mem(d, j*vb))
	}
}
