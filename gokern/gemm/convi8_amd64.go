//go:build !noasm && amd64

package gemm

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// The conv_i8 sets (convi8.go): the AVX2 implicit GEMM (VPMADDUBSW into
// int16, _gen/implicit_avx2.go) and the avx512vnni one (VPDPBUSD on ZMM,
// _gen/implicit_vnni.go); the avx512vnni one writes 8-channel runs of its
// input with quantU8x8AVX512 (16 pixels a block), the rest as AVX2 does,
// and both turn their tiles into rows with tileRowsAVX2.
var (
	_ = ConvI8Op.Register(cpu.AVX2, &ConvI8{Family: cpu.AVX2, Implicit: implicitI8AVX2Kernel,
		QuantU8x16: quantU8x16AVX2Kernel, QuantU8x8: quantU8x8AVX2Kernel, QuantU8x4: quantU8x4AVX2Kernel})
	_ = ConvI8Op.Register(cpu.AVX512VNNI, &ConvI8{Family: cpu.AVX512VNNI, Implicit: implicitI8VNNIKernel,
		ImplicitPair: implicitI8VNNIPairKernel, QuantU8x16: quantU8x16AVX512Kernel, QuantU8x8: quantU8x8AVX512Kernel,
		QuantU8x4: quantU8x4AVX2Kernel})
)

// quantU8x16AVX2Kernel is QuantU8x16 as two quantU8x8AVX2Kernel calls.
func quantU8x16AVX2Kernel(dst []byte, src []float32, hw, w, cp int, a float32) {
	checkQuantU8(len(dst), len(src), hw, w, cp, 16, 16)
	quantU8x8AVX2Kernel(dst, src, hw, w, cp, a)
	quantU8x8AVX2Kernel(dst[8:], src[8*hw:], hw, w, cp, a)
}

// quantU8x16AVX512Kernel runs quantU8x16AVX512 over the row's whole blocks
// of 16 pixels, prefetching the rows two calls (32 channels) ahead; a
// partial last block is done again from pixel w-16, and rows narrower than
// 16 pixels go through quantU8x8AVX512Kernel twice.
func quantU8x16AVX512Kernel(dst []byte, src []float32, hw, w, cp int, a float32) {
	checkQuantU8(len(dst), len(src), hw, w, cp, 16, 16)
	if w < 16 {
		quantU8x8AVX512Kernel(dst, src, hw, w, cp, a)
		quantU8x8AVX512Kernel(dst[8:], src[8*hw:], hw, w, cp, a)
		return
	}
	pf := 2 * 16 * 4 * hw
	quantU8x16AVX512(unsafe.SliceData(dst), unsafe.SliceData(src), hw, w/16, cp, a, pf)
	if w%16 != 0 {
		quantU8x16AVX512(&dst[(w-16)*cp], &src[w-16], hw, 1, cp, a, pf)
	}
}

// quantU8x8AVX512Kernel runs quantU8x8AVX512 over the row's whole blocks
// of 16 pixels (prefetching as quantU8x8AVX2Kernel does); a partial last
// block is done again from pixel w-16 (rewriting some pixels with the same
// bytes), and rows narrower than 16 pixels go through quantU8x8AVX2Kernel.
func quantU8x8AVX512Kernel(dst []byte, src []float32, hw, w, cp int, a float32) {
	checkQuantU8(len(dst), len(src), hw, w, cp, 8, 8)
	if w < 16 {
		quantU8x8AVX2Kernel(dst, src, hw, w, cp, a)
		return
	}
	pf := quantPrefetch * 4 * hw
	quantU8x8AVX512(unsafe.SliceData(dst), unsafe.SliceData(src), hw, w/16, cp, a, pf)
	if w%16 != 0 {
		quantU8x8AVX512(&dst[(w-16)*cp], &src[w-16], hw, 1, cp, a, pf)
	}
}

// implicitTileFn is the shape of the implicit kernels' assembly: ntile
// tiles of ImplicitOC channels x ImplicitPix pixels, pixel-major sums into t.
type implicitTileFn func(w *int8, x *byte, px *int, ntile int, segs *int32, nseg int, t *int32)

// implicitChunk is the most pixels per assembly call: its tiles go
// through the caller's scratch (a block's tiles in each half) before
// tileRowsAVX2 turns them into rows (a buffer on the stack here would be
// cleared on every call: 6 KB, ~10% of a 1x1 64->256 call's kernel time).
const implicitChunk = ImplicitScratch / (2 * ImplicitOC)

func implicitI8AVX2Kernel(w []int8, x []byte, px []int, segs []int32, corr *[ImplicitOC]int32, t []int32, ldt int, scratch []int32) {
	implicitRows(implicitI8AVX2, w, x, px, segs, corr, t, ldt, scratch)
}

func implicitI8VNNIKernel(w []int8, x []byte, px []int, segs []int32, corr *[ImplicitOC]int32, t []int32, ldt int, scratch []int32) {
	implicitRows(implicitI8VNNI, w, x, px, segs, corr, t, ldt, scratch)
}

// implicitI8VNNIPairKernel is the ImplicitI8Pair contract on
// implicitI8VNNIPair.
func implicitI8VNNIPairKernel(w []int8, blen int, x []byte, px []int, segs []int32, corr *[2][ImplicitOC]int32, t []int32, ldt int, scratch []int32) {
	w0, _, c0, c1, t0, t1 := implicitPairBlocks(w, blen, corr, t, ldt)
	// one check covers both blocks: they have the same length, and t1's
	// rows are checked as t0's are (implicitPairBlocks saw t hold t0's)
	checkImplicit(w0, x, px, segs, t1, ldt)
	tiles := scratch[:ImplicitScratch]
	for p0 := 0; p0 < len(px); p0 += implicitChunk {
		n := min(implicitChunk, len(px)-p0)
		implicitI8VNNIPair(unsafe.SliceData(w0), blen, unsafe.SliceData(x), &px[p0], n/ImplicitPix,
			unsafe.SliceData(segs), len(segs)/3, &tiles[0], &tiles[ImplicitScratch/2])
		tilesToRows(t0[p0:], ldt, tiles, n, c0)
		tilesToRows(t1[p0:], ldt, tiles[ImplicitScratch/2:], n, c1)
	}
}

// implicitRows is the ImplicitI8 contract on the assembly tiles of asm:
// chunks of implicitChunk pixels into scratch, then rows less corrections.
func implicitRows(asm implicitTileFn, w []int8, x []byte, px []int, segs []int32, corr *[ImplicitOC]int32, t []int32, ldt int, scratch []int32) {
	checkImplicit(w, x, px, segs, t, ldt)
	tile := scratch[:ImplicitScratch]
	for p0 := 0; p0 < len(px); p0 += implicitChunk {
		n := min(implicitChunk, len(px)-p0)
		asm(unsafe.SliceData(w), unsafe.SliceData(x), &px[p0], n/ImplicitPix,
			unsafe.SliceData(segs), len(segs)/3, &tile[0])
		tilesToRows(t[p0:], ldt, tile, n, corr)
	}
}

// tilesToRows sets t[o*ldt+i] = tile[i*16+o] - corr[o] for i < n: blocks of
// 8 pixels through tileRowsAVX2, the rest one by one.
func tilesToRows(t []int32, ldt int, tile []int32, n int, corr *[ImplicitOC]int32) {
	nb := n / 8
	if nb > 0 {
		tileRowsAVX2(&t[0], ldt, &tile[0], nb, &corr[0])
	}
	for i := 8 * nb; i < n; i++ {
		for o := range ImplicitOC {
			t[o*ldt+i] = tile[i*ImplicitOC+o] - corr[o]
		}
	}
}
