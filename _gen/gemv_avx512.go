//go:build generate

package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The int8 GEMV kernels of the op "linear_gemv" for the avx512vnni family
// (gokern/gemm/gemv_vnni_amd64.go wraps them; gemvI8Generic in gemm.go is
// the oracle). They read I2_S rows as they are: 32 bytes a group of 128
// values, value 32q+j in byte j at bits 6-2q (code = w+1).
//
// Per group and row the 32 bytes are broadcast to both halves of a ZMM
// (VBROADCASTI64X4) and ANDed with two masks, leaving each code in place,
// times a power of four:
//
//	a = bytes & [0xC0 x32 | 0x30 x32]: 64*code(j) | 16*code(32+j)
//	b = bytes & [0x0C x32 | 0x03 x32]:  4*code(64+j) | code(96+j)
//
// so that a pairs with the group's activations 0..63 and b with 64..127,
// both read as they are (one ZMM each). Two VPDPBUSD (a, b unsigned, the
// activations signed) add into two int32 accumulators per row and column,
// whose low eight lanes carry 64 and 4 and high eight 16 and 1 times the
// sums; at the end one VPSRAVD per accumulator (shifts 6/4 and 2/0) takes
// the factors out, exactly: every lane is a multiple of its factor, and
// |lane| <= 3*64*128*4 per group stays below 2^31 for up to 16384 groups
// (the wrapper splits longer rows). No shifts in the loop: per group and
// row two VPANDD and two VPDPBUSD per column, plus the code-3 check
// (VPADDB doubling the low half's bytes, VPTERNLOGD OR-ing bytes & 2*bytes,
// whose odd bits mark a pair of two ones).
//
// The 4x4 tile (gemvI8VNNIShifted) takes one accumulator per output
// instead, and the one-column pair tiles (gemvI8VNNIPairs) load two groups
// a row as they are, with no broadcast: see there.

// gemvVNNITiles are the (rows, columns) tiles generated with two
// accumulators per output; the wrapper covers a call of two or more
// columns with the widest that fit, 4x4 (gemvI8VNNIShifted) first, and a
// call of one column with the pair tiles.
var gemvVNNITiles = [][2]int{{4, 1}, {2, 1}, {1, 1}, {2, 2}, {1, 2}, {2, 4}, {1, 4}}

// Each tile prefetches (PREFETCHT0 per group and row; the pair tiles per
// two groups, one cache line, and not in an odd last group's step) the
// group at the same place in the next tile's rows, rows*ldw bytes on: rows stream from
// L3 or memory, and the tiles of several columns consume them too slowly
// for the hardware prefetchers to run far enough ahead, while a whole
// tile's pass is enough time to bring the next tile's rows in.

// gemvAVX512 emits gokern/gemm/gemv_avx512_amd64.s: each tile with the
// code-3 check, and without it (name suffix v, for codes known valid:
// about 10-30% faster at one column, where the check is a fifth of the
// vector work (measured on the r*c1 tiles, before the pair tiles took one
// column over; the pair tiles': 4096 x 4096, 0.115 against 0.096 ms),
// 1-7% at 4 and 16).
var gemvAVX512 = func(c *build.Context) {
	for _, check := range []bool{true, false} {
		for _, t := range gemvVNNITiles {
			gemvI8VNNI(c, t[0], t[1], check)
		}
		gemvI8VNNIShifted(c, 4, 4, check)
		for _, rows := range []int{4, 2, 1} {
			gemvI8VNNIPairs(c, rows, check)
		}
	}
	for _, cols := range []int{4, 1} {
		gemvI8VNNIBlocks(c, cols)
	}
}

// gemvI8VNNIBlocks emits gemvI8VNNIb4c<cols>v (cols 4 or 1; codes known
// valid): gemvI8VNNIShifted's arithmetic over nb blocks of gpb groups in a
// row, each block's sums stored apart, column by column,
// out[b*ldb+j*ldc+r] = the sum over block b's values of
// (w_r(i)+1)*x[j*ldx+i], minus xsum[b*xsb+j], for r < 4, j < cols: the
// block sums of weights with a scale per block (block_size < K) in one call
// a tile, where one call a block spent more time starting and ending the
// tile than in its loop (two groups a block: the masks, the argument loads
// and Go's call, against 64 VPDPBUSD). Per block: the accumulators zeroed,
// the loop, the sums of the 16 outputs with their factors taken out
// (hsum16Shifted; one column: pairSums and laneSum), the columns' xsum
// subtracted, and per column one 16-byte store of its four rows (the folds
// read a column's rows in order: no transposition). Blocks of 256 and 128,
// 8 and 64 samples: about 10% faster than one VPSRAVD per accumulator and
// an hsum4 per column (BenchmarkGEMVBlocks, Zen 4). |lane| <= 2*4*8*128
// per group: exact for gpb up to 16384.
func gemvI8VNNIBlocks(c *build.Context, cols int) {
	name := fmt.Sprintf("gemvI8VNNIb4c%dv", cols)
	declareNoescape(c, name, "func(w *byte, ldw int, x *int8, ldx int, gpb int, nb int, xsum *int32, xsb int, out *int32, ldc int, ldb int)",
		fmt.Sprintf("%s sets out[b*ldb+j*ldc+r] = sum over block b (groups b*gpb .. b*gpb+gpb-1, 1 <= gpb <= 16384) of (w_r(i)+1)*x[j*ldx+i] - xsum[b*xsb+j] for b < nb (>= 1), r < 4, j < %d, row r at w + r*ldw; the codes must be valid (no code 3: not checked).", name, cols))
	t := newGemvTile(c, name, 4, false)
	m := halves(c, 0x0C0C0C0C, 0x03030303)
	var quads reg.VecVirtual // xsum[j] to lane j's four rows
	if cols == 4 {
		quads = c.ZMM()
		c.VPMOVZXBD(vconst(c, "gemvQuadIdx", [8]uint32{0, 0x01010101, 0x02020202, 0x03030303}), quads)
	}
	po, ps, nb := loadArg(c, "out"), loadArg(c, "xsum"), loadArg(c, "nb")
	c.Label(name + "block")
	acc := zeroZ(c, 4*cols) // acc[r*cols+j]
	t.n = loadArg(c, "gpb")
	shiftedLoop(c, t, m, 4, cols, acc)
	ldc := loadArg(c, "ldc")
	c.SHLQ(operand.Imm(2), ldc)
	ldc3 := times3(c, ldc)
	if cols == 4 { // lane j: column j's four rows
		var byCol [4][]reg.VecVirtual
		for j := range byCol {
			byCol[j] = []reg.VecVirtual{acc[j], acc[4+j], acc[8+j], acc[12+j]}
		}
		v, xs := hsum16Shifted(c, byCol), c.ZMM()
		c.VMOVDQU32(mem(ps, 0), xs.AsX())
		c.VPERMD(xs, quads, xs)
		c.VPSUBD(xs, v, v)
		storeLanes(c, v, rowAddrs(po, ldc, ldc3, 0))
	} else {
		xs := c.XMM()
		c.VPBROADCASTD(mem(ps, 0), xs)
		v := laneSum(c, pairSums(c, acc), true)
		c.VPSUBD(xs, v, v)
		c.VMOVDQU32(v, mem(po, 0))
	}
	step := loadArg(c, "ldb")
	c.SHLQ(operand.Imm(2), step)
	c.ADDQ(step, po)
	step = loadArg(c, "xsb")
	c.SHLQ(operand.Imm(2), step)
	c.ADDQ(step, ps)
	c.DECQ(nb)
	c.JNZ(operand.LabelRef(name + "block"))
	vzeroRet(c)
}

// gemvI8VNNIPairs emits gemvI8VNNIp<rows>c1 (suffix v without check): what
// gemvI8VNNI's one-column tile r<rows>c1 computes (same arguments, same
// results), two groups g, g+1 a step. Per row the two groups' 64 bytes of
// codes come in one plain ZMM load: gemvI8VNNI's broadcast loads cost a
// vector operation each on Zen 4, where VBROADCASTI64X4 + 2 VPANDD + 2
// VPDPBUSD peak at 310 Gops/s and VMOVDQU64 + 2 VPANDD + 2 VPDPBUSD at 460,
// as VPDPBUSD alone (BenchmarkPeak's loops with the loads added), and one
// column has no other columns to spread it over. Each of the four ANDs
// (masks 0xC0, 0x30, 0x0C, 0x03) leaves code(32q+j) times 4^(3-q) in byte
// j of either half, paired with values 32q.. of g in the low half and of
// g+1 in the high half (a 64-byte load and a VINSERTI64X4 from memory,
// once for all rows), into an accumulator per row and q; at the end VPSRAD
// takes the factor out (every lane a multiple of it) and the four are
// added. An odd last group is one more step over the low 32 bytes (masked
// zeroing loads: nothing past the group is read). 4096 x 4096 from L3, one
// thread: 0.115 ms with the broadcasting r4c1v tile, 0.096 with p4c1v.
// Loading the activations' low half with a masked 32-byte load (no
// cache-line split at q = 1, 3) was slower: 0.107-0.117 ms. |lane| <=
// 4*2*64*128 per step stays below 2^31 for up to 16384 groups.
func gemvI8VNNIPairs(c *build.Context, rows int, check bool) {
	t := gemvBegin(c, "gemvI8VNNIp", rows, 1, check)
	var masks [4]reg.VecVirtual
	for q := range masks {
		masks[q] = bcstZ32(c, 0xC0C0C0C0>>(2*q))
	}
	acc := make([][]reg.VecVirtual, rows) // acc[r][q]
	for r := range acc {
		acc[r] = zeroZ(c, 4)
	}
	var three reg.VecVirtual
	if check {
		three = zeroZ(c, 1)[0]
	}
	var low reg.Register // the odd last group: a mask of the low 32 bytes
	step := func(load func(g reg.VecVirtual, r int), pair bool) {
		g := make([]reg.VecVirtual, rows)
		for r := range g {
			g[r] = c.ZMM()
			load(g[r], r)
			if check {
				orCode3(c, g[r], three, c.ZMM())
			}
		}
		for q := range 4 {
			xq := c.ZMM()
			if pair { // values 32q.. of g, then of g+1 in the high half
				c.VMOVDQU8(mem(t.px, 32*q), xq)
				c.VINSERTI64X4(operand.Imm(1), mem(t.px, groupValues+32*q), xq, xq)
			} else {
				c.VMOVDQU8_Z(mem(t.px, 32*q), low, xq)
			}
			for r := range g {
				a := c.ZMM()
				c.VPANDD(masks[q], g[r], a)
				c.VPDPBUSD(xq, a, acc[r][q])
			}
		}
	}
	pairs := c.GP64()
	c.MOVQ(t.n, pairs)
	c.SHRQ(operand.Imm(1), pairs)
	c.JZ(operand.LabelRef(t.name + "odd"))
	repeat(c, t.name+"loop", pairs, func() {
		step(func(g reg.VecVirtual, r int) {
			c.PREFETCHT0(t.nextMem(r))
			c.VMOVDQU64(t.rowMem(r), g)
		}, true)
		c.ADDQ(operand.Imm(64), t.pw)
		c.ADDQ(operand.Imm(64), t.pn)
		c.ADDQ(operand.U32(2*groupValues), t.px)
	})
	c.Label(t.name + "odd")
	c.TESTQ(operand.U32(1), t.n)
	c.JZ(operand.LabelRef(t.name + "end"))
	low = c.K()
	c.KMOVD(gpImm(c, 4, 0xFFFFFFFF), low)
	step(func(g reg.VecVirtual, r int) { c.VMOVDQU8_Z(t.rowMem(r), low, g) }, false) // the high half zeroed
	c.Label(t.name + "end")

	sums := make([]reg.VecVirtual, rows)
	for r, a := range acc {
		for q := range 3 {
			c.VPSRAD(operand.Imm(uint64(6-2*q)), a[q], a[q])
		}
		c.VPADDD(a[1], a[0], a[0])
		c.VPADDD(a[3], a[2], a[2])
		c.VPADDD(a[2], a[0], a[0])
		sums[r] = a[0]
	}
	gemvStore(c, sums, rows, 1)
	var flags reg.VecVirtual
	if check { // the flags of both halves in a YMM, as gemvReturn reads them
		flags = c.YMM()
		c.VEXTRACTI64X4(operand.Imm(1), three, flags)
		c.VPORD(three.AsY(), flags, flags) // EVEX: any register
	}
	gemvReturn(c, check, flags)
}

// gemvI8VNNIShifted emits gemvI8VNNIs<rows>c<cols>: what gemvI8VNNI's tile
// of the same size would compute (same arguments, same results), with one
// accumulator per output instead of two. Both halves of a row's broadcast
// group take the same factors: per half,
//
//	a = (bytes >> 4) & [0x0C x32 | 0x03 x32]: 4*code(j)    | code(32+j)
//	b =  bytes       & [0x0C x32 | 0x03 x32]: 4*code(64+j) | code(96+j)
//
// (VPSRLW by 4 on 16-bit lanes: the bits it carries in from the next byte
// are masked off), so the two VPDPBUSD of a row and column add into one
// accumulator whose low eight lanes carry 4 and high eight 1 times the
// sums; at the end hsum16Shifted adds each output's lanes and takes the
// factor out (a row's four outputs, one 16-byte store). One more vector
// operation per row and group than gemvI8VNNI's, for half its
// accumulators: room for a 4-row, 4-column tile (16 accumulators), whose
// end costs a quarter as much per output as the 2x4 tile's (K of 1024: 8%
// faster; 4096: 1-2%). |lane| <= 2*4*8*128 per group stays below 2^31 for
// up to 16384 groups.
func gemvI8VNNIShifted(c *build.Context, rows, cols int, check bool) {
	if rows != 4 || cols != 4 {
		panic("gemvI8VNNIShifted: 4x4 only")
	}
	t := gemvBegin(c, "gemvI8VNNIs", rows, cols, check)
	m := halves(c, 0x0C0C0C0C, 0x03030303)
	acc := zeroZ(c, rows*cols) // acc[r*cols+j]
	t.zeroCheck(c)
	shiftedLoop(c, t, m, rows, cols, acc)
	var byRow [4][]reg.VecVirtual // lane r: row r's four columns
	for r := range byRow {
		byRow[r] = acc[4*r : 4*r+4]
	}
	v, xs := hsum16Shifted(c, byRow), c.ZMM()
	c.VBROADCASTI32X4(mem(loadArg(c, "xsum"), 0), xs)
	c.VPSUBD(xs, v, v)
	po, ldo := loadArg(c, "out"), loadArg(c, "ldo")
	c.SHLQ(operand.Imm(2), ldo)
	storeLanes(c, v, rowAddrs(po, ldo, times3(c, ldo), 0))
	gemvReturn(c, check, t.three)
}

// storeLanes stores v's four 128-bit lanes at at[0..3].
func storeLanes(c *build.Context, v reg.VecVirtual, at [4]operand.Mem) {
	c.VMOVDQU32(v.AsX(), at[0])
	for l := 1; l < 4; l++ {
		c.VEXTRACTI32X4(operand.Imm(uint64(l)), v, at[l])
	}
}

// shiftedLoop emits gemvI8VNNIShifted's loop over t.n groups (label
// t.name+"loop"): per row the broadcast group shifted and masked with m
// into a and b, per column two VPDPBUSD into acc[r*cols+j].
func shiftedLoop(c *build.Context, t *gemvTile, m reg.VecVirtual, rows, cols int, acc []reg.VecVirtual) {
	repeat(c, t.name+"loop", t.n, func() {
		var a, b [4]reg.VecVirtual
		for r := range rows {
			g := t.loadRow(c, r)
			a[r], b[r] = c.ZMM(), c.ZMM()
			c.VPSRLW(operand.Imm(4), g, a[r])
			c.VPANDD(m, a[r], a[r])
			c.VPANDD(m, g, b[r])
		}
		for j := range cols {
			z0, z1 := c.ZMM(), c.ZMM()
			c.VMOVDQU8(t.colMem(j, 0), z0)
			c.VMOVDQU8(t.colMem(j, 64), z1)
			for r := range rows {
				c.VPDPBUSD(z0, a[r], acc[r*cols+j])
				c.VPDPBUSD(z1, b[r], acc[r*cols+j])
			}
		}
		t.advance(c)
	})
}

// halves returns a ZMM holding lo in each 32-bit lane of its low 256 bits
// and hi in each of its high 256 bits.
func halves(c *build.Context, lo, hi uint32) reg.VecVirtual {
	z := bcstZ32(c, lo)
	h := c.YMM()
	c.VPBROADCASTD(gpImm(c, 4, uint64(hi)), h)
	c.VINSERTI64X4(operand.Imm(1), h, z, z)
	return z
}

// gemvI8VNNI emits gemvI8VNNIr<rows>c<cols>: out[r*ldo+j] = sum_i
// (w_r(i)+1)*x[j*ldx+i] - xsum[j] for r < rows, j < cols over ng whole
// groups (at most 16384), row r's codes at w + r*ldw; returning non-zero
// for a code 3 with check, else (name suffix v) 0 without looking.
func gemvI8VNNI(c *build.Context, rows, cols int, check bool) {
	t := gemvBegin(c, "gemvI8VNNIr", rows, cols, check)
	m0 := halves(c, 0xC0C0C0C0, 0x30303030)
	m1 := halves(c, 0x0C0C0C0C, 0x03030303)
	acc := make([][2]reg.VecVirtual, rows*cols) // acc[r*cols+j]
	for i := range acc {
		z := zeroZ(c, 2)
		acc[i] = [2]reg.VecVirtual{z[0], z[1]}
	}
	t.zeroCheck(c)
	repeat(c, t.name+"loop", t.n, func() {
		var a, b [4]reg.VecVirtual
		for r := range rows {
			g := t.loadRow(c, r)
			a[r], b[r] = c.ZMM(), c.ZMM()
			c.VPANDD(m0, g, a[r])
			c.VPANDD(m1, g, b[r])
		}
		for j := range cols {
			var x0, x1 operand.Op = t.colMem(j, 0), t.colMem(j, 64)
			if rows > 1 { // load once for every row
				z0, z1 := c.ZMM(), c.ZMM()
				c.VMOVDQU8(x0, z0)
				c.VMOVDQU8(x1, z1)
				x0, x1 = z0, z1
			}
			for r := range rows {
				c.VPDPBUSD(x0, a[r], acc[r*cols+j][0])
				c.VPDPBUSD(x1, b[r], acc[r*cols+j][1])
			}
		}
		t.advance(c)
	})

	// Take the factors out and add the two accumulators of each output.
	s0 := halves(c, 6, 4)
	s1 := halves(c, 2, 0)
	sums := make([]reg.VecVirtual, len(acc))
	for i, p := range acc {
		c.VPSRAVD(s0, p[0], p[0])
		c.VPSRAVD(s1, p[1], p[1])
		c.VPADDD(p[1], p[0], p[0])
		sums[i] = p[0]
	}
	gemvStore(c, sums, rows, cols)
	gemvReturn(c, check, t.three)
}

// gemvStore writes the tile's outputs: out[r*ldo+j] = the sum of the 16
// lanes of sums[r*cols+j] - xsum[j].
func gemvStore(c *build.Context, sums []reg.VecVirtual, rows, cols int) {
	po, ldo := loadArg(c, "out"), loadArg(c, "ldo")
	c.SHLQ(operand.Imm(2), ldo)
	ldo3 := times3(c, ldo)
	outMem := func(i int) operand.Mem { // output i = r*cols+j
		r, j := i/cols, i%cols
		return rowAddrs(po, ldo, ldo3, 4*j)[r]
	}
	// xsum in the order of the outputs of each hsum4: (r, 0..3) for four
	// columns, (r, 0), (r, 1), (r+1, 0), (r+1, 1) for two, rows for one.
	ps := loadArg(c, "xsum")
	xs := c.XMM()
	switch cols {
	case 4:
		c.VMOVDQU32(mem(ps, 0), xs)
	case 2:
		c.VPBROADCASTQ(mem(ps, 0), xs)
	default:
		c.VPBROADCASTD(mem(ps, 0), xs)
	}
	for i := 0; i < len(sums); i += 4 {
		v := hsum4(c, sums[i:min(i+4, len(sums))])
		c.VPSUBD(xs, v, v)
		m := min(4, len(sums)-i)
		if cols == 4 && m == 4 { // a row's four outputs are adjacent
			c.VMOVDQU32(v, outMem(i))
			continue
		}
		for l := range m {
			t := v
			if l > 0 {
				t = c.XMM()
				c.VPSHUFD(operand.Imm(uint64(l)), v, t)
			}
			c.VMOVD(t, outMem(i+l))
		}
	}
}

// gemvTile is what the body of one GEMV tile function works with: its
// name, the pointer and count registers the loop advances, the addresses
// of the rows and columns, and the code-3 flags (with check).
type gemvTile struct {
	name      string
	check     bool
	pw, px, n reg.Register
	pn        reg.Register // pw + rows*ldw: the next tile's rows
	rowMem    func(r int) operand.Mem
	nextMem   func(r int) operand.Mem
	colMem    func(j, disp int) operand.Mem
	three     reg.VecVirtual
}

// gemvBegin declares the tile function prefix<rows>c<cols> (suffix v
// without check) and loads its arguments.
func gemvBegin(c *build.Context, prefix string, rows, cols int, check bool) *gemvTile {
	name := fmt.Sprintf("%s%dc%d", prefix, rows, cols)
	ret := "nonzero return: a code 3."
	if !check {
		name += "v"
		ret = "the codes must be valid (no code 3: not checked); returns 0."
	}
	declareNoescape(c, name, "func(w *byte, ldw int, x *int8, ldx int, ng int, xsum *int32, out *int32, ldo int) uint32",
		fmt.Sprintf("%s sets out[r*ldo+j] = sum (w_r(i)+1)*x[j*ldx+i] - xsum[j] for r < %d, j < %d over 1 <= ng <= 16384 I2_S groups, row r at w + r*ldw; %s", name, rows, cols, ret))
	t := newGemvTile(c, name, rows, check)
	t.n = loadArg(c, "ng")
	return t
}

// newGemvTile loads a tile function's arguments w, ldw, x and ldx (the
// function declared) and returns its gemvTile for rows rows (1, 2 or 4),
// the count t.n left to the caller.
func newGemvTile(c *build.Context, name string, rows int, check bool) *gemvTile {
	pw, ldw, px, ldx := loadArg(c, "w"), loadArg(c, "ldw"), loadArg(c, "x"), loadArg(c, "ldx")
	ldw3, ldx3 := times3(c, ldw), times3(c, ldx)
	if rows != 1 && rows != 2 && rows != 4 {
		panic("newGemvTile: tiles have 1, 2 or 4 rows")
	}
	pn := c.GP64()
	c.LEAQ(operand.Mem{Base: pw, Index: ldw, Scale: uint8(rows)}, pn)
	return &gemvTile{
		name: name, check: check, pw: pw, px: px, pn: pn,
		rowMem:  func(r int) operand.Mem { return rowAddrs(pw, ldw, ldw3, 0)[r] },
		nextMem: func(r int) operand.Mem { return rowAddrs(pn, ldw, ldw3, 0)[r] },
		colMem:  func(j, disp int) operand.Mem { return rowAddrs(px, ldx, ldx3, disp)[j] },
	}
}

// advance moves the row pointers on by one group and the column pointer
// by its 128 values.
func (t *gemvTile) advance(c *build.Context) {
	c.ADDQ(operand.Imm(32), t.pw)
	c.ADDQ(operand.Imm(32), t.pn)
	c.ADDQ(operand.U32(groupValues), t.px)
}

// zeroCheck zeroes the code-3 flags (with check).
func (t *gemvTile) zeroCheck(c *build.Context) {
	if t.check {
		t.three = c.YMM()
		c.VPXORD(t.three, t.three, t.three)
	}
}

// loadRow prefetches the next tile's row r at the same group and returns
// row r's next group broadcast to both halves of a ZMM, OR-ing its code-3
// pairs into the flags (with check: VPADDB doubling the low half's bytes,
// VPTERNLOGD OR-ing bytes & 2*bytes).
func (t *gemvTile) loadRow(c *build.Context, r int) reg.VecVirtual {
	c.PREFETCHT0(t.nextMem(r))
	g := c.ZMM()
	c.VBROADCASTI64X4(t.rowMem(r), g)
	if t.check {
		orCode3(c, g.AsY(), t.three, c.YMM())
	}
	return g
}

// orCode3 ORs into three the code-3 pairs of codes (three, codes and the
// scratch register tmp of one width): codes & 2*codes (VPADDB doubling
// each byte into tmp, VPTERNLOGD), whose odd bits mark a pair of two ones.
func orCode3(c *build.Context, codes, three, tmp reg.Register) {
	c.VPADDB(codes, codes, tmp)
	c.VPTERNLOGD(operand.Imm(0xF8), tmp, codes, three) // three |= codes & tmp
}

// gemvReturn returns non-zero when an odd bit of three is set (a code 3
// seen; check), else 0.
func gemvReturn(c *build.Context, check bool, three reg.VecVirtual) {
	r := c.GP32()
	if check {
		mask := c.YMM()
		c.VPBROADCASTD(gpImm(c, 4, 0xAAAAAAAA), mask)
		k := c.K()
		c.VPTESTMD(mask, three, k)
		c.KMOVW(k, r)
	} else {
		c.XORL(r, r)
	}
	vzeroReturn(c, r)
}

// hsum4 returns an XMM whose lane l is the sum of the 16 int32 lanes of
// v[l] (1 to 4 ZMM; lanes past len(v) hold sums of v[0]): pairSums, then
// the four 128-bit lanes added.
func hsum4(c *build.Context, v []reg.VecVirtual) reg.VecVirtual {
	return laneSum(c, pairSums(c, v), false)
}

// pairSums returns a ZMM whose 128-bit lane L holds in its int32 lane l
// the sum of v[l]'s four int32 lanes in lane L (1 to 4 ZMM; lanes past
// len(v) hold sums of v[0]): two rounds of unpacking pairs.
func pairSums(c *build.Context, v []reg.VecVirtual) reg.VecVirtual {
	for len(v) < 4 {
		v = append(v, v[0])
	}
	pair := func(lo, hi func(...operand.Op), x, y reg.VecVirtual) reg.VecVirtual {
		t, u := c.ZMM(), c.ZMM()
		lo(y, x, t)
		hi(y, x, u)
		c.VPADDD(u, t, t)
		return t
	}
	a := pair(c.VPUNPCKLDQ, c.VPUNPCKHDQ, v[0], v[1]) // per 128-bit lane: v0 v1 v0 v1
	b := pair(c.VPUNPCKLDQ, c.VPUNPCKHDQ, v[2], v[3])
	return pair(c.VPUNPCKLQDQ, c.VPUNPCKHQDQ, a, b) // per 128-bit lane: v0 v1 v2 v3
}

// laneSum returns an XMM holding the sum of s's four 128-bit lanes; with
// shifted, the low two (shiftedLoop's four-times sums, multiples of 4)
// arithmetically shifted right by 2 first: one VPSRAD on 8 lanes for
// four accumulators' VPSRAVD.
func laneSum(c *build.Context, s reg.VecVirtual, shifted bool) reg.VecVirtual {
	h := c.YMM()
	c.VEXTRACTI64X4(operand.Imm(1), s, h)
	lo := s.AsY()
	if shifted {
		lo = c.YMM()
		c.VPSRAD(operand.Imm(2), s.AsY(), lo)
	}
	c.VPADDD(h, lo, h)
	x := c.XMM()
	c.VEXTRACTI32X4(operand.Imm(1), h, x)
	c.VPADDD(x, h.AsX(), x)
	return x
}

// hsum16Shifted returns a ZMM whose 128-bit lane i holds, in its int32
// lane l, the sum of the 16 lanes of v[i][l] (four groups of four ZMM), each
// ZMM's low eight lanes carrying four times its sums (shiftedLoop's
// accumulators): pairSums per group, then the groups' lanes gathered in
// pairs (VSHUFI64X2), the four-times halves shifted right by 2 (exact:
// sums of multiples of 4; |sum| <= 4*2*4*8*128 per group, below 2^31 for
// up to 16384 groups) and added to the others. 47 vector operations for
// the 16 outputs, against 68 for VPSRAVD each and four hsum4.
func hsum16Shifted(c *build.Context, v [4][]reg.VecVirtual) reg.VecVirtual {
	var s [4]reg.VecVirtual
	for i := range s {
		s[i] = pairSums(c, v[i])
	}
	// fold2 returns x.L0/4 + x.L2, x.L1/4 + x.L3, y.L0/4 + y.L2, y.L1/4 + y.L3.
	fold2 := func(x, y reg.VecVirtual) reg.VecVirtual {
		lo, hi := c.ZMM(), c.ZMM()
		c.VSHUFI64X2(operand.Imm(0x44), y, x, lo) // x.L0 x.L1 y.L0 y.L1
		c.VSHUFI64X2(operand.Imm(0xEE), y, x, hi) // x.L2 x.L3 y.L2 y.L3
		c.VPSRAD(operand.Imm(2), lo, lo)
		c.VPADDD(hi, lo, lo)
		return lo
	}
	a, b := fold2(s[0], s[1]), fold2(s[2], s[3])
	p, q := c.ZMM(), c.ZMM()
	c.VSHUFI64X2(operand.Imm(0x88), b, a, p) // a.L0 a.L2 b.L0 b.L2
	c.VSHUFI64X2(operand.Imm(0xDD), b, a, q) // a.L1 a.L3 b.L1 b.L3
	c.VPADDD(q, p, p)
	return p
}
