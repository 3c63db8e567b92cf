//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The dot-product micro-kernels of gokern/ops/qlinear (wrapped in its
// kernels_amd64.go): uint8 activations times int8 weights, both row-major,
// kb blocks of 64 k values, exact int32 sums with no int16 saturation.
//
//   - avx512vnni: VPDPBUSD on ZMM (64 u8 x s8 products into 16 dwords per
//     instruction); a 4x4 tile (16 accumulators) and a 1x8 strip.
//   - avx2: both operands widened to int16 (VPMOVZXBW, VPMOVSXBW) and
//     multiplied in pairs by VPMADDWD into dwords (|255*-128*2| < 2^31); a
//     4x2 tile and a 1x4 strip, 16 k per step.
//
// Each accumulator is reduced to one dword at the end and stored to c
// (row-major, rows x cols). Each step prefetches the weight rows' lines pf
// bytes ahead (PREFETCHT1; the callers pass the next channel block's rows):
// rows a page apart defeat the hardware prefetcher's streams.
//
// Besides them: the packed-panel tile kernels, the requantization (avx2),
// and three conv helpers (cols16VNNI, quadRunAVX2, quadRowAVX2) documented
// where emitted.

// qlinearAVX512 emits gokern/ops/qlinear/dot_avx512_amd64.s.
var qlinearAVX512 = kernels(
	func(c *build.Context) { dotVNNI(c, 4, 4) },
	func(c *build.Context) { dotVNNI(c, 1, 8) },
	tileVNNI,
	requantAVX512,
	cols16VNNI,
)

// qlinearAVX2 emits gokern/ops/qlinear/dot_avx2_amd64.s.
var qlinearAVX2 = kernels(
	func(c *build.Context) { dotAVX2(c, 4, 2) },
	func(c *build.Context) { dotAVX2(c, 1, 4) },
	tileAVX2,
	requantAVX2,
	cols8AVX2,
	quadRunAVX2,
	quadRunWideAVX2,
	quadRowAVX2,
)

// rowPtrs returns n pointers base, base+ld, ..., base+(n-1)*ld.
func rowPtrs(c *build.Context, base, ld reg.Register, n int) []reg.Register {
	out := []reg.Register{base}
	for i := 1; i < n; i++ {
		p := c.GP64()
		c.LEAQ(operand.Mem{Base: out[i-1], Index: ld, Scale: 1}, p)
		out = append(out, p)
	}
	return out
}

// hsumStore adds the dwords of y (YMM) and stores the sum at m.
func hsumStoreY(c *build.Context, y reg.Register, m operand.Mem, evex bool) {
	x := y.(reg.VecVirtual).AsX()
	t := c.XMM()
	if evex { // registers 16-31 have no VEX encoding
		c.VEXTRACTI32X4(operand.Imm(1), y, t)
	} else {
		c.VEXTRACTI128(operand.Imm(1), y, t)
	}
	c.VPADDD(t, x, x)
	c.VPSHUFD(operand.Imm(0x4E), x, t)
	c.VPADDD(t, x, x)
	c.VPSHUFD(operand.Imm(0xB1), x, t)
	c.VPADDD(t, x, x)
	c.VMOVD(x, m)
}

// dotVNNI emits dot<rows>x<cols>VNNI: rows of activations against cols
// weight rows, 64 codes of each a step, one VPDPBUSD per (row, channel)
// into a ZMM accumulator; at the end each row's outputs, four adjacent
// channels at a time, come from one hsum4 and one 16-byte store (against a
// horizontal sum and store per output: 64 x 4096 x 4096, 1 thread,
// 5.84-5.92 -> 5.67-5.72 ms). cols is a multiple of 4.
func dotVNNI(c *build.Context, rows, cols int) {
	if cols%4 != 0 {
		panic("dotVNNI: cols must be a multiple of 4")
	}
	name := fmt.Sprintf("dot%dx%dVNNI", rows, cols)
	declareNoescape(c, name, "func(kb int, a *byte, lda int, w *int8, ldw int, c *int32, pf int)",
		fmt.Sprintf("%s sets c[i*%d+j] = sum_{k<64*kb} a[i*lda+k]*w[j*ldw+k] for i < %d, j < %d (kb >= 1); the weight rows' lines pf bytes ahead are prefetched (PREFETCHT1: a streamed weight's next rows).", name, cols, rows, cols))
	kb, a, lda, w, ldw, out, pf := loadArg(c, "kb"), loadArg(c, "a"), loadArg(c, "lda"), loadArg(c, "w"), loadArg(c, "ldw"), loadArg(c, "c"), loadArg(c, "pf")
	ap := rowPtrs(c, a, lda, rows)
	wp := rowPtrs(c, w, ldw, cols)
	acc := zeroZ(c, rows*cols)
	repeat(c, name+"_loop", kb, func() {
		for _, p := range wp {
			c.PREFETCHT1(operand.Mem{Base: p, Index: pf, Scale: 1})
		}
		if rows == 1 {
			av := c.ZMM()
			c.VMOVDQU32(mem(ap[0], 0), av)
			for j := 0; j < cols; j++ {
				c.VPDPBUSD(mem(wp[j], 0), av, acc[j])
			}
		} else {
			wv := make([]reg.VecVirtual, cols)
			for j := range wv {
				wv[j] = c.ZMM()
				c.VMOVDQU32(mem(wp[j], 0), wv[j])
			}
			for i := 0; i < rows; i++ {
				av := c.ZMM()
				c.VMOVDQU32(mem(ap[i], 0), av)
				for j := 0; j < cols; j++ {
					c.VPDPBUSD(wv[j], av, acc[i*cols+j])
				}
			}
		}
		for _, p := range ap {
			c.ADDQ(operand.Imm(64), p)
		}
		for _, p := range wp {
			c.ADDQ(operand.Imm(64), p)
		}
	})
	// four adjacent outputs (one row, four channels) a hsum4 and a store
	for i := 0; i < len(acc); i += 4 {
		c.VMOVDQU32(hsum4(c, acc[i:i+4]), mem(out, 4*i))
	}
	vzeroRet(c)
}

func dotAVX2(c *build.Context, rows, cols int) {
	name := fmt.Sprintf("dot%dx%dAVX2", rows, cols)
	declareNoescape(c, name, "func(kb int, a *byte, lda int, w *int8, ldw int, c *int32, pf int)",
		fmt.Sprintf("%s sets c[i*%d+j] = sum_{k<64*kb} a[i*lda+k]*w[j*ldw+k] for i < %d, j < %d (kb >= 1); the weight rows' lines pf bytes ahead are prefetched (PREFETCHT1: a streamed weight's next rows).", name, cols, rows, cols))
	kb, a, lda, w, ldw, out, pf := loadArg(c, "kb"), loadArg(c, "a"), loadArg(c, "lda"), loadArg(c, "w"), loadArg(c, "ldw"), loadArg(c, "c"), loadArg(c, "pf")
	ap := rowPtrs(c, a, lda, rows)
	wp := rowPtrs(c, w, ldw, cols)
	acc := zeroY(c, rows*cols)
	repeat(c, name+"_loop", kb, func() {
		for _, p := range wp {
			c.PREFETCHT1(operand.Mem{Base: p, Index: pf, Scale: 1})
		}
		for s := 0; s < 64; s += 16 {
			if rows == 1 {
				av := c.YMM()
				c.VPMOVZXBW(mem(ap[0], s), av)
				for j := 0; j < cols; j++ {
					wv, t := c.YMM(), c.YMM()
					c.VPMOVSXBW(mem(wp[j], s), wv)
					c.VPMADDWD(wv, av, t)
					c.VPADDD(t, acc[j], acc[j])
				}
				continue
			}
			wv := make([]reg.VecVirtual, cols)
			for j := range wv {
				wv[j] = c.YMM()
				c.VPMOVSXBW(mem(wp[j], s), wv[j])
			}
			for i := 0; i < rows; i++ {
				av := c.YMM()
				c.VPMOVZXBW(mem(ap[i], s), av)
				for j := 0; j < cols; j++ {
					t := c.YMM()
					c.VPMADDWD(wv[j], av, t)
					c.VPADDD(t, acc[i*cols+j], acc[i*cols+j])
				}
			}
		}
		for _, p := range ap {
			c.ADDQ(operand.Imm(64), p)
		}
		for _, p := range wp {
			c.ADDQ(operand.Imm(64), p)
		}
	})
	for i, y := range acc {
		hsumStoreY(c, y, mem(out, 4*i), false)
	}
	vzeroRet(c)
}

// The packed-panel micro-kernels: an outer product over k quads. The
// activations come as a tile of 8 rows, per k quad the 4 codes of each row
// (32 bytes a quad; avx2: widened to int16, 64 bytes); the weights as a
// panel of 32 channels, per k quad the 4 codes of each channel (128 bytes).
// The int32 results go to c (rows of ldc int32s), added to what c holds
// when add != 0.

// tileVNNI emits tile8x32VNNI: per k quad two ZMM of weights (16 channels
// x 4 codes each) and, per row, its 4 codes broadcast to every dword
// (VPBROADCASTD), VPDPBUSD into 8x2 accumulators.
func tileVNNI(c *build.Context) {
	const rows, cols = 8, 2
	name := "tile8x32VNNI"
	declareNoescape(c, name, "func(kq int, a *byte, w *int8, c *int32, ldc int, add int)",
		name+" sets (adds, when add != 0) c[i*ldc+j] = sum over kq quads of a's row i times w's channel j, i < 8, j < 32 (kq >= 1).")
	kq, a, w, out, ldc, add := loadArg(c, "kq"), loadArg(c, "a"), loadArg(c, "w"), loadArg(c, "c"), loadArg(c, "ldc"), loadArg(c, "add")
	acc := zeroZ(c, rows*cols)
	repeat(c, name+"_loop", kq, func() {
		wv := []reg.VecVirtual{c.ZMM(), c.ZMM()}
		c.VMOVDQU32(mem(w, 0), wv[0])
		c.VMOVDQU32(mem(w, 64), wv[1])
		for i := 0; i < rows; i++ {
			b := c.ZMM()
			c.VPBROADCASTD(mem(a, 4*i), b)
			for j := 0; j < cols; j++ {
				c.VPDPBUSD(wv[j], b, acc[i*cols+j])
			}
		}
		c.ADDQ(operand.Imm(32), a)
		c.ADDQ(operand.Imm(128), w)
	})
	c.SHLQ(operand.Imm(2), ldc)
	qstoreTile(c, name, add, out, ldc, rows, func(i, j int) (reg.VecVirtual, int) { return acc[i*cols+j], 64 * j }, cols,
		func(m operand.Mem, v reg.VecVirtual) { c.VPADDD(m, v, v) }, func(v reg.VecVirtual, m operand.Mem) { c.VMOVDQU32(v, m) })
	vzeroRet(c)
}

// qstoreTile stores rows x cols registers (at(i, j): the register and its
// byte offset in row i) to the rows of c, ldc bytes apart, adding what c
// holds first when add != 0.
func qstoreTile(c *build.Context, name string, add, out, ldc reg.Register, rows int, at func(i, j int) (reg.VecVirtual, int), cols int,
	addMem func(operand.Mem, reg.VecVirtual), store func(reg.VecVirtual, operand.Mem)) {
	c.TESTQ(add, add)
	c.JZ(operand.LabelRef(name + "_store"))
	p := c.GP64()
	c.MOVQ(out, p)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			v, off := at(i, j)
			addMem(mem(p, off), v)
		}
		if i+1 < rows {
			c.ADDQ(ldc, p)
		}
	}
	c.Label(name + "_store")
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			v, off := at(i, j)
			store(v, mem(out, off))
		}
		if i+1 < rows {
			c.ADDQ(ldc, out)
		}
	}
}

// tileAVX2 emits tile4x8AVX2, a quarter of the 8x32 tile's columns and half
// its rows: per k quad 16 weight codes (4 channels x 4) widened to int16
// twice (VPMOVSXBW), each row's 4 codes (pre-widened to int16 by the
// packing) broadcast to every qword (VPBROADCASTQ), VPMADDWD into dwords
// holding pairs of k, VPADDD into 4x2 accumulators; at the end VPHADDD
// sums each channel's two pairs and VPERMQ puts the 8 channels in order.
// a's k quads are 64 bytes apart (8 rows), w's 128 (32 channels).
func tileAVX2(c *build.Context) {
	const rows, cols = 4, 2
	name := "tile4x8AVX2"
	declareNoescape(c, name, "func(kq int, a *byte, w *int8, c *int32, ldc int, add int)",
		name+" sets (adds, when add != 0) c[i*ldc+j] = sum over kq quads of a's row i (int16 codes) times w's channel j, i < 4, j < 8 (kq >= 1).")
	kq, a, w, out, ldc, add := loadArg(c, "kq"), loadArg(c, "a"), loadArg(c, "w"), loadArg(c, "c"), loadArg(c, "ldc"), loadArg(c, "add")
	acc := zeroY(c, rows*cols)
	repeat(c, name+"_loop", kq, func() {
		wv := []reg.VecVirtual{c.YMM(), c.YMM()}
		c.VPMOVSXBW(mem(w, 0), wv[0])
		c.VPMOVSXBW(mem(w, 16), wv[1])
		for i := 0; i < rows; i++ {
			b := c.YMM()
			c.VPBROADCASTQ(mem(a, 8*i), b)
			for j := 0; j < cols; j++ {
				t := c.YMM()
				c.VPMADDWD(wv[j], b, t)
				c.VPADDD(t, acc[i*cols+j], acc[i*cols+j])
			}
		}
		c.ADDQ(operand.Imm(64), a)
		c.ADDQ(operand.Imm(128), w)
	})
	sums := make([]reg.VecVirtual, rows)
	for i := range sums {
		sums[i] = c.YMM()
		c.VPHADDD(acc[i*cols+1], acc[i*cols], sums[i])
		c.VPERMQ(operand.Imm(0xD8), sums[i], sums[i])
	}
	c.SHLQ(operand.Imm(2), ldc)
	qstoreTile(c, name, add, out, ldc, rows, func(i, _ int) (reg.VecVirtual, int) { return sums[i], 0 }, 1,
		func(m operand.Mem, v reg.VecVirtual) { c.VPADDD(m, v, v) }, func(v reg.VecVirtual, m operand.Mem) { c.VMOVDQU(v, m) })
	vzeroRet(c)
}

// requantAVX2 emits requantAVX2, Requant.Quant on rows of channels 8 at a
// time (YMM); requantAVX512 the same 16 at a time (ZMM, the avx512vnni
// family's Quant). Per row (its row sum broadcast) and block of channels:
// raw = acc - colterm - zw*rowsum (VPMULLD, wrapping as int32 does; left
// out where zwz says every zw is 0), rf = float32(raw) + biasq, v =
// rf*mult (two roundings, no FMA), v capped at 2^30 (VMINPS with v as the
// source a NaN passes through), lrintf by VCVTPS2DQ (round to nearest
// even, the default MXCSR; NaN and values below -2^31 give INT32_MIN),
// raised to lo-zo, + zo, lowered to hi: clamp(lrintf(v) + zo, lo, hi),
// NaN giving lo, as Requant.Quant. The codes overwrite acc. One call does
// a block of rows (a conv's 64 output positions): the call, the constants'
// broadcasts and the Go wrapper's checks were a third of the
// requantization's time when a call did one row of 128 channels.
func requantAVX2(c *build.Context) { requant(c, false) }

func requantAVX512(c *build.Context) { requant(c, true) }

// requant emits requantAVX2 or, wide, requantAVX512.
func requant(c *build.Context, wide bool) {
	name, lanes, vec := "requantAVX2", 8, c.YMM
	mov := func(src, dst operand.Op) { c.VMOVDQU(src, dst) }
	bcst := func(v uint32) reg.VecVirtual { return bcst32(c, v) }
	if wide {
		name, lanes, vec = "requantAVX512", 16, c.ZMM
		mov = func(src, dst operand.Op) { c.VMOVDQU32(src, dst) }
		bcst = func(v uint32) reg.VecVirtual { return bcstZ32(c, v) }
	}
	declareNoescape(c, name, "func(rows, n int, acc *int32, ld int, rowsum *int32, colterm *int32, zw *int32, zwz int, biasq *float32, mult *float32, p *[3]int32)",
		fmt.Sprintf("%s replaces acc[i*ld+j], i < rows (>= 1), j < n (a multiple of %d), by its output code for row sum rowsum[i] (Requant.Quant; p: zo, lo, hi; zwz != 0: every zw[j] is 0).", name, lanes))
	rows, n, acc, ld, rsum, ct, zw, zwz, bq, mult, p := loadArg(c, "rows"), loadArg(c, "n"), loadArg(c, "acc"), loadArg(c, "ld"), loadArg(c, "rowsum"),
		loadArg(c, "colterm"), loadArg(c, "zw"), loadArg(c, "zwz"), loadArg(c, "biasq"), loadArg(c, "mult"), loadArg(c, "p")
	zo, lozo, hi := vec(), vec(), vec()
	c.VPBROADCASTD(mem(p, 0), zo)
	c.VPBROADCASTD(mem(p, 4), lozo)
	c.VPSUBD(zo, lozo, lozo) // lo - zo
	c.VPBROADCASTD(mem(p, 8), hi)
	fmax := bcst(0x4E800000) // 2^30
	c.SHLQ(operand.Imm(2), ld)
	c.SHRQ(operand.Imm(uint64(bits(lanes))), n)
	c.TESTQ(n, n)
	c.JZ(operand.LabelRef(name + "_done"))
	j, cnt := c.GP64(), c.GP64()
	at := func(base reg.Register) operand.Mem { return operand.Mem{Base: base, Index: j, Scale: 1} }
	rowLoop := func(withZW bool, label string) {
		repeat(c, label+"_row", rows, func() {
			var rs reg.VecVirtual // the row sum, where zw*rowsum is done
			if withZW {
				rs = vec()
				c.VPBROADCASTD(mem(rsum, 0), rs)
			}
			c.XORQ(j, j)
			c.MOVQ(n, cnt)
			repeat(c, label+"_loop", cnt, func() {
				a := vec()
				mov(at(acc), a)
				c.VPSUBD(at(ct), a, a)
				if withZW {
					t := vec()
					c.VPMULLD(at(zw), rs, t)
					c.VPSUBD(t, a, a)
				}
				f := vec()
				c.VCVTDQ2PS(a, f)
				c.VADDPS(at(bq), f, f)
				c.VMULPS(at(mult), f, f)
				c.VMINPS(f, fmax, f) // (2^30 < f) ? 2^30 : f, NaN: f
				c.VCVTPS2DQ(f, a)
				c.VPMAXSD(lozo, a, a)
				c.VPADDD(zo, a, a)
				c.VPMINSD(hi, a, a)
				mov(a, at(acc))
				c.ADDQ(operand.Imm(uint64(4*lanes)), j)
			})
			c.ADDQ(ld, acc)
			if withZW {
				c.ADDQ(operand.Imm(4), rsum)
			}
		})
		c.JMP(operand.LabelRef(name + "_done"))
	}
	c.TESTQ(zwz, zwz)
	c.JNZ(operand.LabelRef(name + "_nozw_row"))
	rowLoop(true, name)
	rowLoop(false, name+"_nozw")
	c.Label(name + "_done")
	vzeroRet(c)
}

// cols16VNNI emits cols16VNNI, the transposed store of a conv's NCHW
// outputs: 16 rows of 16 int32 codes (one row per output position, one
// column per channel) truncated to bytes (VPMOVDB), transposed in XMM
// registers and stored as 16 bytes per channel. The transpose: four rounds
// of unpacks (bytes, words, dwords, qwords) pairing register k with k+8;
// loading row r into register bitrev4(r) leaves column j in register j
// with the rows in order.
func cols16VNNI(c *build.Context) {
	name := "cols16VNNI"
	declareNoescape(c, name, "func(src *int32, lds int, out *byte, ldo int)",
		name+" sets out[j*ldo+i] = byte(src[i*lds+j]) for i, j < 16.")
	src, lds, out, ldo := loadArg(c, "src"), loadArg(c, "lds"), loadArg(c, "out"), loadArg(c, "ldo")
	c.SHLQ(operand.Imm(2), lds)
	x := make([]reg.VecVirtual, 16)
	for r := 0; r < 16; r++ {
		slot := (r&1)<<3 | (r&2)<<1 | (r&4)>>1 | (r&8)>>3
		z := c.ZMM()
		c.VMOVDQU32(mem(src, 0), z)
		x[slot] = c.XMM()
		c.VPMOVDB(z, x[slot])
		if r+1 < 16 {
			c.ADDQ(lds, src)
		}
	}
	type unpack func(ops ...operand.Op)
	for _, u := range [][2]unpack{{c.VPUNPCKLBW, c.VPUNPCKHBW}, {c.VPUNPCKLWD, c.VPUNPCKHWD},
		{c.VPUNPCKLDQ, c.VPUNPCKHDQ}, {c.VPUNPCKLQDQ, c.VPUNPCKHQDQ}} {
		y := make([]reg.VecVirtual, 16)
		for k := 0; k < 8; k++ {
			y[2*k], y[2*k+1] = c.XMM(), c.XMM()
			u[0](x[k+8], x[k], y[2*k])
			u[1](x[k+8], x[k], y[2*k+1])
		}
		x = y
	}
	for j := 0; j < 16; j++ {
		c.VMOVDQU32(x[j], mem(out, 0))
		if j+1 < 16 {
			c.ADDQ(ldo, out)
		}
	}
	vzeroRet(c)
}

// cols8AVX2 emits cols8AVX2, the avx2 family's transposed store of a
// conv's NCHW outputs (Kernels.Cols16 runs it twice): 16 rows of 8 int32
// codes (one row per output position, one column per channel) truncated to
// bytes and stored as 16 bytes per channel, in 16 YMM registers:
//
//   - rows 2k and 2k+1 packed to words (VPACKSSDW: the codes fit int16),
//     their low bytes kept (VPAND: int8 codes are negative) and pairs of
//     those packed to bytes (VPACKUSWB): register m holds rows 4m..4m+3
//     x channels 0-3 in its low 128-bit lane, x channels 4-7 in its high
//     one, row-major;
//   - each 4x4 byte block transposed in place (VPSHUFB): dword d of lane L
//     is channel 4L+d's rows 4m..4m+3;
//   - the four registers' dwords transposed (VPUNPCKLDQ/HDQ, then
//     VPUNPCKLQDQ/HQDQ): register c holds channel c's 16 rows in its low
//     lane and channel c+4's in its high one; two 16-byte stores.
func cols8AVX2(c *build.Context) {
	name := "cols8AVX2"
	declareNoescape(c, name, "func(src *int32, lds int, out *byte, ldo int)",
		name+" sets out[j*ldo+i] = byte(src[i*lds+j]) for i < 16, j < 8 (the codes in [-128, 255]).")
	src, lds, out, ldo := loadArg(c, "src"), loadArg(c, "lds"), loadArg(c, "out"), loadArg(c, "ldo")
	c.SHLQ(operand.Imm(2), lds)
	low := bcst32(c, 0x00FF00FF)
	x := xmmImm(c, 8, 0x0D0905010C080400)
	c.VPINSRQ(operand.Imm(1), gpImm(c, 8, 0x0F0B07030E0A0602), x, x)
	tr := c.YMM() // the 4x4 byte transpose in each lane
	c.VINSERTI128(operand.Imm(1), x, x.AsY(), tr)
	q := make([]reg.VecVirtual, 4)
	for m := range q {
		var w [2]reg.VecVirtual
		for h := range w {
			a := c.YMM()
			c.VMOVDQU(mem(src, 0), a)
			c.ADDQ(lds, src)
			c.VPACKSSDW(mem(src, 0), a, a)
			c.ADDQ(lds, src)
			c.VPAND(low, a, a)
			w[h] = a
		}
		c.VPACKUSWB(w[1], w[0], w[0])
		c.VPSHUFB(tr, w[0], w[0])
		q[m] = w[0]
	}
	lo01, hi01, lo23, hi23 := c.YMM(), c.YMM(), c.YMM(), c.YMM()
	c.VPUNPCKLDQ(q[1], q[0], lo01)
	c.VPUNPCKHDQ(q[1], q[0], hi01)
	c.VPUNPCKLDQ(q[3], q[2], lo23)
	c.VPUNPCKHDQ(q[3], q[2], hi23)
	ch := make([]reg.VecVirtual, 4)
	for k := range ch {
		ch[k] = c.YMM()
	}
	c.VPUNPCKLQDQ(lo23, lo01, ch[0])
	c.VPUNPCKHQDQ(lo23, lo01, ch[1])
	c.VPUNPCKLQDQ(hi23, hi01, ch[2])
	c.VPUNPCKHQDQ(hi23, hi01, ch[3])
	o4 := c.GP64() // out + 4*ldo: channels 4-7
	c.LEAQ(operand.Mem{Base: out, Index: ldo, Scale: 4}, o4)
	for k, v := range ch {
		c.VMOVDQU(v.AsX(), mem(out, 0))
		c.VEXTRACTI128(operand.Imm(1), v, mem(o4, 0))
		if k+1 < len(ch) {
			c.ADDQ(ldo, out)
			c.ADDQ(ldo, o4)
		}
	}
	vzeroRet(c)
}

// quadRunAVX2 emits quadRunAVX2, the packing of a conv's activation tile
// whose 8 outputs are consecutive words of the quad planes
// (gokern/ops/qlinear/im2col.go): per quad one 32-byte copy from src plus
// its word offset, per (kh, kw) the 8 sums at sum plus its offset added
// (VPADDD), the row sums stored to rs. quadRunWideAVX2 is the same for the
// avx2 family's int16 tiles (Kernels.WideA): each quad's 32 bytes
// zero-extended to 64 (two VPMOVZXBW).
func quadRunAVX2(c *build.Context) { quadRun(c, false) }

func quadRunWideAVX2(c *build.Context) { quadRun(c, true) }

// quadRun emits quadRunAVX2 or, wide, quadRunWideAVX2.
func quadRun(c *build.Context, wide bool) {
	name, step, what := "quadRunAVX2", 32, "copies src[offs[i]:][:8] to dst[32*i:]"
	if wide {
		name, step, what = "quadRunWideAVX2", 64, "writes the 32 bytes of src[offs[i]:][:8], each zero-extended to 16 bits, to dst[64*i:]"
	}
	declareNoescape(c, name, "func(n int, src *uint32, offs *int32, dst *byte, nd int, sum *int32, doffs *int32, rs *int32)",
		name+" "+what+" for i < n (n >= 1) and sets rs[r] = sum over j < nd (nd >= 1) of sum[doffs[j]+r], r < 8.")
	n, src, offs, dst, nd, sum, doffs, rs := loadArg(c, "n"), loadArg(c, "src"), loadArg(c, "offs"), loadArg(c, "dst"),
		loadArg(c, "nd"), loadArg(c, "sum"), loadArg(c, "doffs"), loadArg(c, "rs")
	o := c.GP64()
	repeat(c, name+"_copy", n, func() {
		c.MOVLQSX(mem(offs, 0), o)
		if wide {
			for h := 0; h < 2; h++ {
				v := c.YMM()
				c.VPMOVZXBW(operand.Mem{Base: src, Index: o, Scale: 4, Disp: 16 * h}, v)
				c.VMOVDQU(v, mem(dst, 32*h))
			}
		} else {
			v := c.YMM()
			c.VMOVDQU(operand.Mem{Base: src, Index: o, Scale: 4}, v)
			c.VMOVDQU(v, mem(dst, 0))
		}
		c.ADDQ(operand.Imm(4), offs)
		c.ADDQ(operand.Imm(uint64(step)), dst)
	})
	acc := c.YMM()
	c.VPXOR(acc, acc, acc)
	repeat(c, name+"_sums", nd, func() {
		c.MOVLQSX(mem(doffs, 0), o)
		c.VPADDD(operand.Mem{Base: sum, Index: o, Scale: 4}, acc, acc)
		c.ADDQ(operand.Imm(4), doffs)
	})
	c.VMOVDQU(acc, mem(rs, 0))
	vzeroRet(c)
}

// quadRowAVX2 emits quadRowAVX2, the interior of a stride-1 row of a
// conv's quad planes: per 16 positions and channel quad, the 4 channels'
// 16 codes interleaved into words (VPUNPCKLBW/HBW, VPUNPCKLWD/HWD), xored
// with flip and stored; each word's 4 codes summed (VPMADDUBSW and VPMADDWD
// by ones) over the quads into the positions' sums.
func quadRowAVX2(c *build.Context) {
	name := "quadRowAVX2"
	declareNoescape(c, name, "func(x *byte, hw int, n16 int, c4 int, out *uint32, plane int, flip int, sums *int32)",
		name+" sets out[q*plane+i] = the word of x[(4q+j)*hw+i], j < 4, xored with flip (its low 32 bits), and sums[i] = the sum of the bytes of every out[q*plane+i], for i < 16*n16 (n16 >= 1), q < c4 (c4 >= 1).")
	x, hw, n16, c4, out, plane, sums := loadArg(c, "x"), loadArg(c, "hw"), loadArg(c, "n16"), loadArg(c, "c4"), loadArg(c, "out"),
		loadArg(c, "plane"), loadArg(c, "sums")
	flip := c.XMM()
	c.VMOVD(loadArg(c, "flip").(reg.GPVirtual).As32(), flip)
	c.VPBROADCASTD(flip, flip)
	ones8, ones16 := bcst32(c, 0x01010101).AsX(), bcst32(c, 0x00010001).AsX()
	hw3 := c.GP64()
	c.LEAQ(operand.Mem{Base: hw, Index: hw, Scale: 2}, hw3)
	c.SHLQ(operand.Imm(2), plane)
	xp, op, q := c.GP64(), c.GP64(), c.GP64()
	repeat(c, name+"_blocks", n16, func() {
		sv := make([]reg.VecVirtual, 4)
		for i := range sv {
			sv[i] = c.XMM()
			c.VPXOR(sv[i], sv[i], sv[i])
		}
		c.MOVQ(x, xp)
		c.MOVQ(out, op)
		c.MOVQ(c4, q)
		repeat(c, name+"_quads", q, func() {
			a := []reg.VecVirtual{c.XMM(), c.XMM(), c.XMM(), c.XMM()}
			c.VMOVDQU(mem(xp, 0), a[0])
			c.VMOVDQU(operand.Mem{Base: xp, Index: hw, Scale: 1}, a[1])
			c.VMOVDQU(operand.Mem{Base: xp, Index: hw, Scale: 2}, a[2])
			c.VMOVDQU(operand.Mem{Base: xp, Index: hw3, Scale: 1}, a[3])
			t := []reg.VecVirtual{c.XMM(), c.XMM(), c.XMM(), c.XMM()}
			c.VPUNPCKLBW(a[1], a[0], t[0])
			c.VPUNPCKHBW(a[1], a[0], t[1])
			c.VPUNPCKLBW(a[3], a[2], t[2])
			c.VPUNPCKHBW(a[3], a[2], t[3])
			w := []reg.VecVirtual{c.XMM(), c.XMM(), c.XMM(), c.XMM()}
			c.VPUNPCKLWD(t[2], t[0], w[0])
			c.VPUNPCKHWD(t[2], t[0], w[1])
			c.VPUNPCKLWD(t[3], t[1], w[2])
			c.VPUNPCKHWD(t[3], t[1], w[3])
			for i, v := range w {
				c.VPXOR(flip, v, v)
				c.VMOVDQU(v, mem(op, 16*i))
				m := c.XMM()
				c.VPMADDUBSW(ones8, v, m)
				c.VPMADDWD(ones16, m, m)
				c.VPADDD(m, sv[i], sv[i])
			}
			c.LEAQ(operand.Mem{Base: xp, Index: hw, Scale: 4}, xp)
			c.ADDQ(plane, op)
		})
		for i, v := range sv {
			c.VMOVDQU(v, mem(sums, 16*i))
		}
		c.ADDQ(operand.Imm(16), x)
		c.ADDQ(operand.Imm(64), out)
		c.ADDQ(operand.Imm(64), sums)
	})
	vzeroRet(c)
}
