//go:build !noasm && amd64

package gemm

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// The conv_dw families (assembly from _gen/depthwise.go): avx2 on YMM
// vectors of 8 positions, avx512 on ZMM vectors of 16, four vectors of sums
// in registers across the taps; the Go wrappers run the last
// len(dst) % lanes positions with the generic loops.
var (
	_ = DepthwiseOp.Register(cpu.AVX2, &DepthwiseKernels{Family: cpu.AVX2,
		TapsF32: dwTapsF32(8, dwTapsF32Y), TapsI8: dwTapsI8(8, dwTapsI8Y)})
	_ = DepthwiseOp.Register(cpu.AVX512, &DepthwiseKernels{Family: cpu.AVX512,
		TapsF32: dwTapsF32(16, dwTapsF32Z), TapsI8: dwTapsI8(16, dwTapsI8Z)})
)

// dwTapsF32 wraps a generated float32 taps kernel of lanes positions per
// vector as a checked TapsF32.
func dwTapsF32(lanes int, fn func(dst, x *float32, offs *int, w *float32, taps, n int)) func(dst, x []float32, offs []int, w []float32) {
	return func(dst, x []float32, offs []int, w []float32) {
		n := len(dst)
		checkTaps(n, len(x), offs, len(w), 0)
		body := n / lanes * lanes
		if body > 0 {
			fn(unsafe.SliceData(dst), unsafe.SliceData(x), unsafe.SliceData(offs), unsafe.SliceData(w), len(offs), body)
		}
		if body < n {
			tapsF32Generic(dst[body:], x[body:], offs, w)
		}
	}
}

// dwTapsI8 wraps a generated int8 taps kernel as a checked TapsI8.
func dwTapsI8(lanes int, fn func(dst *int32, x *int8, offs *int, npos, taps, n int)) func(dst []int32, x []int8, offs []int, npos int) {
	return func(dst []int32, x []int8, offs []int, npos int) {
		n := len(dst)
		checkTaps(n, len(x), offs, -1, npos)
		body := n / lanes * lanes
		if body > 0 {
			fn(unsafe.SliceData(dst), unsafe.SliceData(x), unsafe.SliceData(offs), npos, len(offs), body)
		}
		if body < n {
			tapsI8Generic(dst[body:], x[body:], offs, npos)
		}
	}
}
