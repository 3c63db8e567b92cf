// Package quant implements general affine quantization: int8, uint8, int4,
// uint4 and binary tensors with one scale (and zero point) per tensor, per
// channel along any axis, or per block of the flattened tensor; the min/max
// and histogram reductions that observers run; choose_qparams (torch.ao and
// torchao rules); and the three histogram calibrators of NVIDIA's
// pytorch-quantization (percentile, entropy, MSE).
//
// Layouts (bng_abi.h): int8/uint8 one byte per element; int4/uint4 two per
// byte, element 2i in the low nibble of byte i (int4 nibbles two's
// complement, an odd count leaves the last high nibble 0); binary eight per
// byte, bit b of byte j is element 8j+b, 1 = +1 (x >= 0), unused bits 0.
//
// Arithmetic is float32 where the references compute in float32, written
// with explicit float32() conversions so that no multiply and add fuse. The
// hot loops are kernels chosen through gokern/cpu's registry (kernels.go):
// every op has a generic Go implementation, the oracle that SIMD families
// are tested against.
package quant

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// Handles reports whether d is one of this package's formats.
func Handles(d qtensor.DType) bool {
	switch d {
	case qtensor.I8, qtensor.U8, qtensor.I4, qtensor.U4, qtensor.Binary:
		return true
	}
	return false
}

// Range returns the full integer range of an integer dtype (int8 [-128,127],
// uint8 [0,255], int4 [-8,7], uint4 [0,15]); ok is false for other types.
func Range(d qtensor.DType) (qmin, qmax int32, ok bool) {
	switch d {
	case qtensor.I8:
		return -128, 127, true
	case qtensor.U8:
		return 0, 255, true
	case qtensor.I4:
		return -8, 7, true
	case qtensor.U4:
		return 0, 15, true
	}
	return 0, 0, false
}

// ValidScale reports whether s is a usable scale: finite and > 0 (NaN is
// not). Loops over many scales test it and call CheckScale for the message.
func ValidScale(s float32) bool { return s > 0 && qtensor.Finite(s) }

// CheckScale returns a ValueError unless s, a quantized tensor's scale, is
// finite and > 0. The message calls it owner+what (e.g. "out" and "'s
// scale"), joined only for an error: a call allocates nothing. Every op
// that takes scales checks them here, so that one wording reaches users.
func CheckScale(owner, what string, s float32) error {
	if !ValidScale(s) {
		return errs.Value("%s%s must be finite and > 0, got %v", owner, what, s)
	}
	return nil
}

// CheckZeroPoint returns a ValueError unless z, a zero point of dtype d
// (int8, uint8, int4 or uint4), is one of d's codes; the message calls it
// owner+what, as CheckScale's.
func CheckZeroPoint(owner, what string, z int32, d qtensor.DType) error {
	lo, hi, _ := Range(d)
	if z < lo || z > hi {
		return errs.Value("%s%s must be in %s's range [%d, %d], got %d", owner, what, d, lo, hi, z)
	}
	return nil
}

// QRange resolves a requested range: both 0 means the dtype's full range;
// otherwise it must satisfy qmin < qmax inside the dtype's range.
func QRange(d qtensor.DType, qmin, qmax int32) (int32, int32, error) {
	lo, hi, ok := Range(d)
	if !ok {
		return 0, 0, errs.Type("dtype must be int8, uint8, int4 or uint4, got %s", d)
	}
	if qmin == 0 && qmax == 0 {
		return lo, hi, nil
	}
	if qmin < lo || qmax > hi || qmin >= qmax {
		return 0, 0, errs.Value("quant_min and quant_max must satisfy %d <= quant_min < quant_max <= %d for %s, got quant_min=%d, quant_max=%d",
			lo, hi, d, qmin, qmax)
	}
	return qmin, qmax, nil
}

// PackedLen is the number of bytes of n elements of format d.
func PackedLen(d qtensor.DType, n int) int {
	switch d {
	case qtensor.I4, qtensor.U4:
		return (n + 1) / 2
	case qtensor.Binary:
		return (n + 7) / 8
	}
	return n
}

// Groups says which scale each element of a tensor uses: one for the
// tensor, one per channel along an axis, or one per block of the flattened
// tensor (the last block may be short).
type Groups struct {
	N     int // elements
	Count int // groups (scales)
	// Axis >= 0: per channel; group of flat index i is (i/Inner)%Dim.
	Axis, Dim, Inner int
	// Block > 0 (Axis -1): group of i is i/Block. Block 0 and Axis -1: one group.
	Block int
}

// NewGroups describes the groups of a tensor of the given shape: axis >= 0
// per channel along it, axis -1 with blockSize 0 per tensor, axis -1 with
// blockSize > 0 per block of blockSize elements (ceil(n/blockSize) groups).
func NewGroups(shape []int, axis, blockSize int) (Groups, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	g := Groups{N: n, Axis: axis}
	switch {
	case axis >= 0:
		if axis >= len(shape) {
			return g, errs.Value("axis must be -1 or a dimension below %d, got %d", len(shape), axis)
		}
		if blockSize != 0 {
			return g, errs.Value("block_size must be 0 with a channel axis (%d), got %d", axis, blockSize)
		}
		g.Dim, g.Inner = shape[axis], 1
		for _, d := range shape[axis+1:] {
			g.Inner *= d
		}
		g.Count = g.Dim
	case axis == -1:
		if blockSize < 0 {
			return g, errs.Value("block_size must be positive (or 0 for one scale per tensor), got %d", blockSize)
		}
		g.Block = blockSize
		if blockSize == 0 {
			g.Count = 1
		} else {
			g.Count = (n + blockSize - 1) / blockSize
		}
	default:
		return g, errs.Value("axis must be -1 or a dimension below %d, got %d", len(shape), axis)
	}
	return g, nil
}

// Of returns the group of flat index i.
func (g *Groups) Of(i int) int {
	switch {
	case g.Axis >= 0:
		return (i / g.Inner) % g.Dim
	case g.Block > 0:
		return i / g.Block
	}
	return 0
}

// runEnd returns the end of the run of equal groups that starts at i
// (bounded by end).
func (g *Groups) runEnd(i, end int) int {
	switch {
	case g.Axis >= 0:
		return min(end, (i/g.Inner+1)*g.Inner)
	case g.Block > 0:
		return min(end, (i/g.Block+1)*g.Block)
	}
	return end
}

// PerTensor reports whether there is one group for the whole tensor.
func (g *Groups) PerTensor() bool { return g.Axis < 0 && g.Block == 0 }

// rowWise reports whether per-channel runs are too short for the run
// kernels, so that the row kernels (per-element parameters over a period of
// Dim*Inner elements) are used instead.
func (g *Groups) rowWise() bool { return g.Axis >= 0 && g.Inner < minRun }

// minRun is the shortest per-channel run the run kernels take; shorter runs
// go through the row kernels.
const minRun = 16

// period is the length after which per-channel groups repeat.
func (g *Groups) period() int { return g.Dim * g.Inner }
