package qlinear

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// smallScale is torch's SMALL_SCALE_THRESHOLD (quant_utils.h).
const smallScale = 6.1e-5

// ChooseDynamic returns the activation scale and zero point torch's dynamic
// linear (fbgemm) picks for values in [xmin, xmax]: quant_utils'
// ChooseQuantizationParams over [0, 255] ([0, 127] with reduceRange), not
// preserving sparsity. The scale is computed in float64 and returned as
// the float32 fbgemm uses.
func ChooseDynamic(xmin, xmax float32, reduceRange bool) (float32, int32) {
	qmin, qmax := 0.0, 255.0
	if reduceRange {
		qmin, qmax = 0, 127
	}
	mn := math.Min(float64(xmin), 0)
	mx := math.Max(float64(xmax), 0)
	// torch keeps min and max as float; the interval is widened to hold 0
	fmn, fmx := float32(mn), float32(mx)
	scale := (float64(fmx) - float64(fmn)) / (qmax - qmin)
	if float32(scale) == 0 || math.IsInf(float64(1/float32(scale)), 0) {
		scale = 0.1
	}
	if scale < smallScale {
		org := scale
		scale = smallScale
		switch {
		case fmn == 0:
			fmx = float32(smallScale * (qmax - qmin))
		case fmx == 0:
			fmn = float32(-smallScale * (qmax - qmin))
		default:
			amp := float32(smallScale / org)
			fmn *= amp
			fmx *= amp
		}
	}
	zpMin := qmin - float64(fmn)/scale
	zpMax := qmax - float64(fmx)/scale
	errMin := math.Abs(qmin) - math.Abs(float64(fmn)/scale)
	errMax := math.Abs(qmax) - math.Abs(float64(fmx)/scale)
	zp0 := zpMax
	if errMin < errMax {
		zp0 = zpMin
	}
	var zp int32
	switch {
	case zp0 < qmin:
		zp = int32(qmin)
	case zp0 > qmax:
		zp = int32(qmax)
	default:
		zp = int32(math.RoundToEven(zp0))
	}
	return float32(scale), zp
}

// QuantizeDynamic writes the uint8 codes of x with scale s and zero point
// zp as fbgemm's Quantize does: clamp(round_half_even(fma(x, 1/s, zp)),
// 0, qmax), 1/s in float32.
func QuantizeDynamic(x []float32, s float32, zp, qmax int32, dst []byte) {
	inv := float64(1 / s)
	z := float64(zp)
	for i, v := range x {
		t := float32(math.FMA(float64(v), inv, z))
		r := math.RoundToEven(float64(t))
		switch {
		case r <= 0:
			dst[i] = 0
		case r >= float64(qmax):
			dst[i] = byte(qmax)
		default:
			dst[i] = byte(r)
		}
	}
}

// LinearDynamic is torch's dynamic quantized linear (fbgemm): x (M x K
// float32) quantized per call with ChooseDynamic over its min and max and
// QuantizeDynamic, then LinearFloat's epilogue. It returns the scale and
// zero point used.
func LinearDynamic(k *Kernels, M, N, K int, x []float32, reduceRange bool, w Weight, bias []float32, out []float32) (float32, int32, Info, error) {
	if len(x) == 0 {
		return 0, 0, Info{Kernel: kernelName("gemm", k)}, nil
	}
	mn, mx := x[0], x[0]
	for _, v := range x {
		if v != v || math.IsInf(float64(v), 0) {
			return 0, 0, Info{}, errs.Value("x holds NaN or Inf")
		}
		mn = min(mn, v)
		mx = max(mx, v)
	}
	s, zp := ChooseDynamic(mn, mx, reduceRange)
	qmax := int32(255)
	if reduceRange {
		qmax = 127
	}
	q := make([]byte, len(x))
	QuantizeDynamic(x, s, zp, qmax, q)
	info, err := LinearFloat(k, M, N, K, Act{Data: q, Scale: s, Zero: zp}, w, bias, out)
	return s, zp, info, err
}
