package gemm

import (
	"fmt"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// DepthwiseKernels is one family's kernels of the depthwise convolution
// (groups == C): the op "conv_dw" (DepthwiseOp), which gokern/ops/conv2d's
// depthwise kernel runs on one channel's band of output positions. Channels
// are independent, so the vectors run over consecutive output positions of
// one channel: conv2d lays the input out so that every tap (kh, kw) of an
// output run reads a run of consecutive inputs at its own offset (see
// conv2d's depthwise.go), and the kernels add every tap into a vector of
// sums before storing it.
type DepthwiseKernels struct {
	Family cpu.Family
	// TapsF32 sets dst[i] += w[0]*x[offs[0]+i] + w[1]*x[offs[1]+i] + ...
	// for i < len(dst), adding the taps one after another in order, each
	// product fused into its add or not: conv2d passes weights -1, 0, +1,
	// whose products are exact, so both round the same as dst[i] ± x.
	// len(offs) == len(w) >= 1, offsets >= 0, len(x) >= max(offs)+len(dst).
	TapsF32 func(dst, x []float32, offs []int, w []float32)
	// TapsI8 sets dst[i] += x[offs[t]+i] for t < npos and -= it for the
	// taps t >= npos (int32, exact, so in any order), i < len(dst).
	// len(offs) >= 1, 0 <= npos <= len(offs), offsets >= 0,
	// len(x) >= max(offs)+len(dst).
	TapsI8 func(dst []int32, x []int8, offs []int, npos int)

	// Lanes is the channels a vector of the lanes kernels below holds (0:
	// the family has none; see depthwise_lanes.go). Positions are
	// position-major: x[p*Lanes+l] is channel l at position p.
	Lanes int
	// LanesF32 sets, for r < rows, i < n and l < Lanes,
	// dst[(r*n+i)*Lanes+l] to s (mode 0), float32(s*sc[l]) (mode 1) or
	// float32(s*sc[l]) + bias[l] (mode 3: the float32 fold's arithmetic),
	// with mode bit 4 s/div[l] first (modes 5, 7: the int8 fold's), s the
	// sum over t of w[t*Lanes+l] * x[r*xrow+i*stride*Lanes+offs[t]+l] from
	// +0 in the order of the taps (fused or not: the weights are -1, 0,
	// +1). len(offs) >= 1, n, rows, stride >= 1; every read within x; div,
	// sc and bias hold Lanes floats where the mode reads them.
	LanesF32 func(dst, x []float32, offs []int, w []float32, stride, n, rows, xrow int, div, sc, bias []float32, mode int)
	// LanesRowsF32 is LanesF32 for stride 1 and the taps of a kh x kw
	// kernel with column dilation 1, at offsets r*khStep + c*Lanes (row r,
	// column c) in that order, faster (each input vector loaded once per
	// kernel row); it returns false, doing nothing, where the family has no
	// such kernel (kw, or n below its run of positions): then LanesF32.
	LanesRowsF32 func(dst, x, w []float32, kh, kw, khStep, n, rows, xrow int, div, sc, bias []float32, mode int) bool
	// Interleave sets dst[pos[i]+l] = src[l*ld+i] for i < len(pos),
	// l < Lanes (Lanes rows ld apart to position-major vectors at pos);
	// InterleaveI8 the same from int8 (exact in float32, so that
	// LanesF32's sums of int8 values are exact integers below 2^24);
	// Deinterleave sets dst[l*ld+i] = src[i*Lanes+l] for i < n.
	Interleave   func(dst, src []float32, ld int, pos []int)
	InterleaveI8 func(dst []float32, src []int8, ld int, pos []int)
	Deinterleave func(dst []float32, ld int, src []float32, n int)
}

// DepthwiseOp is the registry's op "conv_dw"; the plain Go loops are its
// oracle.
var DepthwiseOp = cpu.NewOp("conv_dw", &DepthwiseKernels{Family: cpu.Generic,
	TapsF32: tapsF32Generic, TapsI8: tapsI8Generic})

// DepthwiseFamilies returns every registered conv_dw family usable on this
// CPU (for tests and benchmarks).
func DepthwiseFamilies() []*DepthwiseKernels { return DepthwiseOp.Impls() }

// checkTaps panics unless the arguments of a Taps call hold what the
// kernels read (the assembly reads them unchecked).
func checkTaps(n, nx int, offs []int, nw, npos int) {
	if len(offs) < 1 || nw >= 0 && nw != len(offs) || npos < 0 || npos > len(offs) {
		panic(fmt.Sprintf("gemm: depthwise taps: %d offsets, %d weights, npos %d", len(offs), nw, npos))
	}
	for _, o := range offs {
		if o < 0 || o+n > nx {
			panic(fmt.Sprintf("gemm: depthwise taps: offset %d for %d outputs, x has %d", o, n, nx))
		}
	}
}

func tapsF32Generic(dst, x []float32, offs []int, w []float32) {
	checkTaps(len(dst), len(x), offs, len(w), 0)
	for i := range dst {
		s := dst[i]
		for t, o := range offs {
			s += w[t] * x[o+i]
		}
		dst[i] = s
	}
}

func tapsI8Generic(dst []int32, x []int8, offs []int, npos int) {
	checkTaps(len(dst), len(x), offs, -1, npos)
	for i := range dst {
		s := dst[i]
		for _, o := range offs[:npos] {
			s += int32(x[o+i])
		}
		for _, o := range offs[npos:] {
			s -= int32(x[o+i])
		}
		dst[i] = s
	}
}
