package gemm

import (
	"fmt"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// DirectF32Kernels is one family's float32 direct-convolution tile: the op
// "conv_directf" (DirectF32Op), which gokern/ops/conv2d's implicit float32
// path runs for stride-1 convolutions with float32 activations. It is an op
// of its own, apart from "conv_gemm", so that it dispatches by its own
// measurement.
//
// The kernel reads the weights expanded once to float32 (the ternary value
// times its scale), MR output channels interleaved per k (panel element
// (k, r) at w[k*MR+r]), and the activations in place: the input padded to
// (C, Hp, Wp) planes, where output position q = oh*Wp + ow of a stride-1
// convolution reads x[q + offs[k]] for k = (c, kh, kw) (offs[k] = c*Hp*Wp +
// kh*dilH*Wp + kw*dilW), so that consecutive positions are consecutive
// floats and a vector of them is one load. A tile that runs past a row's
// last output (ow >= Wo) computes those columns; the caller drops them.
type DirectF32Kernels struct {
	Family cpu.Family
	MR     int // output channels per panel
	Lanes  int // positions per vector
	NV     int // vectors per tile row at most
	// Tile sets t[r*ldt+j] = bias[r] + sum_{i<k} w[i*MR+r]*x[offs[i]+j]
	// (the sum in order of i, float32, fused or not) for r < MR and
	// j < nv*Lanes, 1 <= nv <= NV; offs is non-decreasing, k >= 1,
	// len(offs) >= k, len(w) >= k*MR, len(bias) >= MR,
	// len(x) >= offs[k-1]+nv*Lanes, len(t) >= (MR-1)*ldt+nv*Lanes.
	Tile func(k int, w, x []float32, offs []int, bias, t []float32, ldt, nv int)
	// Blocked is the channels-in-lanes tile, or nil (then the family has
	// none): BOC output channels by np positions of an input blocked by
	// BlockC channels (position p of offset i: x[offs[i]+p*BlockC+c]),
	// t[p*BOC+o] = bias[o] + sum_{i<n} sum_{c<BlockC}
	// w[(i*BlockC+c)*BOC+o] * x[offs[i]+p*BlockC+c] (in order of i and c)
	// for o < BOC, 1 <= np <= BNP; offs non-decreasing, n >= 1,
	// len(x) >= offs[n-1]+np*BlockC, len(w) >= n*BlockC*BOC,
	// len(bias) >= BOC, len(t) >= np*BOC.
	Blocked  func(n int, w, x []float32, offs []int, bias, t []float32, np int)
	BOC, BNP int // Blocked's output channels and positions at most
	// WinoIn and WinoOut are the Winograd F(2x2, 3x3) transforms of the
	// blocked layout, or nil (then the family has none; Blocked is then
	// nil too or the pair is not used). For tiles t < nt and channels c <
	// BlockC, WinoIn reads the 4x4 pixels d[i][j] = x[i*ld+(2t+j)*BlockC+c]
	// and writes v[(4i+j)*ldv+t*BlockC+c] = (B^T d B)[i][j]; WinoOut reads
	// m[(4i+j)*ldm+t*BOC+o] for i, j < 4 and o < BOC and writes
	// y[i*ldy+(2t+j)*BOC+o] = (A^T m A)[i][j] for i, j < 2, with
	//
	//	B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]
	//
	// (their G is in gokern/ops/conv2d, which transforms the weight).
	// Both compute in float32 in the order of winoInGeneric and
	// winoOutGeneric, so every family gives the same bits. nt >= 1; ld >=
	// (2*nt+2)*BlockC, ldv >= nt*BlockC, ldm >= nt*BOC, ldy >= 2*nt*BOC;
	// len(x) >= 3*ld+(2*nt+2)*BlockC, len(v) >= 15*ldv+nt*BlockC, len(m) >=
	// 15*ldm+nt*BOC, len(y) >= ldy+2*nt*BOC.
	WinoIn  func(nt int, x []float32, ld int, v []float32, ldv int)
	WinoOut func(nt int, m []float32, ldm int, y []float32, ldy int)
	// TBlock transposes a TB x TB block: t[j*ldt+i] = m[i*ldm+j] for i, j
	// < TB (ldm, ldt >= TB; len(m) >= (TB-1)*ldm+TB, len(t) >= (TB-1)*ldt+TB),
	// the whole-block part of Transpose.
	TBlock func(m []float32, ldm int, t []float32, ldt int)
	TB     int
}

// Transpose is the package's Transpose (t[j*ldt+i] = m[i*ldm+j] for i <
// rows, j < nc) with the family's TBlock on whole TB x TB blocks: the
// blocked layouts' channel transposes (conv2d's blockInput, and the
// blocked and Winograd tiles into NCHW).
func (k *DirectF32Kernels) Transpose(t []float32, ldt int, m []float32, ldm, rows, nc int) {
	b := k.TB
	if k.TBlock == nil || rows < b || nc < b {
		Transpose(t, ldt, m, ldm, rows, nc)
		return
	}
	i := 0
	for ; i+b <= rows; i += b {
		j := 0
		for ; j+b <= nc; j += b {
			k.TBlock(m[i*ldm+j:], ldm, t[j*ldt+i:], ldt)
		}
		if j < nc {
			Transpose(t[j*ldt+i:], ldt, m[i*ldm+j:], ldm, b, nc-j)
		}
	}
	if i < rows {
		Transpose(t[i:], ldt, m[i*ldm:], ldm, rows-i, nc)
	}
}

// BlockC is the input channels per block of the channels-in-lanes tiles.
const BlockC = 16

// DirectF32Op is the registry's op "conv_directf"; directF32Generic is its
// oracle (8 channels by 4 vectors of 16 positions, the AVX-512 tile).
var DirectF32Op = cpu.NewOp("conv_directf", &DirectF32Kernels{Family: cpu.Generic, MR: 8, Lanes: 16, NV: 4,
	Tile: directF32Generic, Blocked: directF32BlockedGeneric, BOC: 32, BNP: 14,
	WinoIn: winoInGeneric, WinoOut: winoOutGeneric(32), TBlock: transposeBlockGeneric(16), TB: 16})

// checkDirectF32 panics unless the arguments of a Tile call hold what it
// reads and writes (the assembly kernels read them unchecked).
func checkDirectF32(mr, lanes, maxNV, k int, w, x []float32, offs []int, bias, t []float32, ldt, nv int) {
	cols := nv * lanes
	switch {
	case k < 1 || nv < 1 || nv > maxNV || len(offs) < k || len(w) < k*mr || len(bias) < mr:
		panic(fmt.Sprintf("gemm: direct f32 tile: k=%d nv=%d, %d offsets, %d weights, %d biases", k, nv, len(offs), len(w), len(bias)))
	case offs[0] < 0 || offs[k-1] < offs[0] || len(x) < offs[k-1]+cols:
		panic(fmt.Sprintf("gemm: direct f32 tile: offsets %d..%d, %d columns, x has %d", offs[0], offs[k-1], cols, len(x)))
	case ldt < cols || len(t) < (mr-1)*ldt+cols:
		panic(fmt.Sprintf("gemm: direct f32 tile: ldt=%d for %d columns, t has %d", ldt, cols, len(t)))
	}
}

func directF32Generic(k int, w, x []float32, offs []int, bias, t []float32, ldt, nv int) {
	const mr, lanes = 8, 16
	checkDirectF32(mr, lanes, 4, k, w, x, offs, bias, t, ldt, nv)
	cols := nv * lanes
	for r := range mr {
		row := t[r*ldt:][:cols]
		for j := range row {
			row[j] = bias[r]
		}
	}
	for i := range k {
		xs := x[offs[i]:][:cols]
		for r, wv := range w[i*mr : (i+1)*mr] {
			row := t[r*ldt:][:cols]
			for j, v := range xs {
				row[j] += wv * v
			}
		}
	}
}

// checkBlockedF32 panics unless the arguments of a Blocked call hold what
// it reads and writes.
func checkBlockedF32(boc, bnp, n int, w, x []float32, offs []int, bias, t []float32, np int) {
	switch {
	case n < 1 || np < 1 || np > bnp || len(offs) < n || len(w) < n*BlockC*boc || len(bias) < boc ||
		len(t) < np*boc:
		panic(fmt.Sprintf("gemm: blocked f32 tile: n=%d np=%d, %d offsets, %d weights, %d biases, t %d",
			n, np, len(offs), len(w), len(bias), len(t)))
	case offs[0] < 0 || offs[n-1] < offs[0] || len(x) < offs[n-1]+np*BlockC:
		panic(fmt.Sprintf("gemm: blocked f32 tile: offsets %d..%d, %d positions, x has %d", offs[0], offs[n-1], np, len(x)))
	}
}

func directF32BlockedGeneric(n int, w, x []float32, offs []int, bias, t []float32, np int) {
	const boc = 32
	checkBlockedF32(boc, 14, n, w, x, offs, bias, t, np)
	for p := range np {
		copy(t[p*boc:][:boc], bias)
	}
	for i := range n {
		for c := range BlockC {
			wv := w[(i*BlockC+c)*boc:][:boc]
			for p := range np {
				v := x[offs[i]+p*BlockC+c]
				row := t[p*boc:][:boc]
				for o, wo := range wv {
					row[o] += wo * v
				}
			}
		}
	}
}

// checkWino panics unless a WinoIn (in) or WinoOut call's buffers hold what
// it reads and writes: src (x or m) rows of ld apart, dst (v or y) rows
// ldd apart; per tile a source row spans sw values (two pixels of BlockC
// or BOC values) and a destination row dw.
func checkWino(in bool, oc, nt int, src []float32, ld int, dst []float32, ldd int) {
	srcRows, srcW, dstRows, dstW := 4, (2*nt+2)*BlockC, 16, nt*BlockC
	if !in {
		srcRows, srcW, dstRows, dstW = 16, nt*oc, 2, 2*nt*oc
	}
	if nt < 1 || ld < srcW || ldd < dstW || len(src) < (srcRows-1)*ld+srcW || len(dst) < (dstRows-1)*ldd+dstW {
		panic(fmt.Sprintf("gemm: winograd transform (input %v): nt=%d, ld=%d with %d values, ldd=%d with %d values",
			in, nt, ld, len(src), ldd, len(dst)))
	}
}

// winoInGeneric is WinoIn: per output column j, u[i] = (d B)[i][j] for
// the four rows, then v[.][j] = B^T u.
func winoInGeneric(nt int, x []float32, ld int, v []float32, ldv int) {
	checkWino(true, 0, nt, x, ld, v, ldv)
	for t := range nt {
		for c := range BlockC {
			var d [4][4]float32
			for i := range 4 {
				for j := range 4 {
					d[i][j] = x[i*ld+(2*t+j)*BlockC+c]
				}
			}
			for j := range 4 {
				var u [4]float32
				for i := range 4 {
					u[i] = winoB(d[i], j)
				}
				for i := range 4 {
					v[(4*i+j)*ldv+t*BlockC+c] = winoB(u, i)
				}
			}
		}
	}
}

// winoB is element j of B^T r: r0-r2, r1+r2, r2-r1, r1-r3.
func winoB(r [4]float32, j int) float32 {
	switch j {
	case 0:
		return r[0] - r[2]
	case 1:
		return r[1] + r[2]
	case 2:
		return r[2] - r[1]
	}
	return r[1] - r[3]
}

// winoOutGeneric returns WinoOut for oc channels: r0 = (m0 + m1) + m2 and
// r1 = (m1 - m2) - m3 over m's rows, then the same over each r's columns.
func winoOutGeneric(oc int) func(nt int, m []float32, ldm int, y []float32, ldy int) {
	return func(nt int, m []float32, ldm int, y []float32, ldy int) {
		checkWino(false, oc, nt, m, ldm, y, ldy)
		for t := range nt {
			for o := range oc {
				var r [2][4]float32
				for j := range 4 {
					at := func(i int) float32 { return m[(4*i+j)*ldm+t*oc+o] }
					r[0][j] = at(0) + at(1) + at(2)
					r[1][j] = at(1) - at(2) - at(3)
				}
				for i := range 2 {
					y[i*ldy+2*t*oc+o] = r[i][0] + r[i][1] + r[i][2]
					y[i*ldy+(2*t+1)*oc+o] = r[i][1] - r[i][2] - r[i][3]
				}
			}
		}
	}
}

// checkTBlock panics unless a b x b TBlock call's buffers hold the block.
func checkTBlock(b int, m []float32, ldm int, t []float32, ldt int) {
	if ldm < b || ldt < b || len(m) < (b-1)*ldm+b || len(t) < (b-1)*ldt+b {
		panic(fmt.Sprintf("gemm: transpose block %d: ldm=%d with %d values, ldt=%d with %d values", b, ldm, len(m), ldt, len(t)))
	}
}

// transposeBlockGeneric returns TBlock for b x b blocks.
func transposeBlockGeneric(b int) func(m []float32, ldm int, t []float32, ldt int) {
	return func(m []float32, ldm int, t []float32, ldt int) {
		checkTBlock(b, m, ldm, t, ldt)
		for i := range b {
			for j := range b {
				t[j*ldt+i] = m[i*ldm+j]
			}
		}
	}
}
