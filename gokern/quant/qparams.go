package quant

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// Mapping selects how ChooseQParams turns a range into a scale and zero
// point; the numbers are those of the C ABI.
type Mapping int32

// The mappings: torch.ao observers' (_calculate_qparams) and torchao's
// (choose_qparams_affine's MappingType).
const (
	MapAffine                     Mapping = 0 // torch.ao per_tensor_affine / per_channel_affine
	MapSymmetric                  Mapping = 1 // torch.ao per_tensor_symmetric / per_channel_symmetric
	MapAOSymmetric                Mapping = 2 // torchao MappingType.SYMMETRIC
	MapAOSymmetricNoClippingError Mapping = 3 // torchao MappingType.SYMMETRIC_NO_CLIPPING_ERR
	MapAOAsymmetric               Mapping = 4 // torchao MappingType.ASYMMETRIC
)

// QParamsSpec is what ChooseQParams needs besides the ranges.
type QParamsSpec struct {
	DType   qtensor.DType // int8, uint8, int4 or uint4
	Mapping Mapping
	// QMin, QMax: both 0 for the dtype's range; otherwise a custom range
	// (torch.ao's has_customized_qrange: it changes uint8's symmetric zero
	// point).
	QMin, QMax int32
	Eps        float32 // the smallest scale; finite and > 0
}

// ChooseQParams writes one scale and zero point per group from the ranges
// [mn[i], mx[i]] (float32 arithmetic throughout, as torch computes on
// float32 tensors):
//
//	min_neg = min(mn, 0), max_pos = max(mx, 0)
//	MapAffine, MapAOAsymmetric: scale = max((max_pos - min_neg) / float(qmax - qmin), eps),
//	    zp = clamp(qmin - round_half_even(min_neg / scale), qmin, qmax)
//	MapSymmetric: scale = max(max(-min_neg, max_pos) / ((qmax - qmin) / 2), eps),
//	    zp = 0, except uint8: 128 with the dtype's range, (qmin + qmax) // 2 with a custom one
//	MapAOSymmetric: the same scale, zp = int((qmax + qmin + 1) / 2) (truncated toward 0)
//	MapAOSymmetricNoClippingError: scale = max(min_neg/qmin > max_pos/qmax ? min_neg/qmin : max_pos/qmax, eps),
//	    zp as MapAOSymmetric (quant_max must be > 0)
//
// A group with mn = +Inf and mx = -Inf (an observer that saw nothing) gets
// scale 1 and zero point 0 (torch.ao). Any other non-finite bound, or
// mn > mx, is a ValueError; messages call them min and max (min[i] and
// max[i] for more than one group), as bitnet_go.choose_qparams and torch
// do.
func ChooseQParams(mn, mx []float32, p *QParamsSpec, scales []float32, zps []int32) error {
	if len(mn) != len(mx) {
		return errs.Value("mn and mx must have the same number of entries, got %d and %d", len(mn), len(mx))
	}
	if len(scales) != len(mn) || len(zps) != len(mn) {
		return errs.Value("scales and zero_points must have %d entries (one per group of mn), got %d and %d", len(mn), len(scales), len(zps))
	}
	qmin, qmax, err := QRange(p.DType, p.QMin, p.QMax)
	if err != nil {
		return err
	}
	custom := p.QMin != 0 || p.QMax != 0
	if !(p.Eps > 0) || !qtensor.Finite(p.Eps) {
		return errs.Value("eps must be finite and > 0, got %v", p.Eps)
	}
	if p.Mapping < MapAffine || p.Mapping > MapAOAsymmetric {
		return errs.Value("mapping must be 0 (affine), 1 (symmetric), 2 (torchao symmetric), 3 (torchao symmetric_no_clipping_err) or 4 (torchao asymmetric), got %d", int32(p.Mapping))
	}
	if p.Mapping == MapAOSymmetricNoClippingError && qmax <= 0 {
		return errs.Value("quant_max must be > 0 for the symmetric_no_clipping_err mapping, got %d", qmax)
	}
	for i := range mn {
		lo, hi := mn[i], mx[i]
		if math.IsInf(float64(lo), 1) && math.IsInf(float64(hi), -1) {
			scales[i], zps[i] = 1, 0
			continue
		}
		if !qtensor.Finite(lo) || !qtensor.Finite(hi) {
			return errs.Value("%s and %s must be finite (or +inf and -inf for a group that saw no values), got %v and %v",
				paramName("min", i, len(mn)), paramName("max", i, len(mx)), lo, hi)
		}
		if lo > hi {
			return errs.Value("%s = %v is greater than %s = %v", paramName("min", i, len(mn)), lo, paramName("max", i, len(mx)), hi)
		}
		scales[i], zps[i] = qparams(lo, hi, p.Mapping, p.DType, qmin, qmax, custom, p.Eps)
	}
	return nil
}

// qparams is one group's computation (see ChooseQParams).
func qparams(lo, hi float32, m Mapping, d qtensor.DType, qmin, qmax int32, custom bool, eps float32) (float32, int32) {
	minNeg, maxPos := min(lo, 0), max(hi, 0)
	var scale float32
	var zp int32
	switch m {
	case MapAffine, MapAOAsymmetric:
		scale = float32(float32(maxPos-minNeg) / float32(qmax-qmin))
		scale = max(scale, eps)
		r := roundEven32(float32(minNeg / scale))
		z := float64(qmin) - float64(r)
		zp = int32(min(max(z, float64(qmin)), float64(qmax)))
	case MapSymmetric, MapAOSymmetric:
		amax := max(-minNeg, maxPos)
		scale = float32(amax / float32(float64(qmax-qmin)/2))
		scale = max(scale, eps)
		if m == MapAOSymmetric {
			zp = (qmax + qmin + 1) / 2 // Go truncates toward 0, as Python's int() of the float quotient
		} else if d == qtensor.U8 {
			zp = 128
			if custom {
				zp = floorDiv2(qmin + qmax)
			}
		}
	case MapAOSymmetricNoClippingError:
		smin := float32(minNeg / float32(qmin))
		smax := float32(maxPos / float32(qmax))
		scale = smax
		if smin > smax {
			scale = smin
		}
		scale = max(scale, eps)
		zp = (qmax + qmin + 1) / 2
	}
	return scale, zp
}

// roundEven32 rounds to an integer, ties to even (torch.round).
func roundEven32(v float32) float32 { return float32(math.RoundToEven(float64(v))) }

// floorDiv2 is Python's v // 2.
func floorDiv2(v int32) int32 {
	if v < 0 {
		return -((-v + 1) / 2)
	}
	return v / 2
}
