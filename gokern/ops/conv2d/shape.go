// Package conv2d is the ternary 2-D convolution: shape arithmetic, the planner
// that picks an algorithm, and the algorithms themselves (naive, tiled
// im2col + GEMM, 1x1 GEMM on the input, GEMV, the int8 implicit GEMM,
// depthwise and general direct kernels, lookup tables for int8
// activations: lut.go). The micro-kernels live in gokern/gemm; every
// goroutine goes through gokern/par.
//
// Semantics are those of torch.nn.functional.conv2d with a ternary weight
// (values -1, 0, +1 with float32 scales per block of the flattened weight,
// see gokern/ternary) and optional int8 activations; see Conv2D for the exact
// arithmetic.
package conv2d

import (
	"math/bits"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Limits on the shape arithmetic. Every size, stride, padding and dilation
// is at most MaxDim, so sums and products of two of them fit in an int64;
// tensors have at most ternary.MaxElements elements; K = C/groups*kH*kW is at
// most MaxK, so int32 sums of K products of int8 by ternary values are exact:
// |sum| <= 128*K <= 128*(2^24-1) < 2^31 (K = 2^24 could reach +2^31, one past
// the int32 range, with every activation -128 and every weight -1).
const (
	MaxDim = 1 << 31
	MaxK   = 1<<24 - 1
)

// Shape is a convolution's geometry as the C ABI passes it: the input x is
// (N, C, H, W), the weight (O, WC, KH, KW) with WC = C/Groups, and the padding
// may differ on each side (top, left, bottom, right).
type Shape struct {
	N, C, H, W             int
	O, WC, KH, KW          int
	Groups                 int
	StrideH, StrideW       int
	PadT, PadL, PadB, PadR int
	DilH, DilW             int
}

// Dims is a checked Shape with its derived sizes.
type Dims struct {
	Shape
	Cg, Og, K  int // input and output channels per group, K = Cg*KH*KW
	Ho, Wo, P  int // output height and width, P = Ho*Wo
	XLen, WLen int // N*C*H*W, O*K
	OutLen     int // N*O*Ho*Wo
}

// mul returns a*b and whether it is at most limit (a, b >= 0).
func mul(limit int, a ...int) (int, bool) {
	p := uint64(1)
	for _, v := range a {
		hi, lo := bits.Mul64(p, uint64(v))
		if hi != 0 || lo > uint64(limit) {
			return 0, false
		}
		p = lo
	}
	return int(p), true
}

// OutSize returns the output length of one spatial dimension:
// (in + padLo + padHi - dil*(k-1) - 1) / stride + 1, or a value below 1 when
// the padded input is shorter than the dilated kernel. Arguments must be
// within [0, MaxDim] (k, stride, dil >= 1).
func OutSize(in, padLo, padHi, k, stride, dil int) int {
	span := dil*(k-1) + 1
	padded := in + padLo + padHi
	if padded < span {
		return 0
	}
	return (padded-span)/stride + 1
}

// Check validates s and derives its sizes. Errors name the argument at fault,
// in the words of the Python API.
func (s Shape) Check() (Dims, error) {
	d := Dims{Shape: s}
	type field struct {
		name string
		v    int
		min  int
	}
	for _, f := range []field{
		{"x: batch size N", s.N, 0}, {"x: channels C", s.C, 1}, {"x: height H", s.H, 1}, {"x: width W", s.W, 1},
		{"weight: output channels O", s.O, 1}, {"weight: input channels per group", s.WC, 1},
		{"weight: kernel height kH", s.KH, 1}, {"weight: kernel width kW", s.KW, 1},
		{"groups", s.Groups, 1},
		{"stride (height)", s.StrideH, 1}, {"stride (width)", s.StrideW, 1},
		{"padding (top)", s.PadT, 0}, {"padding (left)", s.PadL, 0},
		{"padding (bottom)", s.PadB, 0}, {"padding (right)", s.PadR, 0},
		{"dilation (height)", s.DilH, 1}, {"dilation (width)", s.DilW, 1},
	} {
		if f.v < f.min {
			return d, errs.Value("%s must be >= %d, got %d", f.name, f.min, f.v)
		}
		if f.v > MaxDim {
			return d, errs.Value("%s must be <= %d, got %d", f.name, MaxDim, f.v)
		}
	}
	if s.C%s.Groups != 0 {
		return d, errs.Value("groups=%d must divide the input channels C=%d", s.Groups, s.C)
	}
	if s.O%s.Groups != 0 {
		return d, errs.Value("groups=%d must divide the weight's output channels O=%d", s.Groups, s.O)
	}
	d.Cg, d.Og = s.C/s.Groups, s.O/s.Groups
	if s.WC != d.Cg {
		return d, errs.Value("weight has %d input channels per group, but x has C=%d channels with groups=%d "+
			"(weight shape must be (O, C/groups, kH, kW) = (%d, %d, %d, %d))",
			s.WC, s.C, s.Groups, s.O, d.Cg, s.KH, s.KW)
	}
	var ok bool
	if d.K, ok = mul(MaxK, d.Cg, s.KH, s.KW); !ok {
		return d, errs.Value("weight: K = C/groups*kH*kW = %d*%d*%d exceeds %d (int32 sums would not be exact)",
			d.Cg, s.KH, s.KW, MaxK)
	}
	d.Ho = OutSize(s.H, s.PadT, s.PadB, s.KH, s.StrideH, s.DilH)
	d.Wo = OutSize(s.W, s.PadL, s.PadR, s.KW, s.StrideW, s.DilW)
	if d.Ho < 1 || d.Wo < 1 {
		return d, errs.Value("output size would be %dx%d, below 1: x's spatial size (%d, %d) with padding "+
			"(top %d, bottom %d, left %d, right %d) is smaller than the dilated kernel (%d, %d) "+
			"(kernel (%d, %d), dilation (%d, %d))",
			max(d.Ho, 0), max(d.Wo, 0), s.H, s.W, s.PadT, s.PadB, s.PadL, s.PadR,
			s.DilH*(s.KH-1)+1, s.DilW*(s.KW-1)+1, s.KH, s.KW, s.DilH, s.DilW)
	}
	const lim = ternary.MaxElements
	if d.XLen, ok = mul(lim, s.N, s.C, s.H, s.W); !ok {
		return d, errs.Value("x: shape (%d, %d, %d, %d) has more than %d elements", s.N, s.C, s.H, s.W, lim)
	}
	if d.WLen, ok = mul(lim, s.O, d.K); !ok {
		return d, errs.Value("weight: shape (%d, %d, %d, %d) has more than %d elements", s.O, s.WC, s.KH, s.KW, lim)
	}
	if d.OutLen, ok = mul(lim, s.N, s.O, d.Ho, d.Wo); !ok {
		return d, errs.Value("output shape (%d, %d, %d, %d) has more than %d elements", s.N, s.O, d.Ho, d.Wo, lim)
	}
	d.P = d.Ho * d.Wo
	return d, nil
}

// checkBuffers checks the lengths of a call's buffers against d: x and out
// hold the input and output tensors, bias O entries or none.
func (d *Dims) checkBuffers(x, out, bias []float32) error {
	if len(x) != d.XLen {
		return errs.Value("x must have %d elements for shape (%d, %d, %d, %d), got %d", d.XLen, d.N, d.C, d.H, d.W, len(x))
	}
	if len(out) != d.OutLen {
		return errs.Value("out must have %d elements for shape (%d, %d, %d, %d), got %d", d.OutLen, d.N, d.O, d.Ho, d.Wo, len(out))
	}
	if len(bias) != 0 && len(bias) != d.O {
		return errs.Value("bias must have O=%d elements (or none), got %d", d.O, len(bias))
	}
	return nil
}

// Pointwise reports whether the convolution is a plain matrix product on the
// input: a 1x1 kernel, stride 1 and no padding.
func (d *Dims) Pointwise() bool {
	return d.KH == 1 && d.KW == 1 && d.StrideH == 1 && d.StrideW == 1 &&
		d.PadT == 0 && d.PadL == 0 && d.PadB == 0 && d.PadR == 0
}

// Depthwise reports whether every group has one input channel (groups == C).
func (d *Dims) Depthwise() bool { return d.Cg == 1 }

// floorDiv and ceilDiv divide rounding toward -inf and +inf (b > 0).
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv(a, b int) int { return -floorDiv(-a, b) }

// validRange returns [lo, hi), the outputs o in [0, n) whose input position
// o*stride + off lies in [0, in); an empty range is (0, 0).
func validRange(n, in, stride, off int) (int, int) {
	lo := max(0, ceilDiv(-off, stride))
	hi := min(n, floorDiv(in-1-off, stride)+1)
	if hi <= lo {
		return 0, 0
	}
	return lo, hi
}
