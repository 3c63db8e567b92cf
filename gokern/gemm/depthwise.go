package gemm

import (
	"fmt"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// DepthwiseKernels is one family's row kernels of the depthwise
// convolution (groups == C): the op "conv_dw" (DepthwiseOp), which
// gokern/ops/conv2d's depthwise kernel runs for each ternary weight of a
// channel on a run of output positions of one row. Channels are
// independent, so the vectors run over consecutive output positions of one
// channel: stride 1 reads consecutive inputs; conv2d splits a stride-2 row
// into its even and odd columns first, so that it does too.
type DepthwiseKernels struct {
	Family cpu.Family
	// AxpyF32 sets dst[i] += w*x[i] for i < len(dst) (len(x) >= len(dst)),
	// fused or not: conv2d passes w = -1, 0 or +1, whose products are
	// exact, so both round the same as dst[i] ± x[i].
	AxpyF32 func(dst, x []float32, w float32)
	// AddI8 and SubI8 set dst[i] += x[i] and dst[i] -= x[i] (int32, exact)
	// for i < len(dst) (len(x) >= len(dst)).
	AddI8, SubI8 func(dst []int32, x []int8)
}

// DepthwiseOp is the registry's op "conv_dw"; the plain Go loops are its
// oracle.
var DepthwiseOp = cpu.NewOp("conv_dw", &DepthwiseKernels{Family: cpu.Generic,
	AxpyF32: axpyF32Generic, AddI8: addI8Generic, SubI8: subI8Generic})

// DepthwiseFamilies returns every registered conv_dw family usable on this
// CPU (for tests and benchmarks).
func DepthwiseFamilies() []*DepthwiseKernels { return DepthwiseOp.Impls() }

// checkDW panics unless x holds the n inputs the kernels read (the
// assembly reads them unchecked).
func checkDW(n, nx int) {
	if nx < n {
		panic(fmt.Sprintf("gemm: depthwise row: %d outputs, %d inputs", n, nx))
	}
}

func axpyF32Generic(dst, x []float32, w float32) {
	checkDW(len(dst), len(x))
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] += w * v
	}
}

func addI8Generic(dst []int32, x []int8) {
	checkDW(len(dst), len(x))
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] += int32(v)
	}
}

func subI8Generic(dst []int32, x []int8) {
	checkDW(len(dst), len(x))
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] -= int32(v)
	}
}
