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
// and both fold their tiles into the output with foldTilesAVX2Kernel.
var (
	_ = ConvI8Op.Register(cpu.AVX2, &ConvI8{Family: cpu.AVX2, Implicit: implicitI8AVX2Kernel,
		QuantU8x16: quantU8x16AVX2Kernel, QuantU8x8: quantU8x8AVX2Kernel, QuantU8x4: quantU8x4AVX2Kernel,
		FoldTiles: foldTilesAVX2Kernel, Fence: sfenceAVX2})
	_ = ConvI8Op.Register(cpu.AVX512VNNI, &ConvI8{Family: cpu.AVX512VNNI, Implicit: implicitI8VNNIKernel,
		ImplicitPair: implicitI8VNNIPairKernel, QuantU8x16: quantU8x16AVX512Kernel, QuantU8x8: quantU8x8AVX512Kernel,
		QuantU8x4: quantU8x4AVX2Kernel, FoldTiles: foldTilesAVX2Kernel, Fence: sfenceAVX2})
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

func implicitI8AVX2Kernel(w []int8, x []byte, px []int, segs []int32, t []int32) {
	implicitTiles(implicitI8AVX2, w, x, px, segs, t)
}

func implicitI8VNNIKernel(w []int8, x []byte, px []int, segs []int32, t []int32) {
	implicitTiles(implicitI8VNNI, w, x, px, segs, t)
}

// implicitI8VNNIPairKernel is the ImplicitI8Pair contract on
// implicitI8VNNIPair.
func implicitI8VNNIPairKernel(w []int8, blen int, x []byte, px []int, segs []int32, t0, t1 []int32) {
	w0, _ := implicitPairBlocks(w, blen)
	// one check covers both blocks (they have the same length), t1's
	// length apart
	checkImplicit(w0, x, px, segs, t0)
	if len(t1)/ImplicitOC < len(px) {
		panic("gemm: implicit kernel arguments malformed")
	}
	implicitI8VNNIPair(unsafe.SliceData(w0), blen, unsafe.SliceData(x), &px[0], len(px)/ImplicitPix,
		unsafe.SliceData(segs), len(segs)/3, &t0[0], &t1[0])
}

// implicitTiles is the ImplicitI8 contract on the assembly tiles of asm.
func implicitTiles(asm implicitTileFn, w []int8, x []byte, px []int, segs []int32, t []int32) {
	checkImplicit(w, x, px, segs, t)
	asm(unsafe.SliceData(w), unsafe.SliceData(x), &px[0], len(px)/ImplicitPix, unsafe.SliceData(segs), len(segs)/3, &t[0])
}

// foldTilesAVX2Kernel is FoldTiles: with all 16 channels and plain stores,
// blocks of 8 pixels through foldTilesAVX2 (the pixels past the last whole
// block by the generic code) straight into dst. A partial block of
// channels, or streaming stores, go a row at a time: foldTilesPart pixels
// at a time the tiles become int32 rows in buf (tileRowsAVX2), then each
// row is folded by foldI32AVX2Kernel, or foldI32StreamAVX2Kernel with
// stream. Streaming stores need a row written from start to end while its
// divisions run: 32-byte stores into 8 or 16 rows at once (a block of
// pixels at a time) left lines half written and ran 2x slower than plain
// stores, and a folded buffer copied out with them 1.07-1.28x slower than
// this (1x1 64->256 on 8 samples, Zen 4).
func foldTilesAVX2Kernel(dst []float32, ldd int, t []int32, n, noc int, corr *[ImplicitOC]int32, a float32,
	sc, bias *[ImplicitOC]float32, stream bool, buf []int32) {
	checkFoldTiles(len(dst), ldd, len(t), n, noc, len(buf))
	if noc == ImplicitOC && !stream {
		foldTilesAll(dst, ldd, t, n, corr, a, sc, bias)
		return
	}
	fold := foldI32AVX2Kernel
	if stream {
		fold = foldI32StreamAVX2Kernel
	}
	for i0 := 0; i0 < n; i0 += foldTilesPart {
		m := min(foldTilesPart, n-i0)
		tilesToRows(buf, foldTilesPart, t[i0*ImplicitOC:], m, corr)
		for o := range noc {
			var b float32
			if bias != nil {
				b = bias[o]
			}
			fold(dst[o*ldd+i0:][:m], buf[o*foldTilesPart:][:m], a, sc[o], b, false, bias != nil)
		}
	}
}

// tilesToRows sets rows[o*ldr+i] = t[i*16+o] - corr[o] for i < n, o < 16:
// blocks of 8 pixels through tileRowsAVX2, the rest one by one.
func tilesToRows(rows []int32, ldr int, t []int32, n int, corr *[ImplicitOC]int32) {
	nb := n / 8
	if nb > 0 {
		tileRowsAVX2(&rows[0], ldr, &t[0], nb, &corr[0])
	}
	for i := 8 * nb; i < n; i++ {
		for o := range ImplicitOC {
			rows[o*ldr+i] = t[i*ImplicitOC+o] - corr[o]
		}
	}
}

// foldTilesAll is FoldTiles for all 16 channels with plain stores.
func foldTilesAll(dst []float32, ldd int, t []int32, n int, corr *[ImplicitOC]int32, a float32, sc, bias *[ImplicitOC]float32) {
	mode := 0
	var pb *float32
	if bias != nil {
		mode, pb = 1, &bias[0]
	}
	nb := n / 8
	if nb > 0 {
		foldTilesAVX2(&dst[0], ldd, &t[0], nb, &corr[0], a, &sc[0], pb, mode)
	}
	foldTilesRange(dst, ldd, t, 8*nb, n, ImplicitOC, corr, a, sc, bias)
}
