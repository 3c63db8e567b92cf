package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ops/conv2d"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// conv2dParams checks the caller's bng_conv2d_params (V1 or V2): a
// weight_id below 2^63 (the numbers above are conv2d's own, for the
// conversions it keeps).
func conv2dParams(p *C.bng_conv2d_params) error {
	if p == nil || (p.version != C.BNG_CONV2D_V1 && p.version != C.BNG_CONV2D_V2) {
		return errs.Value("params: bng_conv2d_params is NULL or of a version other than %d or %d", C.BNG_CONV2D_V1, C.BNG_CONV2D_V2)
	}
	if id := convWeightID(p); id>>63 != 0 {
		return errs.Value("params: weight_id must be below 2^63, got %d", id)
	}
	return nil
}

// convWeightID returns the params' weight_id (V2; 0 for V1, which has none).
func convWeightID(p *C.bng_conv2d_params) uint64 {
	if p.version < C.BNG_CONV2D_V2 {
		return 0
	}
	return uint64(p.weight_id)
}

// bng_conv2d computes a 2-D convolution of float32 x (N, C, H, W) with a
// ternary weight w (O, C/groups, kH, kW; dtype i2_s, tl1, tl2, tq2_0 or tq1_0, its scales
// one per w.block_size values of the flattened weight, 0: one scale) plus
// an optional float32 bias (O) (NULL: none) into float32 out (N, O, outH,
// outW), out's spatial size being the one the geometry implies. Every
// operand is a C-contiguous host tensor; out must not overlap the others.
// p holds the geometry (padding per side: top, left, bottom, right), the
// activation bits (0 float32, 8 int8), the algorithm (0 auto ... 6 lut:
// bng_abi.h) and check_finite (NaN/Inf in x, bias or the scales is then a
// ValueError). info, if not NULL, receives the algorithm and the kernel
// that ran. See gokern/ops/conv2d for the arithmetic.
//
//export bng_conv2d
func bng_conv2d(x, w, bias, out *C.bng_tensor, p *C.bng_conv2d_params, info *C.bng_op_info,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if err := conv2dParams(p); err != nil {
			return err
		}
		if err := checkInfo(info); err != nil {
			return err
		}
		xt, err := decode(x, "x", tensorOpt{})
		if err != nil {
			return err
		}
		wt, err := decode(w, "weight", tensorOpt{})
		if err != nil {
			return err
		}
		bt, err := decode(bias, "bias", tensorOpt{optional: true})
		if err != nil {
			return err
		}
		ot, err := decode(out, "out", tensorOpt{})
		if err != nil {
			return err
		}
		d, err := convDims(xt, wt, ot, p)
		if err != nil {
			return err
		}
		xs, err := qtensor.View[float32](xt, qtensor.F32)
		if err != nil {
			return err
		}
		outs, err := qtensor.View[float32](ot, qtensor.F32)
		if err != nil {
			return err
		}
		var bs []float32
		if bt != nil {
			if bs, err = qtensor.View[float32](bt, qtensor.F32); err != nil {
				return err
			}
		}
		if err := wt.WantContiguous(); err != nil {
			return err
		}
		if wt.Axis != -1 {
			return errs.Value("weight: scales run along blocks of the flattened weight (axis -1), got axis %d", wt.Axis)
		}
		wts := conv2d.Weights{Packed: wt.Data, Scales: wt.Scales, BlockSize: wt.BlockSize, QType: wt.DType, ID: convWeightID(p)}
		opt := conv2d.Options{ActBits: int(p.act_bits), Algo: conv2d.Algo(p.algorithm), CheckFinite: p.check_finite != 0}
		ran, err := conv2d.Conv2DInfo(d, xs, wts, bs, outs, opt)
		if err != nil {
			return err
		}
		writeInfo(info, int(ran.Algo), ran.Kernel)
		return nil
	})
}

// convDims checks the ranks of x, weight and out, the geometry of p and
// out's shape (bng_conv2d and bng_cuda_conv2d).
func convDims(xt, wt, ot *qtensor.Tensor, p *C.bng_conv2d_params) (conv2d.Dims, error) {
	if len(xt.Shape) != 4 {
		return conv2d.Dims{}, errs.Value("x must have 4 dimensions (N, C, H, W), got shape %v", xt.Shape)
	}
	if len(wt.Shape) != 4 {
		return conv2d.Dims{}, errs.Value("weight must have 4 dimensions (O, C/groups, kH, kW), got shape %v", wt.Shape)
	}
	if len(ot.Shape) != 4 {
		return conv2d.Dims{}, errs.Value("out must have 4 dimensions (N, O, outH, outW), got shape %v", ot.Shape)
	}
	s := conv2d.Shape{
		N: xt.Shape[0], C: xt.Shape[1], H: xt.Shape[2], W: xt.Shape[3],
		O: wt.Shape[0], WC: wt.Shape[1], KH: wt.Shape[2], KW: wt.Shape[3], Groups: int(p.groups),
		StrideH: int(p.stride[0]), StrideW: int(p.stride[1]),
		PadT: int(p.padding[0]), PadL: int(p.padding[1]), PadB: int(p.padding[2]), PadR: int(p.padding[3]),
		DilH: int(p.dilation[0]), DilW: int(p.dilation[1]),
	}
	d, err := s.Check()
	if err != nil {
		return d, err
	}
	if ot.Shape[0] != d.N || ot.Shape[1] != d.O || ot.Shape[2] != d.Ho || ot.Shape[3] != d.Wo {
		return conv2d.Dims{}, errs.Value("out: shape %v does not match the convolution's output shape [%d %d %d %d]",
			ot.Shape, d.N, d.O, d.Ho, d.Wo)
	}
	return d, nil
}
