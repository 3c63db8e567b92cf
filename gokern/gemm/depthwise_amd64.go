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
		TapsF32: dwTapsF32(8, dwTapsF32Y), TapsI8: dwTapsI8(8, dwTapsI8Y),
		Lanes: 8, LanesF32: dwLanesF32(8, dwLanesF32S1Y, dwLanesF32S2Y), LanesRowsF32: dwLanesRows(8, dwLanesRows3Y, dwLanesRows5Y),
		Interleave: dwInterleave(8, dwInterleaveY), InterleaveI8: dwInterleave(8, dwInterleaveI8Y),
		Deinterleave: dwDeinterleave(8, dwDeinterleaveY)})
	_ = DepthwiseOp.Register(cpu.AVX512, &DepthwiseKernels{Family: cpu.AVX512,
		TapsF32: dwTapsF32(16, dwTapsF32Z), TapsI8: dwTapsI8(16, dwTapsI8Z),
		Lanes: 16, LanesF32: dwLanesF32(16, dwLanesF32S1Z, dwLanesF32S2Z), LanesRowsF32: dwLanesRows(16, dwLanesRows3Z, dwLanesRows5Z),
		Interleave: dwInterleave(16, dwInterleaveZ), InterleaveI8: dwInterleave(16, dwInterleaveI8Z),
		Deinterleave: dwDeinterleave(16, dwDeinterleaveZ)})
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

// lanesFn is a generated lanes kernel (see _gen/depthwise.go's dwLanesF32).
type lanesFn func(dst, x *float32, offs *int, w *float32, taps, n, rows, xrow int, div, sc, bias *float32, mode int)

// zeroLanes stands for the scales and biases a mode does not read (the
// assembly loads them anyway).
var zeroLanes [16]float32

// foldOperands returns v, or zeroLanes where v holds fewer than lanes
// values (a fold operand the call's mode does not read).
func foldOperands(lanes int, v []float32) []float32 {
	if len(v) < lanes {
		return zeroLanes[:]
	}
	return v
}

// dwLanesF32 wraps the generated lanes kernels of strides 1 and 2 as a
// checked LanesF32; other strides run the generic loops.
func dwLanesF32(lanes int, s1, s2 lanesFn) func(dst, x []float32, offs []int, w []float32, stride, n, rows, xrow int, div, sc, bias []float32, mode int) {
	return func(dst, x []float32, offs []int, w []float32, stride, n, rows, xrow int, div, sc, bias []float32, mode int) {
		checkLanes(lanes, dst, x, offs, w, stride, n, rows, xrow, div, sc, bias, mode)
		fn := s1
		switch stride {
		case 1:
		case 2:
			fn = s2
		default:
			lanesF32Generic(lanes, dst, x, offs, w, stride, n, rows, xrow, div, sc, bias, mode)
			return
		}
		div, sc, bias = foldOperands(lanes, div), foldOperands(lanes, sc), foldOperands(lanes, bias)
		fn(unsafe.SliceData(dst), unsafe.SliceData(x), unsafe.SliceData(offs), unsafe.SliceData(w), len(offs), n, rows, xrow,
			unsafe.SliceData(div), unsafe.SliceData(sc), unsafe.SliceData(bias), mode)
	}
}

// rowsFn is a generated rows kernel (see _gen/depthwise.go's dwLanesRows).
type rowsFn func(dst, x, w *float32, kh, khStep, n, rows, xrow int, div, sc, bias *float32, mode int)

// dwLanesRows wraps the generated rows kernels of 3 and 5 columns as a
// checked LanesRowsF32 (false for other widths and rows below 4 positions).
func dwLanesRows(lanes int, k3, k5 rowsFn) func(dst, x, w []float32, kh, kw, khStep, n, rows, xrow int, div, sc, bias []float32, mode int) bool {
	return func(dst, x, w []float32, kh, kw, khStep, n, rows, xrow int, div, sc, bias []float32, mode int) bool {
		fn := k3
		switch {
		case n < 4:
			return false
		case kw == 3:
		case kw == 5:
			fn = k5
		default:
			return false
		}
		checkRows(lanes, dst, x, w, kh, kw, khStep, n, rows, xrow, div, sc, bias, mode)
		div, sc, bias = foldOperands(lanes, div), foldOperands(lanes, sc), foldOperands(lanes, bias)
		fn(unsafe.SliceData(dst), unsafe.SliceData(x), unsafe.SliceData(w), kh, khStep, n, rows, xrow,
			unsafe.SliceData(div), unsafe.SliceData(sc), unsafe.SliceData(bias), mode)
		return true
	}
}

// dwInterleave wraps a generated interleave (float32 or int8) as a checked
// Interleave: the assembly runs the whole blocks of lanes positions and,
// when there are lanes or more, the last lanes positions again for the rest
// (the same stores); fewer run the generic loops.
func dwInterleave[T float32 | int8](lanes int, fn func(dst *float32, src *T, ld int, pos *int, n int)) func(dst []float32, src []T, ld int, pos []int) {
	return func(dst []float32, src []T, ld int, pos []int) {
		checkPositions(lanes, dst, len(src), ld, pos)
		n := len(pos)
		if n < lanes {
			interleaveGeneric(lanes, dst, src, ld, pos)
			return
		}
		body := n / lanes * lanes
		fn(unsafe.SliceData(dst), unsafe.SliceData(src), ld, unsafe.SliceData(pos), body)
		if body < n {
			fn(unsafe.SliceData(dst), &src[n-lanes], ld, &pos[n-lanes], lanes)
		}
	}
}

// dwDeinterleave wraps a generated deinterleave as a checked Deinterleave
// (the rest as in dwInterleave).
func dwDeinterleave(lanes int, fn func(dst *float32, ld int, src *float32, n int)) func(dst []float32, ld int, src []float32, n int) {
	return func(dst []float32, ld int, src []float32, n int) {
		checkInterleave(lanes, src, dst, ld, n)
		if n < lanes {
			deinterleaveGeneric(lanes, dst, ld, src, n)
			return
		}
		body := n / lanes * lanes
		fn(unsafe.SliceData(dst), ld, unsafe.SliceData(src), body)
		if body < n {
			fn(&dst[n-lanes], ld, &src[(n-lanes)*lanes], lanes)
		}
	}
}
