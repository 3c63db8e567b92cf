//go:build !noasm && amd64

package gemm

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// The conv_dw families (assembly from _gen/depthwise.go): avx2 on YMM
// vectors of 8 positions, avx512 on ZMM vectors of 16; the Go wrappers run
// the last n % lanes positions with the generic loops.
var (
	_ = DepthwiseOp.Register(cpu.AVX2, &DepthwiseKernels{Family: cpu.AVX2,
		AxpyF32: dwAxpy(8, dwAxpyF32Y), AddI8: dwAddSub(8, dwAddI8Y, addI8Generic),
		SubI8: dwAddSub(8, dwSubI8Y, subI8Generic)})
	_ = DepthwiseOp.Register(cpu.AVX512, &DepthwiseKernels{Family: cpu.AVX512,
		AxpyF32: dwAxpy(16, dwAxpyF32Z), AddI8: dwAddSub(16, dwAddI8Z, addI8Generic),
		SubI8: dwAddSub(16, dwSubI8Z, subI8Generic)})
)

// dwAxpy wraps a generated float32 row kernel of lanes positions per
// vector as a checked AxpyF32.
func dwAxpy(lanes int, fn func(dst, x *float32, n int, w float32)) func(dst, x []float32, w float32) {
	return func(dst, x []float32, w float32) {
		n := len(dst)
		checkDW(n, len(x))
		body := n / lanes * lanes
		if body > 0 {
			fn(unsafe.SliceData(dst), unsafe.SliceData(x), body, w)
		}
		if body < n {
			axpyF32Generic(dst[body:], x[body:n], w)
		}
	}
}

// dwAddSub wraps a generated int8 row kernel as a checked AddI8 / SubI8,
// tail runs the last positions.
func dwAddSub(lanes int, fn func(dst *int32, x *int8, n int), tail func(dst []int32, x []int8)) func(dst []int32, x []int8) {
	return func(dst []int32, x []int8) {
		n := len(dst)
		checkDW(n, len(x))
		body := n / lanes * lanes
		if body > 0 {
			fn(unsafe.SliceData(dst), unsafe.SliceData(x), body)
		}
		if body < n {
			tail(dst[body:], x[body:n])
		}
	}
}
