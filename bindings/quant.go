package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// The general quantization exports (gokern/quant): int8/uint8/int4/uint4/
// binary quantize and dequantize (reached from bng_quantize and
// bng_dequantize by the operand's dtype), min/max, histogram,
// choose_qparams and the histogram calibrators. Each export decodes its
// operands and parameter struct and calls a Go function of plain values,
// which the tests call directly.

// quantMethodGiven is BNG_GIVEN: the scales (and zero points) are inputs.
const quantMethodGiven = 2

// quantSpec builds the quantized operand t's description; the range is
// resolved from quant_min/quant_max (0, 0: the dtype's range).
func quantSpec(t *qtensor.Tensor, qmin, qmax int32) (*quant.Spec, error) {
	if err := t.WantContiguous(); err != nil {
		return nil, err
	}
	g, err := quant.NewGroups(t.Shape, t.Axis, t.BlockSize)
	if err != nil {
		return nil, errs.Value("%s: %v", t.Name, err)
	}
	s := &quant.Spec{DType: t.DType, Groups: g, Scales: t.Scales}
	if len(t.ZeroPoints) > 0 {
		s.ZeroPoints = t.ZeroPoints
	}
	if t.DType != qtensor.Binary {
		if s.QMin, s.QMax, err = quant.QRange(t.DType, qmin, qmax); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// quantizeGeneral quantizes float32 x into out (int8/uint8/int4/uint4:
// method BNG_GIVEN; binary: BNG_GIVEN or BNG_ABSMEAN, which writes
// out.scales). CUDA operands and run_on = CUDA are TypeErrors.
func quantizeGeneral(xt, ot *qtensor.Tensor, method int32, check bool, qmin, qmax int32, runOn int32) error {
	if !xt.OnHost() || !ot.OnHost() || runOn == C.BNG_CUDA {
		return errs.Type("out: %s quantization runs on the CPU only (CUDA operands and run_on=cuda are not implemented for it)", ot.DType)
	}
	if runOn != 0 {
		return errs.Value("params: run_on must be 0 or %d (cuda), got %d", C.BNG_CUDA, runOn)
	}
	if err := sameShape(xt, ot); err != nil {
		return err
	}
	xs, err := qtensor.View[float32](xt, qtensor.F32)
	if err != nil {
		return err
	}
	if ot.DType == qtensor.Binary && (qmin != 0 || qmax != 0) {
		return errs.Value("params: quant_min and quant_max must be 0 for binary, got %d and %d", qmin, qmax)
	}
	s, err := quantSpec(ot, qmin, qmax)
	if err != nil {
		return err
	}
	if ot.DType == qtensor.Binary {
		if method != quantMethodGiven && method != int32(C.BNG_ABSMEAN) {
			return errs.Value("params: method must be %d (absmean: computes out.scales) or %d (given: reads them) for binary, got %d",
				C.BNG_ABSMEAN, quantMethodGiven, method)
		}
		return quant.QuantizeBinary(xs, s, method == int32(C.BNG_ABSMEAN), check, ot.Data)
	}
	if method != quantMethodGiven {
		return errs.Value("params: method must be %d (given: out.scales and out.zero_points are the parameters) for %s, got %d",
			quantMethodGiven, ot.DType, method)
	}
	return quant.Quantize(xs, s, check, ot.Data)
}

// dequantizeGeneral writes the values of q (int8/uint8/int4/uint4/binary,
// host) into float32 out.
func dequantizeGeneral(pt *qtensor.Tensor, os []float32) error {
	s, err := quantSpec(pt, 0, 0)
	if err != nil {
		return err
	}
	return quant.Dequantize(pt.Data, s, os)
}

// bng_minmax writes the minimum and maximum of float32 x per group (x.axis
// >= 0: per channel; -1 with block_size 0: the tensor; else per block)
// into float32 mn and mx (one entry per group). check_finite != 0: NaN/Inf
// in x is a ValueError; else a group holding a NaN gets NaN.
//
//export bng_minmax
func bng_minmax(x, mn, mx *C.bng_tensor, checkFinite C.int32_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		ts, err := decodeHost([]*C.bng_tensor{x, mn, mx}, "x", "mn", "mx")
		if err != nil {
			return err
		}
		return minmaxOp(ts[0], ts[1], ts[2], checkFinite != 0)
	})
}

// decodeHost decodes the host operands ts, named names, in order.
func decodeHost(ts []*C.bng_tensor, names ...string) ([]*qtensor.Tensor, error) {
	out := make([]*qtensor.Tensor, len(ts))
	for i, t := range ts {
		d, err := decode(t, names[i], tensorOpt{})
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// views is qtensor.View of each of ts as dtype d (Go type T), in order.
func views[T float32 | int32 | int64](d qtensor.DType, ts ...*qtensor.Tensor) ([][]T, error) {
	out := make([][]T, len(ts))
	for i, t := range ts {
		v, err := qtensor.View[T](t, d)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func minmaxOp(xt, mnt, mxt *qtensor.Tensor, check bool) error {
	xs, err := qtensor.View[float32](xt, qtensor.F32)
	if err != nil {
		return err
	}
	g, err := quant.NewGroups(xt.Shape, xt.Axis, xt.BlockSize)
	if err != nil {
		return errs.Value("x: %v", err)
	}
	m, err := views[float32](qtensor.F32, mnt, mxt)
	if err != nil {
		return err
	}
	return quant.MinMax(xs, &g, check, m[0], m[1])
}

// histParams is bng_histogram_params in Go.
type histParams struct {
	absolute, check bool
	lo, hi          float32
}

// bng_histogram ADDS the torch.histc counts of float32 x (|x| with
// p.absolute) over [p.lo, p.hi] into int64 counts (nbins = its length).
//
//export bng_histogram
func bng_histogram(x *C.bng_tensor, p *C.bng_histogram_params, counts *C.bng_tensor, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if p == nil || p.version != C.BNG_HISTOGRAM_V1 {
			return errs.Value("params: bng_histogram_params is NULL or of a version other than %d", C.BNG_HISTOGRAM_V1)
		}
		ts, err := decodeHost([]*C.bng_tensor{x, counts}, "x", "counts")
		if err != nil {
			return err
		}
		return histogramOp(ts[0], histParams{absolute: p.absolute != 0, check: p.check_finite != 0, lo: float32(p.lo), hi: float32(p.hi)}, ts[1])
	})
}

func histogramOp(xt *qtensor.Tensor, p histParams, ct *qtensor.Tensor) error {
	xs, err := qtensor.View[float32](xt, qtensor.F32)
	if err != nil {
		return err
	}
	cs, err := qtensor.View[int64](ct, qtensor.I64)
	if err != nil {
		return err
	}
	return quant.Histogram(xs, p.lo, p.hi, p.absolute, p.check, cs)
}

// bng_choose_qparams writes one scale (float32) and zero point (int32) per
// group from float32 mn and mx (quant.ChooseQParams).
//
//export bng_choose_qparams
func bng_choose_qparams(mn, mx *C.bng_tensor, p *C.bng_qparams_params, scales, zeroPoints *C.bng_tensor, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if p == nil || p.version != C.BNG_QPARAMS_V1 {
			return errs.Value("params: bng_qparams_params is NULL or of a version other than %d", C.BNG_QPARAMS_V1)
		}
		if p.reserved != 0 {
			return errs.Value("params: reserved must be 0, got %d", int32(p.reserved))
		}
		ts, err := decodeHost([]*C.bng_tensor{mn, mx, scales, zeroPoints}, "mn", "mx", "scales", "zero_points")
		if err != nil {
			return err
		}
		spec := quant.QParamsSpec{DType: qtensor.DType(p.dtype), Mapping: quant.Mapping(p.mapping),
			QMin: int32(p.quant_min), QMax: int32(p.quant_max), Eps: float32(p.eps)}
		return chooseQParamsOp(ts[0], ts[1], &spec, ts[2], ts[3])
	})
}

func chooseQParamsOp(mnt, mxt *qtensor.Tensor, spec *quant.QParamsSpec, st, zt *qtensor.Tensor) error {
	if _, _, ok := quant.Range(spec.DType); !ok {
		return errs.Type("params: dtype must be %d (int8), %d (uint8), %d (int4) or %d (uint4), got %d",
			qtensor.I8, qtensor.U8, qtensor.I4, qtensor.U4, int32(spec.DType))
	}
	f, err := views[float32](qtensor.F32, mnt, mxt, st)
	if err != nil {
		return err
	}
	zs, err := qtensor.View[int32](zt, qtensor.I32)
	if err != nil {
		return err
	}
	return quant.ChooseQParams(f[0], f[1], spec, f[2], zs)
}

// bng_calibrate writes into *amax the amax that NVIDIA's histogram
// calibrator (p.method: percentile, entropy or MSE) picks for the |x|
// histogram int64 counts, whose bin i is [i*w, (i+1)*w), w = p.bin_width.
//
//export bng_calibrate
func bng_calibrate(counts *C.bng_tensor, p *C.bng_calibrate_params, amax *C.double, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if p == nil || p.version != C.BNG_CALIBRATE_V1 {
			return errs.Value("params: bng_calibrate_params is NULL or of a version other than %d", C.BNG_CALIBRATE_V1)
		}
		if amax == nil {
			return errs.Value("amax must not be NULL")
		}
		ct, err := decode(counts, "counts", tensorOpt{})
		if err != nil {
			return err
		}
		v, err := calibrateOp(ct, &quant.CalibSpec{Method: quant.CalibMethod(p.method), NumBits: int(p.num_bits),
			Unsigned: p.is_unsigned != 0, StartBin: int(p.start_bin), Percentile: float64(p.percentile), BinWidth: float64(p.bin_width)})
		if err != nil {
			return err
		}
		*(*float64)(unsafe.Pointer(amax)) = v
		return nil
	})
}

func calibrateOp(ct *qtensor.Tensor, s *quant.CalibSpec) (float64, error) {
	cs, err := qtensor.View[int64](ct, qtensor.I64)
	if err != nil {
		return 0, err
	}
	return quant.Calibrate(cs, s)
}
