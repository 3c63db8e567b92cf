package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
)

// The depthwise kernel's SIMD rows (op conv_dw, gemm.DepthwiseKernels):
// depthwise (direct.go) hands a family's row kernel runs of consecutive
// outputs of one row and the consecutive inputs they read.

// dwRow adds w (-1, 0 or +1) times x[i] to dst[i] for i < len(dst)
// (len(x) >= len(dst)).
type dwRow[T elem, A accum] func(dst []A, x []T, w int8)

// dwRows returns the float32 and int8 row kernels of the conv_dw family k,
// or nils for the generic family (depthwise then runs addRow, its oracle).
// The int8 row skips w = 0 (int8 values are finite, so 0*x adds nothing).
func dwRows(k *gemm.DepthwiseKernels) (dwRow[float32, float32], dwRow[int8, int32]) {
	if k == nil || k.Family == cpu.Generic {
		return nil, nil
	}
	f32 := func(dst, x []float32, w int8) { k.AxpyF32(dst, x, float32(w)) }
	i8 := func(dst []int32, x []int8, w int8) {
		switch {
		case w > 0:
			k.AddI8(dst, x)
		case w < 0:
			k.SubI8(dst, x)
		}
	}
	return f32, i8
}

// splitRows writes the input rows that output rows [oh0, oh1) of a
// stride-2 convolution read, each split into its even columns then its odd
// ones, into the same rows of halves (len(halves) >= H*W): input column
// 2j+p of row ih lands at halves[ih*W + halfStart(W, 2j+p)].
func splitRows[T elem](d *Dims, plane, halves []T, oh0, oh1 int) {
	ih0 := max(0, oh0*d.StrideH-d.PadT)
	ih1 := min(d.H, (oh1-1)*d.StrideH-d.PadT+(d.KH-1)*d.DilH+1)
	even := (d.W + 1) / 2
	for ih := ih0; ih < ih1; ih++ {
		in := plane[ih*d.W:][:d.W]
		ev := halves[ih*d.W:][:even]
		od := halves[ih*d.W+even:][:d.W-even]
		for j := range od {
			ev[j] = in[2*j]
			od[j] = in[2*j+1]
		}
		if even > len(od) {
			ev[even-1] = in[d.W-1]
		}
	}
}

// halfStart is the position of input column c in a row of w columns split
// by splitRows: its even columns first, then its odd ones.
func halfStart(w, c int) int {
	if c%2 == 0 {
		return c / 2
	}
	return (w+1)/2 + c/2
}
