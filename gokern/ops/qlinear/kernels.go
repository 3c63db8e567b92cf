// Package qlinear holds the quantized linear, matmul and conv2d ops of
// bitnet_go.functional: uint8/int8 activations times int8 weights (per
// tensor or per channel), ternary weights as int8 values, and int4/ternary
// weights with one scale per group of K, with fbgemm's (torch's x86
// engine's) integer arithmetic and requantization, bit for bit.
//
// # Arithmetic
//
// For activations q_a (zero point za, scale sa) and weights q_w (zw[n],
// sw[n]), output n of row m is
//
//	acc  = sum_k q_a(m,k) * q_w(n,k)                    (exact, int32)
//	raw  = acc - za*(colsum(n) - K*zw(n)) - zw(n)*rowsum(m)   (int32, wraps as fbgemm's)
//	rf   = float32(raw) + bq(n)                          (bq: the bias in accumulator units)
//	out  = clamp(lrintf(rf * mult(n)) + zo, lo, hi)
//
// with mult(n) = float32(sa*sw(n)) / so in float32 (torch's qlinear.cpp and
// qconv.cpp), bq(n) = bias(n) / float32(sa*sw(n)) for per-channel weights
// and bias(n) * float32(1/float64(sa*sw)) for per-tensor weights (fbgemm's
// AVX2 requantization multiplies by the reciprocal there), lo = zo when
// ReLU is fused, else the output type's least value. Requant (requant.go)
// is the one implementation of this epilogue.
//
// int8 activations are shifted to uint8 (q+128, za+128) and uint8 weights
// (quint8 matmul operands) to int8 (q-128, zw-128): the products of the
// differences are unchanged, so the same uint8 x int8 kernels serve every
// combination exactly.
//
// # Kernels
//
// The integer products run in micro-kernels (Kernels, registry op
// "qlinear_dot"); the generic Go kernels are the oracle of each family.
//
//   - Tile (64 rows and more, and every conv): an 8x32 outer product over
//     packed operands (pack.go): weight panels of 32 channels x k quads,
//     packed once per weight with their column sums and kept in panelCache
//     (a buf.Cache: the codes are compared on each call, so changed codes
//     are repacked), activation tiles of 8 rows x k quads packed per call in
//     parallel (im2col writes them directly), K blocks of kcQuads quads,
//     tasks of 64 rows x 128 channels over par. avx512vnni: per k quad two
//     ZMM of weights, each row's 4 codes broadcast (VPBROADCASTD), VPDPBUSD
//     into 16 ZMM accumulators. avx2: 4x8 quarters, the weights widened
//     (VPMOVSXBW), the activations packed as int16 (VPBROADCASTQ),
//     VPMADDWD + VPADDD, VPHADDD at the end.
//   - Convs (im2col.go): for 3 channels per group and more, K in a
//     channel-quad order (kh, kw, 4 channels), the input rewritten once per
//     call into padded planes of 4-channel words split by stride phase
//     (QuadRow: AVX2 unpacks, 16 inputs at a time where stride 1 and the
//     quads full), so that a tile of 8 consecutive outputs is one 32-byte
//     copy per quad
//     (QuadRun: AVX2, offsets from a per-conv table, row sums from the
//     per-position channel sums); 512 outputs and more pack their tiles
//     task by task (gemm.runFused), and NCHW outputs are stored 16 outputs
//     x 16 channels at a time (Cols16: avx512vnni VPMOVDB and a byte
//     transpose in XMM registers; avx2 packs and a transpose in YMM
//     registers, 8 channels at a time).
//   - Dot4x4 / Dot1x8 (fewer than 64 rows: GEMV): dot products of
//     row-major rows, the weight streamed once as given, the next channel
//     block's rows prefetched (PREFETCHT1); K % KB tails in Go from K >=
//     tailMinK, shorter rows copied padded.
//   - Quant: the requantization of a block of rows of products
//     (Requant.Quant; avx2: 8 channels at a time, avx512vnni 16,
//     VCVTPS2DQ's round to nearest even).
//
// Neither family has the int16 saturation of VPMADDUBSW: VPDPBUSD is exact
// for every uint8 x int8, and VPMADDWD on widened operands too.
package qlinear

import (
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// KB is the k-granularity of the micro-kernels: rows of both operands are
// padded with zeros to a multiple of KB bytes.
const KB = 64

// Kernels is one family's set of dot-product micro-kernels.
type Kernels struct {
	Family cpu.Family
	// Dot4x4 sets c[i*4+j] = sum_{k < kb*KB} a[i*lda+k] * w[j*ldw+k] for
	// i, j < 4 (a: uint8 activations, w: int8 weights; kb >= 1).
	Dot4x4 func(kb int, a []byte, lda int, w []int8, ldw int, c *[16]int32)
	// Dot1x8 sets c[j] = sum_{k < kb*KB} a[k] * w[j*ldw+k] for j < 8.
	Dot1x8 func(kb int, a []byte, w []int8, ldw int, c *[8]int32)
	// Tile sets c[i*ldc+j] (adds to it when add is set), i < MR, j < NR,
	// to the products over kq k quads of a packed activation tile and a
	// weight panel (pack.go; kq >= 1).
	Tile func(kq int, a []byte, w []int8, c []int32, ldc int, add bool)
	// WideA: the activation tiles Tile reads hold int16 codes.
	WideA bool
	// Quant replaces acc[i*ld+j], i < len(rowsums), j < nc, by the output
	// code of channel n0+j for row sum rowsums[i]
	// (r.Quant(r.Raw(acc[i*ld+j], rowsums[i], n0+j), n0+j)); r.BiasQ is not
	// nil. A block of rows a call: a conv task's 64 output positions.
	Quant func(acc []int32, ld int, rowsums []int32, n0, nc int, r *Requant)
	// Cols16 sets out[j*ldo+i] = byte(src[i*lds+j]) for i, j < 16: the
	// transposed store of 16 output positions x 16 channels of codes
	// (values in [-128, 255], as Quant leaves them) into a conv's NCHW
	// planes (nil: gemm.epilogueCols's Go loop).
	Cols16 func(src []int32, lds int, out []byte, ldo int)
	// QuadRun packs a tile of 8 consecutive words of a conv's quad planes
	// (im2col.go): for i < len(offs), dst[32*i:][:32] = the 8 words at
	// src[offs[i]:] (WideA: dst[64*i:][:64] = their 32 bytes, each
	// zero-extended to 16 bits), and rs[r] = sum over j of
	// sum[doffs[j]+r], r < 8 (offsets in [0, maxOff] and [0, maxDoff];
	// nil: Go).
	QuadRun func(src []uint32, offs []int32, maxOff int, dst []byte, sum []int32, doffs []int32, maxDoff int, rs []int32)
	// QuadRow writes n16*16 consecutive positions of c4 full quad planes
	// (im2col.go): out[q*plane+i] = the word of the codes x[(4q+j)*hw+i],
	// j < 4, xored with flip, and sums[i] = the sum of the bytes of those
	// c4 words (nil: Go).
	QuadRow func(x []byte, hw, n16, c4 int, out []uint32, plane int, flip uint32, sums []int32)
}

// KernelOp is the op "qlinear_dot" of the kernel registry.
var KernelOp = cpu.NewOp[*Kernels]("qlinear_dot", &genericKernels)

var genericKernels = Kernels{Family: cpu.Generic, Dot4x4: dot4x4Generic, Dot1x8: dot1x8Generic, Tile: tileGeneric, Quant: quantGeneric,
	Cols16: cols16Generic, QuadRun: quadRunGeneric, QuadRow: quadRowGeneric}

func quadRowGeneric(x []byte, hw, n16, c4 int, out []uint32, plane int, flip uint32, sums []int32) {
	n := 16 * n16
	clear(sums[:n])
	for q := 0; q < c4; q++ {
		r0, r1, r2, r3 := x[4*q*hw:4*q*hw+n], x[(4*q+1)*hw:(4*q+1)*hw+n], x[(4*q+2)*hw:(4*q+2)*hw+n], x[(4*q+3)*hw:(4*q+3)*hw+n]
		row := out[q*plane : q*plane+n]
		for i := range row {
			v := (uint32(r0[i]) | uint32(r1[i])<<8 | uint32(r2[i])<<16 | uint32(r3[i])<<24) ^ flip
			row[i] = v
			sums[i] += byteSum(v)
		}
	}
}

func quadRunGeneric(src []uint32, offs []int32, _ int, dst []byte, sum []int32, doffs []int32, _ int, rs []int32) {
	words := asWords(dst[:32*len(offs)])
	for i, o := range offs {
		copy(words[i*8:i*8+8], src[o:o+8])
	}
	var sums [8]int32
	for _, o := range doffs {
		for r := range sums {
			sums[r] += sum[int(o)+r]
		}
	}
	copy(rs, sums[:])
}

func cols16Generic(src []int32, lds int, out []byte, ldo int) {
	for i := 0; i < 16; i++ {
		row := src[i*lds : i*lds+16]
		for j, v := range row {
			out[j*ldo+i] = byte(v)
		}
	}
}

func tileGeneric(kq int, a []byte, w []int8, c []int32, ldc int, add bool) {
	var acc [MR * NR]int32
	for q := 0; q < kq; q++ {
		aq, wq := a[q*MR*4:(q+1)*MR*4], w[q*NR*4:(q+1)*NR*4]
		for i := 0; i < MR; i++ {
			a0, a1, a2, a3 := int32(aq[i*4]), int32(aq[i*4+1]), int32(aq[i*4+2]), int32(aq[i*4+3])
			for j := 0; j < NR; j++ {
				acc[i*NR+j] += a0*int32(wq[j*4]) + a1*int32(wq[j*4+1]) + a2*int32(wq[j*4+2]) + a3*int32(wq[j*4+3])
			}
		}
	}
	for i := 0; i < MR; i++ {
		row := c[i*ldc : i*ldc+NR]
		for j := range row {
			if add {
				row[j] += acc[i*NR+j]
			} else {
				row[j] = acc[i*NR+j]
			}
		}
	}
}

func dot4x4Generic(kb int, a []byte, lda int, w []int8, ldw int, c *[16]int32) {
	n := kb * KB
	for i := 0; i < 4; i++ {
		ar := a[i*lda : i*lda+n]
		for j := 0; j < 4; j++ {
			wr := w[j*ldw : j*ldw+n]
			var s int32
			for k, v := range ar {
				s += int32(v) * int32(wr[k])
			}
			c[i*4+j] = s
		}
	}
}

func dot1x8Generic(kb int, a []byte, w []int8, ldw int, c *[8]int32) {
	n := kb * KB
	ar := a[:n]
	for j := 0; j < 8; j++ {
		wr := w[j*ldw : j*ldw+n]
		var s int32
		for k, v := range ar {
			s += int32(v) * int32(wr[k])
		}
		c[j] = s
	}
}

func quantGeneric(acc []int32, ld int, rowsums []int32, n0, nc int, r *Requant) {
	for i, rs := range rowsums {
		row := acc[i*ld : i*ld+nc]
		for j, a := range row {
			row[j] = r.Quant(r.Raw(a, rs, n0+j), n0+j)
		}
	}
}
